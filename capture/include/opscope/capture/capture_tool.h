// capture_tool.h — the capture tool of the hook (OP_CAPTURE=1): each matching op's inputs are copied out
// before it runs and its outputs after it completes, and written to <result dir>/capture.db. The database
// is shared with auto-compare (which stores its results and failing ops there) and closed by the database
// tool, which the hook runs after every other tool.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/rundb/writer.h>
#include <opscope/tool.h>

#include <memory>

namespace opscope::capture {

using rundb::CaptureWriter;

std::unique_ptr<Tool> makeCaptureTool(const Config& config, std::shared_ptr<CaptureWriter> writer);

// Closes the database at exit and prints what it holds (the capture summary; compare results).
std::unique_ptr<Tool> makeDatabaseTool(const Config& config, std::shared_ptr<CaptureWriter> writer);

}  // namespace opscope::capture
