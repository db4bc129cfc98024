// dtype.h — element types of the simulated MLU in C++: sizes, names, and the software float16/bfloat16
// conversions (round to nearest even) that the kernel library, the CPU reference and the tools share.
#pragma once

#include <mlu/mluops.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace mlu {

constexpr std::size_t dtypeSize(mluopDataType_t t) {
  switch (t) {
    case MLUOP_DTYPE_FLOAT:
      return 4;
    case MLUOP_DTYPE_HALF:
      return 2;
    case MLUOP_DTYPE_BFLOAT16:
      return 2;
    case MLUOP_DTYPE_DOUBLE:
      return 8;
    case MLUOP_DTYPE_INT8:
      return 1;
    case MLUOP_DTYPE_INT16:
      return 2;
    case MLUOP_DTYPE_INT32:
      return 4;
    case MLUOP_DTYPE_INT64:
      return 8;
    case MLUOP_DTYPE_UINT8:
      return 1;
    case MLUOP_DTYPE_BOOL:
      return 1;
    case MLUOP_DTYPE_INVALID:
      break;
  }
  return 0;
}

constexpr std::string_view dtypeName(mluopDataType_t t) {
  switch (t) {
    case MLUOP_DTYPE_FLOAT:
      return "float32";
    case MLUOP_DTYPE_HALF:
      return "float16";
    case MLUOP_DTYPE_BFLOAT16:
      return "bfloat16";
    case MLUOP_DTYPE_DOUBLE:
      return "float64";
    case MLUOP_DTYPE_INT8:
      return "int8";
    case MLUOP_DTYPE_INT16:
      return "int16";
    case MLUOP_DTYPE_INT32:
      return "int32";
    case MLUOP_DTYPE_INT64:
      return "int64";
    case MLUOP_DTYPE_UINT8:
      return "uint8";
    case MLUOP_DTYPE_BOOL:
      return "bool";
    case MLUOP_DTYPE_INVALID:
      break;
  }
  return "invalid";
}

// The dtype of a canonical name ("float32", "bfloat16", ...); MLUOP_DTYPE_INVALID for any other text.
constexpr mluopDataType_t dtypeOfName(std::string_view name) {
  for (int d = MLUOP_DTYPE_FLOAT; d <= MLUOP_DTYPE_BOOL; ++d) {
    if (dtypeName(static_cast<mluopDataType_t>(d)) == name) return static_cast<mluopDataType_t>(d);
  }
  return MLUOP_DTYPE_INVALID;
}

constexpr bool isFloating(mluopDataType_t t) {
  return t == MLUOP_DTYPE_FLOAT || t == MLUOP_DTYPE_HALF || t == MLUOP_DTYPE_BFLOAT16 ||
         t == MLUOP_DTYPE_DOUBLE;
}
constexpr bool isHalfType(mluopDataType_t t) { return t == MLUOP_DTYPE_HALF || t == MLUOP_DTYPE_BFLOAT16; }

// float32 -> IEEE binary16, round to nearest even; overflow gives inf, NaN stays a (quiet) NaN.
inline std::uint16_t floatToHalf(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u |
                                      (abs > 0x7f800000u ? 0x0200u | ((abs >> 13) & 0x3ffu) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal or zero
    // Scale into the subnormal grid (units of 2^-24) with a float add that rounds to nearest even.
    const float scaled = std::bit_cast<float>(abs) + 0.5f;  // 0.5 = 2^-1: aligns 2^-24 with its last bit
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(scaled) - 0x3f000000u));
  }
  const std::uint32_t mant_odd = (abs >> 13) & 1u;
  const std::uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

// IEEE binary16 -> float32, exact.
inline float halfToFloat(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN.
inline std::uint16_t floatToBfloat16(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

// bfloat16 -> float32, exact.
inline float bfloat16ToFloat(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace mlu
