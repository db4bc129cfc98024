// Device kernels of the fill, copy/cast, permute, broadcasting binary (pow too), unary and their backward
// (gelu, silu, sin, cos, pow_scalar too), random (Philox) ops, sgd ops.
//
// Every kernel walks its operands with one strided loop (StridedLoop): the operands are brought to the
// output's shape (inputs as broadcast views with stride 0), dims of size 1 are dropped and dims that are
// contiguous in every operand merged, and the elements are split across the simulated cores in chunks of
// whole rows of the innermost dim. Rows whose operands are all contiguous take a plain indexed loop the
// compiler vectorizes. Arithmetic is the device's: float32 for every floating dtype (half types are
// rounded once, when stored) and fast range-reduction + polynomial approximations of exp and log (tanh and
// sigmoid are built on exp), accurate to a few float32 ulps but not correctly rounded; gelu, silu and their
// gradients are built on those and the float32 erf; sin, cos and pow are the float32 library functions.
#include "device.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#include "cpu_features.h"
#include "element.h"
#include "elementwise_shapes.h"
#include "fast_exp.h"
#include "math_ops.h"
#include "philox.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>

namespace mlu {
namespace {

using elementwise::broadcastTo;

// Elements per chunk below which a kernel is not split further across cores.
constexpr std::int64_t kGrain = std::int64_t{1} << 15;

template <std::size_t N>
using Offsets = std::array<std::int64_t, N>;

// The iteration space of N operands of one shape (operand 0 the output), after dropping size-1 dims and
// merging dims that are contiguous with their inner neighbour in every operand. Strides in elements.
template <std::size_t N>
struct StridedLoop {
  int ndim = 1;
  std::int64_t numel = 0;
  std::array<std::int64_t, MLUOP_DIM_MAX> sizes{};
  std::array<Offsets<MLUOP_DIM_MAX>, N> strides{};
};

template <std::size_t N>
StridedLoop<N> makeLoop(const std::array<TensorView, N>& views) {
  const TensorView& shape = views[0];
  StridedLoop<N> loop;
  loop.ndim = 0;
  loop.numel = shape.numel();
  for (int d = 0; d < shape.ndim; ++d) {
    if (shape.dim(d) == 1) continue;
    if (loop.ndim > 0) {
      const auto last = static_cast<std::size_t>(loop.ndim - 1);
      bool mergeable = true;
      for (std::size_t k = 0; k < N; ++k) {
        mergeable = mergeable && loop.strides[k][last] == views[k].stride(d) * shape.dim(d);
      }
      if (mergeable) {
        loop.sizes[last] *= shape.dim(d);
        for (std::size_t k = 0; k < N; ++k) loop.strides[k][last] = views[k].stride(d);
        continue;
      }
    }
    const auto at = static_cast<std::size_t>(loop.ndim++);
    loop.sizes[at] = shape.dim(d);
    for (std::size_t k = 0; k < N; ++k) loop.strides[k][at] = views[k].stride(d);
  }
  if (loop.ndim == 0) {  // a 0-d tensor or all dims of size 1: one element
    loop.ndim = 1;
    loop.sizes[0] = 1;
  }
  return loop;
}

// Calls row(first, offsets, steps, count) for each run of elements [begin, end) (row-major linear
// indices) that lies in one row of the innermost dim: `first` is the linear index of the run's first
// element, offsets its element offset in each operand, steps each operand's innermost stride.
template <std::size_t N, typename Row>
void forEachRow(const StridedLoop<N>& loop, std::int64_t begin, std::int64_t end, const Row& row) {
  const int last = loop.ndim - 1;
  const auto ulast = static_cast<std::size_t>(last);
  std::array<std::int64_t, MLUOP_DIM_MAX> index{};
  Offsets<N> offsets{};
  Offsets<N> steps{};
  std::int64_t rest = begin;
  for (int d = last; d >= 0; --d) {
    const auto ud = static_cast<std::size_t>(d);
    index[ud] = rest % loop.sizes[ud];
    rest /= loop.sizes[ud];
    for (std::size_t k = 0; k < N; ++k) offsets[k] += index[ud] * loop.strides[k][ud];
  }
  for (std::size_t k = 0; k < N; ++k) steps[k] = loop.strides[k][ulast];
  while (begin < end) {
    const std::int64_t count = std::min(loop.sizes[ulast] - index[ulast], end - begin);
    row(begin, offsets, steps, count);
    begin += count;
    index[ulast] += count;
    for (std::size_t k = 0; k < N; ++k) offsets[k] += count * steps[k];
    // Carry into the outer dims.
    for (int d = last; d > 0 && index[static_cast<std::size_t>(d)] == loop.sizes[static_cast<std::size_t>(d)];
         --d) {
      const auto ud = static_cast<std::size_t>(d);
      for (std::size_t k = 0; k < N; ++k) {
        offsets[k] += loop.strides[k][ud - 1] - index[ud] * loop.strides[k][ud];
      }
      index[ud] = 0;
      ++index[ud - 1];
    }
  }
}

// Enqueues a kernel running row over every element of views (views[0] gives the shape), split across
// the device's cores. row must own what it uses: it runs later, on the queue's worker.
template <std::size_t N, typename Row>
Status launchRows(const Launch& launch, const std::array<TensorView, N>& views, Row row) {
  const StridedLoop<N> loop = makeLoop(views);
  const int cores = launch.cores();
  return launch.enqueue([loop, row, cores] {
    parallelFor(loop.numel, kGrain, cores,
                [&](std::int64_t begin, std::int64_t end) { forEachRow(loop, begin, end, row); });
  });
}

Status unsupportedDtype(const TensorView& t) {
  return {MLUOP_STATUS_INTERNAL_ERROR, fmt::format("no kernel for dtype {}", dtypeName(t.dtype))};
}

// Elements per tile of the contiguous elementwise loops.
constexpr std::int64_t kTile = 16;

// out = fn(in...) elementwise in float, every operand of storage type T; inputs broadcast to out.
template <typename T, std::size_t N, typename Fn, std::size_t... I>
Status launchMap(const Launch& launch, const std::array<TensorView, N>& views, Fn fn,
                 std::index_sequence<I...>) {
  T* const out_base = typed<T>(views[0]);
  const std::array<const T*, N - 1> in_base{typed<const T>(views[I + 1])...};
  return launchRows(
      launch, views, [=](std::int64_t, const Offsets<N>& off, const Offsets<N>& step, std::int64_t n) {
        T* const out = out_base + off[0];
        if (step[0] == 1 && ((step[I + 1] == 1) && ...)) {
          [&](const auto*... in) {
            // Tiles of kTile elements computed into a local array, as a kernel stages through
            // on-chip memory: a fixed trip count and no aliasing with the local array, so the
            // compiler vectorizes even at -O2, and in-place calls stay safe (a tile is read whole
            // before it is written). The inputs are read in place: staging them too through
            // narrower stores than the vector loads that read them back stalled every tile.
            std::int64_t i = 0;
            for (; i + kTile <= n; i += kTile) {
              float result[kTile];
              for (std::int64_t j = 0; j < kTile; ++j) result[j] = fn(load<float>(in[i + j])...);
              for (std::int64_t j = 0; j < kTile; ++j) out[i + j] = store<T>(result[j]);
            }
            for (; i < n; ++i) out[i] = store<T>(fn(load<float>(in[i])...));
          }((in_base[I] + off[I + 1])...);
        } else {
          for (std::int64_t i = 0; i < n; ++i) {
            out[i * step[0]] = store<T>(fn(load<float>(in_base[I][off[I + 1] + i * step[I + 1]])...));
          }
        }
      });
}

template <std::size_t NIn, typename Fn>
Status mapFloating(const Launch& launch, const TensorView& out, const std::array<TensorView, NIn>& inputs,
                   Fn fn) {
  std::array<TensorView, NIn + 1> views;
  views[0] = out;
  for (std::size_t k = 0; k < NIn; ++k) views[k + 1] = broadcastTo(inputs[k], out);
  Status status = unsupportedDtype(out);
  dispatchFloating(out.dtype, [&]<typename T>() {
    status = launchMap<T>(launch, views, fn, std::make_index_sequence<NIn>{});
  });
  return status;
}

// ---- the integer-capable ops (runtime/ops/math_ops.h) ----

// The compute type of a storage type: float for the 16-bit floats, the stored type itself otherwise
// (float32, the integers, bool).
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
Compute<T> toCompute(T v) {
  if constexpr (std::is_same_v<Compute<T>, T>) {
    return v;
  } else {
    return load<float>(v);
  }
}

template <typename T, std::size_t N, typename Fn, std::size_t... I>
Status launchTyped(const Launch& launch, const std::array<TensorView, N>& views, Fn fn,
                   std::index_sequence<I...>) {
  T* const out_base = typed<T>(views[0]);
  const std::array<const T*, N - 1> in_base{typed<const T>(views[I + 1])...};
  return launchRows(
      launch, views, [=](std::int64_t, const Offsets<N>& off, const Offsets<N>& step, std::int64_t n) {
        T* const out = out_base + off[0];
        for (std::int64_t i = 0; i < n; ++i) {
          const auto r = static_cast<Compute<T>>(fn(toCompute(in_base[I][off[I + 1] + i * step[I + 1]])...));
          if constexpr (std::is_same_v<Compute<T>, T>) {
            out[i * step[0]] = r;
          } else {
            out[i * step[0]] = store<T>(r);
          }
        }
      });
}

// out = fn(in...) elementwise in each dtype's compute type, every operand of out's dtype (one A accepts);
// inputs broadcast to out.
template <math::Accepts A, std::size_t NIn, typename Fn>
Status mapTyped(const Launch& launch, const TensorView& out, const std::array<TensorView, NIn>& inputs,
                Fn fn) {
  std::array<TensorView, NIn + 1> views;
  views[0] = out;
  for (std::size_t k = 0; k < NIn; ++k) views[k + 1] = broadcastTo(inputs[k], out);
  Status status = unsupportedDtype(out);
  dispatchAll(out.dtype, [&]<typename T>() {
    if constexpr (math::accepts<A, T>()) {
      status = launchTyped<T>(launch, views, fn, std::make_index_sequence<NIn>{});
    }
  });
  return status;
}

// The arithmetic ops on every dtype: the floating ones through the vectorized float map (fn), integers
// and bool through the typed map in their own type (int_fn, which wraps; math_ops.h).
template <std::size_t NIn, typename Fn, typename IntFn>
Status mapArithmetic(const Launch& launch, const TensorView& out, const std::array<TensorView, NIn>& inputs,
                     Fn fn, IntFn int_fn) {
  if (isFloating(out.dtype)) return mapFloating<NIn>(launch, out, inputs, fn);
  return mapTyped<math::Accepts::kIntegerOrBool, NIn>(launch, out, inputs, int_fn);
}

// c = a / b for integer or bool a and b into a floating c: both converted to float32 and divided there,
// as PyTorch promotes int / int to the default float dtype before dividing (x / 0 is ±inf, 0 / 0 NaN).
Status divideIntegers(const Launch& launch, const TensorView& a, const TensorView& b, const TensorView& c) {
  const std::array<TensorView, 3> views{c, broadcastTo(a, c), broadcastTo(b, c)};
  Status status = unsupportedDtype(a);
  dispatchFloating(c.dtype, [&]<typename D>() {
    dispatchAll(a.dtype, [&]<typename S>() {
      if constexpr (std::is_integral_v<S>) {
        D* const out_base = typed<D>(c);
        const S* const a_base = typed<const S>(views[1]);
        const S* const b_base = typed<const S>(views[2]);
        status = launchRows(launch, views,
                            [=](std::int64_t, const Offsets<3>& off, const Offsets<3>& step, std::int64_t n) {
                              for (std::int64_t i = 0; i < n; ++i) {
                                const auto x = static_cast<float>(a_base[off[1] + i * step[1]]);
                                const auto y = static_cast<float>(b_base[off[2] + i * step[2]]);
                                out_base[off[0] + i * step[0]] = store<D>(x / y);
                              }
                            });
      }
    });
  });
  return status;
}

// ---- fast float32 math (device numerics: a few ulps, not correctly rounded) ----

// e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n*ln2_hi is exact), e^r by a degree-6
// polynomial (Cephes expf coefficients), then scaled by 2^n in two steps so subnormal results work.
inline float fastExp(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.7228317f) return std::numeric_limits<float>::infinity();
  if (x < -103.972694f) return 0.0f;  // below half the smallest subnormal
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int k = static_cast<int>(n);
  const int k1 = k / 2;
  return y * pow2(k1) * pow2(k - k1);
}

// ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln(m) = f - f^2/2 + f^3 P(f) for f = m - 1 (Cephes logf
// coefficients), plus e ln2 (split in two).
inline float fastLog(float x) {
  if (std::isnan(x)) return x;
  if (x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (std::isinf(x)) return x;
  int e = 0;
  if (x < std::numeric_limits<float>::min()) {  // subnormal: normalize first
    x *= 0x1p23f;
    e = -23;
  }
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  e += static_cast<int>(bits >> 23) - 126;
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  if (m < 0.707106781186547524f) {
    e -= 1;
    m = m + m - 1.0f;
  } else {
    m = m - 1.0f;
  }
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  const auto fe = static_cast<float>(e);
  float y = p * m * z;
  y += fe * -2.12194440e-4f;
  y += -0.5f * z;
  return (m + y) + fe * 0.693359375f;
}

// tanh: an odd polynomial (Cephes tanhf) for |x| < 0.625, else 1 - 2 / (e^{2|x|} + 1) with x's sign.
inline float fastTanh(float x) {
  const float ax = std::fabs(x);
  if (ax < 0.625f) {
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    return p * z * x + x;
  }
  const float t = 1.0f - 2.0f / (fastExp(2.0f * ax) + 1.0f);
  return std::copysign(t, x);
}

inline float fastSigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

// GELU's constants: sqrt(2/pi), the cubic coefficient of its tanh form, 1/sqrt(2) and 1/sqrt(2 pi).
constexpr float kGeluTanhScale = 0.797884560802865355f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.707106781186547524f;
constexpr float kInvSqrt2Pi = 0.398942280401432678f;

// ---- the normal CDF Phi(x) = erfc(-x / sqrt 2) / 2 and density, vectorizable ----
//
// erfc(z) for z >= 0 as t exp(-z^2 + P(t)), t = 1 / (1 + z/2), with P the degree-9 Chebyshev fit of
// Numerical Recipes' erfcc (fractional error below 1.2e-7 in exact arithmetic; 1.6e-6 in float32 here),
// which keeps the far tail relative. exp is the Cephes polynomial with its argument clamped to [-87, 88], so
// that 2^n stays a normal float (a smaller true value underflows to 0 in the final product anyway). Then
// Phi(x) = h for x < 0 and 1 - h for x >= 0 with h = erfc(|x| / sqrt 2) / 2, blended without a branch.
// The scalar forms and the 8-lane AVX2 forms run the same float32 operations in the same order (max and
// min as "a > b ? a : b" and "a < b ? a : b", fma, true division, the conversion of a whole number), so
// every layout and both builds give the same bits.
constexpr float kErfcP[10] = {0.17087277f,  -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                              -0.18628806f, 0.09678418f,  0.37409196f, 1.00002368f,  -1.26551223f};

inline float normalCdf(float x) {
  const float z = std::fabs(x) * kInvSqrt2;
  const float t = 1.0f / std::fma(0.5f, z, 1.0f);
  float p = kErfcP[0];
  for (int i = 1; i < 10; ++i) p = std::fma(p, t, kErfcP[i]);
  const float h = 0.5f * (t * clampedExp(std::fma(-z, z, p)));
  const float sel = x >= 0.0f ? 1.0f : 0.0f;
  return std::fma(sel, 1.0f - 2.0f * h, h);
}

// phi(x) = e^(-x^2/2) / sqrt(2 pi); 0 where x^2/2 > 87 (phi < 1e-38 there: x phi(x) is 0 for gelu's
// gradient, and at infinite x the gradient is inf * 0 = NaN, as PyTorch's formula gives).
inline float normalPdf(float x) {
  const float a = (-0.5f * x) * x;
  const float e = kInvSqrt2Pi * clampedExp(a);
  return a >= -87.0f ? e : 0.0f;
}

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 normalCdf8(__m256 x) {
  const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kInvSqrt2));
  const __m256 t =
      _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(kErfcP[0]);
  for (int i = 1; i < 10; ++i) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfcP[i]));
  const __m256 h =
      _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_mul_ps(t, clampedExp8(_mm256_fnmadd_ps(z, z, p))));
  const __m256 sel = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ), _mm256_set1_ps(1.0f));
  return _mm256_fmadd_ps(sel, _mm256_fnmadd_ps(_mm256_set1_ps(2.0f), h, _mm256_set1_ps(1.0f)), h);
}

