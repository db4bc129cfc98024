#include "launcher.h"

#include <mlu/op_args.h>
#include <opscope/analysis/analyze.h>
#include <opscope/analysis/collective_check.h>
#include <opscope/analysis/diff.h>
#include <opscope/analysis/memory_diff.h>
#include <opscope/analysis/time_diff.h>
#include <opscope/report/ranks.h>
#include <opscope/report/report.h>
#include <opscope/results/flight_recorder_file.h>
#include <opscope/results/run_folder.h>

#include <opscope/options.h>
#include <opscope/private_file.h>
#include <opscope/results/trace_file.h>
#include <opscope/run_info.h>
#include <opscope/trace_repair_file.h>

#include <dlfcn.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace fs = std::filesystem;

namespace opscope::launcher {
namespace {

constexpr const char* kUsage =
    "usage: opscope run [--capture[=LIST]] [--compare[=LIST]] [--fallback=LIST] [--profile] [--memcheck]\n"
    "                   [--dump-args=N] [--sync-exec] [--out DIR] [OPTION FLAGS] -- PROGRAM ARGS...\n"
    "       opscope report DIR [--out FILE]\n"
    "       opscope summary DIR\n"
    "       opscope diff RUN_A RUN_B [--html FILE]\n"
    "       opscope analyze RUNFOLDER\n"
    "       opscope ops\n"
    "       opscope env\n"
    "       opscope --help | --version\n"
    "\n"
    "run   runs PROGRAM under the hook layer (LD_PRELOAD=libopscope.so) with the chosen tools, forwards its\n"
    "      exit status and prints where the results went. LIST is a comma-separated list of op names or\n"
    "      regular expressions (see `opscope ops`), aten::REGEX (the calls inside matching PyTorch ops) and\n"
    "      module:REGEX (the calls in matching nn.Module paths); --out sets OPSCOPE_RESULT_DIR (default\n"
    "      ./opscope_results). OPTION FLAGS: each variable of `opscope env` that shows a flag can be set\n"
    "      with it (--overflow-check, --trace-max-mb=N, ...). A Python program finds the packages opscope "
    "and\n"
    "      torch_mlu (PYTHONPATH is set); `import opscope` scopes a tool to a region of it "
    "(docs/python.md).\n"
    "report DIR [--out FILE]\n"
    "      writes DIR/report.html: one self-contained page of the run's findings (ops, accuracy, fallbacks,\n"
    "      memory, capture) and prints the verdict.\n"
    "summary DIR\n"
    "      prints the same findings as plain text.\n"
    "diff RUN_A RUN_B [--html FILE]\n"
    "      where two runs first differ: each a capture.db (or its result directory), both captured with\n"
    "      --capture-mode=stats (statistics of every call) or both with whole tensors; their calls are\n"
    "      aligned by op name and call order, and the first call whose tensors differ beyond their dtype's\n"
    "      tolerance (whole tensors: auto-compare's metrics), the ops only one run has and the largest\n"
    "      differences are printed; --html FILE writes them as a page in the report's style too. Exit\n"
    "      status: 0 no difference, 1 a difference, 2 bad arguments, 3 a run cannot be read (or the page\n"
    "      cannot be written). Two profiled runs (--profile: time_measure.csv, or its result directory)\n"
    "      are compared by where the time went: the total device time, then the ops, input signatures and\n"
    "      modules that got slower or faster, largest change first, with calls and mean times, and the\n"
    "      signatures only one run has (exit status 0 when printed). Two memcheck runs (memcheck.json, or\n"
    "      its result directory) are compared by the sites that leak more or less, largest change first,\n"
    "      the peaks in use and the memory errors (exit status 0 when printed). Runs that are several of\n"
    "      these are compared each way.\n"
    "analyze RUNFOLDER\n"
    "      a multi-rank run's flight recorder dumps (each rank's flight_recorder.json) read together: the\n"
    "      ranks without a dump, per communicator the first collective not completed by every rank (the\n"
    "      ranks that never enqueued it, with their last collective and backtrace, and those waiting in it\n"
    "      or failed), every mismatch of the ranks' calls and late ranks. Exit status: 0 nothing found, 1 a\n"
    "      finding, 2 bad arguments, 3 RUNFOLDER holds no rank directory.\n"
    "ops   lists every op the hook layer can see, with its C symbol and arguments.\n"
    "env   lists every environment variable opscope reads, with its default and what it does.\n";

// Splits "--name=value" into name and value; "--name" gives no value.
std::pair<std::string_view, std::optional<std::string>> splitOption(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) return {std::string_view(arg), std::nullopt};
  return {std::string_view(arg).substr(0, eq), arg.substr(eq + 1)};
}

// The C type of a scalar argument, for the listing.
template <typename T>
const char* scalarTypeName(const T&) {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_same_v<T, int>)
    return "int";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return "uint64";
  else if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else
    return "scalar";
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// OpenBLAS, on which the CPU reference (auto-compare, fallback, op-replay) runs its float64 matrix products,
// picks its kernels by the CPU's model, and on a model it does not know (a virtual machine's "Intel(R)
// Xeon(R) Processor" among them) falls back to its Prescott (SSE3) kernels: dgemm 5.5x slower on this
// machine than with its AVX-512 ones. The kernels of what the CPU has, when OpenBLAS would fall back and the
// caller named none; "" otherwise. Called in the launched child before it becomes the program (OpenBLAS
// starts its threads when loaded: not in the launcher, which forks).
std::string openblasCoreType() {
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set != nullptr && *set != '\0') return "";
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2) return "";
  // This process's OpenBLAS only answers the question: one thread, and the program's setting left as it was.
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  const std::optional<std::string> saved =
      threads != nullptr ? std::optional<std::string>(threads) : std::nullopt;
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  using CoreName = char* (*)();
  const auto corename =
      lib != nullptr ? reinterpret_cast<CoreName>(dlsym(lib, "openblas_get_corename")) : nullptr;
  const char* name = corename != nullptr ? corename() : nullptr;
  if (saved) {
    setenv("OPENBLAS_NUM_THREADS", saved->c_str(), 1);
  } else {
    unsetenv("OPENBLAS_NUM_THREADS");
  }
  if (name == nullptr || std::string_view(name) != "Prescott") return "";
  return avx512 ? "SkylakeX" : "Haswell";
}

