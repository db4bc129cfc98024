// The module rule (docs/DESIGN.md, "Modules"): scripts/module-graph.py finds no include that breaks it in
// this tree, does find one planted in a small made-up tree (a tool including another tool, a tool including
// hooks), and the graph docs/DESIGN.md shows is the one the script draws from the sources today.
#include "../support/subprocess.h"
#include "../support/test_data.h"
#include "test_paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

const std::string kSource = opscope_test::paths::kSourceDir;
const std::string kScript = kSource + "/scripts/module-graph.py";

void writeFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST(ModuleGraph, NoIncludeBreaksTheRule) {
  const auto r = opscope_test::run({"/usr/bin/python3", kScript, "--root", kSource, "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("no include breaks the rule"));
}

TEST(ModuleGraph, AToolIncludingAnotherToolOrTheHookIsFound) {
  const fs::path root = opscope_test::tempDir("module_graph");
  writeFile(root / "core/include/opscope/tool.h", "#pragma once\n");
  // A tool is a top-level folder with a CMakeLists.txt that is none of the fixed modules.
  writeFile(root / "capture/CMakeLists.txt", "");
  writeFile(root / "compare/CMakeLists.txt", "");
  writeFile(root / "capture/include/opscope/capture/capture_tool.h", "#include <opscope/tool.h>\n");
  writeFile(root / "hooks/src/hook.h", "#pragma once\n");
  writeFile(root / "compare/src/compare_tool.cpp", "#include <opscope/tool.h>\n");
  const auto clean = opscope_test::run({"/usr/bin/python3", kScript, "--root", root.string(), "--check"});
  EXPECT_EQ(clean.exit_code, 0) << clean.all();
  writeFile(root / "compare/src/compare_tool.cpp",
            "#include <opscope/tool.h>\n#include <opscope/capture/capture_tool.h>\n"
            "  #  include \"../../hooks/src/hook.h\"\n");
  const auto broken = opscope_test::run({"/usr/bin/python3", kScript, "--root", root.string(), "--check"});
  EXPECT_EQ(broken.exit_code, 1) << broken.all();
  EXPECT_THAT(broken.out, HasSubstr("compare/src/compare_tool.cpp: includes opscope/capture/capture_tool.h "
                                    "(capture): compare may include only core, runtime"));
  EXPECT_THAT(broken.out, HasSubstr("compare/src/compare_tool.cpp: includes ../../hooks/src/hook.h (hooks)"));
  EXPECT_THAT(broken.out, HasSubstr("2 includes break the module rule"));
  // A new tool folder is under the rule as soon as it has its CMakeLists.txt.
  writeFile(root / "newtool/src/new_tool.cpp", "#include <opscope/capture/capture_tool.h>\n");
  const auto unlisted = opscope_test::run({"/usr/bin/python3", kScript, "--root", root.string(), "--check"});
  EXPECT_THAT(unlisted.out, Not(HasSubstr("newtool/src/new_tool.cpp")));
  writeFile(root / "newtool/CMakeLists.txt", "");
  const auto listed = opscope_test::run({"/usr/bin/python3", kScript, "--root", root.string(), "--check"});
  EXPECT_THAT(listed.out,
              HasSubstr("newtool/src/new_tool.cpp: includes opscope/capture/capture_tool.h (capture): "
                        "newtool may include only core, runtime"));
  fs::remove_all(root);
}

TEST(ModuleGraph, DesignShowsTheGraphOfTheSources) {
  const auto r = opscope_test::run({"/usr/bin/python3", kScript, "--root", kSource, "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.all();
  std::ifstream design(kSource + "/docs/DESIGN.md");
  std::stringstream text;
  text << design.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr(r.out)) << "docs/DESIGN.md's module table is out of date: run\n"
                                            << "scripts/module-graph.py and paste its output";
}
