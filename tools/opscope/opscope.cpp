// opscope — the launcher: runs a program under the hook layer (libopscope.so) with the chosen tools, and
// lists what can be hooked.
//
//   opscope run [--capture[=LIST]] [--compare[=LIST]] [--fallback=LIST] [--profile] [--memcheck]
//               [--dump-args=N] [--sync-exec] [--out DIR] [OPTION FLAGS] -- PROGRAM ARGS...
//   opscope ops
//
// `run` only sets environment variables (DESIGN.md's table) and LD_PRELOAD, so everything it does can also
// be done by hand; it then runs the program, forwards its exit status and prints the result directory.
#include "launcher.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return opscope::launcher::main(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opscope: %s\n", e.what());
    return 2;
  }
}
