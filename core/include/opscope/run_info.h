// run_info.h — the run the hook is in: process, rank, command line, start time and result directory.
#pragma once

#include <cstdint>
#include <string>

namespace opscope {

struct RunInfo {
  long pid = 0;
  int rank = -1;             // RANK or OMPI_COMM_WORLD_RANK, -1 when neither is set
  std::string command_line;  // /proc/self/cmdline, arguments separated by spaces
  std::int64_t start_unix_ns = 0;
  std::string start_time_iso;  // "2026-11-25T10:11:12Z"
  // <root>/<YYYYmmdd-HHMMSS>-<pid>[-rank<N>]-<XXXXXX>: the last part random (createResultDir), so that
  // nobody can predict or pre-create it. Empty when nothing writes.
  std::string result_dir;
};

// Fills pid, rank, command line and start time for this process, and result_dir's planned name under root
// (without its random part).
RunInfo makeRunInfo(const std::string& result_root);

// Checks before main that result directories can be made under root, making nothing that stays: root, or
// its nearest existing ancestor, must be a directory this process can create entries in (tried with a
// directory made and removed at once). Throws ConfigError naming OPSCOPE_RESULT_DIR.
void checkResultRoot(const std::string& root);

// Creates the result directory: run.result_dir plus a random suffix, mode 0700 (parents made when
// missing), and sets run.result_dir to it. Throws ConfigError naming OPSCOPE_RESULT_DIR.
void createResultDir(RunInfo& run);

}  // namespace opscope
