#include "config.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <thread>

namespace mlurt {
namespace {

// Parses a whole decimal integer in [lo, hi]; nullopt for anything else (sign, spaces, suffixes).
std::optional<std::int64_t> parseInt(std::string_view text, std::int64_t lo, std::int64_t hi) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value < lo || value > hi) return std::nullopt;
  return value;
}

}  // namespace

std::variant<Config, std::string> loadConfig(const EnvLookup& lookup) {
  Config config;
  const unsigned hw = std::thread::hardware_concurrency();
  config.cores = hw == 0 ? 1 : static_cast<int>(hw);

  struct Item {
    const char* name;
    std::int64_t lo, hi;
    const char* unit;
  };
  constexpr Item kDevices{"MLU_SIM_DEVICE_COUNT", 1, 64, "devices"};
  constexpr Item kMemory{"MLU_SIM_MEMORY_MB", 1, 1 << 20, "MiB per device"};
  constexpr Item kCores{"MLU_SIM_CORES", 1, 1024, "cores per device"};

  std::string error;
  auto read = [&](const Item& item) -> std::optional<std::int64_t> {
    const char* raw = lookup(item.name);
    // Unset or empty: the default (an empty value means unset, as for every opscope variable).
    if (raw == nullptr || *raw == '\0' || !error.empty()) return std::nullopt;
    auto value = parseInt(raw, item.lo, item.hi);
    if (!value) {
      error = fmt::format("{}='{}' is invalid: expected a whole number of {} from {} to {}", item.name, raw,
                          item.unit, item.lo, item.hi);
    }
    return value;
  };
  if (auto v = read(kDevices)) config.device_count = static_cast<int>(*v);
  if (auto v = read(kMemory)) config.memory_bytes = static_cast<std::size_t>(*v) << 20;
  if (auto v = read(kCores)) config.cores = static_cast<int>(*v);
  if (!error.empty()) return error;
  return config;
}

}  // namespace mlurt
