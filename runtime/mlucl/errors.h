// Thread-local last-error state of libmlucl and the texts of its status codes.
#pragma once

#include <mlu/mlucl.h>

#include <fmt/format.h>

#include <string>
#include <utility>

namespace mlucl {

// Records status and message as the calling thread's last error and returns status.
mluclStatus_t setLastError(mluclStatus_t status, std::string message);

template <typename... Args>
mluclStatus_t fail(mluclStatus_t status, fmt::format_string<Args...> format, Args&&... args) {
  return setLastError(status, fmt::format(format, std::forward<Args>(args)...));
}

// Short enum name of a status, e.g. "MLUCL_ERROR_MISMATCH".
const char* statusName(mluclStatus_t status);

}  // namespace mlucl
