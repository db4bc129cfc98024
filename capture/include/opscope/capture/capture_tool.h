// capture_tool.h — the capture tool of the hook (OP_CAPTURE=1): each matching op's inputs are copied out
// before it runs and its outputs after it completes, and written to <result dir>/capture.db.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>

#include <memory>

namespace opscope::capture {

// Opens <run.result_dir>/capture.db. Throws std::runtime_error when it cannot.
std::unique_ptr<Tool> makeCaptureTool(const Config& config, const RunInfo& run);

}  // namespace opscope::capture