inline __m256 normalPdf8(__m256 x) {
  const __m256 a = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), x), x);
  const __m256 e = _mm256_mul_ps(_mm256_set1_ps(kInvSqrt2Pi), clampedExp8(a));
  return _mm256_and_ps(_mm256_cmp_ps(a, _mm256_set1_ps(-87.0f), _CMP_GE_OQ), e);
}

// The same operations 16 lanes at a time, for CPUs with AVX-512F (chosen at run time: the build targets
// AVX2): the same bits as the 8-lane and scalar forms, in half the instructions.
#define MLU_AVX512 [[gnu::target("avx512f")]]
MLU_AVX512 inline __m512 normalCdf16(__m512 x) {
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(kInvSqrt2));
  const __m512 t =
      _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.5f), z, _mm512_set1_ps(1.0f)));
  __m512 p = _mm512_set1_ps(kErfcP[0]);
  for (int i = 1; i < 10; ++i) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kErfcP[i]));
  const __m512 h =
      _mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(t, clampedExp16(_mm512_fnmadd_ps(z, z, p))));
  const __m512 sel =
      _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
  return _mm512_fmadd_ps(sel, _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), h, _mm512_set1_ps(1.0f)), h);
}

MLU_AVX512 inline __m512 normalPdf16(__m512 x) {
  const __m512 a = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), x), x);
  const __m512 e = _mm512_mul_ps(_mm512_set1_ps(kInvSqrt2Pi), clampedExp16(a));
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(-87.0f), _CMP_GE_OQ), e);
}

