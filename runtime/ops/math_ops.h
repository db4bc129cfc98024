// math_ops.h — the elementwise semantics of the integer-capable ops (remainder, floor_divide, clamp, the
// rounding ops, sign, the logical and bitwise ops), written once for the device kernels (float compute) and
// the CPU reference (double compute) alike, so that both follow PyTorch in the same way. C is the compute
// type: float or double for the floating dtypes, the storage type itself for the integer ones and bool.
// Header-only: runtime/ops is compiled into both the kernel library and the reference.
#pragma once

#include "element.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace mlu::math {

template <typename C>
inline constexpr bool kFloatCompute = std::is_floating_point_v<C>;

// The storage types an op takes, checked at compile time by the kernels (validate() has refused the rest).
enum class Accepts { kFloatingOrInteger, kIntegerOrBool, kAny };

template <Accepts A, typename T>
constexpr bool accepts() {
  constexpr bool floating =
      std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
  constexpr bool integer = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  if constexpr (A == Accepts::kFloatingOrInteger) {
    return floating || integer;
  } else if constexpr (A == Accepts::kIntegerOrBool) {
    return std::is_integral_v<T>;
  } else {
    return floating || std::is_integral_v<T>;
  }
}

// Python's modulo (PyTorch's remainder): the result has the divisor's sign. Floating: fmod corrected by
// one divisor (b = 0 gives NaN). Integer: a divisor of 0 gives 0 (PyTorch raises ZeroDivisionError; a
// kernel cannot report), and INT_MIN % -1 is 0.
template <typename C>
C remainder(C a, C b) {
  if constexpr (kFloatCompute<C>) {
    C mod = std::fmod(a, b);
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
    return mod;
  } else if constexpr (std::is_same_v<C, bool>) {
    return false;  // a % true = 0; a % false is a division by zero: 0
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return 0;  // also INT_MIN % -1, which C++ leaves undefined
    }
    C mod = static_cast<C>(a % b);
    if constexpr (std::is_signed_v<C>) {
      if (mod != 0 && (b < 0) != (mod < 0)) mod = static_cast<C>(mod + b);
    }
    return mod;
  }
}

// Floor division (PyTorch's floor_divide, rounding_mode='floor'). Floating: as PyTorch's div_floor —
// a / b when b = 0 (±inf or NaN), else (a - fmod(a, b)) / b moved down by one where the signs differ and
// rounded to the nearest integer, with a zero quotient carrying the sign of a / b. Integer: rounds toward
// −inf; a divisor of 0 gives 0 (PyTorch raises), INT_MIN / -1 wraps to INT_MIN.
template <typename C>
C floorDivide(C a, C b) {
  if constexpr (kFloatCompute<C>) {
    if (b == 0) return a / b;
    const C mod = std::fmod(a, b);
    C div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
    if (div == 0) return std::copysign(C{0}, a / b);
    C floored = std::floor(div);
    if (div - floored > C{0.5}) floored += 1;
    return floored;
  } else if constexpr (std::is_same_v<C, bool>) {
    return a && b;  // a / true = a; a / false: 0
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return static_cast<C>(0 - static_cast<std::make_unsigned_t<C>>(a));  // wraps at INT_MIN
      const C q = static_cast<C>(a / b);
      return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<C>(q - 1) : q;
    } else {
      return static_cast<C>(a / b);
    }
  }
}

// PyTorch's sign: (0 < x) − (x < 0); NaN gives 0, −0 gives 0.
template <typename C>
C sign(C x) {
  if constexpr (std::is_same_v<C, bool>) {
    return x;
  } else {
    return static_cast<C>((C{0} < x) - (x < C{0}));
  }
}

// Rounding: floating values as the C library rounds them (round: half to even, as torch.round), integers
// unchanged.
template <typename C>
C floorOf(C x) {
  if constexpr (kFloatCompute<C>) {
    return std::floor(x);
  } else {
    return x;
  }
}
template <typename C>
C ceilOf(C x) {
  if constexpr (kFloatCompute<C>) {
    return std::ceil(x);
  } else {
    return x;
  }
}
template <typename C>
C roundOf(C x) {
  if constexpr (kFloatCompute<C>) {
    return std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
  } else {
    return x;
  }
}
template <typename C>
C truncOf(C x) {
  if constexpr (kFloatCompute<C>) {
    return std::trunc(x);
  } else {
    return x;
  }
}