// Whether path starts as an ELF file does ("\x7fELF").
bool isElfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof magic) && std::memcmp(magic,
                                                     "\x7f"
                                                     "ELF",
                                                     4) == 0;
}

// The launcher's child, for forwarding SIGTERM/SIGHUP (a signal handler can only reach global state).
volatile sig_atomic_t g_child = 0;

void forwardSignal(int sig) {
  if (g_child > 0) kill(static_cast<pid_t>(g_child), sig);
}

int runCommand(const std::vector<std::string>& args) {
  const RunOptions options = parseRun(args);
  const std::string hook = findHookLibrary();
  std::error_code ec;
  if (!fs::is_regular_file(hook, ec)) {
    throw UsageError(
        fmt::format("the hook library '{}' does not exist (build it, or set OPSCOPE_HOOK_LIB)", hook));
  }
  // A file that is not a shared object would be dropped by the dynamic linker with one line, and the run
  // would end as if the program never used the MLU: said now instead.
  if (!isElfFile(hook)) {
    throw UsageError(
        fmt::format("the hook library '{}' is not a shared library (OPSCOPE_HOOK_LIB names "
                    "libopscope.so)",
                    hook));
  }
  auto env = environmentFor(options);
  // The out-of-memory snapshot is on in every run, unless the caller's environment or a flag set it.
  if (std::getenv("OP_OOM_SNAPSHOT") == nullptr &&
      std::none_of(env.begin(), env.end(), [](const auto& e) { return e.first == "OP_OOM_SNAPSHOT"; }))
    env.emplace_back("OP_OOM_SNAPSHOT", "1");

  // Where the result directories go: --out, else the caller's OPSCOPE_RESULT_DIR, else the default. Made
  // absolute, so a program that changes directory still writes where the user looks.
  std::string root = "opscope_results";
  if (const char* r = std::getenv("OPSCOPE_RESULT_DIR"); r != nullptr && *r != '\0') root = r;
  for (auto& [name, value] : env) {
    if (name == "OPSCOPE_RESULT_DIR") root = value;
  }
  root = fs::absolute(root, ec).lexically_normal().string();
  env.emplace_back("OPSCOPE_RESULT_DIR", root);
  // Where the ranks of a multi-process program (mpirun, torchrun) put their directories: one folder of this
  // run's, <stamp>-<launcher pid>-ranks, unless the caller named one.
  std::string run_folder;
  char stamp[32];  // this launch's time, in the run folder's and the job's names
  {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  }
  if (const char* f = std::getenv("OPSCOPE_RUN_FOLDER"); f != nullptr && *f != '\0') {
    run_folder = runFolderName(f, nullptr, nullptr, nullptr, 0);  // the name the ranks will use
  } else {
    run_folder = fmt::format("{}-{}-ranks", stamp, static_cast<long>(getpid()));
    env.emplace_back("OPSCOPE_RUN_FOLDER", run_folder);
  }
  // This launch's job, which the ranks record (run.json "job"): a folder the caller named may hold earlier
  // jobs' ranks, which the readers then keep apart from this one's.
  if (const char* j = std::getenv("OPSCOPE_JOB_ID"); j == nullptr || *j == '\0')
    env.emplace_back("OPSCOPE_JOB_ID", fmt::format("opscope-run-{}-{}", stamp, static_cast<long>(getpid())));
  env.emplace_back("LD_PRELOAD", preloadValue(hook, std::getenv("LD_PRELOAD")));
  // A Python program finds `import opscope` and `import torch_mlu` with nothing set.
  if (const std::string packages = findPythonPackages(); !packages.empty())
    env.emplace_back("PYTHONPATH", pythonPathValue(packages, std::getenv("PYTHONPATH")));

  // The result directories there before: a program the launcher starts through a script or another
  // launcher (sh -c, mpirun) writes under other pids than the child's.
  const auto before = resultDirsOf(root, -1);

  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (child == 0) {
    if (const std::string core = openblasCoreType(); !core.empty()) {
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      std::fprintf(
          stderr,
          "opscope: OPENBLAS_CORETYPE=%s: OpenBLAS does not recognize this CPU and would use its slow "
          "generic kernels for the CPU reference (auto-compare, fallback) and PyTorch's CPU ops\n",
          core.c_str());
    }
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : options.program) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const int err = errno;
    std::fprintf(stderr, "opscope: cannot run '%s': %s\n", argv[0], std::strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  g_child = child;
  // Ctrl-C reaches the program through the terminal's process group; the launcher waits for it to finish
  // (and flush) instead of dying first. SIGTERM/SIGHUP sent to the launcher are passed on.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction forward {};
  forward.sa_handler = forwardSignal;
  struct sigaction old_int {
  }, old_quit{}, old_term{}, old_hup{};
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  sigaction(SIGTERM, &forward, &old_term);
  sigaction(SIGHUP, &forward, &old_hup);
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  g_child = 0;
  if (waited < 0) throw std::runtime_error(fmt::format("waitpid failed: {}", std::strerror(errno)));

  int exit_code = 0;
  if (WIFEXITED(status)) {
    exit_code = WEXITSTATUS(status);
    if (exit_code != 0)
      std::fprintf(stderr, "opscope: %s exited with status %d\n", options.program[0].c_str(), exit_code);
  } else if (WIFSIGNALED(status)) {
    exit_code = 128 + WTERMSIG(status);
    std::fprintf(stderr, "opscope: %s was killed by %s\n", options.program[0].c_str(),
                 signalName(WTERMSIG(status)).c_str());
  }

  // A multi-rank program: its ranks' directories in the run folder, and one view of them all.
  const fs::path folder = fs::path(root) / run_folder;
  if (const auto ranks = resultDirsOf(folder.string(), -1); !ranks.empty()) {
    std::fprintf(stderr, "opscope: results of %zu rank%s in %s\n", ranks.size(), ranks.size() == 1 ? "" : "s",
                 folder.c_str());
    for (const auto& dir : ranks) std::fprintf(stderr, "opscope:   %s\n", fs::path(dir).filename().c_str());
    std::fprintf(stderr, "opscope: one page of all ranks (and a merged trace): opscope report %s\n",
                 folder.c_str());
    return exit_code;
  }
  // Every result directory this run made: the program's, and those of the processes it started (a script
  // that runs several programs, a Python program's subprocesses), in name order.
  std::vector<std::string> dirs;
  for (auto& dir : resultDirsOf(root, -1)) {
    if (!std::binary_search(before.begin(), before.end(), dir)) dirs.push_back(std::move(dir));
  }
  if (dirs.empty()) {
    std::fprintf(stderr,
                 "opscope: no result directory under %s (the program never used the MLU, or no tool that "
                 "writes files was on)\n",
                 root.c_str());
  }
  for (const auto& dir : dirs) {
    std::fprintf(stderr, "opscope: results in %s\n", dir.c_str());
    std::vector<std::pair<std::string, std::uintmax_t>> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file(ec))
        files.emplace_back(entry.path().filename().string(), entry.file_size(ec));
    }
    std::sort(files.begin(), files.end());
    for (const auto& [name, size] : files) {
      std::fprintf(stderr, "opscope:   %-20s %s\n", name.c_str(), report::humanBytes(size).c_str());
    }
    std::fprintf(stderr, "opscope: one page of the findings: opscope report %s\n", dir.c_str());
  }
  return exit_code;
}

