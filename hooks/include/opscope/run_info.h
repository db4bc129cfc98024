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
  std::string result_dir;      // <root>/<YYYYmmdd-HHMMSS>-<pid>[-rank<N>], empty when nothing writes
};

// Fills pid, rank, command line and start time for this process, and result_dir under root.
RunInfo makeRunInfo(const std::string& result_root);

// Creates dir (and its parents) and checks a file can be written in it. Throws ConfigError naming
// OPSCOPE_RESULT_DIR.
void createResultDir(const std::string& dir);

}  // namespace opscope