// gelu and its gradient over the first n - n % 16 elements; returns how many it did.
MLU_AVX512 std::int64_t geluRow16(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(v, normalCdf16(v)));
  }
  return i;
}

MLU_AVX512 std::int64_t geluBackwardRow16(const float* g, const float* x, float* gi, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 d = _mm512_fmadd_ps(v, normalPdf16(v), normalCdf16(v));
    _mm512_storeu_ps(gi + i, _mm512_mul_ps(_mm512_loadu_ps(g + i), d));
  }
  return i;
}
#undef MLU_AVX512

#endif

// x Phi(x) in float32.
inline float geluErf(float x) { return x * normalCdf(x); }

// PyTorch's approximate='tanh': x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline float geluTanh(float x) {
  const float inner = kGeluTanhScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + fastTanh(inner));
}

// d/dx x Phi(x) = Phi(x) + x phi(x).
inline float geluErfGrad(float x) { return std::fma(x, normalPdf(x), normalCdf(x)); }

// d/dx of the tanh form: (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2).
inline float geluTanhGrad(float x) {
  const float x2 = x * x;
  const float t = fastTanh(kGeluTanhScale * (x + kGeluCubic * x2 * x));
  const float sech2 = 1.0f - t * t;
  // Where tanh saturates the second term is 0 (also for huge or infinite x, where x^2 overflows).
  if (sech2 == 0.0f) return 0.5f * (1.0f + t);
  return 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluTanhScale * (1.0f + 3.0f * kGeluCubic * x2);
}