// A number row's value given to its flag: a whole number in the row's range, else a usage error now (rather
// than the hook's error once the program has started).
void checkNumber(const Option& row, std::string_view flag, const std::string& value) {
  std::uint64_t n = 0;
  const char* end = value.data() + value.size();
  const auto [at, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || at != end || n < row.min || n > row.max) {
    throw UsageError(fmt::format("{}: '{}' is not a whole number in [{}, {}] ({}: {})", flag, value, row.min,
                                 row.max, row.name, row.help));
  }
}

}  // namespace

RunOptions parseRun(const std::vector<std::string>& args) {
  RunOptions o;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program starts here (no "--" given)
    const auto [name, value] = splitOption(arg);
    auto need = [&, name = name, value = value]() -> std::string {
      if (value) {
        if (value->empty()) throw UsageError(fmt::format("{} needs a value", name));
        return *value;
      }
      // The program's "--" is not a value.
      if (i + 1 >= args.size() || args[i + 1] == "--")
        throw UsageError(fmt::format("{} needs a value", name));
      return args[++i];
    };
    const Option* row = findRunFlag(name);
    if (row == nullptr) throw UsageError(fmt::format("unknown option '{}'", arg));
    // A flag of the option table (options.inc): a tool's flag needs no code here. The hook checks each
    // value again before the program starts, naming the variable.
    const std::string variable(row->name);
    if (!row->run_also.empty()) {
      const std::string_view also = row->run_also;
      const auto eq = also.find('=');
      o.environment.emplace_back(std::string(also.substr(0, eq)),
                                 eq == std::string_view::npos ? "1" : std::string(also.substr(eq + 1)));
    }
    if (row->kind == OptionKind::kFlag) {
      if (value) throw UsageError(fmt::format("{} takes no value", name));
      o.environment.emplace_back(variable, "1");
    } else if (row->kind == OptionKind::kList && !row->run_also.empty()) {
      // An optional list: the bare flag turns the tool on for every op.
      if (value && !value->empty()) o.environment.emplace_back(variable, *value);
    } else {
      const std::string v = need();
      if (row->kind == OptionKind::kNumber) checkNumber(*row, name, v);
      o.environment.emplace_back(variable, v);
    }
  }
  o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (o.program.empty()) throw UsageError("run: no program given (opscope run [OPTIONS] -- PROGRAM ARGS...)");
  return o;
}

