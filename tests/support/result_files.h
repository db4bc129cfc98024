// result_files.h — for the tests of the offline commands (report, summary, diff, analyze): a file written or
// read whole, and the built `opscope` run with arguments.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "subprocess.h"
#include "test_paths.h"

namespace opscope_test {

inline void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The built opscope with `args`, its environment extended by `env`.
inline Run runOpscope(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<std::string> argv = {OPSCOPE_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, env);
}

}  // namespace opscope_test
