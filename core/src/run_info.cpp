#include <opscope/config.h>
#include <opscope/run_info.h>

#include <opscope/private_file.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace opscope {

RunInfo makeRunInfo(const std::string& result_root) {
  RunInfo r;
  r.pid = static_cast<long>(getpid());
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long rank = std::strtol(v, &end, 10);
      if (*end == '\0' && rank >= 0) {
        r.rank = static_cast<int>(rank);
        break;
      }
    }
  }
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
    run.result_dir = createPrivateDir(planned.parent_path().string(), planned.filename().string());
  } catch (const std::exception& e) {
    throw ConfigError(fmt::format("OPSCOPE_RESULT_DIR: {}", e.what()));
  }
}

}  // namespace opscope