std::vector<std::pair<std::string, std::string>> environmentFor(const RunOptions& o) { return o.environment; }

std::string preloadValue(const std::string& hook, const char* existing) {
  std::string value = hook;
  if (existing == nullptr) return value;
  // LD_PRELOAD items are separated by colons or spaces.
  std::string_view rest(existing);
  while (!rest.empty()) {
    const auto end = rest.find_first_of(": ");
    const std::string_view item = rest.substr(0, end);
    if (!item.empty() && item != hook) value += ":" + std::string(item);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return value;
}

std::string findHookLibrary() {
  if (const char* lib = std::getenv("OPSCOPE_HOOK_LIB"); lib != nullptr && *lib != '\0') return lib;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "libopscope.so";
  return (self.parent_path().parent_path() / "lib" / "libopscope.so").lexically_normal().string();
}

std::string findPythonPackages() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path root = self.parent_path().parent_path();
  for (const fs::path& dir : {root / "python", root / OPSCOPE_PYTHON_INSTALL_DIR}) {
    if (fs::is_regular_file(dir / "opscope" / "__init__.py", ec)) return dir.lexically_normal().string();
  }
  return "";
}

std::string pythonPathValue(const std::string& packages, const char* existing) {
  if (existing == nullptr || *existing == '\0') return packages;
  if (packages.empty()) return existing;
  return packages + ":" + existing;
}

