// trace_repair_file.h — a killed run's trace.json.tmp (or .json.gz.tmp) repaired into a file of its own
// (trace_repair.h's repairTrace on the file's text): trace-check --repair and `opscope report` of a killed
// run, which leaves the repaired trace beside the .tmp for Perfetto to load.
#pragma once

#include <opscope/trace_repair.h>

#include <string>

namespace opscope {

// Reads `in` (inflated as far as it goes when it ends in .gz or .gz.tmp), repairs it and writes the repaired
// trace to `out` (gzip-compressed when `out` ends in .gz), a new private file: an existing `out` is not
// replaced. Returns "" and fills *result on success, else the reason ("<out> exists; not replaced",
// "cannot repair <in>: ...", "cannot write <out>: ...").
std::string repairTraceFile(const std::string& in, const std::string& out, RepairedTrace* result);

// The name a repaired trace gets by default: `in` without .tmp (else in + ".repaired.json").
std::string repairedTraceName(const std::string& in);

}  // namespace opscope
