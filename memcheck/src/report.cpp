#include "report.h"

#include <opscope/results/format_version.h>
#include <opscope/results/memcheck_file.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <tuple>

namespace opscope::memcheck {
namespace {

// " (conv2d_forward)": the op a peak was reached in or after, when one had run.
std::string peakOpName(const Peak& p) {
  return p.op == mlu::OpId::kCount ? std::string() : fmt::format(" ({})", mlu::opName(p.op));
}

// " in layer4.1.conv2 (backward of aten::convolution) at main.py:112 in main": where the program made the
// allocation that reached a peak.
std::string peakSite(const Peak& p) {
  const std::string site = siteText(p.site);
  return site.empty() ? site : " in " + site;
}

}  // namespace

std::vector<LeakGroup> groupLeaks(const std::vector<LiveAllocation>& live) {
  std::map<std::tuple<StackId, std::uint32_t, int>, LeakGroup> groups;
  for (const LiveAllocation& a : live) {
    LeakGroup& g = groups[{a.stack, a.site != nullptr ? a.site->id : 0, a.device}];
    if (g.allocations == 0 || a.time < g.first.time) g.first = a;
    g.stack = a.stack;
    g.device = a.device;
    g.bytes += a.size;
    ++g.allocations;
  }
  std::vector<LeakGroup> out;
  out.reserve(groups.size());
  for (auto& [key, g] : groups) out.push_back(g);
  std::sort(out.begin(), out.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return std::tie(b.bytes, a.stack, a.device) < std::tie(a.bytes, b.stack, b.device);
  });
  return out;
}

Held splitGrowth(const std::vector<LiveAllocation>& live, std::uint32_t steps) {
  using Key = std::tuple<StackId, std::uint32_t, int>;
  auto key = [](const LiveAllocation& a) {
    return Key{a.stack, a.site != nullptr ? a.site->id : 0, a.device};
  };
  std::map<Key, std::map<std::uint32_t, std::uint64_t>> step_bytes;  // per group: bytes per counted step
  for (const LiveAllocation& a : live) {
    if (a.step >= 1 && a.step + 2 <= steps) step_bytes[key(a)][a.step] += a.size;
  }
  const std::uint32_t counted = steps >= 3 ? steps - 2 : 0;
  std::vector<LiveAllocation> growing, held;
  for (const LiveAllocation& a : live) {
    const auto it = step_bytes.find(key(a));
    const bool growth =
        it != step_bytes.end() && it->second.size() >= 3 && it->second.size() * 4 >= counted * 3;
    (growth ? growing : held).push_back(a);
  }
  Held out{groupLeaks(growing), groupLeaks(held)};
  for (LeakGroup& g : out.growth) {
    const auto& bytes = step_bytes[Key{g.stack, g.first.site != nullptr ? g.first.site->id : 0, g.device}];
    std::uint64_t total = 0;
    for (const auto& [step, b] : bytes) total += b;
    g.steps = static_cast<std::uint32_t>(bytes.size());
    g.bytes_per_step = total / std::max<std::size_t>(1, bytes.size());
  }
  return out;
}

std::string leakSummaryLine(const std::vector<LeakGroup>& leaks) {
  std::uint64_t bytes = 0, allocations = 0;
  for (const LeakGroup& g : leaks) {
    bytes += g.bytes;
    allocations += g.allocations;
  }
  return fmt::format("opscope memcheck: {} bytes leaked in {} allocations from {} sites", bytes, allocations,
                     leaks.size());
}

