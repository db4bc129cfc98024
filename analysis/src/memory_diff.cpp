#include <opscope/analysis/diff.h>
#include <opscope/analysis/memory_diff.h>
#include <opscope/results/format_version.h>
#include <opscope/results/json_input.h>
#include <opscope/results/memcheck_file.h>
#include <opscope/text.h>

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <limits>

namespace opscope::analysis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bounds on what a hostile memcheck.json can make us hold (memcheck writes at most a few thousand sites).
constexpr std::size_t kMaxSites = 100000;
constexpr std::size_t kMaxText = 1024;  // of a field used
constexpr int kKeyFrames = 16;          // frames of a backtrace that make its site
constexpr int kLabelFrames = 2;         // frames of it shown

fs::path fileOf(const fs::path& run) {
  std::error_code ec;
  return fs::is_directory(run, ec) ? run / std::string(results::kMemcheckFile) : run;
}

std::string textOf(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>().substr(0, kMaxText) : std::string();
}

std::uint64_t countOf(const json& o, const char* key, bool& ok) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_unsigned()) {
    ok = false;
    return 0;
  }
  return it->get<std::uint64_t>();
}

// A frame as text: "function file:line", or "module+offset" where memcheck found no line.
std::string frameText(const json& f) {
  const std::string function = textOf(f, "function"), file = textOf(f, "file");
  const auto line = f.find("line");
  if (!file.empty()) {
    return fmt::format("{} {}:{}", function.empty() ? "??" : function, file,
                       line != f.end() && line->is_number_integer() ? line->get<std::int64_t>() : 0);
  }
  const std::string module = textOf(f, "module"), offset = textOf(f, "offset");
  if (!module.empty())
    return fmt::format("{}{}+{}", function.empty() ? "" : function + " in ", module, offset);
  return function.empty() ? textOf(f, "address") : function;
}

// Saturating a + b.
std::uint64_t plus(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max()
                                                           : a + b;
}

std::string bytesText(std::uint64_t bytes) { return fmt::format("{} bytes", bytes); }

std::string signedBytes(std::int64_t change) { return fmt::format("{:+} bytes", change); }

}  // namespace

bool isMemcheckRun(const fs::path& run) {
  std::error_code ec;
  const fs::path file = fileOf(run);
  return file.filename() == results::kMemcheckFile && fs::is_regular_file(file, ec);
}

MemoryProfile loadMemoryProfile(const fs::path& run) {
  const fs::path path = fileOf(run);
  MemoryProfile p;
  p.path = path.string();
  json m;
  try {
    m = results::readJsonFile(path, results::kMaxMemcheckFileBytes);
    if (const std::string e =
            results::formatVersionError(results::kMemcheckFile, m, results::kMemcheckFormatVersion);
        !e.empty())
      throw std::runtime_error(e);
    if (!m.is_object()) throw std::runtime_error("memcheck.json: not an object");
  } catch (const std::exception& e) {
    throw DiffError(
        fmt::format("{}: {} (check the run with opscope run --memcheck)", run.string(), e.what()));
  }
  auto each = [&](const char* key, auto&& take) {
    const auto it = m.find(key);
    if (it == m.end()) return;
    if (!it->is_array()) {
      ++p.odd;
      return;
    }
    for (const json& entry : *it) {
      if (!entry.is_object() || !take(entry)) ++p.odd;
    }
  };
  each("leaks", [&](const json& leak) {
    bool ok = true;
    const std::uint64_t bytes = countOf(leak, "bytes", ok), allocations = countOf(leak, "allocations", ok);
    const auto stack = leak.find("stack");
    if (!ok || stack == leak.end() || !stack->is_array()) return false;
    std::string key, label;
    int n = 0;
    for (const json& f : *stack) {
      if (!f.is_object()) return false;
      if (n >= kKeyFrames) break;
      const std::string text = frameText(f);
      key += text + "\n";
      if (n < kLabelFrames) label += (n > 0 ? " <- " : "") + text;
      ++n;
    }
    if (key.empty()) key = label = "(no backtrace: MEM_CHECK_ENABLE_BACKTRACE=1 gives one)";
    const std::string place = textOf(leak, "place");
    if (!place.empty()) key += place;  // the same code leaking on two devices: two sites
    if (p.leaks.size() >= kMaxSites && !p.leaks.contains(key)) key = label = "(other sites)";
    MemoryLine& l = p.leaks[key];
    l.bytes = plus(l.bytes, bytes);
    l.allocations = plus(l.allocations, allocations);
    p.labels.try_emplace(key, place.empty() || place == "MLU 0" ? label : label + " (" + place + ")");
    return true;
  });
  each("peaks", [&](const json& peak) {
    bool ok = true;
    const std::uint64_t bytes = countOf(peak, "bytes", ok);
    const std::string place = textOf(peak, "place");
    if (!ok || place.empty() || (p.peaks.size() >= kMaxSites && !p.peaks.contains(place))) return false;
    p.peaks[place] = std::max(p.peaks[place], bytes);
    return true;
  });
  each("errors", [&](const json& error) {
    const std::string kind = textOf(error, "kind");
    if (kind.empty() || (p.errors.size() >= kMaxSites && !p.errors.contains(kind))) return false;
    bool ok = true;
    const std::uint64_t count = countOf(error, "count", ok);
    p.errors[kind] = plus(p.errors[kind], ok ? std::max<std::uint64_t>(count, 1) : 1);
    return true;
  });
  return p;
}

