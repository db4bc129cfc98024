// gemm_kernel.h — the device's GEMM engine, used by matmul, linear and the im2col convolutions.
//
// A Goto/BLIS-style blocked GEMM in float32: C[m, n] (+)= A[m, k] B[k, n].
//  - Operands are read through index maps (Axis) so that any strides work, including views whose rows or
//    columns span several tensor dims (a convolution's (channel, kh, kw) or (ho, wo)); float16/bfloat16
//    elements are converted to float32 while packing.
//  - Cache blocking: B is packed in kKc x kNc blocks (kNr-column panels, kept in L2/L3), A in kMc x kKc
//    blocks (kMr-row panels, kept in L2); the micro-kernel multiplies one A panel by one B panel.
//  - The register-tiled micro-kernel keeps a kMr x kNr = 6 x 16 accumulator tile (12 AVX registers) and is
//    plain C++ that GCC vectorizes. It is compiled twice: for AVX2+FMA (selected at run time with
//    __builtin_cpu_supports, no -march flag needed) and portable (SSE2 on x86-64, no FMA).
//  - On a CPU with AVX-512F, blocks of up to 2 x 2 full micro-tiles (12 x 32: two A panels by two B panels,
//    24 accumulators in zmm registers) are multiplied by one wide kernel, written with intrinsics. Each
//    element is the same chain of FMAs in the same order as in the AVX2 kernel, so the two give identical
//    bits: the wider registers only do more of them per instruction.
//  - Accumulation is blocked: each kKc-deep block is summed in registers, then added into C.
// Also here: the im2col / col2im lowering that turns a convolution into these GEMMs.
// The engine runs on the calling thread; callers split the work across cores (device_gemm.cpp). It is
// header-only and self-contained so that the tests can run both micro-kernels directly.
#pragma once

#include "cpu_features.h"

#include "../ops/element.h"
#include "../ops/gemm_shapes.h"

#include <mlu/op_args.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace mlu::gemm {

inline constexpr int kMr = 6;              // micro-tile rows
inline constexpr int kNr = 16;             // micro-tile columns: two 8-float AVX registers
inline constexpr std::int64_t kKc = 256;   // depth of a packed block (an A and a B panel fit in L1)
inline constexpr std::int64_t kMc = 144;   // rows of a packed A block (multiple of kMr; fits in L2)
inline constexpr std::int64_t kNc = 2048;  // columns of a packed B block (multiple of kNr)
inline constexpr std::int64_t kStageFloats = 1 << 20;  // float32 staging block of a non-float32 output

// Maps a logical index j in [0, size) of a matrix dimension to an element offset. The dimension may span
// several tensor dims (row-major, outermost first), e.g. a convolution's (ho, wo): then
// offset(j) = sum_l index_l * stride_l over the digits of j. Dims that merge into one stride are merged,
// so a contiguous span is a single level (a "simple" axis).
struct Axis {
  int levels = 0;  // 0: every index maps to offset 0 (an empty span, e.g. linear's rows for a 1-d x)
  std::array<std::int64_t, MLUOP_DIM_MAX> sizes{}, strides{};

  static Axis strided(std::int64_t stride) {
    Axis a;
    a.levels = 1;
    a.sizes[0] = 1;  // the outermost level's size is never used
    a.strides[0] = stride;
    return a;
  }
  // The dims [first, last) of t.
  static Axis ofDims(const TensorView& t, int first, int last) {
    Axis a;
    for (int d = first; d < last; ++d) a.append(t.dim(d), t.stride(d));
    return a;
  }
  // Adds an inner dim of `size` elements `stride` apart (merged into the previous level when it continues
  // it).
  void append(std::int64_t size, std::int64_t stride) {
    if (size == 1) return;
    if (levels > 0 && strides[static_cast<std::size_t>(levels - 1)] == size * stride) {
      sizes[static_cast<std::size_t>(levels - 1)] *= size;
      strides[static_cast<std::size_t>(levels - 1)] = stride;
      return;
    }
    sizes[static_cast<std::size_t>(levels)] = size;
    strides[static_cast<std::size_t>(levels)] = stride;
    ++levels;
  }
  bool simple() const { return levels <= 1; }
  std::int64_t stride() const { return levels == 0 ? 0 : strides[0]; }