namespace {

// Whether name is a result directory of pid (of any pid when pid < 0):
// <YYYYmmdd-HHMMSS>-<pid>[-rank<N>][-<6 letters or digits>] (the random part is absent in directories of
// older versions), or one rank's in a run folder, <YYYYmmdd-HHMMSS>-rank<R>-<pid>-<6 letters or digits>.
bool isResultDirOf(std::string_view name, long pid) {
  auto digits = [&](std::size_t n) {  // n digits (n = 0: one or more) taken from the front of name
    std::size_t k = 0;
    while (k < name.size() && std::isdigit(static_cast<unsigned char>(name[k])) != 0) ++k;
    if (k == 0 || (n != 0 && k != n)) return false;
    name.remove_prefix(k);
    return true;
  };
  auto literal = [&](std::string_view text) {
    if (!name.starts_with(text)) return false;
    name.remove_prefix(text.size());
    return true;
  };
  if (!digits(8) || !literal("-") || !digits(6) || !literal("-")) return false;
  const bool rank_first = name.starts_with("rank");
  if (rank_first && (!literal("rank") || !digits(0) || !literal("-"))) return false;
  if (pid < 0 ? !digits(0) : !literal(fmt::format("{}", pid))) return false;
  if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0])) != 0) return false;
  if (!rank_first && name.starts_with("-rank") && (!literal("-rank") || !digits(0))) return false;
  if (name.empty()) return true;
  return name.size() == 7 && name[0] == '-' && std::all_of(name.begin() + 1, name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0;
         });
}

}  // namespace

std::vector<std::string> resultDirsOf(const std::string& root, long pid) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    if (isResultDirOf(entry.path().filename().string(), pid)) dirs.push_back(entry.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::string opsListing() {
  std::string out = fmt::format("{:<32} {:<40} {}\n", "op", "C symbol", "arguments (after the handle)");
  mlu::forEachOp([&]<typename Args>() {
    std::string arguments;
    const Args args{};
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      if (!arguments.empty()) arguments += ' ';
      arguments += fmt::format("{}:{}", meta.name,
                               meta.role == mlu::Role::kScalar ? std::string_view(scalarTypeName(value))
                                                               : mlu::roleName(meta.role, meta.optional));
    });
    out += fmt::format("{:<32} {:<40} {}\n", Args::kName, Args::kSymbol, arguments);
  });
  out += fmt::format(
      "{} ops. Roles: in, out, inout (in place), ? optional; scalars by C type; ints (an int "
      "list), conv (convolution descriptor), workspace.\n",
      mlu::kOpCount);
  return out;
}

