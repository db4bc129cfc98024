// mpi_run.h — the command line that starts a program as `np` ranks with Open MPI's mpirun on this machine,
// for the tests that run multi-rank programs.
#pragma once

#include "test_paths.h"

#include <string>

namespace opscope_test {

// The sanitizers' options for processes that run Open MPI, as `env` arguments. AddressSanitizer:
// LeakSanitizer off (Open MPI's own allocations at exit, some in components it has unloaded, are not leaks
// of ours), and the runtime need not come first in the library list (mpirun and env are not instrumented,
// and get libopscope.so preloaded under `opscope run`). ThreadSanitizer: Open MPI's own lock-order reports
// suppressed (tests/runtime/tsan-mpi.supp). No effect in normal builds.
inline std::string mpiSanitizerOptions() {
  return "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 TSAN_OPTIONS=suppressions=" +
         std::string(paths::kSourceDir) + "/tests/runtime/tsan-mpi.supp";
}

// mpirun -np N --oversubscribe (more ranks than cores), with Open MPI's run-as-root switches set here, by
// the test (CI runs as root; a user's shell should not need them), and mpiSanitizerOptions().
inline std::string mpirunCommand(int np) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + mpiSanitizerOptions() + " " +
         std::string(paths::kMpirun) + " -np " + std::to_string(np) + " --oversubscribe";
}

}  // namespace opscope_test
