// flight_recorder.h — the collective flight recorder (OP_FLIGHT_RECORDER; docs/recorder.md): per
// communicator a ring of the last OP_COLLECTIVE_RING transfers of the collective library, each with its
// sequence number, call, queue, state (calling, enqueued, started, completed, refused) and the host times of
// each, the program's last op before it and a backtrace; dumped to flight_recorder.json in the result
// directory at exit, when a transfer has not completed after OP_COLLECTIVE_TIMEOUT_S (then every rank is
// asked to dump through a file in the shared run folder, and the rank aborts unless
// OP_COLLECTIVE_TIMEOUT_ACTION=dump), when a communicator reports an error, on a fatal signal and on SIGUSR1.
#pragma once

#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/tool.h>
#include <opscope/tool_registration.h>

#include <memory>

namespace opscope::recorder {

std::unique_ptr<Tool> makeFlightRecorder(const Config& config, const RunInfo& run);

ToolRegistration registration();

// The name of the file a rank that timed out writes into the run folder to ask every rank for its dump.
inline constexpr const char* kDumpRequestFile = "flight_recorder.request";

}  // namespace opscope::recorder
