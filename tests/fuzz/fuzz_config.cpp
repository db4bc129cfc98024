// libFuzzer target: the hook's configuration parser (core/src/config.cpp) on hostile environments. The
// input is NAME=value lines; every variable the hook reads may be among them. parseConfig must return or
// throw ConfigError: never crash, hang or read out of bounds (op lists go through RE2).
#include <opscope/config.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> env;
  std::vector<std::string> entries;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[line.substr(0, eq)] = line.substr(eq + 1);
    entries.push_back(line);
  }
  try {
    opscope::parseConfig(
        [&](const char* name) -> const char* {
          const auto it = env.find(name);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        entries);
  } catch (const opscope::ConfigError&) {
  }
  return 0;
}