  std::int64_t offset(std::int64_t j) const {
    std::int64_t off = 0;
    for (int l = levels - 1; l > 0; --l) {
      const auto i = static_cast<std::size_t>(l);
      off += (j % sizes[i]) * strides[i];
      j /= sizes[i];
    }
    return levels > 0 ? off + j * strides[0] : off;
  }
  // out[i] = offset(begin + i) for i in [0, count).
  void offsets(std::int64_t begin, std::int64_t count, std::int64_t* out) const {
    if (simple()) {
      for (std::int64_t i = 0; i < count; ++i) out[i] = (begin + i) * stride();
    } else {
      for (std::int64_t i = 0; i < count; ++i) out[i] = offset(begin + i);
    }
  }
};

// An input matrix: element (i, j) is data[rows.offset(i) + cols.offset(j)] of dtype.
struct Operand {
  const void* data = nullptr;
  mluopDataType_t dtype = MLUOP_DTYPE_FLOAT;
  Axis rows, cols;
};

// A float32 destination: element (i, j) at data[i * rs + j * cs].
struct Dest {
  float* data = nullptr;
  std::int64_t rs = 0, cs = 1;
};

// An output matrix of any floating dtype, as Operand.
struct Output {
  void* data = nullptr;
  mluopDataType_t dtype = MLUOP_DTYPE_FLOAT;
  Axis rows, cols;
};

// An optional bias added to every row (per_row: bias[i] to row i) or column of the output.
struct Bias {
  const void* data = nullptr;  // NULL: no bias
  mluopDataType_t dtype = MLUOP_DTYPE_FLOAT;
  std::int64_t stride = 1;
  bool per_row = false;
};

// Per-thread buffers of the engine (the packed blocks model a core's on-chip memory). Reuse one across
// calls on the same thread.
struct Scratch {
  std::vector<float> a, b, stage, bias;
  std::vector<std::int64_t> a_rows, a_cols, b_rows, b_cols, out_rows, out_cols;
  std::array<float, kMr * kNr> tile{};
};

// ---- micro-kernel ----

// In the sanitizer build the micro-kernel itself is not instrumented: ASan and UBSan's bounds checks keep its
// accumulator tile in memory and check every access, which made the kernel the bulk of every training test
// (mnist_train ran ~8x slower than it does now) and the sanitizer test suite many minutes longer. Instead,
// checkedRegion() checks each range the kernel reads or writes before it runs, and turns a poisoned byte into
// an ordinary ASan report (with the caller's stack) by reading it through an instrumented load. In other
// builds the kernels are inlined into their callers as before, unchecked.
#if defined(__SANITIZE_ADDRESS__)
#define MLU_GEMM_NO_ASAN __attribute__((no_sanitize("address", "undefined")))
#define MLU_GEMM_UNCHECKED_KERNEL __attribute__((no_sanitize("address", "undefined"), noinline))
inline void checkedRegion(const void* begin, std::size_t bytes) {
  if (const void* bad = __asan_region_is_poisoned(const_cast<void*>(begin), bytes)) {
    [[maybe_unused]] const char touched = *static_cast<const volatile char*>(bad);
  }
}
#else
#define MLU_GEMM_NO_ASAN
#define MLU_GEMM_UNCHECKED_KERNEL __attribute__((always_inline))
#endif

// c[0:kMr, 0:kNr] (+)= A panel (kc x kMr, a[p * kMr + i]) x B panel (kc x kNr, b[p * kNr + j]), c with row
// stride ldc and unit column stride. Written so that GCC keeps acc in registers (the i loop unrolled, the
// j loop vectorized into 2 x 8 lanes) and, in the FMA instance, contracts each step into one vfmadd.
template <bool kFma>
[[gnu::always_inline]] MLU_GEMM_NO_ASAN inline void microKernelBody(std::int64_t kc,
                                                                    const float* __restrict a,
                                                                    const float* __restrict b,
                                                                    float* __restrict c, std::int64_t ldc,
                                                                    bool accumulate) {
  float acc[kMr][kNr] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * kNr;
    const float* ap = a + p * kMr;
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const float ai = ap[i];
      for (int j = 0; j < kNr; ++j) {
        if constexpr (kFma) {
          acc[i][j] = __builtin_fmaf(ai, bp[j], acc[i][j]);
        } else {
          acc[i][j] += ai * bp[j];
        }
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      for (int j = 0; j < kNr; ++j) ci[j] += acc[i][j];
    } else {
      for (int j = 0; j < kNr; ++j) ci[j] = acc[i][j];
    }
  }
}