MemoryDiff diffMemory(const MemoryProfile& a, const MemoryProfile& b, std::size_t top) {
  MemoryDiff d;
  d.run_a = a.path;
  d.run_b = b.path;
  d.odd_a = a.odd;
  d.odd_b = b.odd;
  auto labelOf = [&](const std::string& key) {
    if (auto it = b.labels.find(key); it != b.labels.end()) return it->second;
    if (auto it = a.labels.find(key); it != a.labels.end()) return it->second;
    return key;
  };
  std::map<std::string, MemoryChange> sites;
  for (const auto& [key, line] : a.leaks) {
    sites[key].a = line;
    d.leaked_a = {plus(d.leaked_a.bytes, line.bytes), plus(d.leaked_a.allocations, line.allocations)};
  }
  for (const auto& [key, line] : b.leaks) {
    sites[key].b = line;
    d.leaked_b = {plus(d.leaked_b.bytes, line.bytes), plus(d.leaked_b.allocations, line.allocations)};
  }
  for (auto& [key, c] : sites) {
    c.what = labelOf(key);
    if (c.change() > 0 || (c.change() == 0 && c.b.allocations > c.a.allocations)) {
      d.grew.push_back(std::move(c));
    } else if (c.change() < 0 || c.b.allocations < c.a.allocations) {
      d.shrank.push_back(std::move(c));
    }
  }
  d.grew_count = d.grew.size();
  d.shrank_count = d.shrank.size();
  auto keep = [top](std::vector<MemoryChange>& list, bool growing) {
    std::sort(list.begin(), list.end(), [growing](const MemoryChange& x, const MemoryChange& y) {
      if (x.change() != y.change()) return growing ? x.change() > y.change() : x.change() < y.change();
      return x.what < y.what;
    });
    if (list.size() > top) list.resize(top);
  };
  keep(d.grew, true);
  keep(d.shrank, false);
  std::map<std::string, MemoryChange> peaks, errors;
  for (const auto& [place, bytes] : a.peaks) peaks[place].a.bytes = bytes;
  for (const auto& [place, bytes] : b.peaks) peaks[place].b.bytes = bytes;
  for (const auto& [kind, count] : a.errors) errors[kind].a.allocations = count;
  for (const auto& [kind, count] : b.errors) errors[kind].b.allocations = count;
  for (auto& [place, c] : peaks) {
    c.what = place;
    d.peaks.push_back(std::move(c));
  }
  for (auto& [kind, c] : errors) {
    c.what = kind;
    d.errors.push_back(std::move(c));
  }
  return d;
}

std::string renderMemoryDiff(const MemoryDiff& d) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(
      it,
      "opscope diff: device memory, from A's memcheck to B's\n  A: {}\n  B: {}\n"
      "leaked: {} in {} allocations -> {} in {} allocations ({})\n",
      d.run_a, d.run_b, bytesText(d.leaked_a.bytes), d.leaked_a.allocations, bytesText(d.leaked_b.bytes),
      d.leaked_b.allocations,
      signedBytes(static_cast<std::int64_t>(d.leaked_b.bytes) - static_cast<std::int64_t>(d.leaked_a.bytes)));
  for (const MemoryChange& c : d.peaks) {
    fmt::format_to(it, "peak in use on {}: {} -> {} ({})\n", c.what, bytesText(c.a.bytes),
                   bytesText(c.b.bytes), signedBytes(c.change()));
  }
  for (const MemoryChange& c : d.errors) {
    fmt::format_to(it, "memory errors, {}: {} -> {}\n", c.what, c.a.allocations, c.b.allocations);
  }
  if (d.odd_a + d.odd_b > 0)
    fmt::format_to(it, "(entries that are not what memcheck writes, skipped: {} in A, {} in B)\n", d.odd_a,
                   d.odd_b);
  auto list = [&](const char* title, std::size_t count, const std::vector<MemoryChange>& changes) {
    if (changes.empty()) return;
    fmt::format_to(it, "\n{} ({}{}):\n", title, count,
                   count > changes.size() ? fmt::format(", the {} largest", changes.size()) : "");
    for (const MemoryChange& c : changes) {
      fmt::format_to(it, "  {:>16}  {} -> {} allocations ({} -> {})  {}\n", signedBytes(c.change()),
                     c.a.allocations, c.b.allocations, bytesText(c.a.bytes), bytesText(c.b.bytes), c.what);
    }
  };
  list("sites that leak more in B (largest growth first)", d.grew_count, d.grew);
  list("sites that leak less in B", d.shrank_count, d.shrank);
  if (d.grew.empty() && d.shrank.empty()) out += "\nno site leaks more or less\n";
  return out;
}

