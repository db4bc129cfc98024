// launcher.h — the `opscope` command line, split so tests can check parsing and the environment a run
// gets without starting processes.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace opscope::launcher {

// A usage mistake: printed as "opscope: <message>" with a hint, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What `opscope run` was asked to do.
struct RunOptions {
  // What the flags set, NAME and value, in the order given. Every flag is a row of the option table
  // (options.inc's run flags: --capture[=LIST] sets OP_CAPTURE=1 and the list, --out DIR
  // OPSCOPE_RESULT_DIR, --trace-max-mb=N, ...).
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<std::string> program;  // PROGRAM ARGS...
};

// Parses the arguments after "run". Throws UsageError.
RunOptions parseRun(const std::vector<std::string>& args);

// The environment variables `run` sets for the program (not LD_PRELOAD), in the order of the flags.
std::vector<std::pair<std::string, std::string>> environmentFor(const RunOptions& options);

// LD_PRELOAD for the program: the hook first, then whatever the user had (without a second copy of the
// hook).
std::string preloadValue(const std::string& hook, const char* existing);

// The hook library next to this executable (../lib/libopscope.so), or $OPSCOPE_HOOK_LIB.
std::string findHookLibrary();

// The folder of opscope's Python packages (opscope, torch_mlu) beside the launcher: <build>/python in a build
// tree, <prefix>/lib/python3.X/dist-packages once installed; "" when there is none.
std::string findPythonPackages();

// PYTHONPATH for the program: the packages' folder first, then what the caller had (none: unchanged).
std::string pythonPathValue(const std::string& packages, const char* existing);

// The result directories a run with this pid wrote under root (<stamp>-<pid>[-rank<N>][-<random>]), sorted;
// pid < 0: those of every pid.
std::vector<std::string> resultDirsOf(const std::string& root, long pid);

// `opscope ops`: one line per hookable op.
std::string opsListing();

// The whole command line; returns the exit status.
int main(const std::vector<std::string>& args);

}  // namespace opscope::launcher