[[gnu::target("avx2,fma")]] MLU_GEMM_UNCHECKED_KERNEL inline void microKernelFma(
    std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool accumulate) {
  microKernelBody<true>(kc, a, b, c, ldc, accumulate);
}

MLU_GEMM_UNCHECKED_KERNEL inline void microKernelPlain(std::int64_t kc, const float* a, const float* b,
                                                       float* c, std::int64_t ldc, bool accumulate) {
  microKernelBody<false>(kc, a, b, c, ldc, accumulate);
}

// The ranges a micro-kernel call touches, checked under AddressSanitizer (see checkedRegion).
inline void checkMicroKernelRanges([[maybe_unused]] std::int64_t kc, [[maybe_unused]] const float* a,
                                   [[maybe_unused]] const float* b, [[maybe_unused]] float* c,
                                   [[maybe_unused]] std::int64_t ldc) {
#if defined(__SANITIZE_ADDRESS__)
  checkedRegion(a, static_cast<std::size_t>(kc) * kMr * sizeof(float));
  checkedRegion(b, static_cast<std::size_t>(kc) * kNr * sizeof(float));
  for (int i = 0; i < kMr; ++i) checkedRegion(c + i * ldc, kNr * sizeof(float));
#endif
}

[[gnu::target("avx2,fma")]] inline void microKernelAvx2(std::int64_t kc, const float* a, const float* b,
                                                        float* c, std::int64_t ldc, bool accumulate) {
  checkMicroKernelRanges(kc, a, b, c, ldc);
  microKernelFma(kc, a, b, c, ldc, accumulate);
}

inline void microKernelPortable(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
                                bool accumulate) {
  checkMicroKernelRanges(kc, a, b, c, ldc);
  microKernelPlain(kc, a, b, c, ldc, accumulate);
}

using MicroKernel = void (*)(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc,
                             bool accumulate);

// c[0 : rows, 0 : cols] (+)= the first rows x cols of ra consecutive A panels x rb consecutive B panels (each
// panel kc deep and zero-padded, as the packing lays them out), ra and rb in {1, 2}, 0 < rows <= ra * kMr,
// 0 < cols <= rb * kNr (an edge block is stored through masks); c as in the micro-kernel.
using WideKernel = void (*)(int ra, int rb, int rows, int cols, std::int64_t kc, const float* a,
                            const float* b, float* c, std::int64_t ldc, bool accumulate);

#if defined(__x86_64__)
// The wide kernel's body for kRa x kRb panels: per depth step, kRb B vectors of 16 floats are loaded and each
// of the kRa * kMr A values is broadcast into kRb FMAs (_mm512_fmadd_ps: one rounding, as __builtin_fmaf).
template <int kRa, int kRb>
[[gnu::target("avx512f"), gnu::always_inline]] MLU_GEMM_NO_ASAN inline void wideKernelBody(
    int rows, int cols, std::int64_t kc, const float* __restrict a, const float* __restrict b,
    float* __restrict c, std::int64_t ldc, bool accumulate) {
  static_assert(kNr == 16, "one zmm register per B panel row");
  constexpr int kRows = kRa * kMr;
  __m512 acc[kRows][kRb];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int r = 0; r < kRb; ++r) acc[i][r] = _mm512_setzero_ps();
  }
  const std::int64_t a_panel = kc * kMr, b_panel = kc * kNr;
  for (std::int64_t p = 0; p < kc; ++p) {
    __m512 bv[kRb];
#pragma GCC unroll 2
    for (int r = 0; r < kRb; ++r) bv[r] = _mm512_loadu_ps(b + r * b_panel + p * kNr);
#pragma GCC unroll 2
    for (int q = 0; q < kRa; ++q) {
      const float* ap = a + q * a_panel + p * kMr;
#pragma GCC unroll 6
      for (int i = 0; i < kMr; ++i) {
        const __m512 av = _mm512_set1_ps(ap[i]);
#pragma GCC unroll 2
        for (int r = 0; r < kRb; ++r) acc[q * kMr + i][r] = _mm512_fmadd_ps(av, bv[r], acc[q * kMr + i][r]);
      }
    }
  }
  if (rows == kRows && cols == kRb * kNr) {
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
      for (int r = 0; r < kRb; ++r) {
        float* dst = c + i * ldc + r * kNr;
        _mm512_storeu_ps(dst, accumulate ? _mm512_add_ps(_mm512_loadu_ps(dst), acc[i][r]) : acc[i][r]);
      }
    }
    return;
  }
  __mmask16 mask[kRb];
