#include "report.h"

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

}  // namespace

std::vector<LeakGroup> groupLeaks(const std::vector<LiveAllocation>& live) {
  std::map<std::pair<StackId, int>, LeakGroup> groups;
  for (const LiveAllocation& a : live) {
    LeakGroup& g = groups[{a.stack, a.device}];
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

std::string leakSummaryLine(const std::vector<LeakGroup>& leaks) {
  std::uint64_t bytes = 0, allocations = 0;
  for (const LeakGroup& g : leaks) {
    bytes += g.bytes;
    allocations += g.allocations;
  }
  return fmt::format("opscope memcheck: {} bytes leaked in {} allocations from {} sites", bytes, allocations,
                     leaks.size());
}

namespace {

nlohmann::json framesJson(const std::vector<Frame>& frames) {
  nlohmann::json out = nlohmann::json::array();
  for (const Frame& f : frames) {
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

void appendStack(std::string& out, const char* title, StackId stack, const SymbolizeStack& symbolize) {
  if (stack == 0) return;
  out += title;
  formatFrames(out, symbolize(stack));
}

}  // namespace

std::string formatError(const MemoryError& e, const SymbolizeStack& symbolize) {
  // "heap-buffer-overflow on MLU 0: 4 bytes past the end of ...", "double-free: mlurtFree of ..."
  const bool place = e.message.rfind("on ", 0) == 0;
  std::string out = fmt::format("opscope memcheck: ERROR: {}{} {}\n", e.kind, place ? "" : ":", e.message);
  if (e.stack == 0) {
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
  nlohmann::json json = {
      {"tool", "opscope memcheck"}, {"command", in.command}, {"pid", in.pid}, {"backtraces", in.backtraces}};
  fmt::format_to(text, "opscope memcheck report: {} (pid {})\n\n", in.command, in.pid);

  nlohmann::json leaks = nlohmann::json::array();
  for (const LeakGroup& g : in.leaks) {
    fmt::format_to(text, "Leak of {} bytes in {} allocation{} on {} from:\n", g.bytes, g.allocations,
                   g.allocations == 1 ? "" : "s", placeName(g.device));
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
    leaks.push_back(std::move(j));
  }
  json["leaks"] = std::move(leaks);

  nlohmann::json errors = nlohmann::json::array();
  if (!in.errors.empty())
    fmt::format_to(text, "{} memory error{}:\n\n", in.errors.size(), in.errors.size() == 1 ? "" : "s");
  for (const MemoryError& e : in.errors) {
    r.text += formatError(e, symbolize);
    r.text += '\n';
    nlohmann::json j = {{"kind", e.kind}, {"message", e.message}, {"op_seq", e.op_seq}};
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
  fmt::format_to(text, "\n{}; {} memory error{}\n", line, in.errors.size(), in.errors.size() == 1 ? "" : "s");
  r.json = json.dump(1) + "\n";
  r.summary =
      fmt::format("{}; {} memory error{}\n", line, in.errors.size(), in.errors.size() == 1 ? "" : "s");
  for (const Peak& p : in.peaks) {
    r.summary += fmt::format("opscope memcheck: peak on {}: {} bytes after op #{}{}\n", placeName(p.device),
                             p.bytes, p.op_seq, peakOpName(p));
  }
  return r;
}

}  // namespace opscope::memcheck
