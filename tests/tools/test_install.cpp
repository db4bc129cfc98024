// `cmake --install` of this build into a fresh prefix, and the installed tree used as a user would, with no
// variable set: every file in its place, a C program that calls opscope_step() built with
// `pkg-config --cflags --libs opscope` and with the CMake package, and the installed `opscope run` of a
// PyTorch program, which finds libopscope.so and the Python packages by itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "subprocess.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
namespace paths = opscope_test::paths;

// Runs argv with none of the variables that could point at the build tree.
opscope_test::Run clean(const std::vector<std::string>& argv, const std::vector<std::string>& set = {}) {
  std::vector<std::string> command = {"/usr/bin/env", "-u", "PYTHONPATH",      "-u", "LD_LIBRARY_PATH", "-u",
                                      "LD_PRELOAD",   "-u", "OPSCOPE_HOOK_LIB"};
  command.insert(command.end(), set.begin(), set.end());
  command.insert(command.end(), argv.begin(), argv.end());
  return opscope_test::run(command);
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

constexpr const char* kProgram = R"(#include <opscope.h>
#include <mlu/mlurt.h>
#include <stdio.h>
int main(void) {
  int devices = 0;
  if (mlurtGetDeviceCount(&devices) != MLURT_SUCCESS) return 1;
  opscope_step();
  printf("%s, hook loaded %d\n", devices > 0 ? "a device" : "no device", opscope_loaded());
  return 0;
}
)";

TEST(Install, TheInstalledTreeWorksWithNothingSet) {
  if (*paths::kSanitize != '\0') {
    // Its libraries need the sanitizer's runtime loaded first, which a plain program does not have.
    GTEST_SKIP() << "a " << paths::kSanitize << " build is not for installing";
  }
  const fs::path root = fs::temp_directory_path() / ("opscope-install-" + std::to_string(getpid()));
  fs::remove_all(root);
  const fs::path prefix = root / "prefix";
  const auto install =
      opscope_test::run({paths::kCmake, "--install", paths::kBuildDir, "--prefix", prefix.string()});
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  for (const char* file :
       {"bin/opscope", "bin/op-replay", "bin/trace-check", "lib/libopscope.so", "lib/libmlurt.so",
        "lib/libmluops.so", "lib/libmlucl.so", "include/opscope.h", "include/mlu/mluops.h",
        "include/mlu/mlurt.h", "lib/pkgconfig/opscope.pc", "lib/cmake/opscope/opscopeConfig.cmake"}) {
    EXPECT_TRUE(fs::is_regular_file(prefix / file)) << file;
  }
  const fs::path python = prefix / paths::kPythonInstallDir;
  EXPECT_TRUE(fs::is_regular_file(python / "opscope" / "__init__.py"));
  const auto version = clean({(prefix / "bin/opscope").string(), "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;

  // A C program through pkg-config: it runs alone, and under the installed hook opscope_step() reaches it.
  write(root / "step.c", kProgram);
  const std::string pc_path = "PKG_CONFIG_PATH=" + (prefix / "lib/pkgconfig").string();
  const auto flags = clean({"/usr/bin/pkg-config", "--cflags", "--libs", "opscope"}, {pc_path});
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  const auto cc = clean({"/bin/sh", "-c",
                         "cc -Wall -Wextra -Werror -o " + (root / "step").string() + " " +
                             (root / "step.c").string() + " $(pkg-config --cflags --libs opscope)"},
                        {pc_path});
  ASSERT_EQ(cc.exit_code, 0) << cc.out << cc.err;
  EXPECT_EQ(clean({(root / "step").string()}).out, "a device, hook loaded 0\n");
  EXPECT_EQ(clean({(root / "step").string()}, {"LD_PRELOAD=" + (prefix / "lib/libopscope.so").string()}).out,
            "a device, hook loaded 1\n");

  // The same program through the CMake package.
  fs::create_directories(root / "cmake-project");
  write(root / "cmake-project/CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.25)\nproject(uses_opscope C)\nfind_package(opscope 0.1 REQUIRED "
        "CONFIG)\nadd_executable(step step.c)\ntarget_link_libraries(step PRIVATE opscope::api "
        "opscope::mlurt)\n");
  fs::copy_file(root / "step.c", root / "cmake-project/step.c");
  const auto configure = clean({paths::kCmake, "-S", (root / "cmake-project").string(), "-B",
                                (root / "cmake-build").string(), "-DCMAKE_PREFIX_PATH=" + prefix.string()});
  ASSERT_EQ(configure.exit_code, 0) << configure.out << configure.err;
  const auto build = clean({paths::kCmake, "--build", (root / "cmake-build").string()});
  ASSERT_EQ(build.exit_code, 0) << build.out << build.err;
  EXPECT_EQ(clean({(root / "cmake-build/step").string()}).out, "a device, hook loaded 0\n");

  // A PyTorch program under the installed launcher, with no PYTHONPATH: it imports torch_mlu and opscope.
  if (!fs::is_regular_file(python / "torch_mlu" / "__init__.py")) {
    GTEST_SKIP() << "torch_mlu is not built here (no libtorch-dev, or a sanitizer build)";
  }
  // The torch.distributed backend's module finds its libraries from where it is installed.
  EXPECT_TRUE(fs::is_regular_file(python / "torch_mlu" / "_mlucl.so"));
  const auto backend = clean({"/usr/bin/python3", "-c",
                              "import torch.distributed as d, torch_mlu, torch_mlu._mlucl as m; "
                              "print(d.Backend.MLUCL, m.ProcessGroupMLU.__mro__[1].__name__)"},
                             {"PYTHONPATH=" + python.string()});
  EXPECT_EQ(backend.exit_code, 0) << backend.err;
  EXPECT_THAT(backend.out, HasSubstr("MLUCL ProcessGroup")) << backend.out << backend.err;
  const auto compared =
      clean({(prefix / "bin/opscope").string(), "run", "--compare", "--out", (root / "results").string(),
             "--", "/usr/bin/python3", std::string(paths::kSourceDir) + "/examples/torch_mnist/main.py",
             "--max-steps", "2", "--no-eval", "--train-size", "200"});
  ASSERT_EQ(compared.exit_code, 0) << compared.out << compared.err;
  EXPECT_THAT(compared.err, HasSubstr(", 0 failed")) << compared.err;
  EXPECT_THAT(compared.err, HasSubstr("autocompare.csv")) << compared.err;
  fs::remove_all(root);
}

}  // namespace
