// libFuzzer target: the report's loading of a result directory (report/src/load.cpp) whose run.json,
// memcheck.json and trace.json are the input (split at NUL bytes). loadRun must return a model, with
// warnings, never crash or hang.
#include <opscope/report/report.h>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir = fs::temp_directory_path() / ("opscope_fuzz_json_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const char* names[] = {"run.json", "memcheck.json", "trace.json"};
  std::size_t start = 0;
  for (const char* name : names) {
    std::size_t end = text.find('\0', start);
    if (end == std::string_view::npos) end = text.size();
    std::ofstream(dir / name, std::ios::binary) << text.substr(start, end - start);
    start = end < text.size() ? end + 1 : text.size();
  }
  try {
    const auto model = opscope::report::loadRun(dir);
    static_cast<void>(model);
  } catch (const std::exception&) {
  }
  return 0;
}
