// status.h — the result of an op's argument check or CPU reference run: a status and what was wrong.
#pragma once

#include <mlu/mluops.h>

#include <fmt/format.h>

#include <string>
#include <utility>

namespace mlu {

struct [[nodiscard]] Status {
  mluopStatus_t code = MLUOP_STATUS_SUCCESS;
  std::string message;

  bool ok() const { return code == MLUOP_STATUS_SUCCESS; }
  static Status success() { return {}; }
};

template <typename... Args>
Status badParam(fmt::format_string<Args...> format, Args&&... args) {
  return {MLUOP_STATUS_BAD_PARAM, fmt::format(format, std::forward<Args>(args)...)};
}

template <typename... Args>
Status notSupported(fmt::format_string<Args...> format, Args&&... args) {
  return {MLUOP_STATUS_NOT_SUPPORTED, fmt::format(format, std::forward<Args>(args)...)};
}

// Returns from the enclosing function when a Status-valued expression is not ok.
#define MLU_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::mlu::Status mlu_status_ = (expr);        \
    if (!mlu_status_.ok()) return mlu_status_; \
  } while (false)

}  // namespace mlu
