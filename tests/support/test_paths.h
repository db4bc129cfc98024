// test_paths.h — where the build put the programs and libraries the tests run, and where the sources are.
// The values come from one source file generated into the build folder (tests/test_paths.cpp, see
// tests/CMakeLists.txt) rather than from -D flags, so that no test's compile command names a folder: a
// compiler cache then serves a clone in another folder (CI's) from the cache a local build filled. The
// macros keep the names the tests have always used.
#pragma once

namespace opscope_test::paths {

extern const char* const kLibopscope;  // build/lib/libopscope.so
extern const char* const kLibmluops;   // build/lib/libmluops.so
extern const char* const kLibmlucl;    // build/lib/libmlucl.so
extern const char* const kOpscope;     // the launcher
extern const char* const kOpReplay;
extern const char* const kTraceCheck;
extern const char* const kMnistTrain;
extern const char* const kLlamaTrain;
extern const char* const kDeviceQuery;
extern const char* const kLeaky;
extern const char* const kLeakyHost;
extern const char* const kHookProbe;
extern const char* const kFaultProbe;
extern const char* const kMemcheckProbe;
extern const char* const kProfileProbe;
extern const char* const kMultiQueueProgram;
extern const char* const kSoftmaxRows;
extern const char* const kMpirun;       // Open MPI's mpirun
extern const char* const kMluclProbe;   // tests/runtime/mlucl_probe.cpp
extern const char* const kReuseProbe;   // tests/tools/reuse_probe.cpp
extern const char* const kSourceDir;    // the repository's root
extern const char* const kArtifactDir;  // build/test-artifacts (screenshots)
extern const char* const kDevtoolsCheckScript;
extern const char* const kNode;      // "" when CMake found none (then PATH is searched)
extern const char* const kValgrind;  // "" when not installed
extern const char* const kChromium;
extern const char* const kBuildDir;          // the build folder (cmake --install reads it)
extern const char* const kCmake;             // the cmake that configured it
extern const char* const kPythonInstallDir;  // where the Python packages go under a prefix
extern const char* const kSanitize;          // OPSCOPE_SANITIZE of this build ("" for none)

}  // namespace opscope_test::paths

#define LIBOPSCOPE_PATH ::opscope_test::paths::kLibopscope
#define LIBMLUOPS_PATH ::opscope_test::paths::kLibmluops
#define OPSCOPE_PATH ::opscope_test::paths::kOpscope
#define OP_REPLAY_PATH ::opscope_test::paths::kOpReplay
#define TRACE_CHECK_PATH ::opscope_test::paths::kTraceCheck
#define MNIST_TRAIN_PATH ::opscope_test::paths::kMnistTrain
#define LLAMA_TRAIN_PATH ::opscope_test::paths::kLlamaTrain
#define DEVICE_QUERY_PATH ::opscope_test::paths::kDeviceQuery
#define LEAKY_PATH ::opscope_test::paths::kLeaky
#define LEAKY_HOST_PATH ::opscope_test::paths::kLeakyHost
#define HOOK_PROBE_PATH ::opscope_test::paths::kHookProbe
#define FAULT_PROBE_PATH ::opscope_test::paths::kFaultProbe
#define MEMCHECK_PROBE_PATH ::opscope_test::paths::kMemcheckProbe
#define PROFILE_PROBE_PATH ::opscope_test::paths::kProfileProbe
#define MULTI_QUEUE_PROGRAM_PATH ::opscope_test::paths::kMultiQueueProgram
#define SOFTMAX_ROWS_PATH ::opscope_test::paths::kSoftmaxRows
#define OPSCOPE_SOURCE_DIR ::opscope_test::paths::kSourceDir
#define OPSCOPE_ARTIFACT_DIR ::opscope_test::paths::kArtifactDir
#define OPSCOPE_DEVTOOLS_CHECK_SCRIPT ::opscope_test::paths::kDevtoolsCheckScript
#define OPSCOPE_NODE_EXECUTABLE ::opscope_test::paths::kNode
#define VALGRIND_PATH ::opscope_test::paths::kValgrind
#define CHROMIUM_PATH ::opscope_test::paths::kChromium