// d/dx x sigmoid(x) = s (1 + x (1 - s)).
inline float siluGrad(float x) {
  const float s = fastSigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

// PyTorch's hardsigmoid, min(max(x + 3, 0), 6) / 6, in float32; NaN stays NaN.
inline float hardsigmoid(float x) {
  return std::isnan(x) ? x : std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
}

// ---- casts (copy, fill) ----

template <typename T>
constexpr bool kIsHalfType = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// A float converted to an integer type: truncated toward zero, saturating at the type's range, NaN -> 0.
template <typename D>
D saturatingTruncate(double v) {
  using L = std::numeric_limits<D>;
  if (std::isnan(v)) return D{0};
  const double top = std::ldexp(1.0, L::digits);  // max + 1
  if (v >= top) return L::max();
  if (v <= static_cast<double>(L::min()) - 1.0) return L::min();
  return static_cast<D>(v);
}

// One element of storage type S converted to storage type D (PyTorch's casts: integers wrap, floats to
// integers truncate toward zero (saturating here, except uint8, which wraps through int64 as PyTorch's),
// anything to bool is != 0, floats round to nearest even; integers go to the 16-bit floats through float32).
template <typename D, typename S>
D convertElement(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (kIsHalfType<S>) {
      return load<float>(v) != 0.0f;
    } else {
      return v != S{0};
    }
  } else if constexpr (std::is_integral_v<S>) {
    if constexpr (std::is_integral_v<D> || std::is_same_v<D, double>) {
      return static_cast<D>(v);
    } else {
      return store<D>(static_cast<float>(v));
    }
  } else if constexpr (std::is_same_v<D, std::uint8_t>) {
    return floatToUint8(load<double>(v));
  } else if constexpr (std::is_integral_v<D>) {
    return saturatingTruncate<D>(load<double>(v));
  } else if constexpr (std::is_same_v<D, double>) {
    return load<double>(v);
  } else {
    return store<D>(load<float>(v));
  }
}

Status copyKernel(const Launch& launch, const TensorView& src, const TensorView& dst) {
  const std::array<TensorView, 2> views{dst, src};
  Status status = unsupportedDtype(dst);
  dispatchAll(dst.dtype, [&]<typename D>() {
    dispatchAll(src.dtype, [&]<typename S>() {
      D* const out_base = typed<D>(dst);
      const S* const in_base = typed<const S>(src);
      status = launchRows(launch, views,
                          [=](std::int64_t, const Offsets<2>& off, const Offsets<2>& step, std::int64_t n) {
                            D* const out = out_base + off[0];
                            const S* const in = in_base + off[1];
                            if (step[0] == 1 && step[1] == 1) {
                              if constexpr (std::is_same_v<D, S>) {
                                std::memmove(out, in, static_cast<std::size_t>(n) * sizeof(D));
                              } else {
                                for (std::int64_t i = 0; i < n; ++i) out[i] = convertElement<D>(in[i]);
                              }
                            } else {
                              for (std::int64_t i = 0; i < n; ++i) {
                                out[i * step[0]] = convertElement<D>(in[i * step[1]]);
                              }
                            }
                          });
    });
  });
  return status;
}

// ---- random ----

// The Philox words of consecutive elements of one row, computing each block once.
class BlockCache {
 public:
  explicit BlockCache(std::uint64_t seed) : seed_(seed) {}
  const philox::Counter& get(std::uint64_t block) {
    if (!valid_ || block != block_) {
      words_ = philox::block(seed_, block);
      block_ = block;
      valid_ = true;
    }
    return words_;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t block_ = 0;
  bool valid_ = false;
  philox::Counter words_{};
};

// The standard normal of element `index` of a normal draw (Box-Muller on a pair of Philox words; `normal`
// and `normal_tensor` share it, so that one stream gives both).
inline float standardNormal(BlockCache& blocks, std::uint64_t offset, std::uint64_t index) {
  const philox::Counter& words = blocks.get(philox::normalBlock(offset, index));
  const auto w = static_cast<std::size_t>(philox::normalWord(index));
  const float u1 = philox::boxMullerU1Float(words[w]);
  const float u2 = philox::uniformOfFloat(words[w + 1]);
  return std::sqrt(-2.0f * fastLog(u1)) * std::cos(6.28318530717958648f * u2);
}

}  // namespace