namespace {

// The result directory of `report DIR` / `summary DIR`, with what can be said when it is not one.
nlohmann::json loadResultDir(const std::string& dir) {
  report::Limits limits;
  limits.progress = [](const std::string& file, std::uintmax_t bytes) {
    std::fprintf(stderr, "opscope: reading %s (%s)...\n", file.c_str(), report::humanBytes(bytes).c_str());
  };
  try {
    return report::loadRun(dir, limits);
  } catch (const report::ReportError& e) {
    // A root of result directories (./opscope_results) is a common slip: name the newest run in it.
    std::vector<fs::path> runs;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_directory(ec) &&
          (fs::exists(entry.path() / "run.json") || fs::exists(entry.path() / "trace.json") ||
           fs::exists(entry.path() / "capture.db") || fs::exists(entry.path() / "memcheck.json"))) {
        runs.push_back(entry.path());
      }
    }
    if (runs.empty()) throw;
    std::sort(runs.begin(), runs.end());
    throw report::ReportError(fmt::format("{}\n(it holds {} result director{}; the newest is {})", e.what(),
                                          runs.size(), runs.size() == 1 ? "y" : "ies", runs.back().string()));
  }
}

std::string oneDirectory(const std::vector<std::string>& rest, const char* command, std::string* out_file) {
  std::string dir;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (out_file != nullptr && (a == "--out" || a == "-o")) {
      if (i + 1 >= rest.size()) throw UsageError(fmt::format("{}: {} needs a file name", command, a));
      *out_file = rest[++i];
    } else if (out_file != nullptr && a.rfind("--out=", 0) == 0) {
      *out_file = a.substr(6);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError(fmt::format("{}: unknown option '{}'", command, a));
    } else if (dir.empty()) {
      dir = a;
    } else {
      throw UsageError(fmt::format("{}: one result directory, got '{}' and '{}'", command, dir, a));
    }
  }
  if (dir.empty())
    throw UsageError(fmt::format("{} needs a result directory (opscope {} DIR)", command, command));
  return dir;
}

// A run folder of several ranks (no run.json of its own, rank directories in it).
bool isRunFolder(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(fs::path(dir) / "run.json", ec) && !results::rankDirectories(dir).empty();
}

// The view of a run folder: the ranks' report (report/), with what the analyses (analysis/) find across the
// ranks: their captured collective transfers checked, and the flight recorder's dumps read together.
nlohmann::json loadRunFolder(const fs::path& dir, bool write_trace) {
  nlohmann::json model = report::loadRanks(dir, write_trace);
  report::FolderAnalyses found;
  std::vector<analysis::RankCapture> captures;
  bool any_dump = false;
  for (const nlohmann::json& row : model["ranks"]) {
    const fs::path rank_dir = dir / row.value("dir", "");
    captures.push_back({static_cast<int>(row.value("rank", std::int64_t{-1})), rank_dir / "capture.db"});
    std::error_code ec;
    any_dump = any_dump || fs::exists(rank_dir / results::kFlightRecorderFile, ec);
  }
  found.collectives_check = analysis::checkCollectives(captures);
  if (any_dump) {
    try {
      found.flight_recorder = analysis::analyzeRanks(dir);
    } catch (const std::exception& e) {
      found.warnings.push_back(fmt::format("flight recorder: {}", e.what()));
    }
  }
  report::addAnalyses(model, found);
  return model;
}