#pragma GCC unroll 2
  for (int r = 0; r < kRb; ++r) {
    const int valid = std::clamp(cols - r * kNr, 0, kNr);
    mask[r] = static_cast<__mmask16>((1u << valid) - 1u);
  }
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    if (i >= rows) break;
#pragma GCC unroll 2
    for (int r = 0; r < kRb; ++r) {
      float* dst = c + i * ldc + r * kNr;
      const __m512 v = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask[r], dst), acc[i][r]) : acc[i][r];
      _mm512_mask_storeu_ps(dst, mask[r], v);
    }
  }
}

[[gnu::target("avx512f")]] MLU_GEMM_UNCHECKED_KERNEL inline void wideKernelUnchecked(
    int ra, int rb, int rows, int cols, std::int64_t kc, const float* a, const float* b, float* c,
    std::int64_t ldc, bool accumulate) {
  if (ra == 2 && rb == 2) {
    wideKernelBody<2, 2>(rows, cols, kc, a, b, c, ldc, accumulate);
  } else if (ra == 2) {
    wideKernelBody<2, 1>(rows, cols, kc, a, b, c, ldc, accumulate);
  } else if (rb == 2) {
    wideKernelBody<1, 2>(rows, cols, kc, a, b, c, ldc, accumulate);
  } else {
    wideKernelBody<1, 1>(rows, cols, kc, a, b, c, ldc, accumulate);
  }
}

[[gnu::target("avx512f")]] inline void wideKernelAvx512(int ra, int rb, int rows, int cols, std::int64_t kc,
                                                        const float* a, const float* b, float* c,
                                                        std::int64_t ldc, bool accumulate) {
#if defined(__SANITIZE_ADDRESS__)
  checkedRegion(a, static_cast<std::size_t>(ra * kc) * kMr * sizeof(float));
  checkedRegion(b, static_cast<std::size_t>(rb * kc) * kNr * sizeof(float));
  for (int i = 0; i < rows; ++i) checkedRegion(c + i * ldc, static_cast<std::size_t>(cols) * sizeof(float));
#endif
  wideKernelUnchecked(ra, rb, rows, cols, kc, a, b, c, ldc, accumulate);
}
#endif

// The kernels the engine runs: tile for single (and edge) micro-tiles, wide (when not null) for full blocks
// of up to 2 x 2 micro-tiles.
struct Kernels {
  MicroKernel tile = &microKernelPortable;
  WideKernel wide = nullptr;
};

// The best kernels this CPU runs (chosen once).
inline Kernels bestKernels() {
  static const Kernels kernels = [] {
    Kernels k;
    if (cpuHasAvx2Fma()) k.tile = &microKernelAvx2;
#if defined(__x86_64__)
    if (k.tile == &microKernelAvx2 && cpuHasAvx512f()) k.wide = &wideKernelAvx512;
#endif
    return k;
  }();
  return kernels;
}

// The best single-tile micro-kernel this CPU runs.
inline MicroKernel bestMicroKernel() { return bestKernels().tile; }

// ---- packing ----

// Calls f.template operator()<T>() with the storage type of a floating dtype.
template <typename F>
void dispatchStorage(mluopDataType_t dtype, F&& f) {
  dispatchFloating(dtype, std::forward<F>(f));
}

