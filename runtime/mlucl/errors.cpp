#include "errors.h"

#include "../common/raw_enum.h"

#include <iterator>

namespace mlucl {
namespace {

struct LastError {
  mluclStatus_t status = MLUCL_SUCCESS;
  std::string message;
};

// Per thread by contract: each thread sees only the errors of its own calls.
thread_local LastError tl_last_error;

struct StatusText {
  const char* name;
  const char* full;
};

constexpr StatusText kStatusTexts[] = {
    {"MLUCL_SUCCESS", "MLUCL_SUCCESS: no error"},
    {"MLUCL_ERROR_INVALID_VALUE", "MLUCL_ERROR_INVALID_VALUE: an argument is invalid"},
    {"MLUCL_ERROR_INVALID_HANDLE", "MLUCL_ERROR_INVALID_HANDLE: unknown or destroyed communicator"},
    {"MLUCL_ERROR_MISMATCH", "MLUCL_ERROR_MISMATCH: the ranks disagree on a collective"},
    {"MLUCL_ERROR_SYSTEM", "MLUCL_ERROR_SYSTEM: MPI failed or cannot be used"},
    {"MLUCL_ERROR_RUNTIME", "MLUCL_ERROR_RUNTIME: the MLU runtime refused"},
    {"MLUCL_ERROR_COMM_FAILED", "MLUCL_ERROR_COMM_FAILED: the communicator failed earlier"},
    {"MLUCL_ERROR_INTERNAL", "MLUCL_ERROR_INTERNAL: internal error"},
};

bool known(int status) { return status >= 0 && static_cast<unsigned>(status) < std::size(kStatusTexts); }

}  // namespace

mluclStatus_t setLastError(mluclStatus_t status, std::string message) {
  tl_last_error.status = status;
  tl_last_error.message = std::move(message);
  return status;
}

const char* statusName(mluclStatus_t status) {
  const int raw = mlu::rawEnum(status);
  return known(raw) ? kStatusTexts[raw].name : "MLUCL_ERROR_UNKNOWN";
}

}  // namespace mlucl

using namespace mlucl;

extern "C" {

MLUCL_API const char* mluclGetErrorString(mluclStatus_t status) {
  const int raw = mlu::rawEnum(status);
  return known(raw) ? kStatusTexts[raw].full : "MLUCL_ERROR_UNKNOWN: unknown status code";
}

MLUCL_API mluclStatus_t mluclGetLastError(void) {
  const mluclStatus_t status = tl_last_error.status;
  tl_last_error.status = MLUCL_SUCCESS;
  return status;
}

MLUCL_API const char* mluclGetLastErrorMessage(void) { return tl_last_error.message.c_str(); }

}  // extern "C"