int reportCommand(const std::vector<std::string>& rest) {
  std::string out_file;
  const std::string dir = oneDirectory(rest, "report", &out_file);
  if (out_file.empty()) out_file = (fs::path(dir) / "report.html").string();
  if (isRunFolder(dir)) {
    // Every rank: its own report.html, one page of them all and the merged trace.
    try {
      const nlohmann::json model = loadRunFolder(dir, true);
      const std::string page = report::renderRanksHtml(model);
      if (const std::string error = writePrivateFile(out_file, page); !error.empty()) {
        std::fprintf(stderr, "opscope: report: %s (write it elsewhere with --out FILE)\n", error.c_str());
        return 1;
      }
      std::fputs(report::renderRanksSummary(model).c_str(), stdout);
      std::printf("report: %s (%s; open it in a browser)\n",
                  fs::absolute(out_file).lexically_normal().c_str(), report::humanBytes(page.size()).c_str());
      return 0;
    } catch (const report::ReportError& e) {
      std::fprintf(stderr, "opscope: report: %s\n", e.what());
      return 1;
    }
  }
  // A killed run's traces (trace.json.tmp and the like, without their finished file): repaired beside them
  // first, so that Perfetto has a trace.json to load (the page reads the same events either way).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || !results::isUnfinishedTrace(name)) continue;
    const std::string out = repairedTraceName(entry.path().string());
    if (fs::exists(fs::symlink_status(out, ec))) continue;
    if (const std::string error = repairTraceFile(entry.path().string(), out, nullptr); !error.empty()) {
      std::fprintf(stderr, "opscope: report: warning: %s\n", error.c_str());
    } else {
      std::fprintf(stderr, "opscope: report: %s was cut short (the run was killed): repaired into %s\n",
                   name.c_str(), fs::path(out).filename().c_str());
    }
  }
  try {
    const nlohmann::json model = loadResultDir(dir);
    const std::string page = report::renderHtml(model);
    if (const std::string error = writePrivateFile(out_file, page); !error.empty()) {
      std::fprintf(stderr, "opscope: report: %s (write it elsewhere with --out FILE)\n", error.c_str());
      return 1;
    }
    for (const auto& w : model["warnings"])
      std::fprintf(stderr, "opscope: report: warning: %s\n", w.get<std::string>().c_str());
    std::printf("%s", report::renderVerdict(model).c_str());
    std::printf("report: %s (%s; open it in a browser)\n", fs::absolute(out_file).lexically_normal().c_str(),
                report::humanBytes(page.size()).c_str());
    return 0;
  } catch (const report::ReportError& e) {
    std::fprintf(stderr, "opscope: report: %s\n", e.what());
    return 1;
  }
}

int summaryCommand(const std::vector<std::string>& rest) {
  const std::string dir = oneDirectory(rest, "summary", nullptr);
  try {
    if (isRunFolder(dir)) {
      std::fputs(report::renderRanksSummary(loadRunFolder(dir, false)).c_str(), stdout);
      return 0;
    }
    std::fputs(report::renderSummary(loadResultDir(dir)).c_str(), stdout);
    return 0;
  } catch (const report::ReportError& e) {
    std::fprintf(stderr, "opscope: summary: %s\n", e.what());
    return 1;
  }
}

int analyzeCommand(const std::vector<std::string>& rest) {
  const std::string dir = oneDirectory(rest, "analyze", nullptr);
  try {
    const nlohmann::json model = analysis::analyzeRanks(dir);
    std::fputs(analysis::renderAnalysis(model).c_str(), stdout);
    return model["verdict"].empty() ? 0 : 1;
  } catch (const analysis::AnalysisError& e) {
    std::fprintf(stderr, "opscope: analyze: %s\n", e.what());
    return 3;
  }
}

// Writes a diff's page (private, not through a symlink) and says where; 3 when it cannot be written.
int writeDiffPage(const std::string& html, const std::string& page) {
  if (const std::string error = writePrivateFile(html, page); !error.empty()) {
    std::fprintf(stderr, "opscope: diff: %s\n", error.c_str());
    return 3;
  }
  std::printf("page: %s (%s; open it in a browser)\n", fs::absolute(html).lexically_normal().c_str(),
              report::humanBytes(page.size()).c_str());
  return 0;
}

