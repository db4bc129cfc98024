// element.h — typed access to tensor elements for kernels: storage types for every dtype, conversion to
// and from a compute type, and dispatch from a runtime dtype to a template.
#pragma once

#include <mlu/dtype.h>
#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <array>
#include <cstdint>
#include <type_traits>

namespace mlu {

// Storage types of the two 16-bit float formats (raw bits).
struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

// Converts a stored element to the compute type C (float or double).
template <typename C, typename T>
inline C load(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return static_cast<C>(halfToFloat(v.bits));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return static_cast<C>(bfloat16ToFloat(v.bits));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? C{1} : C{0};
  } else {
    return static_cast<C>(v);
  }
}

// Converts a computed value to the storage type T, rounding to nearest even for the 16-bit floats.
template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{floatToHalf(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{floatToBfloat16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != C{0};
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v);  // callers keep values in range
  } else {
    return static_cast<T>(v);
  }
}

// Calls f.template operator()<T>() with the storage type of dtype; returns false for INVALID.
// A floating value converted to uint8 as PyTorch converts it (c10 casts through int64 so that negative
// values wrap the same on every platform: -1.0 -> 255, -3.7 -> 253, 300.0 -> 44): truncated toward zero
// into int64, then taken modulo 256. NaN and values outside int64's range give 0 (the low byte of what x86's
// conversion to int64 gives them).
inline std::uint8_t floatToUint8(double v) {
  if (!(v > -0x1p63 && v < 0x1p63)) return 0;
  return static_cast<std::uint8_t>(static_cast<std::int64_t>(v));
}

template <typename F>
bool dispatchAll(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      f.template operator()<float>();
      return true;
    case MLUOP_DTYPE_HALF:
      f.template operator()<Half>();
      return true;
    case MLUOP_DTYPE_BFLOAT16:
      f.template operator()<BFloat16>();
      return true;
    case MLUOP_DTYPE_DOUBLE:
      f.template operator()<double>();
      return true;
    case MLUOP_DTYPE_INT8:
      f.template operator()<std::int8_t>();
      return true;
    case MLUOP_DTYPE_INT16:
      f.template operator()<std::int16_t>();
      return true;
    case MLUOP_DTYPE_INT32:
      f.template operator()<std::int32_t>();
      return true;
    case MLUOP_DTYPE_INT64:
      f.template operator()<std::int64_t>();
      return true;
    case MLUOP_DTYPE_UINT8:
      f.template operator()<std::uint8_t>();
      return true;
    case MLUOP_DTYPE_BOOL:
      f.template operator()<bool>();
      return true;
    case MLUOP_DTYPE_INVALID:
      break;
  }
  return false;
}

// Like dispatchAll, for the floating dtypes only; returns false for the others.
template <typename F>
bool dispatchFloating(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      f.template operator()<float>();
      return true;
    case MLUOP_DTYPE_HALF:
      f.template operator()<Half>();
      return true;
    case MLUOP_DTYPE_BFLOAT16:
      f.template operator()<BFloat16>();
      return true;
    case MLUOP_DTYPE_DOUBLE:
      f.template operator()<double>();
      return true;
    default:
      return false;
  }
}

// Element i (in row-major order of the logical shape) of a strided tensor: its offset in elements. For a
// contiguous tensor (the common case) that is i itself. Otherwise the walker keeps the multi-index of the
// last element asked for, so a walk in order (i, i + 1, ...) costs a step of an odometer per element, not
// a division per dim; any other i is worked out from scratch. One walker per thread: it is not
// thread-safe.
class OffsetWalker {
 public:
  explicit OffsetWalker(const TensorView& t) : t_(t), contiguous_(t.contiguous()) {}
  // Whether offsetOf(i) is i (a loop may then index directly, which the compiler can vectorize).
  bool contiguous() const { return contiguous_; }
  std::int64_t offsetOf(std::int64_t linear) const {
    if (contiguous_) return linear;
    if (linear == last_ + 1 && last_ >= 0) {
      for (int d = t_.ndim - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        offset_ += t_.stride(d);
        if (++index_[u] < t_.dim(d)) break;
        offset_ -= index_[u] * t_.stride(d);
        index_[u] = 0;
      }
    } else {
      offset_ = 0;
      std::int64_t rest = linear;
      for (int d = t_.ndim - 1; d >= 0; --d) {
        const std::int64_t size = t_.dim(d);
        index_[static_cast<std::size_t>(d)] = rest % size;
        offset_ += (rest % size) * t_.stride(d);
        rest /= size;
      }
    }
    last_ = linear;
    return offset_;
  }

 private:
  const TensorView& t_;
  bool contiguous_;
  mutable std::int64_t last_ = -1, offset_ = 0;
  mutable std::array<std::int64_t, MLUOP_DIM_MAX> index_{};
};

template <typename T>
inline T* typed(const TensorView& t) {
  return static_cast<T*>(t.data);
}

}  // namespace mlu
