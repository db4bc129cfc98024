#include "errors.h"

#include "../common/raw_enum.h"

namespace mlurt {
namespace {

struct LastError {
  mlurtStatus_t status = MLURT_SUCCESS;
  std::string message;
};

// Per thread by contract: each thread sees only the errors of its own calls.
thread_local LastError tl_last_error;

struct StatusText {
  const char* name;
  const char* full;
};

constexpr StatusText kStatusTexts[] = {
    {"MLURT_SUCCESS", "MLURT_SUCCESS: no error"},
    {"MLURT_ERROR_INVALID_VALUE", "MLURT_ERROR_INVALID_VALUE: an argument is invalid"},
    {"MLURT_ERROR_INVALID_DEVICE", "MLURT_ERROR_INVALID_DEVICE: no such device"},
    {"MLURT_ERROR_OUT_OF_MEMORY", "MLURT_ERROR_OUT_OF_MEMORY: out of memory"},
    {"MLURT_ERROR_INVALID_POINTER",
     "MLURT_ERROR_INVALID_POINTER: pointer is not a live allocation of the expected kind"},
    {"MLURT_ERROR_INVALID_MEMCPY_DIRECTION",
     "MLURT_ERROR_INVALID_MEMCPY_DIRECTION: pointers do not match the copy direction"},
    {"MLURT_ERROR_INVALID_HANDLE", "MLURT_ERROR_INVALID_HANDLE: unknown or destroyed queue or notifier"},
    {"MLURT_ERROR_NOT_READY", "MLURT_ERROR_NOT_READY: work has not completed yet"},
    {"MLURT_ERROR_LAUNCH_FAILED", "MLURT_ERROR_LAUNCH_FAILED: an asynchronous task failed"},
    {"MLURT_ERROR_NOTIFIER_TIMING_DISABLED",
     "MLURT_ERROR_NOTIFIER_TIMING_DISABLED: notifier was created without timing"},
    {"MLURT_ERROR_NOTIFIER_NOT_PLACED",
     "MLURT_ERROR_NOTIFIER_NOT_PLACED: notifier was never placed on a queue"},
    {"MLURT_ERROR_NOT_PERMITTED",
     "MLURT_ERROR_NOT_PERMITTED: operation not permitted here (it would deadlock, or this is a forked "
     "child)"},
    {"MLURT_ERROR_SHUTDOWN", "MLURT_ERROR_SHUTDOWN: the runtime has shut down"},
    {"MLURT_ERROR_INTERNAL", "MLURT_ERROR_INTERNAL: internal runtime error"},
};

bool known(int status) { return status >= 0 && static_cast<unsigned>(status) < std::size(kStatusTexts); }

}  // namespace

mlurtStatus_t setLastError(mlurtStatus_t status, std::string message) {
  tl_last_error.status = status;
  tl_last_error.message = std::move(message);
  return status;
}

const char* statusName(mlurtStatus_t status) {
  const int raw = mlu::rawEnum(status);
  return known(raw) ? kStatusTexts[raw].name : "MLURT_ERROR_UNKNOWN";
}

}  // namespace mlurt

using namespace mlurt;

extern "C" {

MLURT_API const char* mlurtGetErrorString(mlurtStatus_t status) {
  const int raw = mlu::rawEnum(status);
  return known(raw) ? kStatusTexts[raw].full : "MLURT_ERROR_UNKNOWN: unknown status code";
}

MLURT_API mlurtStatus_t mlurtGetLastError(void) {
  const mlurtStatus_t status = tl_last_error.status;
  tl_last_error.status = MLURT_SUCCESS;
  return status;
}

MLURT_API mlurtStatus_t mlurtPeekAtLastError(void) { return tl_last_error.status; }

MLURT_API const char* mlurtGetLastErrorMessage(void) { return tl_last_error.message.c_str(); }

}  // extern "C"
