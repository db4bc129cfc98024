// compare_tool.h — the hook's auto-compare (OP_AUTOCOMPARE=1), overflow check (OP_OVERFLOW_CHECK=1) and
// dtype cast (OP_DTYPE_CAST).
//
// Auto-compare: before a matching op runs, its queue is synced and every tensor copied to the host; after
// it completes, the CPU reference runs on the copies, and every output of the device is compared with the
// reference's (metrics.h, tolerance.h), and every input the op must not modify is checked to be unchanged.
// Failures are printed at once; every compared op gets its metrics in capture.db (compare_results) and a
// row per tensor in autocompare.csv; a failing op also gets its inputs, device outputs and CPU outputs in
// capture.db, so op-replay can run it again.
//
// Overflow check: the first op (by sequence number) whose outputs hold NaN or Inf while its inputs held
// none is reported with its arguments; later ones are counted.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/rundb/writer.h>
#include <opscope/tool.h>
#include <opscope/tool_registration.h>

#include <memory>

namespace opscope::compare {

// writer: the run's capture.db. Throws std::runtime_error when autocompare.csv cannot be created.
std::unique_ptr<Tool> makeCompareTool(const Config& config, const RunInfo& run,
                                      std::shared_ptr<rundb::CaptureWriter> writer);

std::unique_ptr<Tool> makeOverflowTool(const Config& config);
// The overflow check, on with OP_OVERFLOW_CHECK=1 (its findings go to run.json).
ToolRegistration overflowRegistration();

// The dtype cast, on with OP_DTYPE_CAST (src/dtype_cast_tool.cpp): the listed ops run on the device in the
// wider dtype; which ran so goes to run.json's findings and the end-of-run lines.
ToolRegistration dtypeCastRegistration();

// The perturbation check, on with OP_PERTURB=1 (src/perturb_tool.cpp): the listed ops run again on the
// device on perturbed inputs; perturb.csv, and the flagged ones printed and in run.json's findings.
ToolRegistration perturbRegistration();

}  // namespace opscope::compare
