// The runtime's configuration, read from MLU_SIM_* environment variables.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <variant>

namespace mlurt {

struct Config {
  int device_count = 2;
  std::size_t memory_bytes = std::size_t{8192} << 20;
  int cores = 1;
};

// Looks a variable up; returns nullptr when unset (std::getenv in production).
using EnvLookup = std::function<const char*(const char*)>;

// Parses the configuration; on a malformed value returns a message naming the variable and the value.
std::variant<Config, std::string> loadConfig(const EnvLookup& lookup);

}  // namespace mlurt
