#include <opscope/config.h>
#include <opscope/run_info.h>

#include <opscope/private_file.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <string_view>
#include <tuple>

namespace opscope {

namespace {

std::string safeName(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 120)) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

bool set(const char* v) { return v != nullptr && *v != '\0'; }

}  // namespace

std::string runFolderName(const char* opscope_run_folder, const char* pmix_namespace, const char* ompi_jobid,
                          const char* torchrun_id, long ppid) {
  if (set(opscope_run_folder)) return safeName(opscope_run_folder);
  if (set(pmix_namespace)) return safeName(fmt::format("mpi-job{}", pmix_namespace));
  if (set(ompi_jobid)) return safeName(fmt::format("mpi-job{}", ompi_jobid));
  if (set(torchrun_id)) return safeName(fmt::format("torchrun-{}", torchrun_id));
  return fmt::format("ranks-ppid{}", ppid);
}

std::string jobId(const char* opscope_job_id, const char* pmix_namespace, const char* ompi_jobid, long ppid,
                  const std::string& ppid_start, const char* torchrun_restart) {
  std::string id = set(opscope_job_id)   ? std::string(opscope_job_id)
                   : set(pmix_namespace) ? fmt::format("mpi-{}", pmix_namespace)
                   : set(ompi_jobid)     ? fmt::format("mpi-{}", ompi_jobid)
                                         : fmt::format("ppid{}-{}", ppid, ppid_start);
  if (set(torchrun_restart) && std::string_view(torchrun_restart) != "0")
    id += fmt::format("-restart{}", torchrun_restart);
  return safeName(id);
}

namespace {

// When process pid started (field 22 of /proc/<pid>/stat, clock ticks since boot), or "".
std::string startTicks(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  const std::size_t at = stat.rfind(')');  // the command may hold spaces and parentheses
  if (at == std::string::npos) return {};
  std::istringstream fields(stat.substr(at + 1));  // field 3 (the state) on
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> field)) return {};
  return field;
}

}  // namespace

RunInfo makeRunInfo(const std::string& result_root) {
  RunInfo r;
  r.pid = static_cast<long>(getpid());
  std::tie(r.rank, r.world_size) = rankAndWorldSize([](const char* name) { return std::getenv(name); });
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  r.command_line = raw;

  const auto now = std::chrono::system_clock::now();
  r.start_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  std::tm local{};
  gmtime_r(&seconds, &utc);
  localtime_r(&seconds, &local);
  char iso[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &utc);
  r.start_time_iso = iso;
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  if (r.rank >= 0 && r.world_size > 1) {
    // One rank of several: its directory goes into the run's folder, which every rank shares.
    r.run_folder = (std::filesystem::path(result_root) /
                    runFolderName(std::getenv("OPSCOPE_RUN_FOLDER"), std::getenv("PMIX_NAMESPACE"),
                                  std::getenv("OMPI_MCA_ess_base_jobid"), std::getenv("TORCHELASTIC_RUN_ID"),
                                  static_cast<long>(getppid())))
                       .string();
    r.result_dir =
        (std::filesystem::path(r.run_folder) / fmt::format("{}-rank{}-{}", stamp, r.rank, r.pid)).string();
    const long ppid = static_cast<long>(getppid());
    r.job = jobId(std::getenv("OPSCOPE_JOB_ID"), std::getenv("PMIX_NAMESPACE"),
                  std::getenv("OMPI_MCA_ess_base_jobid"), ppid, startTicks(ppid),
                  std::getenv("TORCHELASTIC_RESTART_COUNT"));
    return r;
  }
  std::string name = fmt::format("{}-{}", stamp, r.pid);
  if (r.rank >= 0) name += fmt::format("-rank{}", r.rank);
  r.result_dir = (std::filesystem::path(result_root) / name).string();
  return r;
}

void checkResultRoot(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path existing = fs::absolute(root.empty() ? fs::path(".") : fs::path(root), ec);
  if (ec) throw ConfigError(fmt::format("OPSCOPE_RESULT_DIR: cannot create '{}': {}", root, ec.message()));
  while (!fs::exists(fs::symlink_status(existing, ec)) && existing.has_relative_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    throw ConfigError(fmt::format("OPSCOPE_RESULT_DIR: cannot create '{}': '{}' is not a directory", root,
                                  existing.string()));
  }
  std::string probe = (existing / ".opscope-check-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr) {
    throw ConfigError(
        fmt::format("OPSCOPE_RESULT_DIR: cannot create '{}': cannot make a directory in '{}': {}", root,
                    existing.string(), std::strerror(errno)));
  }
  ::rmdir(probe.c_str());
}

void createResultDir(RunInfo& run) {
  const std::filesystem::path planned(run.result_dir);
  try {
    if (!run.run_folder.empty()) ensureSharedPrivateDir(run.run_folder);
    run.result_dir = createPrivateDir(planned.parent_path().string(), planned.filename().string());
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("OPSCOPE_RESULT_DIR: {}", e.what()));
  }
}

}  // namespace opscope