nlohmann::json framesJson(const std::vector<Frame>& frames) {
  nlohmann::json out = nlohmann::json::array();
  for (const Frame& f : frames) {
    if (f.program) {  // the program's own frame (Python's): no address, no module
      nlohmann::json j = {{"function", f.function}, {"program", true}};
      if (!f.file.empty()) {
        j["file"] = f.file;
        j["line"] = f.line;
      }
      out.push_back(std::move(j));
      continue;
    }
    nlohmann::json j = {{"address", fmt::format("{:#x}", f.address)},
                        {"function", f.function},
                        {"module", f.module},
                        {"offset", fmt::format("{:#x}", f.offset)}};
    if (!f.file.empty()) {
      j["file"] = f.file;
      j["line"] = f.line;
    }
    if (f.inlined) j["inlined"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

void appendStack(std::string& out, const char* title, StackId stack, const SymbolizeStack& symbolize) {
  if (stack == 0) return;
  out += title;
  formatFrames(out, symbolize(stack));
}

}  // namespace

std::string formatError(const MemoryError& e, const SymbolizeStack& symbolize) {
  // "heap-buffer-overflow on MLU 0: 4 bytes past the end of ...", "double-free: mlurtFree of ..."
  const bool place = e.message.rfind("on ", 0) == 0;
  std::string out = fmt::format("opscope memcheck: ERROR: {}{} {}{}\n", e.kind, place ? "" : ":", e.message,
                                e.count > 1 ? fmt::format(" ({} times)", e.count) : "");
  if (e.stack == 0 && e.site_only) {
    out +=
        "    (at the program's line named above; the op's own backtrace is not kept, to keep checking every "
        "op "
        "cheap)\n";
  } else if (e.stack == 0) {
    out += "    (no backtrace: set MEM_CHECK_ENABLE_BACKTRACE=1)\n";
  } else {
    formatFrames(out, symbolize(e.stack));
  }
  appendStack(out, "  freed before at:\n", e.free_stack, symbolize);
  appendStack(out, "  allocated at:\n", e.alloc_stack, symbolize);
  return out;
}

Reports buildReports(const ReportInput& in, const SymbolizeStack& symbolize) {
  Reports r;
  auto text = std::back_inserter(r.text);
  nlohmann::json json = {{"tool", "opscope memcheck"},
                         {results::kFormatVersionKey, results::kMemcheckFormatVersion},
                         {"command", in.command},
                         {"pid", in.pid},
                         {"backtraces", in.backtraces}};
  fmt::format_to(text, "opscope memcheck report: {} (pid {})\n\n", in.command, in.pid);

  // A group of live allocations: "Leak of ..." or "Held: ...", where the program made them, the stack.
  auto group = [&](const LeakGroup& g, const char* what) {
    fmt::format_to(text, "{} {} bytes in {} allocation{} on {}", what, g.bytes, g.allocations,
                   g.allocations == 1 ? "" : "s", placeName(g.device));
    // "(80 bytes a step, seen in 4 steps; made in fc at train.py:11 in <module>)"
    std::string about =
        g.steps > 0 ? fmt::format("{} bytes a step, seen in {} steps", g.bytes_per_step, g.steps) : "";
    if (const std::string site = siteText(g.first.site); !site.empty())
      about += (about.empty() ? "made in " : "; made in ") + site;
    if (!about.empty()) fmt::format_to(text, " ({})", about);
    r.text += " from:\n";
    nlohmann::json j = {{"bytes", g.bytes},
                        {"allocations", g.allocations},
                        {"place", placeName(g.device)},
                        {"device", g.device},
                        {"first",
                         {{"pointer", fmt::format("{:#x}", g.first.ptr)},
                          {"size", g.first.size},
                          {"thread", g.first.thread},
                          {"op_seq", g.first.op_seq},
                          {"time_ms", static_cast<double>(g.first.time) * in.ns_per_tick / 1e6}}}};
    if (g.stack == 0) {
      fmt::format_to(text,
                     "    (no backtrace: set MEM_CHECK_ENABLE_BACKTRACE=1) first: {:#x}, {} bytes, "
                     "thread {}, after op #{}\n",
                     g.first.ptr, g.first.size, g.first.thread, g.first.op_seq);
      j["stack"] = nlohmann::json::array();
    } else {
      const std::vector<Frame> frames = symbolize(g.stack);
      formatFrames(r.text, frames);
      j["stack"] = framesJson(frames);
    }
    r.text += '\n';
    if (g.steps > 0) {
      j["steps"] = g.steps;
      j["bytes_per_step"] = g.bytes_per_step;
    }
    if (g.first.site != nullptr) {
      j["module"] = g.first.site->module;
      j["source"] = g.first.site->source;
      if (!g.first.site->forward_op.empty()) j["forward_op"] = g.first.site->forward_op;
    }
    return j;
  };
  nlohmann::json leaks = nlohmann::json::array();
  for (const LeakGroup& g : in.leaks) leaks.push_back(group(g, "Leak of"));
  json["leaks"] = std::move(leaks);
  std::uint64_t held_bytes = 0, held_allocations = 0;
  nlohmann::json held = nlohmann::json::array();
  if (in.program_ended) {
    for (const LeakGroup& g : in.held) {
      held_bytes += g.bytes;
      held_allocations += g.allocations;
    }
    fmt::format_to(
        text,
        "Still held at exit: {} bytes in {} allocations from {} sites (the program held them when it "
        "ended: not leaks; {} steps marked)\n\n",
        held_bytes, held_allocations, in.held.size(), in.steps);
    for (const LeakGroup& g : in.held) held.push_back(group(g, "Held:"));
    json["held_at_exit"] = std::move(held);
    json["steps"] = in.steps;
  }

  nlohmann::json errors = nlohmann::json::array();
  if (!in.errors.empty())
    fmt::format_to(text, "{} memory error{}:\n\n", in.errors.size(), in.errors.size() == 1 ? "" : "s");
  for (const MemoryError& e : in.errors) {
    r.text += formatError(e, symbolize);
    r.text += '\n';
    nlohmann::json j = {{"kind", e.kind}, {"message", e.message}, {"op_seq", e.op_seq}, {"count", e.count}};
    j["stack"] = framesJson(symbolize(e.stack));
    if (e.alloc_stack != 0) j["allocation_stack"] = framesJson(symbolize(e.alloc_stack));
    if (e.free_stack != 0) j["free_stack"] = framesJson(symbolize(e.free_stack));
    errors.push_back(std::move(j));
  }
  json["errors"] = std::move(errors);

  nlohmann::json peaks = nlohmann::json::array();
  for (const Peak& p : in.peaks) {
    fmt::format_to(text, "Peak memory in use on {}: {} bytes, reached after op #{}{}\n", placeName(p.device),
                   p.bytes, p.op_seq, peakOpName(p));
    peaks.push_back(
        {{"place", placeName(p.device)}, {"device", p.device}, {"bytes", p.bytes}, {"op_seq", p.op_seq}});
    if (p.op != mlu::OpId::kCount) peaks.back()["op"] = mlu::opName(p.op);
  }
  json["peaks"] = std::move(peaks);
  nlohmann::json piece_peaks = nlohmann::json::array();
  for (const Peak& p : in.piece_peaks) {
    if (p.bytes == 0) continue;
    fmt::format_to(
        text,
        "Peak of the pieces in use on {} (the program's allocator's): {} bytes, reached after op #{}{}{}\n",
        placeName(p.device), p.bytes, p.op_seq, peakOpName(p), peakSite(p));
    nlohmann::json j = {
        {"place", placeName(p.device)}, {"device", p.device}, {"bytes", p.bytes}, {"op_seq", p.op_seq}};
    if (p.op != mlu::OpId::kCount) j["op"] = mlu::opName(p.op);
    if (p.site != nullptr) j["site"] = siteText(p.site);
    nlohmann::json modules = nlohmann::json::array();
    for (const auto& [module, bytes] : p.modules) {
      fmt::format_to(text, "    {:>14} bytes held by {}\n", bytes, module.empty() ? "(no module)" : module);
      modules.push_back({{"module", module}, {"bytes", bytes}});
    }
    j["modules"] = std::move(modules);
    piece_peaks.push_back(std::move(j));
  }
  json["piece_peaks"] = std::move(piece_peaks);
  // Each marked step's peak and what it ended with, per place (device memory, and the pieces a program's own
  // allocator handed out).
  auto marks = [](const std::vector<StepMark>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const StepMark& m : list)
      out.push_back({{"step", m.step}, {"place", placeName(m.device)}, {"peak", m.peak}, {"end", m.end}});
    return out;
  };
  json["steps"] = marks(in.step_marks);
  json["piece_steps"] = marks(in.piece_step_marks);
  if (in.steps_dropped > 0) json["steps_dropped"] = in.steps_dropped;

  const std::string line = leakSummaryLine(in.leaks);
  std::uint64_t bytes = 0, allocations = 0;
  for (const LeakGroup& g : in.leaks) {
    bytes += g.bytes;
    allocations += g.allocations;
  }
  json["summary"] = {{"leaked_bytes", bytes},
                     {"leaked_allocations", allocations},
                     {"leak_sites", in.leaks.size()},
                     {"errors", in.errors.size()}};
  if (in.program_ended) {
    json["summary"]["held_bytes"] = held_bytes;
    json["summary"]["held_allocations"] = held_allocations;
    json["summary"]["held_sites"] = in.held.size();
  }
  fmt::format_to(text, "\n{}; {} memory error{}\n", line, in.errors.size(), in.errors.size() == 1 ? "" : "s");
  r.json = json.dump(1) + "\n";
  r.summary =
      fmt::format("{}; {} memory error{}\n", line, in.errors.size(), in.errors.size() == 1 ? "" : "s");
  // The growth leaks, most bytes a step first: the first ten here, all of them in memcheck.txt.
  std::vector<const LeakGroup*> growing;
  for (const LeakGroup& g : in.leaks) {
    if (g.steps > 0) growing.push_back(&g);
  }
  std::stable_sort(growing.begin(), growing.end(), [](const LeakGroup* a, const LeakGroup* b) {
    return a->bytes_per_step > b->bytes_per_step;
  });
  constexpr std::size_t kPrinted = 10;
  for (std::size_t i = 0; i < growing.size() && i < kPrinted; ++i) {
    const LeakGroup& g = *growing[i];
    r.summary += fmt::format(
        "opscope memcheck: leak: {} bytes a step ({} bytes in {} allocations) made in {}\n", g.bytes_per_step,
        g.bytes, g.allocations, g.first.site != nullptr ? siteText(g.first.site) : std::string("(no site)"));
  }
  if (growing.size() > kPrinted)
    r.summary += fmt::format("opscope memcheck: ... and {} more growing sites (memcheck.txt)\n",
                             growing.size() - kPrinted);
  if (in.program_ended) {
    r.summary += fmt::format(
        "opscope memcheck: still held at exit (not leaks): {} bytes in {} allocations from {} sites\n",
        held_bytes, held_allocations, in.held.size());
  }
  for (const Peak& p : in.peaks) {
    r.summary += fmt::format("opscope memcheck: peak on {}: {} bytes after op #{}{}\n", placeName(p.device),
                             p.bytes, p.op_seq, peakOpName(p));
  }
  for (const Peak& p : in.piece_peaks) {
    if (p.bytes == 0 || p.site == nullptr) continue;
    std::string modules;
    for (std::size_t i = 0; i < p.modules.size() && i < 3; ++i) {
      fmt::format_to(std::back_inserter(modules), "{}{} {} bytes", i == 0 ? "" : ", ",
                     p.modules[i].first.empty() ? "(no module)" : p.modules[i].first, p.modules[i].second);
    }
    r.summary +=
        fmt::format("opscope memcheck: tensor peak on {}: {} bytes after op #{}{}{}; held most by {}\n",
                    placeName(p.device), p.bytes, p.op_seq, peakOpName(p), peakSite(p), modules);
  }
  return r;
}

}  // namespace opscope::memcheck
