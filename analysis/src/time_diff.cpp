#include <opscope/analysis/diff.h>
#include <opscope/analysis/time_diff.h>
#include <opscope/results/csv.h>
#include <opscope/text.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <system_error>

namespace opscope::analysis {
namespace {

namespace fs = std::filesystem;

// Bounds on what a hostile time_measure.csv can make us hold: past kMaxKeys distinct signatures (or
// modules), a new one's calls count under kOther; a field's first kMaxText bytes are used.
constexpr std::size_t kMaxKeys = 100000;
constexpr std::size_t kMaxText = 1024;
constexpr const char* kOther = "(other)";
// A change of device time below this (what the lists print as 0.000 ms) is no change.
constexpr double kNoChangeMs = 0.0005;

fs::path csvOf(const fs::path& run) {
  std::error_code ec;
  return fs::is_directory(run, ec) ? run / "time_measure.csv" : run;
}

// A time in milliseconds: a finite number, not negative; nothing otherwise.
bool parseMs(const std::string& text, double& out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  return ec == std::errc() && ptr == end && std::isfinite(out) && out >= 0;
}

template <typename Key>
TimeLine& lineOf(std::map<Key, TimeLine>& lines, const Key& key, const Key& other) {
  if (auto it = lines.find(key); it != lines.end()) return it->second;
  return lines[lines.size() < kMaxKeys ? key : other];
}

void add(TimeLine& line, double device_ms, double host_ms) {
  ++line.calls;
  line.device_ms += device_ms;
  line.host_ms += host_ms;
}

std::string signatureText(const std::pair<std::string, std::string>& key) {
  return key.second.empty() ? key.first : fmt::format("{} [{}]", key.first, key.second);
}

// Every key of both maps paired: (key, A's line, B's line), a missing side empty.
template <typename Key, typename F>
void eachPair(const std::map<Key, TimeLine>& a, const std::map<Key, TimeLine>& b, F&& f) {
  auto ia = a.begin();
  auto ib = b.begin();
  while (ia != a.end() || ib != b.end()) {
    if (ib == b.end() || (ia != a.end() && ia->first < ib->first)) {
      f(ia->first, &ia->second, nullptr);
      ++ia;
    } else if (ia == a.end() || ib->first < ia->first) {
      f(ib->first, nullptr, &ib->second);
      ++ib;
    } else {
      f(ia->first, &ia->second, &ib->second);
      ++ia;
      ++ib;
    }
  }
}

// Splits changes into the slower and the faster ones, each largest change first, at most `top`.
void rank(std::vector<TimeChange> changes, std::vector<TimeChange>& slower, std::vector<TimeChange>& faster,
          std::size_t top) {
  for (TimeChange& c : changes) {
    if (std::abs(c.change()) < kNoChangeMs) continue;
    if (c.change() > 0) {
      slower.push_back(std::move(c));
    } else if (c.change() < 0) {
      faster.push_back(std::move(c));
    }
  }
  auto keep = [top](std::vector<TimeChange>& list, auto&& before) {
    std::sort(list.begin(), list.end(), [&](const TimeChange& x, const TimeChange& y) {
      return before(x, y) || (!before(y, x) && x.what < y.what);
    });
    if (list.size() > top) list.resize(top);
  };
  keep(slower, [](const TimeChange& x, const TimeChange& y) { return x.change() > y.change(); });
  keep(faster, [](const TimeChange& x, const TimeChange& y) { return x.change() < y.change(); });
}

std::string ms(double v) { return fmt::format("{:.3f} ms", v); }

std::string signedMs(double v) { return fmt::format("{}{:.3f} ms", v >= 0 ? "+" : "", v); }

// ", +35.6%": the change as a share of the base (nothing when the base is 0).
std::string percentOf(double change, double base) {
  return base > 0 ? fmt::format(", {:+.1f}%", 100 * change / base) : std::string();
}

// "+20.004 ms per call" when both runs called it, else "".
std::string perCall(const TimeChange& c) {
  if (c.a.calls == 0 || c.b.calls == 0) return "";
  return fmt::format(" ({} per call)", signedMs(c.b.deviceMean() - c.a.deviceMean()));
}

void textTable(std::string& out, const char* title, const std::vector<TimeChange>& list) {
  if (list.empty()) return;
  fmt::format_to(std::back_inserter(out), "\n{}:\n", title);
  std::size_t width = 0;
  for (const TimeChange& c : list) width = std::max(width, std::min<std::size_t>(c.what.size(), 60));
  for (const TimeChange& c : list) {
    const std::string what = c.what.size() > 60 ? c.what.substr(0, 57) + "..." : c.what;
    fmt::format_to(std::back_inserter(out), "  {:<{}}  {}{}   calls {} -> {}, mean {:.3f} -> {:.3f} ms\n",
                   what, width, signedMs(c.change()), perCall(c), c.a.calls, c.b.calls, c.a.deviceMean(),
                   c.b.deviceMean());
  }
}

void htmlTable(std::string& out, const std::vector<TimeChange>& list, const char* empty) {
  auto it = std::back_inserter(out);
  if (list.empty()) {
    fmt::format_to(it, "<p class=\"missing\">{}</p>\n", empty);
    return;
  }
  out +=
      "<div class=\"scroll\"><table class=\"data compact\"><thead><tr><th>what</th><th class=\"num\">device "
      "time change</th><th class=\"num\">per call</th><th class=\"num\">calls A</th><th class=\"num\">calls "
      "B</th><th class=\"num\">mean A</th><th class=\"num\">mean B</th></tr></thead><tbody>\n";
  for (const TimeChange& c : list) {
    fmt::format_to(it,
                   "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
                   "class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
                   "class=\"num\">{}</td></tr>\n",
                   escapeHtml(c.what), signedMs(c.change()),
                   c.a.calls > 0 && c.b.calls > 0 ? signedMs(c.b.deviceMean() - c.a.deviceMean()) : "",
                   c.a.calls, c.b.calls, c.a.calls > 0 ? ms(c.a.deviceMean()) : "",
                   c.b.calls > 0 ? ms(c.b.deviceMean()) : "");
  }
  out += "</tbody></table></div>\n";
}

}  // namespace

bool isProfiledRun(const fs::path& run) {
  std::error_code ec;
  const fs::path csv = csvOf(run);
  return csv.extension() == ".csv" && fs::is_regular_file(csv, ec);
}

TimeProfile loadTimeProfile(const fs::path& run) {
  const fs::path path = csvOf(run);
  TimeProfile p;
  p.path = path.string();
  try {
    results::CsvReader csv(path, {"name", "host_ms", "device_ms"});
    const std::size_t name = csv.column("name"), host = csv.column("host_ms"),
                      device = csv.column("device_ms");
    const std::optional<std::size_t> shapes = csv.optionalColumn("shapes");
    const std::optional<std::size_t> module = csv.optionalColumn("module");
    const std::pair<std::string, std::string> other_signature{kOther, ""};
    csv.forEach([&](const std::vector<std::string>& f) {
      double d = 0, h = 0;
      if (f[name].empty() || !parseMs(f[device], d) || !parseMs(f[host], h)) {
        ++p.malformed;
        return;
      }
      const std::string op = f[name].substr(0, kMaxText);
      add(p.total, d, h);
      add(lineOf(p.ops, op, std::string(kOther)), d, h);
      const std::string signature = shapes ? f[*shapes].substr(0, kMaxText) : std::string();
      add(lineOf(p.signatures, std::pair(op, signature), other_signature), d, h);
      if (module && !f[*module].empty())
        add(lineOf(p.modules, f[*module].substr(0, kMaxText), std::string(kOther)), d, h);
    });
    p.malformed += csv.malformed();
  } catch (const std::exception& e) {
    throw DiffError(
        fmt::format("{}: {} (profile the run with opscope run --profile)", run.string(), e.what()));
  }
  return p;
}

TimeDiff diffTimes(const TimeProfile& a, const TimeProfile& b, std::size_t top) {
  TimeDiff d;
  d.run_a = a.path;
  d.run_b = b.path;
  d.total_a = a.total;
  d.total_b = b.total;
  d.malformed_a = a.malformed;
  d.malformed_b = b.malformed;
  std::vector<TimeChange> ops, signatures, modules, only_b, only_a;
  eachPair(a.ops, b.ops, [&](const std::string& key, const TimeLine* x, const TimeLine* y) {
    ops.push_back({key, x ? *x : TimeLine{}, y ? *y : TimeLine{}});
  });
  eachPair(a.signatures, b.signatures, [&](const auto& key, const TimeLine* x, const TimeLine* y) {
    TimeChange c{signatureText(key), x ? *x : TimeLine{}, y ? *y : TimeLine{}};
    if (x && y) {
      signatures.push_back(std::move(c));
    } else if (y) {
      only_b.push_back(std::move(c));
    } else {
      only_a.push_back(std::move(c));
    }
  });
  eachPair(a.modules, b.modules, [&](const std::string& key, const TimeLine* x, const TimeLine* y) {
    modules.push_back({key, x ? *x : TimeLine{}, y ? *y : TimeLine{}});
  });
  rank(std::move(ops), d.slower_ops, d.faster_ops, top);
  rank(std::move(signatures), d.slower_signatures, d.faster_signatures, top);
  rank(std::move(modules), d.slower_modules, d.faster_modules, top);
  d.new_count = only_b.size();
  d.vanished_count = only_a.size();
  // The signatures only one run has, by their device time there (also those of no device time).
  auto byTime = [top](std::vector<TimeChange> list, std::vector<TimeChange>& out) {
    std::sort(list.begin(), list.end(), [](const TimeChange& x, const TimeChange& y) {
      const double tx = std::abs(x.change()), ty = std::abs(y.change());
      return tx != ty ? tx > ty : x.what < y.what;
    });
    if (list.size() > top) list.resize(top);
    out = std::move(list);
  };
  byTime(std::move(only_b), d.new_signatures);
  byTime(std::move(only_a), d.vanished_signatures);
  return d;
}

std::string renderTimeDiff(const TimeDiff& d) {
  std::string out;
  auto it = std::back_inserter(out);
  const double change = d.total_b.device_ms - d.total_a.device_ms;
  fmt::format_to(it,
                 "opscope diff: where the time went, from A's profile to B's\n  A: {}\n  B: {}\n"
                 "device time in ops: {} -> {} ({}{}); op calls {} -> {}; host time in op calls {} -> {}\n",
                 d.run_a, d.run_b, ms(d.total_a.device_ms), ms(d.total_b.device_ms), signedMs(change),
                 percentOf(change, d.total_a.device_ms), d.total_a.calls, d.total_b.calls,
                 ms(d.total_a.host_ms), ms(d.total_b.host_ms));
  if (d.malformed_a + d.malformed_b > 0)
    fmt::format_to(it, "(rows that do not parse, skipped: {} in A, {} in B)\n", d.malformed_a, d.malformed_b);
  textTable(out, "ops that got slower (device time, largest change first)", d.slower_ops);
  textTable(out, "ops that got faster", d.faster_ops);
  textTable(out, "input signatures that got slower", d.slower_signatures);
  textTable(out, "input signatures that got faster", d.faster_signatures);
  textTable(out, "modules that got slower", d.slower_modules);
  textTable(out, "modules that got faster", d.faster_modules);
  if (d.new_count > 0)
    textTable(out, fmt::format("new input signatures, only in B ({})", d.new_count).c_str(),
              d.new_signatures);
  if (d.vanished_count > 0) {
    textTable(out, fmt::format("vanished input signatures, only in A ({})", d.vanished_count).c_str(),
              d.vanished_signatures);
  }
  if (d.slower_ops.empty() && d.faster_ops.empty()) out += "\nno op's device time changed\n";
  return out;
}

std::string renderTimeDiffSections(const TimeDiff& d) {
  std::string out;
  auto it = std::back_inserter(out);
  const double change = d.total_b.device_ms - d.total_a.device_ms;
  fmt::format_to(
      it,
      "<section id=\"time-total\"><h2>Time</h2>\n<div class=\"tiles\"><div class=\"tile{}\"><div "
      "class=\"v\">{}</div><div class=\"l\">device time in ops{}</div></div><div class=\"tile\"><div "
      "class=\"v\">{} &rarr; {}</div><div class=\"l\">device time in ops, A &rarr; B</div></div><div "
      "class=\"tile\"><div class=\"v\">{} &rarr; {}</div><div class=\"l\">op calls</div></div></div>\n"
      "<p class=\"note\">Ops are matched by name, input signatures by op name and input shapes, modules "
      "by their path; each list is ordered by the change of its device time.</p>\n</section>\n",
      change > 0 ? " bad" : " good", signedMs(change), escapeHtml(percentOf(change, d.total_a.device_ms)),
      ms(d.total_a.device_ms), ms(d.total_b.device_ms), d.total_a.calls, d.total_b.calls);
  // The lists that both runs have, each a section of its slower and its faster ones.
  struct Part {
    const char* id;
    const char* what;  // "Ops", ...
    const std::vector<TimeChange>& slower;
    const std::vector<TimeChange>& faster;
    const char* noun;  // "No <noun> got slower<note>."
    const char* note;
  };
  for (const Part& part : {Part{"time-ops", "Ops", d.slower_ops, d.faster_ops, "op", ""},
                           Part{"time-signatures", "Input signatures", d.slower_signatures,
                                d.faster_signatures, "input signature both runs have", ""},
                           Part{"time-modules", "Modules", d.slower_modules, d.faster_modules, "module",
                                " (or the runs name no modules)"}}) {
    fmt::format_to(it, "<section id=\"{}\"><h2>{} that got slower</h2>\n", part.id, part.what);
    htmlTable(out, part.slower, fmt::format("No {} got slower{}.", part.noun, part.note).c_str());
    fmt::format_to(it, "<h2>{} that got faster</h2>\n", part.what);
    htmlTable(out, part.faster, fmt::format("No {} got faster{}.", part.noun, part.note).c_str());
    out += "</section>\n";
  }
  fmt::format_to(it, "<section id=\"time-only\"><h2>New input signatures, only in B ({})</h2>\n",
                 d.new_count);
  htmlTable(out, d.new_signatures, "None.");
  fmt::format_to(it, "<h2>Vanished input signatures, only in A ({})</h2>\n", d.vanished_count);
  htmlTable(out, d.vanished_signatures, "None.");
  out += "</section>\n";
  return out;
}

std::string renderTimeDiffHtml(const TimeDiff& d, std::string_view style, std::string_view more) {
  std::string out;
  fmt::format_to(
      std::back_inserter(out),
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta "
      "name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>opscope diff</title>\n{}\n"
      "</head>\n<body>\n<nav id=\"nav\"><div class=\"in\"><span class=\"brand\">opscope diff</span><a "
      "href=\"#time-total\">Time</a><a href=\"#time-ops\">Ops</a><a href=\"#time-signatures\">Input "
      "signatures</a><a href=\"#time-modules\">Modules</a><a href=\"#time-only\">Only one "
      "run</a></div></nav>\n"
      "<main>\n<header><h1>Where the time went</h1>\n<p class=\"sub\">A: <code>{}</code><br>B: "
      "<code>{}</code></p></header>\n",
      style, escapeHtml(d.run_a), escapeHtml(d.run_b));
  out += renderTimeDiffSections(d);
  out += more;
  out += "</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace opscope::analysis
