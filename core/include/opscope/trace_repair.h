// trace_repair.h — what is left of a trace the profiler could not finish (a program killed with SIGKILL
// leaves trace.json.tmp, cut anywhere, its last second missing): every event written whole, made into a
// complete trace that readers load. The profiler writes one event per line after the head
// `{"traceEvents":[`, each line but the first starting with `,` + newline, and names each track before its
// first event, so the events kept still have their tracks' names. Header-only: `trace-check --repair` and
// the report (also built alone, for fuzzing) use it; the text may come from anyone.
#pragma once

#include <opscope/results/trace_file.h>

#include <algorithm>
#include <cstddef>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opscope {

struct RepairedTrace {
  std::string json;                // a complete trace
  std::size_t lost_bytes = 0;      // the cut-off event at the end, left out
  std::size_t dangling_flows = 0;  // flow starts left out: their ends were in the part lost
  bool was_complete = false;       // the text was a whole trace already (json is the text)
};

namespace trace_repair_detail {

// Whether line is one whole JSON object: braces and brackets balance outside strings, and it ends there.
inline bool wholeObject(std::string_view line) {
  if (line.empty() || line.front() != '{') return false;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1 == line.size();
      if (depth < 0) return false;
    }
  }
  return false;
}

// The id of a flow event's line ("id":N), or "" when it has none.
inline std::string_view flowId(std::string_view line) {
  const std::size_t at = line.find("\"id\":");
  if (at == std::string_view::npos) return {};
  std::size_t end = at + 5;
  while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
  return line.substr(at + 5, end - at - 5);
}

}  // namespace trace_repair_detail

// Throws std::runtime_error when text is not the start of an opscope trace or holds no whole event.
inline RepairedTrace repairTrace(std::string_view text) {
  constexpr std::string_view kHead = "{\"traceEvents\":[\n";
  constexpr std::string_view kSeparator = ",\n";
  if (text.substr(0, kHead.size()) != kHead) {
    throw std::runtime_error("not a trace written by opscope's profiler (it starts with {\"traceEvents\":[)");
  }
  RepairedTrace out;
  // A whole trace ends with its closing line: nothing to repair.
  if (text.find("\n],\"displayTimeUnit\"") != std::string_view::npos && text.ends_with("}}\n")) {
    out.json = std::string(text);
    out.was_complete = true;
    return out;
  }
  // The events kept: up to the last separator, and the line after it when it is whole.
  std::size_t end = text.rfind(kSeparator);
  if (end == std::string_view::npos || end < kHead.size()) {
    end = kHead.size();  // at most one event, with no separator
  }
  std::string_view tail = text.substr(end == kHead.size() ? end : end + kSeparator.size());
  if (const std::size_t newline = tail.find('\n'); newline != std::string_view::npos)
    tail = tail.substr(0, newline);
  if (tail.ends_with(',')) tail.remove_suffix(1);  // cut between an event and the next one's newline
  std::size_t kept = end;
  if (trace_repair_detail::wholeObject(tail))
    kept = static_cast<std::size_t>(tail.data() + tail.size() - text.data());
  if (kept <= kHead.size()) throw std::runtime_error("it holds no whole event");
  out.lost_bytes = text.size() - kept;
  // A flow whose end was in the lost last second keeps only its start: left out, as readers would.
  const std::string_view events = text.substr(0, kept);
  std::set<std::string_view> ended;
  for (std::size_t at = events.find("{\"ph\":\"f\""); at != std::string_view::npos;
       at = events.find("{\"ph\":\"f\"", at + 1)) {
    ended.insert(trace_repair_detail::flowId(events.substr(at, events.find('\n', at) - at)));
  }
  out.json.reserve(kept + 160);
  std::size_t from = 0;
  for (std::size_t at = events.find("\n{\"ph\":\"s\""); at != std::string_view::npos;
       at = events.find("\n{\"ph\":\"s\"", at + 1)) {
    const std::size_t line_end = std::min(events.find('\n', at + 1), events.size());
    // Each event after the first is ",\n{...}": the comma ends the line before it, and the event ends
    // where the next one's comma begins. (The first event, with no comma before it, is kept.)
    if (events[at - 1] != ',') continue;
    if (ended.count(trace_repair_detail::flowId(events.substr(at + 1, line_end - at - 1))) != 0) continue;
    out.json.append(events.substr(from, at - 1 - from));
    from = line_end < events.size() ? line_end - 1 : line_end;
    ++out.dangling_flows;
  }
  out.json.append(events.substr(from));
  out.json += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"opscope\",\"format_version\":";
  out.json += std::to_string(results::kTraceFormatVersion);
  out.json += ",\"repaired\":true,\"bytes_lost\":";
  out.json += std::to_string(out.lost_bytes);
  out.json += "}}\n";
  return out;
}

}  // namespace opscope
