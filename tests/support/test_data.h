// test_data.h — scratch directories and typed byte buffers for the tool tests.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace opscope_test {

// A fresh, empty directory under the system's temporary directory, unique to this process.
inline std::filesystem::path tempDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("opscope_test_{}_{}", name, getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The bytes of values, in a vector of std::byte (Out: std::vector<std::byte> or opscope::Bytes).
template <typename Out = std::vector<std::byte>, typename T>
Out bytesOf(const std::vector<T>& values) {
  Out out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T, typename ByteVector>
std::vector<T> valuesOf(const ByteVector& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace opscope_test
