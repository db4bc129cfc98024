// Thread-local last-error state of the runtime, and the messages of its status codes.
#pragma once

#include <mlu/mlurt.h>

#include <fmt/format.h>

#include <string>
#include <utility>

namespace mlurt {

// Records status and message as the calling thread's last error and returns status.
mlurtStatus_t setLastError(mlurtStatus_t status, std::string message);

// fail(status, "format {}", args...): formats the message, records it, returns status.
template <typename... Args>
mlurtStatus_t fail(mlurtStatus_t status, fmt::format_string<Args...> format, Args&&... args) {
  return setLastError(status, fmt::format(format, std::forward<Args>(args)...));
}

// Short enum name of a status, e.g. "MLURT_ERROR_OUT_OF_MEMORY".
const char* statusName(mlurtStatus_t status);

}  // namespace mlurt
