// run_folder.h — a multi-rank run's folder: the result directory of each rank
// (<folder>/<stamp>-rank<R>-<pid>-XXXXXX, see RunInfo::run_folder), found by the run.json in it that names a
// rank. Read by the ranks view (report/) and by `opscope analyze` (analysis/).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace opscope::results {

struct RankDirectory {
  int rank = -1;
  std::filesystem::path dir;
  nlohmann::json run;  // its run.json, as read (untrusted: in a format version this opscope reads)
};

// The rank directories in dir (each with a run.json that names a rank) of its newest job, sorted by rank
// (then directory); empty when dir is not a run folder. A folder two jobs shared (run.json "job": a reused
// OPSCOPE_RUN_FOLDER) gives the ranks of the job that started last, and a line for `warnings`, when given,
// that says so; so does a rank's run.json in a newer format version (that rank is left out).
std::vector<RankDirectory> rankDirectories(const std::filesystem::path& dir,
                                           std::vector<std::string>* warnings = nullptr);

}  // namespace opscope::results