// The clamp bounds of one call in the compute type (given as double scalars; validate() ensures that an
// integer dtype's bounds are whole numbers within its range).
template <typename C>
struct ClampBounds {
  bool has_min = false, has_max = false;
  C min{}, max{};
  bool nan = false;  // a NaN bound: every result is NaN (floating only)
};

template <typename C>
ClampBounds<C> clampBounds(bool has_min, double min, bool has_max, double max) {
  ClampBounds<C> b;
  b.has_min = has_min;
  b.has_max = has_max;
  if constexpr (kFloatCompute<C>) b.nan = (has_min && std::isnan(min)) || (has_max && std::isnan(max));
  if (has_min) b.min = static_cast<C>(min);
  if (has_max) b.max = static_cast<C>(max);
  return b;
}

// PyTorch's clamp: min(max(x, min), max) — with min > max every value becomes max; NaN x stays NaN, a NaN
// bound gives NaN.
template <typename C>
C clamp(C x, const ClampBounds<C>& b) {
  if constexpr (kFloatCompute<C>) {
    if (b.nan) return std::numeric_limits<C>::quiet_NaN();
    if (std::isnan(x)) return x;
  }
  C r = x;
  if (b.has_min && r < b.min) r = b.min;
  if (b.has_max && r > b.max) r = b.max;
  return r;
}

// Bitwise not: ~x for the integers, !x for bool (PyTorch's bitwise_not of a bool tensor).
template <typename C>
C bitwiseNot(C x) {
  if constexpr (std::is_same_v<C, bool>) {
    return !x;
  } else {
    return static_cast<C>(~x);
  }
}

// Logical truth of a value (nonzero; NaN is true).
template <typename C>
bool truth(C x) {
  return x != C{0};
}

// ---- integer and bool arithmetic (the compute type is the stored type) ----
// Integers wrap modulo 2^bits as PyTorch's two's-complement kernels do; the arithmetic goes through the
// unsigned type, where overflow is defined. On bool, add is or and mul is and (PyTorch's); sub and neg
// of bool are refused by validate(), as PyTorch refuses them.

template <typename C>
using Wide = std::conditional_t<std::is_same_v<C, bool>, bool, std::make_unsigned_t<C>>;

template <typename C>
C wrapAdd(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a || b;
  } else {
    return static_cast<C>(static_cast<Wide<C>>(static_cast<Wide<C>>(a) + static_cast<Wide<C>>(b)));
  }
}

template <typename C>
C wrapSub(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a != b;  // not reached (refused); bool arithmetic mod 2
  } else {
    return static_cast<C>(static_cast<Wide<C>>(static_cast<Wide<C>>(a) - static_cast<Wide<C>>(b)));
  }
}

template <typename C>
C wrapMul(C a, C b) {
  if constexpr (std::is_same_v<C, bool>) {
    return a && b;
  } else {
    // Promoted operands of the narrow types could overflow int; multiply in the widest unsigned type.
    return static_cast<C>(static_cast<std::uint64_t>(static_cast<Wide<C>>(a)) *
                          static_cast<std::uint64_t>(static_cast<Wide<C>>(b)));
  }
}

template <typename C>
C wrapNeg(C a) {
  if constexpr (std::is_same_v<C, bool>) {
    return a;  // not reached (refused); -x mod 2
  } else {
    return static_cast<C>(static_cast<Wide<C>>(Wide<C>{0} - static_cast<Wide<C>>(a)));
  }
}

// |x|: the most negative value stays itself (it wraps, as PyTorch's); unsigned and bool unchanged.
template <typename C>
C absOf(C a) {
  if constexpr (std::is_signed_v<C>) {
    return a < 0 ? wrapNeg(a) : a;
  } else {
    return a;
  }
}

// a + alpha * b on integers (alpha converted to the type; validate() checks it is a whole number in
// range); on bool a || (alpha && b).
template <typename C>
C addScaled(C a, C b, C alpha) {
  return wrapAdd(a, wrapMul(alpha, b));
}

}  // namespace mlu::math