Status device(const Launch& launch, const fill_args& a) {
  const TensorView y = a.y;
  Status status = unsupportedDtype(y);
  dispatchAll(y.dtype, [&]<typename T>() {
    const T value = convertElement<T>(a.value);
    T* const base = typed<T>(y);
    status = launchRows(launch, std::array<TensorView, 1>{y},
                        [=](std::int64_t, const Offsets<1>& off, const Offsets<1>& step, std::int64_t n) {
                          T* const out = base + off[0];
                          if (step[0] == 1) {
                            std::fill(out, out + n, value);
                          } else {
                            for (std::int64_t i = 0; i < n; ++i) out[i * step[0]] = value;
                          }
                        });
  });
  return status;
}

Status device(const Launch& launch, const copy_args& a) { return copyKernel(launch, a.x, a.y); }

Status device(const Launch& launch, const permute_args& a) {
  return copyKernel(launch, elementwise::permutedView(a.x, elementwise::normalizedDims(a.dims, a.x.ndim)),
                    a.y);
}

Status device(const Launch& launch, const add_args& a) {
  const float alpha = a.alpha;
  const double whole_alpha = a.alpha;  // a whole number for the integer dtypes (validate())
  return mapArithmetic<2>(
      launch, a.c, {a.a, a.b}, [alpha](float x, float y) { return x + alpha * y; },
      [whole_alpha](auto x, auto y) { return math::addScaled(x, y, static_cast<decltype(x)>(whole_alpha)); });
}

Status device(const Launch& launch, const sub_args& a) {
  return mapArithmetic<2>(
      launch, a.c, {a.a, a.b}, [](float x, float y) { return x - y; },
      [](auto x, auto y) { return math::wrapSub(x, y); });
}

Status device(const Launch& launch, const mul_args& a) {
  return mapArithmetic<2>(
      launch, a.c, {a.a, a.b}, [](float x, float y) { return x * y; },
      [](auto x, auto y) { return math::wrapMul(x, y); });
}

Status device(const Launch& launch, const div_args& a) {
  if (!isFloating(a.a.dtype)) return divideIntegers(launch, a.a, a.b, a.c);
  return mapFloating<2>(launch, a.c, {a.a, a.b}, [](float x, float y) { return x / y; });
}

Status device(const Launch& launch, const maximum_args& a) {
  return mapArithmetic<2>(
      launch, a.c, {a.a, a.b}, [](float x, float y) { return x > y || std::isnan(x) ? x : y; },
      [](auto x, auto y) { return x > y ? x : y; });
}

Status device(const Launch& launch, const minimum_args& a) {
  return mapArithmetic<2>(
      launch, a.c, {a.a, a.b}, [](float x, float y) { return x < y || std::isnan(x) ? x : y; },
      [](auto x, auto y) { return x < y ? x : y; });
}

Status device(const Launch& launch, const add_scalar_args& a) {
  const auto value = static_cast<float>(a.value);
  const double whole = a.value;  // a whole number in range for the integer dtypes (validate())
  return mapArithmetic<1>(
      launch, a.y, {a.x}, [value](float x) { return x + value; },
      [whole](auto x) { return math::wrapAdd(x, static_cast<decltype(x)>(whole)); });
}

Status device(const Launch& launch, const mul_scalar_args& a) {
  const auto value = static_cast<float>(a.value);
  const double whole = a.value;
  return mapArithmetic<1>(
      launch, a.y, {a.x}, [value](float x) { return x * value; },
      [whole](auto x) { return math::wrapMul(x, static_cast<decltype(x)>(whole)); });
}

Status device(const Launch& launch, const neg_args& a) {
  return mapArithmetic<1>(
      launch, a.y, {a.x}, [](float x) { return -x; }, [](auto x) { return math::wrapNeg(x); });
}

Status device(const Launch& launch, const abs_args& a) {
  return mapArithmetic<1>(
      launch, a.y, {a.x}, [](float x) { return std::fabs(x); }, [](auto x) { return math::absOf(x); });
}

Status device(const Launch& launch, const exp_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return fastExp(x); });
}

Status device(const Launch& launch, const log_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return fastLog(x); });
}

Status device(const Launch& launch, const sqrt_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return std::sqrt(x); });
}

Status device(const Launch& launch, const rsqrt_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return 1.0f / std::sqrt(x); });
}

Status device(const Launch& launch, const tanh_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return fastTanh(x); });
}

Status device(const Launch& launch, const sigmoid_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return fastSigmoid(x); });
}

Status device(const Launch& launch, const relu_args& a) {
  // NaN propagates, as PyTorch's relu.
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return x > 0.0f || std::isnan(x) ? x : 0.0f; });
}

Status device(const Launch& launch, const relu_backward_args& a) {
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.x},
                        [](float g, float x) { return x > 0.0f ? g : 0.0f; });
}

Status device(const Launch& launch, const sigmoid_backward_args& a) {
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.y},
                        [](float g, float y) { return g * ((1.0f - y) * y); });
}

Status device(const Launch& launch, const tanh_backward_args& a) {
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.y},
                        [](float g, float y) { return g * (1.0f - y * y); });
}

// A float32 output and inputs whose elements are contiguous in one order (same strides, no broadcast): the
// row-at-a-time 8-lane forms apply.
bool denseFloat32(const TensorView& out, std::initializer_list<const TensorView*> inputs) {
  if (out.dtype != MLUOP_DTYPE_FLOAT || !out.contiguous()) return false;
  for (const TensorView* in : inputs) {
    if (in->dtype != MLUOP_DTYPE_FLOAT || !in->contiguous() || in->numel() != out.numel() ||
        in->ndim != out.ndim)
      return false;
  }
  return true;
}