int diffCommand(const std::vector<std::string>& rest) {
  std::vector<std::string> runs;
  std::string html;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (a == "--html") {
      if (i + 1 >= rest.size()) throw UsageError("diff: --html needs a file name");
      html = rest[++i];
    } else if (a.rfind("--html=", 0) == 0) {
      html = a.substr(7);
      if (html.empty()) throw UsageError("diff: --html needs a file name");
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError(fmt::format("diff: unknown option '{}'", a));
    } else {
      runs.push_back(a);
    }
  }
  if (runs.size() != 2)
    throw UsageError(fmt::format("diff needs two runs (opscope diff RUN_A RUN_B), got {}", runs.size()));
  // Which diff: two captures (capture.db) are compared call by call, two profiled runs (time_measure.csv)
  // by where the time went, two memcheck runs (memcheck.json) by their leaks, peaks and errors; runs that
  // are several of these are compared each way.
  auto hasCapture = [](const std::string& run) {
    std::error_code ec;
    if (fs::is_directory(run, ec)) return fs::exists(fs::path(run) / "capture.db", ec);
    const fs::path file(run);
    return file.extension() != ".csv" && file.filename() != "memcheck.json";
  };
  const bool captures = hasCapture(runs[0]) && hasCapture(runs[1]);
  const bool profiles = analysis::isProfiledRun(runs[0]) && analysis::isProfiledRun(runs[1]);
  const bool memchecks = analysis::isMemcheckRun(runs[0]) && analysis::isMemcheckRun(runs[1]);
  try {
    std::optional<analysis::TimeDiff> times;
    std::optional<analysis::MemoryDiff> memory;
    if (profiles) {
      times = analysis::diffTimes(analysis::loadTimeProfile(runs[0]), analysis::loadTimeProfile(runs[1]));
    }
    if (memchecks) {
      memory =
          analysis::diffMemory(analysis::loadMemoryProfile(runs[0]), analysis::loadMemoryProfile(runs[1]));
    }
    // The time and memory findings, as text and as sections of a page.
    std::string text, sections;
    if (times) {
      text += analysis::renderTimeDiff(*times);
      sections += analysis::renderTimeDiffSections(*times);
    }
    if (memory) {
      text += (text.empty() ? "" : "\n") + analysis::renderMemoryDiff(*memory);
      sections += analysis::renderMemoryDiffSections(*memory);
    }
    if (!captures && (times || memory)) {
      std::fputs(text.c_str(), stdout);
      if (html.empty()) return 0;
      const std::string page =
          times ? analysis::renderTimeDiffHtml(*times, report::reportStyle(),
                                               memory ? analysis::renderMemoryDiffSections(*memory) : "")
                : analysis::renderMemoryDiffHtml(*memory, report::reportStyle());
      return writeDiffPage(html, page);
    }
    const analysis::RunDiff d = analysis::diffRuns(runs[0], runs[1]);
    std::fputs(analysis::renderDiff(d).c_str(), stdout);
    if (!text.empty()) std::fputs(("\n" + text).c_str(), stdout);
    if (!html.empty() &&
        writeDiffPage(html, analysis::renderDiffHtml(d, report::reportStyle(), sections)) != 0)
      return 3;
    return d.first || !d.only.empty() ? 1 : 0;
  } catch (const analysis::DiffError& e) {
    std::fprintf(stderr, "opscope: diff: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {  // anything else a run's files made go wrong: a run that cannot be read
    std::fprintf(stderr, "opscope: diff: %s\n", e.what());
    return 3;
  }
}

}  // namespace

int main(const std::vector<std::string>& args) {
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::string usage = kUsage;
      // The option flags, from the option table (options.h's run flags).
      usage += "\noption flags of `opscope run` (the variables they set, `opscope env` says more):\n";
      for (const Option& row : kOptions) {
        if (row.run_flag.empty()) continue;
        usage += fmt::format("  {:<24} {}: {}\n", runFlagUsage(row), row.name, row.help);
      }
      std::fputs(usage.c_str(), args.empty() ? stderr : stdout);
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
      std::printf("opscope %s\n", OPSCOPE_VERSION);
      return 0;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "run") return runCommand(rest);
    if (args[0] == "ops") {
      if (!rest.empty()) throw UsageError(fmt::format("ops takes no arguments, got '{}'", rest[0]));
      std::fputs(opsListing().c_str(), stdout);
      return 0;
    }
    if (args[0] == "env") {
      if (!rest.empty()) throw UsageError(fmt::format("env takes no arguments, got '{}'", rest[0]));
      std::fputs(optionsListing().c_str(), stdout);
      return 0;
    }
    if (args[0] == "report") return reportCommand(rest);
    if (args[0] == "summary") return summaryCommand(rest);
    if (args[0] == "diff") return diffCommand(rest);
    if (args[0] == "analyze") return analyzeCommand(rest);
    throw UsageError(fmt::format("unknown command '{}'", args[0]));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "opscope: %s\n(opscope --help for usage)\n", e.what());
    return 2;
  }
}

}  // namespace opscope::launcher