// Packs the A block with rows at element offsets rows[0:mc] and columns at cols[0:kc] into kMr-row panels
// (dst[panel][p * kMr + i]), zero-padding the last panel. cols_unit: cols[p] = cols[0] + p; rows_unit:
// rows[i] = rows[0] + i (a transposed A: the kMr rows of a panel are contiguous at each p).
template <typename T>
void packA(const T* __restrict base, const std::int64_t* rows, std::int64_t mc, const std::int64_t* cols,
           std::int64_t kc, bool cols_unit, bool rows_unit, float* __restrict dst) {
  for (std::int64_t i0 = 0; i0 < mc; i0 += kMr) {
    const std::int64_t mr = std::min<std::int64_t>(kMr, mc - i0);
    if (rows_unit && !cols_unit && mr == kMr) {
      for (std::int64_t p = 0; p < kc; ++p) {
        const T* src = base + cols[p] + rows[i0];
        for (int i = 0; i < kMr; ++i) dst[p * kMr + i] = load<float>(src[i]);
      }
      dst += kc * kMr;
      continue;
    }
    for (std::int64_t i = 0; i < kMr; ++i) {
      float* d = dst + i;
      if (i >= mr) {
        for (std::int64_t p = 0; p < kc; ++p) d[p * kMr] = 0.0f;
      } else if (cols_unit) {
        const T* row = base + rows[i0 + i] + cols[0];
        for (std::int64_t p = 0; p < kc; ++p) d[p * kMr] = load<float>(row[p]);
      } else {
        const T* row = base + rows[i0 + i];
        for (std::int64_t p = 0; p < kc; ++p) d[p * kMr] = load<float>(row[cols[p]]);
      }
    }
    dst += kc * kMr;
  }
}

// Packs the B block with rows at rows[0:kc] and columns at cols[0:nc] into kNr-column panels
// (dst[panel][p * kNr + j]), zero-padding the last panel. cols_unit: cols[j] = cols[0] + j; rows_unit:
// rows[p] = rows[0] + p (a transposed B, e.g. linear's weight: each column is read contiguously).
template <typename T>
void packB(const T* __restrict base, const std::int64_t* rows, std::int64_t kc, const std::int64_t* cols,
           std::int64_t nc, bool cols_unit, bool rows_unit, float* __restrict dst) {
  for (std::int64_t j0 = 0; j0 < nc; j0 += kNr) {
    const std::int64_t nr = std::min<std::int64_t>(kNr, nc - j0);
    if (rows_unit && !cols_unit) {
      for (std::int64_t j = 0; j < kNr; ++j) {
        float* d = dst + j;
        if (j >= nr) {
          for (std::int64_t p = 0; p < kc; ++p) d[p * kNr] = 0.0f;
          continue;
        }
        const T* column = base + cols[j0 + j] + rows[0];
        for (std::int64_t p = 0; p < kc; ++p) d[p * kNr] = load<float>(column[p]);
      }
      dst += kc * kNr;
      continue;
    }
    for (std::int64_t p = 0; p < kc; ++p) {
      const T* row = base + rows[p];
      float* d = dst + p * kNr;
      if (cols_unit && nr == kNr) {
        const T* src = row + cols[j0];
        for (int j = 0; j < kNr; ++j) d[j] = load<float>(src[j]);
      } else {
        for (std::int64_t j = 0; j < nr; ++j) d[j] = load<float>(row[cols[j0 + j]]);
        for (std::int64_t j = nr; j < kNr; ++j) d[j] = 0.0f;
      }
    }
    dst += kc * kNr;
  }
}

// ---- the blocked GEMM ----

// An edge tile (mr x nr valid of a micro-tile) or a tile of a strided destination: the full tile is computed
// aside and its valid part kept.
inline void edgeTile(MicroKernel kernel, std::int64_t kc, const float* ap, const float* bp, float* ct,
                     std::int64_t mr, std::int64_t nr, const Dest& c, bool add, Scratch& s) {
  kernel(kc, ap, bp, s.tile.data(), kNr, false);
  for (std::int64_t i = 0; i < mr; ++i) {
    for (std::int64_t j = 0; j < nr; ++j) {
      float& dst = ct[i * c.rs + j * c.cs];
      const float v = s.tile[static_cast<std::size_t>(i * kNr + j)];
      dst = add ? dst + v : v;
    }
  }
}

