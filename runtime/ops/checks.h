// checks.h — argument checks that several op families' validate functions share.
#pragma once

#include <mlu/dtype.h>
#include <mlu/op_args.h>
#include <mlu/status.h>

#include <string_view>

namespace mlu::checks {

// A required tensor: present, with a known dtype and 0-8 dims.
inline Status tensor(std::string_view name, const TensorView& t) {
  if (!t.present) return badParam("{} is missing", name);
  if (dtypeSize(t.dtype) == 0) return badParam("{} has an unknown dtype {}", name, static_cast<int>(t.dtype));
  if (t.ndim < 0 || t.ndim > MLUOP_DIM_MAX) {
    return badParam("{} has {} dims; a tensor has 0 to {}", name, t.ndim, MLUOP_DIM_MAX);
  }
  return Status::success();
}

// The floating dtypes the numeric ops compute in (float64 only reaches the reference: the device refuses it).
inline Status floating(std::string_view name, const TensorView& t) {
  if (isFloating(t.dtype)) return Status::success();
  return notSupported("{} is {}, which is not supported; use float32, float16 or bfloat16", name,
                      dtypeName(t.dtype));
}

inline Status sameDtype(std::string_view name, const TensorView& t, std::string_view ref_name,
                        const TensorView& ref) {
  if (t.dtype == ref.dtype) return Status::success();
  return badParam("{} is {} but {} is {}; they must have the same dtype", name, dtypeName(t.dtype), ref_name,
                  dtypeName(ref.dtype));
}

}  // namespace mlu::checks