std::string renderMemoryDiffSections(const MemoryDiff& d) {
  std::string out;
  auto it = std::back_inserter(out);
  const std::int64_t change =
      static_cast<std::int64_t>(d.leaked_b.bytes) - static_cast<std::int64_t>(d.leaked_a.bytes);
  fmt::format_to(
      it,
      "<section id=\"memory-leaks\"><h2>Leaks</h2>\n<div class=\"tiles\"><div class=\"tile{}\"><div "
      "class=\"v\">{}</div><div class=\"l\">leaked, B against A</div></div><div class=\"tile\"><div "
      "class=\"v\">{} &rarr; {}</div><div class=\"l\">leaked bytes, A &rarr; B</div></div></div>\n",
      change > 0   ? " bad"
      : change < 0 ? " good"
                   : "",
      escapeHtml(signedBytes(change)), d.leaked_a.bytes, d.leaked_b.bytes);
  auto table = [&](const std::vector<MemoryChange>& changes, const char* title, const char* none) {
    fmt::format_to(it, "<h2>{}</h2>\n", title);
    if (changes.empty()) {
      fmt::format_to(it, "<p class=\"missing\">{}</p>\n", none);
      return;
    }
    out +=
        "<div class=\"scroll\"><table class=\"data compact\"><thead><tr><th class=\"num\">change</th><th "
        "class=\"num\">allocations A</th><th class=\"num\">allocations B</th><th class=\"num\">bytes "
        "A</th><th "
        "class=\"num\">bytes B</th><th>site</th></tr></thead><tbody>\n";
    for (const MemoryChange& c : changes) {
      fmt::format_to(it,
                     "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
                     "class=\"num\">{}</td><td class=\"num\">{}</td><td><code>{}</code></td></tr>\n",
                     escapeHtml(signedBytes(c.change())), c.a.allocations, c.b.allocations, c.a.bytes,
                     c.b.bytes, escapeHtml(c.what));
    }
    out += "</tbody></table></div>\n";
  };
  table(d.grew, "Sites that leak more in B", "No site leaks more in B.");
  table(d.shrank, "Sites that leak less in B", "No site leaks less in B.");
  out += "</section>\n<section id=\"memory-peaks\"><h2>Peaks and errors</h2>\n<ul>\n";
  for (const MemoryChange& c : d.peaks) {
    fmt::format_to(it, "<li>peak in use on {}: {} &rarr; {} ({})</li>\n", escapeHtml(c.what), c.a.bytes,
                   c.b.bytes, escapeHtml(signedBytes(c.change())));
  }
  for (const MemoryChange& c : d.errors) {
    fmt::format_to(it, "<li>memory errors, {}: {} &rarr; {}</li>\n", escapeHtml(c.what), c.a.allocations,
                   c.b.allocations);
  }
  out += "</ul>\n</section>\n";
  return out;
}

std::string renderMemoryDiffHtml(const MemoryDiff& d, std::string_view style) {
  std::string out;
  fmt::format_to(
      std::back_inserter(out),
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta "
      "name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>opscope "
      "diff</title>\n{}\n</head>\n<body>\n<nav id=\"nav\"><div class=\"in\"><span class=\"brand\">opscope "
      "diff</span><a href=\"#memory-leaks\">Leaks</a><a href=\"#memory-peaks\">Peaks and "
      "errors</a></div></nav>\n<main>\n<header><h1>Where the device memory went</h1>\n<p "
      "class=\"sub\">A: <code>{}</code><br>B: <code>{}</code></p></header>\n",
      style, escapeHtml(d.run_a), escapeHtml(d.run_b));
  out += renderMemoryDiffSections(d);
  out += "</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace opscope::analysis