// c[0:m, 0:n] = (accumulate ? c : 0) + A[m0 : m0 + m, 0:k] x B[0:k, n0 : n0 + n], in float32.
inline void gemmFloat(const Operand& a, const Operand& b, std::int64_t m0, std::int64_t m, std::int64_t n0,
                      std::int64_t n, std::int64_t k, const Dest& c, bool accumulate, Scratch& s,
                      Kernels kernels = bestKernels()) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum
    if (!accumulate) {
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) c.data[i * c.rs + j * c.cs] = 0.0f;
      }
    }
    return;
  }
  const auto round_up = [](std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; };
  const std::int64_t mc_max = std::min(kMc, round_up(m, kMr));
  const std::int64_t kc_max = std::min(kKc, k);
  const std::int64_t nc_max = std::min(kNc, round_up(n, kNr));
  s.a.resize(static_cast<std::size_t>(mc_max * kc_max));
  s.b.resize(static_cast<std::size_t>(kc_max * nc_max));
  s.a_rows.resize(static_cast<std::size_t>(mc_max));
  s.a_cols.resize(static_cast<std::size_t>(kc_max));
  s.b_rows.resize(static_cast<std::size_t>(kc_max));
  s.b_cols.resize(static_cast<std::size_t>(nc_max));

  for (std::int64_t jc = 0; jc < n; jc += kNc) {
    const std::int64_t nc = std::min(kNc, n - jc);
    b.cols.offsets(n0 + jc, nc, s.b_cols.data());
    const bool b_unit = b.cols.simple() && b.cols.stride() == 1;
    const bool b_rows_unit = b.rows.simple() && b.rows.stride() == 1;
    for (std::int64_t pc = 0; pc < k; pc += kKc) {
      const std::int64_t kc = std::min(kKc, k - pc);
      b.rows.offsets(pc, kc, s.b_rows.data());
      dispatchStorage(b.dtype, [&]<typename T>() {
        packB(static_cast<const T*>(b.data), s.b_rows.data(), kc, s.b_cols.data(), nc, b_unit, b_rows_unit,
              s.b.data());
      });
      a.cols.offsets(pc, kc, s.a_cols.data());
      const bool a_unit = a.cols.simple() && a.cols.stride() == 1;
      const bool a_rows_unit = a.rows.simple() && a.rows.stride() == 1;
      const bool add = accumulate || pc > 0;
      for (std::int64_t ic = 0; ic < m; ic += kMc) {
        const std::int64_t mc = std::min(kMc, m - ic);
        a.rows.offsets(m0 + ic, mc, s.a_rows.data());
        dispatchStorage(a.dtype, [&]<typename T>() {
          packA(static_cast<const T*>(a.data), s.a_rows.data(), mc, s.a_cols.data(), kc, a_unit, a_rows_unit,
                s.a.data());
        });
        if (kernels.wide != nullptr && c.cs == 1) {
          // Blocks of up to 2 x 2 micro-tiles, edge blocks included (masked stores).
          for (std::int64_t jr = 0; jr < nc; jr += 2 * kNr) {
            const int rb = nc - jr > kNr ? 2 : 1;
            const int cols = static_cast<int>(std::min<std::int64_t>(rb * kNr, nc - jr));
            const float* bp = s.b.data() + jr * kc;
            for (std::int64_t ir = 0; ir < mc; ir += 2 * kMr) {
              const int ra = mc - ir > kMr ? 2 : 1;
              const int rows = static_cast<int>(std::min<std::int64_t>(ra * kMr, mc - ir));
              kernels.wide(ra, rb, rows, cols, kc, s.a.data() + ir * kc, bp,
                           c.data + (ic + ir) * c.rs + jc + jr, c.rs, add);
            }
          }
          continue;
        }
        for (std::int64_t jr = 0; jr < nc; jr += kNr) {
          const std::int64_t nr = std::min<std::int64_t>(kNr, nc - jr);
          const float* bp = s.b.data() + jr * kc;
          for (std::int64_t ir = 0; ir < mc; ir += kMr) {
            const std::int64_t mr = std::min<std::int64_t>(kMr, mc - ir);
            const float* ap = s.a.data() + ir * kc;
            float* ct = c.data + (ic + ir) * c.rs + (jc + jr) * c.cs;
            if (mr == kMr && nr == kNr && c.cs == 1) {
              kernels.tile(kc, ap, bp, ct, c.rs, add);
              continue;
            }
            edgeTile(kernels.tile, kc, ap, bp, ct, mr, nr, c, add, s);
          }
        }
      }
    }
  }
}

