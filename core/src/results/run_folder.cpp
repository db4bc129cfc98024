#include <opscope/results/format_version.h>
#include <opscope/results/json_input.h>
#include <opscope/results/run_file.h>
#include <opscope/results/run_folder.h>
#include <opscope/text.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace opscope::results {

std::vector<RankDirectory> rankDirectories(const fs::path& dir, std::vector<std::string>* warnings) {
  std::vector<RankDirectory> out;
  std::error_code ec;
  // Each job's ranks, and when it started (its ranks' latest start time, then directory name).
  std::map<std::string, std::vector<RankDirectory>> jobs;
  std::map<std::string, std::pair<std::string, std::string>> started;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    const fs::path run = entry.path() / kRunFile;
    if (!fs::is_regular_file(run, ec)) continue;
    try {
      json j = readJsonFile(run, kMaxRunFileBytes);
      if (const std::string e =
              formatVersionError((entry.path().filename() / kRunFile).string(), j, kRunFormatVersion);
          !e.empty()) {
        if (warnings != nullptr) warnings->push_back(e + "; that rank is left out");
        continue;
      }
      const auto rank = integer(j, "rank");
      if (!rank || *rank < 0 || *rank > (1 << 20)) continue;
      const std::string job = printable(text(j, "job")).substr(0, 128);  // "" before job ids
      auto& when = started[job];
      when = std::max(when, std::make_pair(printable(text(j, "start_time")).substr(0, 32),
                                           entry.path().filename().string()));
      if (jobs.size() < 4096 || jobs.contains(job))
        jobs[job].push_back({static_cast<int>(*rank), entry.path(), std::move(j)});
    } catch (const std::exception&) {
      continue;  // not a rank's directory
    }
  }
  if (jobs.empty()) return out;
  auto newest = jobs.begin();
  for (auto it = jobs.begin(); it != jobs.end(); ++it)
    if (started[it->first] > started[newest->first]) newest = it;
  if (jobs.size() > 1 && warnings != nullptr) {
    warnings->push_back(fmt::format(
        "the folder holds the ranks of {} jobs (a run folder used again: OPSCOPE_RUN_FOLDER, torchrun's "
        "rendezvous id): only the newest, job {} (started {}), is read; give each job its own folder",
        jobs.size(), newest->first.empty() ? "(no id)" : newest->first, started[newest->first].first));
  }
  out = std::move(newest->second);
  std::sort(out.begin(), out.end(), [](const RankDirectory& a, const RankDirectory& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.dir < b.dir;
  });
  return out;
}

}  // namespace opscope::results