// gelu (exact form) of n contiguous float32 elements, 8 at a time where AVX2 is compiled in.
void geluRow(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  if (cpuHasAvx512f()) i = geluRow16(x, y, n);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, normalCdf8(v)));
  }
#endif
  for (; i < n; ++i) y[i] = geluErf(x[i]);
}

void geluBackwardRow(const float* g, const float* x, float* gi, std::int64_t n) {
  std::int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  if (cpuHasAvx512f()) i = geluBackwardRow16(g, x, gi, n);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 d = _mm256_fmadd_ps(v, normalPdf8(v), normalCdf8(v));
    _mm256_storeu_ps(gi + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), d));
  }
#endif
  for (; i < n; ++i) gi[i] = g[i] * geluErfGrad(x[i]);
}

// Runs row(begin, end) over [0, n) elements split across the device's cores.
template <typename Row>
Status launchDense(const Launch& launch, std::int64_t n, Row row) {
  const int cores = launch.cores();
  return launch.enqueue([n, row, cores] { parallelFor(n, kGrain, cores, row); });
}

Status device(const Launch& launch, const gelu_args& a) {
  if (a.approximate_tanh) return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return geluTanh(x); });
  if (denseFloat32(a.y, {&a.x})) {
    const float* x = typed<const float>(a.x);
    float* y = typed<float>(a.y);
    return launchDense(launch, a.y.numel(),
                       [=](std::int64_t b, std::int64_t e) { geluRow(x + b, y + b, e - b); });
  }
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return geluErf(x); });
}

Status device(const Launch& launch, const gelu_backward_args& a) {
  if (a.approximate_tanh) {
    return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.x},
                          [](float g, float x) { return g * geluTanhGrad(x); });
  }
  if (denseFloat32(a.grad_input, {&a.grad_output, &a.x})) {
    const float* g = typed<const float>(a.grad_output);
    const float* x = typed<const float>(a.x);
    float* gi = typed<float>(a.grad_input);
    return launchDense(launch, a.grad_input.numel(),
                       [=](std::int64_t b, std::int64_t e) { geluBackwardRow(g + b, x + b, gi + b, e - b); });
  }
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.x},
                        [](float g, float x) { return g * geluErfGrad(x); });
}

Status device(const Launch& launch, const hardsigmoid_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return hardsigmoid(x); });
}

// 1/6 where -3 < x < 3, else 0 (NaN: 0), as PyTorch's.
Status device(const Launch& launch, const hardsigmoid_backward_args& a) {
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.x},
                        [](float g, float x) { return x > -3.0f && x < 3.0f ? g * (1.0f / 6.0f) : 0.0f; });
}

// x min(max(x + 3, 0), 6) / 6, multiplied before the division as PyTorch's CPU kernel does.
Status device(const Launch& launch, const hardswish_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) {
    return std::isnan(x) ? x : x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
  });
}

// 0 below -3, x/3 + 1/2 up to 3, 1 above (NaN: the gradient passes), as PyTorch's.
Status device(const Launch& launch, const hardswish_backward_args& a) {
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.x}, [](float g, float x) {
    if (x < -3.0f) return 0.0f;
    return x <= 3.0f ? g * (x / 3.0f + 0.5f) : g;
  });
}

Status device(const Launch& launch, const silu_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return x * fastSigmoid(x); });
}

Status device(const Launch& launch, const silu_backward_args& a) {
  return mapFloating<2>(launch, a.grad_input, {a.grad_output, a.x},
                        [](float g, float x) { return g * siluGrad(x); });
}

Status device(const Launch& launch, const sin_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return std::sin(x); });
}

Status device(const Launch& launch, const cos_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return std::cos(x); });
}

// float32 powf: 0 ** 0 = 1, a negative base with a non-integer exponent gives NaN, 1 ** NaN = 1.
Status device(const Launch& launch, const pow_args& a) {
  return mapFloating<2>(launch, a.c, {a.a, a.b}, [](float x, float y) { return std::pow(x, y); });
}

// The exponent is rounded to float32 (the compute type); squaring takes the exact product.
Status device(const Launch& launch, const pow_scalar_args& a) {
  const auto exponent = static_cast<float>(a.exponent);
  if (exponent == 2.0f) return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return x * x; });
  return mapFloating<1>(launch, a.y, {a.x}, [exponent](float x) { return std::pow(x, exponent); });
}

Status device(const Launch& launch, const bitwise_and_args& a) {
  return mapTyped<math::Accepts::kIntegerOrBool, 2>(launch, a.c, {a.a, a.b},
                                                    [](auto x, auto y) { return x & y; });
}

Status device(const Launch& launch, const bitwise_or_args& a) {
  return mapTyped<math::Accepts::kIntegerOrBool, 2>(launch, a.c, {a.a, a.b},
                                                    [](auto x, auto y) { return x | y; });
}

Status device(const Launch& launch, const bitwise_xor_args& a) {
  return mapTyped<math::Accepts::kIntegerOrBool, 2>(launch, a.c, {a.a, a.b},
                                                    [](auto x, auto y) { return x ^ y; });
}

Status device(const Launch& launch, const bitwise_not_args& a) {
  return mapTyped<math::Accepts::kIntegerOrBool, 1>(launch, a.y, {a.x},
                                                    [](auto x) { return math::bitwiseNot(x); });
}

Status device(const Launch& launch, const remainder_args& a) {
  return mapTyped<math::Accepts::kFloatingOrInteger, 2>(launch, a.c, {a.a, a.b},
                                                        [](auto x, auto y) { return math::remainder(x, y); });
}

Status device(const Launch& launch, const floor_divide_args& a) {
  return mapTyped<math::Accepts::kFloatingOrInteger, 2>(
      launch, a.c, {a.a, a.b}, [](auto x, auto y) { return math::floorDivide(x, y); });
}