// out[m0 : m0 + m, n0 : n0 + n] = A[m0 : m0 + m, :] x B[:, n0 : n0 + n] (+ bias), in float32, rounded once
// into the output's dtype. A float32 output with simple strides is accumulated in place; any other output
// goes through a float32 staging block of at most kNc columns (and about kStageFloats values).
inline void gemmOut(const Operand& a, const Operand& b, std::int64_t m0, std::int64_t m, std::int64_t n0,
                    std::int64_t n, std::int64_t k, const Output& out, const Bias& bias, Scratch& s) {
  if (m <= 0 || n <= 0) return;
  // The bias of each output row (per_row) or column, as float32.
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    const std::int64_t first = bias.per_row ? m0 : n0, count = bias.per_row ? m : n;
    s.bias.resize(static_cast<std::size_t>(count));
    dispatchStorage(bias.dtype, [&]<typename T>() {
      const T* src = static_cast<const T*>(bias.data);
      for (std::int64_t i = 0; i < count; ++i)
        s.bias[static_cast<std::size_t>(i)] = load<float>(src[(first + i) * bias.stride]);
    });
  }
  auto bias_value = [&](std::int64_t i, std::int64_t j) {
    return has_bias ? s.bias[static_cast<std::size_t>(bias.per_row ? i : j)] : 0.0f;
  };
  if (out.dtype == MLUOP_DTYPE_FLOAT && out.rows.simple() && out.cols.simple()) {
    const std::int64_t rs = out.rows.stride(), cs = out.cols.stride();
    float* base = static_cast<float*>(out.data) + m0 * rs + n0 * cs;
    gemmFloat(a, b, m0, m, n0, n, k, Dest{base, rs, cs}, false, s);
    if (has_bias) {
      const float* bias_values = s.bias.data();
      for (std::int64_t i = 0; i < m; ++i) {
        float* row = base + i * rs;
        if (bias.per_row) {
          const float b = bias_values[i];
          for (std::int64_t j = 0; j < n; ++j) row[j * cs] += b;
        } else {
          for (std::int64_t j = 0; j < n; ++j) row[j * cs] += bias_values[j];
        }
      }
    }
    return;
  }
  s.out_rows.resize(static_cast<std::size_t>(m));
  out.rows.offsets(m0, m, s.out_rows.data());
  for (std::int64_t j0 = 0; j0 < n; j0 += kNc) {
    const std::int64_t nn = std::min(kNc, n - j0);
    s.out_cols.resize(static_cast<std::size_t>(nn));
    out.cols.offsets(n0 + j0, nn, s.out_cols.data());
    // Rows in chunks that keep the staging block near kStageFloats (B is repacked once per chunk).
    const std::int64_t chunk = std::max<std::int64_t>(kMc, kStageFloats / nn / kMr * kMr);
    for (std::int64_t i0 = 0; i0 < m; i0 += chunk) {
      const std::int64_t mm = std::min(chunk, m - i0);
      s.stage.resize(static_cast<std::size_t>(mm * nn));
      gemmFloat(a, b, m0 + i0, mm, n0 + j0, nn, k, Dest{s.stage.data(), nn, 1}, false, s);
      dispatchStorage(out.dtype, [&]<typename T>() {
        T* dst = static_cast<T*>(out.data);
        for (std::int64_t i = 0; i < mm; ++i) {
          const float* src = s.stage.data() + i * nn;
          T* row = dst + s.out_rows[static_cast<std::size_t>(i0 + i)];
          for (std::int64_t j = 0; j < nn; ++j) {
            const float v = src[j] + bias_value(i0 + i, j0 + j);
            row[s.out_cols[static_cast<std::size_t>(j)]] = store<T>(v);
          }
        }
      });
    }
  }
}

