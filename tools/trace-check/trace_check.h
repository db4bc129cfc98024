// trace_check.h — a checker of Chrome Trace Event Format JSON (trace.json) against the rules Perfetto's JSON
// importer applies, plus the flow binding the Chrome DevTools trace engine needs. Neither consumer reports
// a malformed event: they drop it, misplace it or draw it in the wrong place, so a trace that loads is not
// yet a correct trace. check() names every violation with the event's index in traceEvents and its name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace opscope::tracecheck {

// At most this many error messages are stored in a Report; error_count counts all of them.
inline constexpr std::size_t kMaxStoredErrors = 100;

struct Report {
  std::vector<std::string> errors;              // the first kMaxStoredErrors violations, in the order found
  std::size_t error_count = 0;                  // all violations
  std::size_t events = 0;                       // entries of traceEvents
  std::map<std::string, std::size_t> by_phase;  // "X" -> count, ... (events with a string "ph")
  std::size_t slices = 0;                       // complete slices: X events plus matched B/E pairs
  std::size_t tracks = 0;                       // (pid, tid) threads holding at least one complete slice
  std::size_t flows = 0;  // flows (cat, name, id) with exactly one s and one f, the s not after the f

  bool ok() const { return error_count == 0; }
};

// Checks a parsed trace: an object with a "traceEvents" array, or a bare array of events.
Report check(const nlohmann::json& trace);

// Reads and checks a file. A file that cannot be read or is not JSON gives a report with one error naming
// the file (and, for bad JSON, the byte offset, line and column where parsing stopped).
Report checkFile(const std::string& path);

}  // namespace opscope::tracecheck