Status device(const Launch& launch, const clamp_args& a) {
  const bool has_min = a.has_min, has_max = a.has_max;
  const double min = a.min, max = a.max;
  return mapTyped<math::Accepts::kFloatingOrInteger, 1>(launch, a.y, {a.x}, [=](auto x) {
    return math::clamp(x, math::clampBounds<decltype(x)>(has_min, min, has_max, max));
  });
}

Status device(const Launch& launch, const floor_args& a) {
  return mapTyped<math::Accepts::kFloatingOrInteger, 1>(launch, a.y, {a.x},
                                                        [](auto x) { return math::floorOf(x); });
}

Status device(const Launch& launch, const ceil_args& a) {
  return mapTyped<math::Accepts::kFloatingOrInteger, 1>(launch, a.y, {a.x},
                                                        [](auto x) { return math::ceilOf(x); });
}

Status device(const Launch& launch, const round_args& a) {
  return mapTyped<math::Accepts::kFloatingOrInteger, 1>(launch, a.y, {a.x},
                                                        [](auto x) { return math::roundOf(x); });
}

Status device(const Launch& launch, const trunc_args& a) {
  return mapTyped<math::Accepts::kFloatingOrInteger, 1>(launch, a.y, {a.x},
                                                        [](auto x) { return math::truncOf(x); });
}

Status device(const Launch& launch, const sign_args& a) {
  return mapTyped<math::Accepts::kAny, 1>(launch, a.y, {a.x}, [](auto x) { return math::sign(x); });
}

// float32 division (correctly rounded: 1/0 = inf, 1/-0 = -inf).
Status device(const Launch& launch, const reciprocal_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return 1.0f / x; });
}

// The float32 library erf.
Status device(const Launch& launch, const erf_args& a) {
  return mapFloating<1>(launch, a.y, {a.x}, [](float x) { return std::erf(x); });
}

Status device(const Launch& launch, const dropout_forward_args& a) {
  const std::array<TensorView, 3> views{a.y, a.x, a.mask};
  const float p = a.p;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const std::uint64_t seed = a.seed, offset = a.offset;
  Status status = unsupportedDtype(a.x);
  dispatchFloating(a.x.dtype, [&]<typename T>() {
    T* const y_base = typed<T>(a.y);
    const T* const x_base = typed<const T>(a.x);
    auto* const mask_base = typed<std::uint8_t>(a.mask);
    status =
        launchRows(launch, views,
                   [=](std::int64_t first, const Offsets<3>& off, const Offsets<3>& step, std::int64_t n) {
                     BlockCache blocks(seed);
                     for (std::int64_t i = 0; i < n; ++i) {
                       const auto index = static_cast<std::uint64_t>(first + i);
                       const std::uint32_t word = blocks.get(philox::uniformBlock(
                           offset, index))[static_cast<std::size_t>(philox::uniformWord(index))];
                       const bool keep = philox::uniformOfFloat(word) >= p;
                       mask_base[off[2] + i * step[2]] = keep ? 1 : 0;
                       y_base[off[0] + i * step[0]] =
                           store<T>(load<float>(x_base[off[1] + i * step[1]]) * (keep ? scale : 0.0f));
                     }
                   });
  });
  return status;
}

Status device(const Launch& launch, const dropout_backward_args& a) {
  const std::array<TensorView, 3> views{a.grad_input, a.grad_output, a.mask};
  const float scale = a.p < 1.0f ? 1.0f / (1.0f - a.p) : 0.0f;
  Status status = unsupportedDtype(a.grad_output);
  dispatchFloating(a.grad_output.dtype, [&]<typename T>() {
    T* const gi_base = typed<T>(a.grad_input);
    const T* const go_base = typed<const T>(a.grad_output);
    const auto* const mask_base = typed<const std::uint8_t>(a.mask);
    status = launchRows(
        launch, views, [=](std::int64_t, const Offsets<3>& off, const Offsets<3>& step, std::int64_t n) {
          for (std::int64_t i = 0; i < n; ++i) {
            const float m = mask_base[off[2] + i * step[2]] != 0 ? scale : 0.0f;
            gi_base[off[0] + i * step[0]] = store<T>(load<float>(go_base[off[1] + i * step[1]]) * m);
          }
        });
  });
  return status;
}

Status device(const Launch& launch, const uniform_args& a) {
  const auto low = static_cast<float>(a.low);
  const auto range = static_cast<float>(a.high - a.low);
  const std::uint64_t seed = a.seed, offset = a.offset;
  Status status = unsupportedDtype(a.y);
  dispatchFloating(a.y.dtype, [&]<typename T>() {
    T* const base = typed<T>(a.y);
    status =
        launchRows(launch, std::array<TensorView, 1>{a.y},
                   [=](std::int64_t first, const Offsets<1>& off, const Offsets<1>& step, std::int64_t n) {
                     BlockCache blocks(seed);
                     for (std::int64_t i = 0; i < n; ++i) {
                       const auto index = static_cast<std::uint64_t>(first + i);
                       const std::uint32_t word = blocks.get(philox::uniformBlock(
                           offset, index))[static_cast<std::size_t>(philox::uniformWord(index))];
                       base[off[0] + i * step[0]] = store<T>(low + range * philox::uniformOfFloat(word));
                     }
                   });
  });
  return status;
}

Status device(const Launch& launch, const normal_args& a) {
  const auto mean = static_cast<float>(a.mean);
  const auto stddev = static_cast<float>(a.std);
  const std::uint64_t seed = a.seed, offset = a.offset;
  Status status = unsupportedDtype(a.y);
  dispatchFloating(a.y.dtype, [&]<typename T>() {
    T* const base = typed<T>(a.y);
    status =
        launchRows(launch, std::array<TensorView, 1>{a.y},
                   [=](std::int64_t first, const Offsets<1>& off, const Offsets<1>& step, std::int64_t n) {
                     BlockCache blocks(seed);
                     for (std::int64_t i = 0; i < n; ++i) {
                       const float z = standardNormal(blocks, offset, static_cast<std::uint64_t>(first + i));
                       base[off[0] + i * step[0]] = store<T>(mean + stddev * z);
                     }
                   });
  });
  return status;
}