// ---- convolution lowering (im2col / col2im) ----

using gemm_shapes::ConvGeometry;

// The output positions [lo, hi) of one kernel tap along a dim that read inside the input:
// 0 <= o * stride + shift < size.
inline std::pair<std::int64_t, std::int64_t> validOutputs(std::int64_t out, int stride, std::int64_t shift,
                                                          std::int64_t size) {
  std::int64_t lo = 0, hi = out;
  while (lo < out && lo * stride + shift < 0) ++lo;
  while (hi > lo && (hi - 1) * stride + shift >= size) --hi;
  return {lo, hi};
}

// dst[i] = float(src[i * stride]) for i in [0, n). The unit-stride case is written in blocks of 8 so that
// GCC vectorizes it inline (a plain loop becomes a memmove call, costly for rows of a few dozen floats).
template <typename T>
inline void convertRow(const T* __restrict src, std::int64_t stride, float* __restrict dst, std::int64_t n) {
  std::int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) dst[i + j] = load<float>(src[i + j]);
    }
    for (; i < n; ++i) dst[i] = load<float>(src[i]);
  } else {
    for (; i < n; ++i) dst[i] = load<float>(src[i * stride]);
  }
}

inline void zeroRow(float* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = 0.0f;
}

// Lowers channels [c0, c0 + C/g) of one image (element (c, h, w) at image[c * sc + h * sh + w * sw]) into
// col [C/g * kh * kw, Ho * Wo], row (c, i, j) holding tap (i, j) of channel c at every output position
// (zero where it falls in the padding).
template <typename T>
void im2col(const T* image, std::int64_t sc, std::int64_t sh, std::int64_t sw, const ConvGeometry& g,
            std::int64_t c0, float* col) {
  const std::int64_t pixels = g.outPixels();
  for (std::int64_t ci = 0; ci < g.cinPerGroup(); ++ci) {
    const T* plane = image + (c0 + ci) * sc;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t shift_h = i * g.dil_h - g.pad_h;
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const std::int64_t shift_w = j * g.dil_w - g.pad_w;
        const auto [lo, hi] = validOutputs(g.wo, g.stride_w, shift_w, g.w);
        float* row = col + ((ci * g.kh + i) * g.kw + j) * pixels;
        for (std::int64_t oh = 0; oh < g.ho; ++oh) {
          float* dst = row + oh * g.wo;
          const std::int64_t h = oh * g.stride_h + shift_h;
          if (h < 0 || h >= g.h) {
            zeroRow(dst, g.wo);
            continue;
          }
          zeroRow(dst, lo);
          convertRow(plane + h * sh + (lo * g.stride_w + shift_w) * sw, g.stride_w * sw, dst + lo, hi - lo);
          zeroRow(dst + hi, g.wo - hi);
        }
      }
    }
  }
}

// The adjoint of im2col: adds col [C/g * kh * kw, Ho * Wo] (its rows row_stride apart; 0: Ho * Wo) into
// channels [c0, c0 + C/g) of a float32 image [C, H, W].
inline void col2im(const float* col, const ConvGeometry& g, std::int64_t c0, float* image,
                   std::int64_t row_stride = 0) {
  const std::int64_t pixels = row_stride > 0 ? row_stride : g.outPixels();
  for (std::int64_t ci = 0; ci < g.cinPerGroup(); ++ci) {
    float* plane = image + (c0 + ci) * g.h * g.w;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t shift_h = i * g.dil_h - g.pad_h;
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const std::int64_t shift_w = j * g.dil_w - g.pad_w;
        const auto [lo, hi] = validOutputs(g.wo, g.stride_w, shift_w, g.w);
        const float* row = col + ((ci * g.kh + i) * g.kw + j) * pixels;
        for (std::int64_t oh = 0; oh < g.ho; ++oh) {
          const std::int64_t h = oh * g.stride_h + shift_h;
          if (h < 0 || h >= g.h) continue;
          float* line = plane + h * g.w + shift_w;
          const float* src = row + oh * g.wo;
          for (std::int64_t ow = lo; ow < hi; ++ow) line[ow * g.stride_w] += src[ow];
        }
      }
    }
  }
}

}  // namespace mlu::gemm
