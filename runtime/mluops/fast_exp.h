// fast_exp.h — the device's vectorizable float32 e^x, shared by the kernels that need the same bits in
// every form: the Cephes polynomial after a round-to-nearest range reduction (a few ulps), its argument
// clamped to [-87, 88] so that 2^n stays a normal float. The scalar, 8-lane AVX2 and 16-lane AVX-512 forms
// run the same float32 operations in the same order (max and min as "a > b ? a : b" and "a < b ? a : b",
// fma, the conversion of a whole number), so they give the same bits. Callers deal with arguments below
// -87 (a true value under 1.7e-38) and with NaN, which comes out as e^-87.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace mlu {

// 2^k for k in [-126, 127], built from its bits.
inline float pow2(int k) { return std::bit_cast<float>(static_cast<std::uint32_t>(k + 127) << 23); }

constexpr float kExpQ[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                            4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline float clampedExp(float a) {
  a = a > -87.0f ? a : -87.0f;  // a NaN argument gives -87 here (its NaN comes back through the caller)
  a = a < 88.0f ? a : 88.0f;
  const float n = std::fma(a, 1.44269504088896341f, 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = std::fma(-n, -2.12194440e-4f, std::fma(-n, 0.693359375f, a));
  float q = kExpQ[0];
  for (int i = 1; i < 6; ++i) q = std::fma(q, r, kExpQ[i]);
  const float e = std::fma(q, r * r, r) + 1.0f;
  return e * pow2(static_cast<int>(n));
}

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 clampedExp8(__m256 a) {
  a = _mm256_max_ps(a, _mm256_set1_ps(-87.0f));  // MAXPS: a > b ? a : b
  a = _mm256_min_ps(a, _mm256_set1_ps(88.0f));   // MINPS: a < b ? a : b
  const __m256 n =
      _mm256_sub_ps(_mm256_fmadd_ps(a, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(12582912.0f)),
                    _mm256_set1_ps(12582912.0f));
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), a));
  __m256 q = _mm256_set1_ps(kExpQ[0]);
  for (int i = 1; i < 6; ++i) q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpQ[i]));
  const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(bits));
}

// GCC 12's avx512fintrin.h passes _mm512_undefined_ps() as the unused source of the masked forms behind
// _mm512_max_ps and friends, which -Wmaybe-uninitialized then reports; the value is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
[[gnu::target("avx512f")]] inline __m512 clampedExp16(__m512 a) {
  a = _mm512_max_ps(a, _mm512_set1_ps(-87.0f));
  a = _mm512_min_ps(a, _mm512_set1_ps(88.0f));
  const __m512 n =
      _mm512_sub_ps(_mm512_fmadd_ps(a, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f)),
                    _mm512_set1_ps(12582912.0f));
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), a));
  __m512 q = _mm512_set1_ps(kExpQ[0]);
  for (int i = 1; i < 6; ++i) q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpQ[i]));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(e, _mm512_castsi512_ps(bits));
}
#pragma GCC diagnostic pop
#endif

}  // namespace mlu