// normal with tensor mean and std (broadcast to y): element i is mean[i] + std[i] z_i with z_i the
// standard normal that `normal` draws for element i (the same Philox stream). A negative std gives NaN
// (PyTorch raises; a kernel cannot).
Status device(const Launch& launch, const normal_tensor_args& a) {
  const std::uint64_t seed = a.seed, offset = a.offset;
  const std::array<TensorView, 3> views{a.y, broadcastTo(a.mean, a.y), broadcastTo(a.std, a.y)};
  Status status = unsupportedDtype(a.y);
  dispatchFloating(a.y.dtype, [&]<typename T>() {
    T* const base = typed<T>(a.y);
    const T* const mean = typed<const T>(views[1]);
    const T* const stddev = typed<const T>(views[2]);
    status =
        launchRows(launch, views,
                   [=](std::int64_t first, const Offsets<3>& off, const Offsets<3>& step, std::int64_t n) {
                     BlockCache blocks(seed);
                     for (std::int64_t i = 0; i < n; ++i) {
                       const float z = standardNormal(blocks, offset, static_cast<std::uint64_t>(first + i));
                       const float sd = load<float>(stddev[off[2] + i * step[2]]);
                       const float v = sd < 0.0f ? std::numeric_limits<float>::quiet_NaN()
                                                 : load<float>(mean[off[1] + i * step[1]]) + sd * z;
                       base[off[0] + i * step[0]] = store<T>(v);
                     }
                   });
  });
  return status;
}

// Rotary embedding from given tables: with (x1, x2) the halves of x's last dim (elementwise::rotaryHalves)
// and c, s the tables broadcast to [..., D/2] (s negated for conj, the inverse rotation and the backward),
// y1 = x1 c - x2 s and y2 = x1 s + x2 c, in float32. y may be x itself.
Status device(const Launch& launch, const rotary_embedding_args& a) {
  const elementwise::RotaryHalves x = elementwise::rotaryHalves(a.x, a.interleaved);
  const elementwise::RotaryHalves y = elementwise::rotaryHalves(a.y, a.interleaved);
  const std::array<TensorView, 6> views{
      y.first, y.second, x.first, x.second, broadcastTo(a.cos, y.first), broadcastTo(a.sin, y.first)};
  const float sign = a.conj ? -1.0f : 1.0f;
  Status status = unsupportedDtype(a.x);
  dispatchFloating(a.x.dtype, [&]<typename T>() {
    std::array<T*, 6> base{};
    for (std::size_t k = 0; k < views.size(); ++k) base[k] = typed<T>(views[k]);
    status = launchRows(
        launch, views, [=](std::int64_t, const Offsets<6>& off, const Offsets<6>& step, std::int64_t n) {
          for (std::int64_t i = 0; i < n; ++i) {
            const auto at = [&](std::size_t k) -> T& { return base[k][off[k] + i * step[k]]; };
            const float x1 = load<float>(at(2)), x2 = load<float>(at(3));
            const float c = load<float>(at(4)), sn = sign * load<float>(at(5));
            at(0) = store<T>(x1 * c - x2 * sn);
            at(1) = store<T>(x1 * sn + x2 * c);
          }
        });
  });
  return status;
}

// torch.optim.SGD's step per element, in float32: d = grad + weight_decay * param; with momentum the buffer
// becomes d at the first step (init_buffer, or no buffer to keep) and momentum * buf + (1 - dampening) d
// after; nesterov steps along d + momentum * buf, the others along buf.
Status device(const Launch& launch, const sgd_step_args& a) {
  const float lr = a.lr, momentum = a.momentum, weight_decay = a.weight_decay;
  const float keep = 1.0f - a.dampening;
  const bool nesterov = a.nesterov;
  const bool init = a.init_buffer || !a.momentum_buffer.present;
  const bool store_buffer = a.momentum_buffer.present;
  Status status = unsupportedDtype(a.param);
  dispatchFloating(a.param.dtype, [&]<typename T>() {
    T* const param = typed<T>(a.param);
    const T* const grad = typed<const T>(a.grad);
    if (momentum == 0.0f) {
      status = launchRows(launch, std::array<TensorView, 2>{a.param, a.grad},
                          [=](std::int64_t, const Offsets<2>& off, const Offsets<2>& step, std::int64_t n) {
                            for (std::int64_t i = 0; i < n; ++i) {
                              T& p = param[off[0] + i * step[0]];
                              const float pv = load<float>(p);
                              const float d = load<float>(grad[off[1] + i * step[1]]) + weight_decay * pv;
                              p = store<T>(pv - lr * d);
                            }
                          });
      return;
    }
    // Without a buffer to keep, the param view stands in for it in the loop (never read or written).
    const TensorView buffer_view = store_buffer ? a.momentum_buffer : a.param;
    T* const buffer = typed<T>(buffer_view);
    status = launchRows(launch, std::array<TensorView, 3>{a.param, a.grad, buffer_view},
                        [=](std::int64_t, const Offsets<3>& off, const Offsets<3>& step, std::int64_t n) {
                          for (std::int64_t i = 0; i < n; ++i) {
                            T& p = param[off[0] + i * step[0]];
                            const float pv = load<float>(p);
                            const float d = load<float>(grad[off[1] + i * step[1]]) + weight_decay * pv;
                            float bv = d;
                            if (!init) bv = momentum * load<float>(buffer[off[2] + i * step[2]]) + keep * d;
                            if (store_buffer) buffer[off[2] + i * step[2]] = store<T>(bv);
                            const float direction = nesterov ? d + momentum * bv : bv;
                            p = store<T>(pv - lr * direction);
                          }
                        });
  });
  return status;
}

}  // namespace mlu
