// Device kernels of scaled_dot_product_attention, flash-attention style: the Sq x Sk score matrix is never
// materialized.
//
// Forward (one task per (batch, head, block of kBr queries)): the query block is loaded into float32 with
// the softmax scale and log2(e) folded in; for each block of kBc keys, S = Q K^T (a register-tiled float32
// product), masked entries set to -inf, then the online softmax keeps a running row max m and sum l:
// P = 2^(S - m_new), l = l 2^(m - m_new) + rowsum(P), O = O 2^(m - m_new) + P V. At the end o = O / l and
// lse = (m + log2 l) ln 2 (natural log). Causal: key blocks wholly above the diagonal are skipped.
//
// Backward (flash-attention-2 recomputation): P = 2^(S - lse log2(e)) from the saved lse, D_i = rowsum(dO ∘
// O), dV += P^T dO, dP = dO V^T, dS = P ∘ (dP - D), dK += dS^T Q scale, dQ += dS K scale. Work is split
// without races in one of two ways, chosen from the shapes and the core count:
//  - fused, when there are at least as many (batch, key/value head) pairs as cores: one task per pair walks
//    the key blocks, accumulating dK/dV per key block and dQ for each query head of its group in float32;
//  - split, otherwise: one task per (batch, key/value head, key block) for dK/dV, then one per (batch,
//    query head, query block) for dQ (recomputing P and dS).
// Both sum every gradient in the same order (dQ over key blocks in increasing order, dK/dV over the group's
// query heads, then query blocks), with the same arithmetic, so the result does not depend on the number
// of cores. Grouped-query attention (Hkv < H key/value heads): query head h reads key/value head
// h / (H / Hkv); a key/value head's gradients sum over its query heads within its task (no races).
//
// Numerics: float32 throughout (float16/bfloat16 converted on load, rounded once on store); exp2 is a
// polynomial approximation (< 2 ulp); products accumulate in float32 in key/query order. The tiles
// (kBr x D, D x kBc, kBc x Dv, kBr x kBc, kBr x Dv floats: about 150 KB at D = 128) stay in L2; the inner
// loops are compiled twice, for AVX2+FMA (chosen at run time) and portable SSE2.
//
// A row that sees no key (Sk = 0) gets o = 0 and lse = -inf; a row whose lse is -inf gets zero gradients.
#include "cpu_features.h"
#include "device.h"

#include "attention_shapes.h"
#include "element.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mlu {
namespace {

using attention::Sizes;

constexpr int kMr = 4;            // rows of a register tile
constexpr int kNr = 16;           // columns of a register tile (two 8-float AVX registers)
constexpr std::int64_t kBr = 64;  // queries per block
constexpr std::int64_t kBc = 64;  // keys per block (a multiple of kNr)
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr std::int64_t roundUp(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }
constexpr std::int64_t blocks(std::int64_t x, std::int64_t m) { return (x + m - 1) / m; }

template <bool kFma>
[[gnu::always_inline]] inline float madd(float a, float b, float c) {
  if constexpr (kFma) {
    return __builtin_fmaf(a, b, c);
  } else {
    return a * b + c;
  }
}

// c ? a : b by bit masks: GCC (with -ftrapping-math) will not if-convert a float comparison in a loop into a
// vector blend, but it vectorizes this.
[[gnu::always_inline]] inline float select(bool c, float a, float b) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & mask) |
                              (std::bit_cast<std::uint32_t>(b) & ~mask));
}

// 2^x, branch-free so that loops over it vectorize: x = n + f with n integer and |f| <= 1/2, 2^f by its
// degree-7 Taylor polynomial (truncation < 6e-9), 2^n in the exponent bits. Below -126 it gives 0 (the
// masked -inf entries); NaN stays NaN.
template <bool kFma>
[[gnu::always_inline]] inline float exp2Approx(float x) {
  const float lo = select(x < -126.0f, -126.0f, x);
  const float xc = select(lo > 127.0f, 127.0f, lo);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (xc + kRound) - kRound;
  const float f = xc - n;
  float p = 1.525273380405984e-05f;
  p = madd<kFma>(p, f, 1.5403530393381606e-04f);
  p = madd<kFma>(p, f, 1.3333558146428443e-03f);
  p = madd<kFma>(p, f, 9.618129107628477e-03f);
  p = madd<kFma>(p, f, 5.550410866482158e-02f);
  p = madd<kFma>(p, f, 2.402265069591007e-01f);
  p = madd<kFma>(p, f, 6.931471805599453e-01f);
  p = madd<kFma>(p, f, 1.0f);
  const float n_safe = select(n != n, 0.0f, n);  // NaN: p is NaN already
  const float scale =
      std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<std::int32_t>(n_safe) + 127) << 23);
  return select(x < -126.0f, 0.0f, p * scale);
}

// The part of a product a row tile of C needs: columns [0, n_end) of C and depth [k_begin, k_end). Under the
// causal mask the blocks on the diagonal need only part of their columns (scores of visible keys) or depth
// (keys or queries whose probabilities are not 0); the rest is never computed.
struct Span {
  std::int64_t n_end, k_begin, k_end;
};

// C[m x n] (+)= A[m x k] B[k x n] on float32 buffers with row strides lda, ldb, ldc; m a multiple of kMr,
// n of kNr. kTransA: A is stored transposed (element (i, p) at a[p * lda + i]). Each kMr x kNr tile of C is
// accumulated in registers over the depth, in order. span(i0) limits the row tile at i0 (see Span); the
// columns past its n_end are left as they are.
template <bool kFma, bool kTransA, typename SpanOf>
[[gnu::always_inline]] inline void tileGemm(std::int64_t m, const float* __restrict a, std::int64_t lda,
                                            const float* __restrict b, std::int64_t ldb, float* __restrict c,
                                            std::int64_t ldc, bool accumulate, const SpanOf& span) {
  for (std::int64_t i0 = 0; i0 < m; i0 += kMr) {
    const Span sp = span(i0);
    for (std::int64_t j0 = 0; j0 < sp.n_end; j0 += kNr) {
      float acc[kMr][kNr];
      for (int i = 0; i < kMr; ++i) {
        for (int j = 0; j < kNr; ++j) acc[i][j] = accumulate ? c[(i0 + i) * ldc + j0 + j] : 0.0f;
      }
      for (std::int64_t p = sp.k_begin; p < sp.k_end; ++p) {
        const float* bp = b + p * ldb + j0;
#pragma GCC unroll 4
        for (int i = 0; i < kMr; ++i) {
          const float ai = kTransA ? a[p * lda + i0 + i] : a[(i0 + i) * lda + p];
          for (int j = 0; j < kNr; ++j) acc[i][j] = madd<kFma>(ai, bp[j], acc[i][j]);
        }
      }
      for (int i = 0; i < kMr; ++i) {
        for (int j = 0; j < kNr; ++j) c[(i0 + i) * ldc + j0 + j] = acc[i][j];
      }
    }
  }
}

// dst[r * ld + c] = src[r * rs + c * cs] * mul for r < rows, c < cols; zero in columns [cols, cols_pad) and
// rows [rows, rows_pad).
template <typename T>
[[gnu::always_inline]] inline void loadRows(const T* src, std::int64_t rs, std::int64_t cs, std::int64_t rows,
                                            std::int64_t cols, float mul, float* dst, std::int64_t ld,
                                            std::int64_t rows_pad, std::int64_t cols_pad) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * rs;
    float* d = dst + r * ld;
    if (cs == 1) {
      for (std::int64_t c = 0; c < cols; ++c) d[c] = load<float>(row[c]) * mul;
    } else {
      for (std::int64_t c = 0; c < cols; ++c) d[c] = load<float>(row[c * cs]) * mul;
    }
    std::fill(d + cols, d + cols_pad, 0.0f);
  }
  for (std::int64_t r = rows; r < rows_pad; ++r) std::fill(dst + r * ld, dst + r * ld + cols_pad, 0.0f);
}

// The transpose: dst[c * ld + r] = src[r * rs + c * cs] for r < rows, c < cols; zero for r in
// [rows, rows_pad).
template <typename T>
[[gnu::always_inline]] inline void loadTransposed(const T* src, std::int64_t rs, std::int64_t cs,
                                                  std::int64_t rows, std::int64_t cols, float* dst,
                                                  std::int64_t ld, std::int64_t rows_pad) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = src + r * rs;
    for (std::int64_t c = 0; c < cols; ++c) dst[c * ld + r] = load<float>(row[c * cs]);
  }
  for (std::int64_t c = 0; c < cols; ++c) std::fill(dst + c * ld + rows, dst + c * ld + rows_pad, 0.0f);
}

// out[r * rs + c * cs] = src[r * ld + c] * mul for r < rows, c < cols.
template <typename T>
[[gnu::always_inline]] inline void storeRows(const float* src, std::int64_t ld, std::int64_t rows,
                                             std::int64_t cols, float mul, T* out, std::int64_t rs,
                                             std::int64_t cs) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) out[r * rs + c * cs] = store<T>(src[r * ld + c] * mul);
  }
}

// A 4-d tensor [B, H, S, X] seen per (batch, head): the base of a (b, h) slice and the row/column strides.
template <typename T>
struct Slices {
  T* data;
  std::int64_t sb, sh, rs, cs;
  explicit Slices(const TensorView& t)
      : data(typed<T>(t)), sb(t.stride(0)), sh(t.stride(1)), rs(t.stride(2)), cs(t.stride(3)) {}
  T* slice(std::int64_t bh, std::int64_t heads) const { return data + (bh / heads) * sb + (bh % heads) * sh; }
};

// The (batch, key/value head) pair of (batch, query head) pair bh: grouped-query attention shares each
// key/value head among group() query heads.
inline std::int64_t kvPair(const Sizes& n, std::int64_t bh) {
  return (bh / n.heads) * n.kv_heads + n.kvHead(bh % n.heads);
}

// The keys of block [j0, j0 + nc) that query i sees: [j0, j0 + visible).
inline std::int64_t visibleInBlock(bool causal, std::int64_t i, std::int64_t j0, std::int64_t nc) {
  return causal ? std::clamp<std::int64_t>(i + 1 - j0, 0, nc) : nc;
}

// Runs task(t, scratch) for t in [0, total): one worker per core, each with scratch of its own, taking the
// next task from a shared counter. Callers number their tasks from the most work to the least (the causal
// mask makes blocks uneven), so that this greedy order balances the cores. Every task writes its own part
// of the outputs, so the results do not depend on which worker ran what.
template <typename Scratch, typename Make, typename Task>
void runTasks(std::int64_t total, int cores, const Make& make, const Task& task) {
  const std::int64_t ways = std::min<std::int64_t>(cores, total);
  std::atomic<std::int64_t> next{0};
  parallelFor(ways, 1, static_cast<int>(std::max<std::int64_t>(ways, 1)),
              [&](std::int64_t begin, std::int64_t end) {
                Scratch scratch = make();
                for (std::int64_t w = begin; w < end; ++w) {
                  for (std::int64_t t = next++; t < total; t = next++) task(t, scratch);
                }
              });
}

// ---- forward ----

struct ForwardJob {
  TensorView q, k, v, o, lse;
  Sizes n;
  bool causal = false;
  float scale_log2 = 0;          // scale * log2(e), folded into Q
  std::int64_t dp = 0, dvp = 0;  // D and Dv rounded up to kNr
};

struct ForwardScratch {
  std::vector<float> q, kt, v, s, o, m, l;
  explicit ForwardScratch(const ForwardJob& job)
      : q(static_cast<std::size_t>(kBr * job.dp)),
        kt(static_cast<std::size_t>(job.n.d * kBc)),
        v(static_cast<std::size_t>(kBc * job.dvp)),
        s(static_cast<std::size_t>(kBr * kBc)),
        o(static_cast<std::size_t>(kBr * job.dvp)),
        m(static_cast<std::size_t>(kBr)),
        l(static_cast<std::size_t>(kBr)) {}
};

// One online-softmax step of row r (scores in log2 units, already masked): P replaces S, and the row's
// max, sum and output accumulator are rescaled.
template <bool kFma>
[[gnu::always_inline]] inline void softmaxStep(float* row, std::int64_t ncp, float& m, float& l, float* o_row,
                                               std::int64_t dvp) {
  float lanes[kNr];
  std::fill(lanes, lanes + kNr, -kInf);
  for (std::int64_t c0 = 0; c0 < ncp; c0 += kNr) {
    for (int j = 0; j < kNr; ++j) {
      const float x = row[c0 + j];
      lanes[j] = select((x != x) | (x > lanes[j]), x, lanes[j]);  // NaN wins
    }
  }
  float mx = m;
  for (int j = 0; j < kNr; ++j) mx = ((lanes[j] != lanes[j]) | (lanes[j] > mx)) ? lanes[j] : mx;
  if (mx == -kInf) {  // nothing visible yet
    std::fill(row, row + ncp, 0.0f);
    return;
  }
  const float alpha = m == -kInf ? 0.0f : exp2Approx<kFma>(m - mx);
  std::fill(lanes, lanes + kNr, 0.0f);
  for (std::int64_t c0 = 0; c0 < ncp; c0 += kNr) {
    for (int j = 0; j < kNr; ++j) {
      const float p = exp2Approx<kFma>(row[c0 + j] - mx);
      row[c0 + j] = p;
      lanes[j] += p;
    }
  }
  float sum = 0.0f;
  for (int j = 0; j < kNr; ++j) sum += lanes[j];
  l = l * alpha + sum;
  m = mx;
  if (alpha != 1.0f) {
    for (std::int64_t e = 0; e < dvp; ++e) o_row[e] *= alpha;
  }
}

template <typename T, bool kFma>
[[gnu::always_inline]] inline void forwardTaskBody(const ForwardJob& job, std::int64_t task,
                                                   ForwardScratch& s) {
  const Sizes& n = job.n;
  const std::int64_t q_blocks = blocks(n.sq, kBr);
  const std::int64_t heads = n.batch * n.heads;
  const std::int64_t bh = task % heads;
  const std::int64_t i0 = (q_blocks - 1 - task / heads) * kBr;  // the last (most keys) first
  const std::int64_t mr = std::min(kBr, n.sq - i0);
  const std::int64_t mp = roundUp(mr, kMr);
  const Slices<const T> q(job.q), k(job.k), v(job.v);
  const Slices<T> o(job.o);
  const T* q_base = q.slice(bh, n.heads) + i0 * q.rs;
  const T* k_base = k.slice(kvPair(n, bh), n.kv_heads);
  const T* v_base = v.slice(kvPair(n, bh), n.kv_heads);

  loadRows(q_base, q.rs, q.cs, mr, n.d, job.scale_log2, s.q.data(), job.dp, mp, job.dp);
  std::fill(s.o.begin(), s.o.end(), 0.0f);
  std::fill(s.m.begin(), s.m.end(), -kInf);
  std::fill(s.l.begin(), s.l.end(), 0.0f);
  const std::int64_t kv_end = job.causal ? std::min(n.sk, i0 + mr) : n.sk;
  for (std::int64_t j0 = 0; j0 < kv_end; j0 += kBc) {
    const std::int64_t nc = std::min(kBc, kv_end - j0);
    const std::int64_t ncp = roundUp(nc, kNr);
    loadTransposed(k_base + j0 * k.rs, k.rs, k.cs, nc, n.d, s.kt.data(), kBc, ncp);
    loadRows(v_base + j0 * v.rs, v.rs, v.cs, nc, n.dv, 1.0f, s.v.data(), job.dvp, nc, job.dvp);
    // The keys the last row of the row tile at t sees (the most in the tile).
    const auto tile_visible = [&](std::int64_t t) {
      return visibleInBlock(job.causal, i0 + t + kMr - 1, j0, nc);
    };
    tileGemm<kFma, false>(mp, s.q.data(), job.dp, s.kt.data(), kBc, s.s.data(), kBc, false,
                          [&](std::int64_t t) {
                            return Span{roundUp(tile_visible(t), kNr), 0, n.d};
                          });
    for (std::int64_t r = 0; r < mr; ++r) {
      float* row = s.s.data() + r * kBc;
      const std::int64_t visible = visibleInBlock(job.causal, i0 + r, j0, nc);
      std::fill(row + visible, row + ncp, -kInf);
      const auto ur = static_cast<std::size_t>(r);
      softmaxStep<kFma>(row, ncp, s.m[ur], s.l[ur], s.o.data() + r * job.dvp, job.dvp);
    }
    // Rows [mr, mp) hold finite scores of zero padding; their outputs are never stored.
    tileGemm<kFma, false>(mp, s.s.data(), kBc, s.v.data(), job.dvp, s.o.data(), job.dvp, true,
                          [&](std::int64_t t) {
                            return Span{job.dvp, 0, tile_visible(t)};
                          });
  }
  T* o_base = o.slice(bh, n.heads) + i0 * o.rs;
  float* lse = typed<float>(job.lse);
  const std::int64_t lse_base = (bh / n.heads) * job.lse.stride(0) + (bh % n.heads) * job.lse.stride(1);
  for (std::int64_t r = 0; r < mr; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    const float l = s.l[ur];
    const float inv = l > 0.0f ? 1.0f / l : (l == 0.0f ? 0.0f : l);  // l NaN: NaN row
    for (std::int64_t e = 0; e < n.dv; ++e)
      o_base[r * o.rs + e * o.cs] = store<T>(s.o[ur * job.dvp + e] * inv);
    lse[lse_base + (i0 + r) * job.lse.stride(2)] = l == 0.0f ? -kInf : (s.m[ur] + std::log2(l)) * kLn2;
  }
}

template <typename T>
[[gnu::target("avx2,fma")]] void forwardTaskAvx2(const ForwardJob& job, std::int64_t task,
                                                 ForwardScratch& s) {
  forwardTaskBody<T, true>(job, task, s);
}
template <typename T>
void forwardTaskPortable(const ForwardJob& job, std::int64_t task, ForwardScratch& s) {
  forwardTaskBody<T, false>(job, task, s);
}

template <typename T>
void forwardKernel(const ForwardJob& job, int cores) {
  const std::int64_t tasks = job.n.batch * job.n.heads * blocks(job.n.sq, kBr);
  const auto run = cpuHasAvx2Fma() ? &forwardTaskAvx2<T> : &forwardTaskPortable<T>;
  runTasks<ForwardScratch>(
      tasks, cores, [&] { return ForwardScratch(job); },
      [&](std::int64_t t, ForwardScratch& s) { run(job, t, s); });
}

// ---- backward ----

struct BackwardJob {
  TensorView grad_o, q, k, v, o, lse, grad_q, grad_k, grad_v;
  Sizes n;
  bool causal = false;
  float scale = 0, scale_log2 = 0;
  std::int64_t dp = 0, dvp = 0;
  const float* lse2 = nullptr;   // [B*H*Sq]: lse * log2(e), +inf where lse is -inf (P = 0)
  const float* delta = nullptr;  // [B*H*Sq]: D_i = rowsum(dO ∘ O)
};

struct BackwardScratch {
  // query block: Q * scale * log2(e), dO, lse2, D
  std::vector<float> qs, dout, lse2, delta;
  // key block: K^T, K, V^T
  std::vector<float> kt, kn, vt;
  // P and dP (then dS), accumulators dK and dV of a key block, dQ of a query block (split mode)
  std::vector<float> p, dpm, dk, dv, dq;
  explicit BackwardScratch(const BackwardJob& job)
      : qs(static_cast<std::size_t>(kBr * job.dp)),
        dout(static_cast<std::size_t>(kBr * job.dvp)),
        lse2(static_cast<std::size_t>(kBr)),
        delta(static_cast<std::size_t>(kBr)),
        kt(static_cast<std::size_t>(job.n.d * kBc)),
        kn(static_cast<std::size_t>(kBc * job.dp)),
        vt(static_cast<std::size_t>(job.n.dv * kBc)),
        p(static_cast<std::size_t>(kBr * kBc)),
        dpm(static_cast<std::size_t>(kBr * kBc)),
        dk(static_cast<std::size_t>(kBc * job.dp)),
        dv(static_cast<std::size_t>(kBc * job.dvp)),
        dq(static_cast<std::size_t>(kBr * job.dp)) {}
};

struct QueryBlock {
  std::int64_t i0 = 0, mr = 0, mp = 0;
};
struct KeyBlock {
  std::int64_t j0 = 0, nc = 0, ncp = 0;
};

template <typename T>
[[gnu::always_inline]] inline QueryBlock loadQueryBlock(const BackwardJob& job, std::int64_t bh,
                                                        std::int64_t qb, BackwardScratch& s) {
  const Sizes& n = job.n;
  QueryBlock blk;
  blk.i0 = qb * kBr;
  blk.mr = std::min(kBr, n.sq - blk.i0);
  blk.mp = roundUp(blk.mr, kMr);
  const Slices<const T> q(job.q), go(job.grad_o);
  loadRows(q.slice(bh, n.heads) + blk.i0 * q.rs, q.rs, q.cs, blk.mr, n.d, job.scale_log2, s.qs.data(), job.dp,
           blk.mp, job.dp);
  loadRows(go.slice(bh, n.heads) + blk.i0 * go.rs, go.rs, go.cs, blk.mr, n.dv, 1.0f, s.dout.data(), job.dvp,
           blk.mp, job.dvp);
  const std::int64_t row0 = bh * n.sq + blk.i0;
  for (std::int64_t r = 0; r < kBr; ++r) {
    const auto u = static_cast<std::size_t>(r);
    s.lse2[u] = r < blk.mr ? job.lse2[row0 + r] : kInf;
    s.delta[u] = r < blk.mr ? job.delta[row0 + r] : 0.0f;
  }
  return blk;
}

// Key block kb of (batch, key/value head) pair bkv.
template <typename T>
[[gnu::always_inline]] inline KeyBlock loadKeyBlock(const BackwardJob& job, std::int64_t bkv, std::int64_t kb,
                                                    BackwardScratch& s) {
  const Sizes& n = job.n;
  KeyBlock blk;
  blk.j0 = kb * kBc;
  blk.nc = std::min(kBc, n.sk - blk.j0);
  blk.ncp = roundUp(blk.nc, kNr);
  const Slices<const T> k(job.k), v(job.v);
  const T* k_base = k.slice(bkv, n.kv_heads) + blk.j0 * k.rs;
  loadTransposed(k_base, k.rs, k.cs, blk.nc, n.d, s.kt.data(), kBc, blk.ncp);
  loadRows(k_base, k.rs, k.cs, blk.nc, n.d, 1.0f, s.kn.data(), job.dp, blk.nc, job.dp);
  loadTransposed(v.slice(bkv, n.kv_heads) + blk.j0 * v.rs, v.rs, v.cs, blk.nc, n.dv, s.vt.data(), kBc,
                 blk.ncp);
  return blk;
}

// One row of a pair: P = 2^(S - lse2) on the visible keys (0 elsewhere) replaces S in prow, and
// dS = P (dP - D) replaces dP in drow (0 past the visible keys, where S and dP were not computed).
template <bool kFma>
[[gnu::always_inline]] inline void rowGradients(float* __restrict prow, float* __restrict drow, int ncp,
                                                int visible, float lse2, float delta) {
  for (int c = 0; c < ncp; ++c) {
    const float pv = select(c < visible, exp2Approx<kFma>(prow[c] - lse2), 0.0f);
    prow[c] = pv;
    drow[c] = select(c < visible, pv * (drow[c] - delta), 0.0f);  // dP past the visible keys is stale
  }
}

// The gradients of one (query block, key block) pair: P and dS recomputed, then dV += P^T dO and
// dK += dS^T Q' into dk/dv when given (dK in units of scale * log2(e)), dQ += dS K into dq when given
// (in units of 1/scale).
template <bool kFma>
[[gnu::always_inline]] inline void pairGradients(const BackwardJob& job, const QueryBlock& qb,
                                                 const KeyBlock& kb, BackwardScratch& s, float* dk, float* dv,
                                                 float* dq) {
  const Sizes& n = job.n;
  float* p = s.p.data();
  float* ds = s.dpm.data();
  // The keys the last query of the row tile at t sees (the most in the tile), and the first query of the
  // block that sees key t.
  const auto tile_visible = [&](std::int64_t t) {
    return visibleInBlock(job.causal, qb.i0 + t + kMr - 1, kb.j0, kb.nc);
  };
  const auto first_query = [&](std::int64_t t) {
    return job.causal ? std::clamp<std::int64_t>(kb.j0 + t - qb.i0, 0, qb.mr) : std::int64_t{0};
  };
  tileGemm<kFma, false>(qb.mp, s.qs.data(), job.dp, s.kt.data(), kBc, p, kBc, false, [&](std::int64_t t) {
    return Span{roundUp(tile_visible(t), kNr), 0, n.d};
  });  // S
  tileGemm<kFma, false>(qb.mp, s.dout.data(), job.dvp, s.vt.data(), kBc, ds, kBc, false, [&](std::int64_t t) {
    return Span{roundUp(tile_visible(t), kNr), 0, n.dv};
  });  // dP
  for (std::int64_t r = 0; r < qb.mp; ++r) {
    const auto u = static_cast<std::size_t>(r);
    const float lse2 = s.lse2[u];
    const float delta = s.delta[u];
    const std::int64_t visible = visibleInBlock(job.causal, qb.i0 + r, kb.j0, kb.nc);
    rowGradients<kFma>(p + r * kBc, ds + r * kBc, static_cast<int>(kb.ncp), static_cast<int>(visible), lse2,
                       delta);
  }
  const std::int64_t ncr = roundUp(kb.nc, kMr);
  if (dv != nullptr)
    tileGemm<kFma, true>(ncr, p, kBc, s.dout.data(), job.dvp, dv, job.dvp, true, [&](std::int64_t t) {
      return Span{job.dvp, first_query(t), qb.mr};
    });
  if (dk != nullptr) {
    tileGemm<kFma, true>(ncr, ds, kBc, s.qs.data(), job.dp, dk, job.dp, true, [&](std::int64_t t) {
      return Span{job.dp, first_query(t), qb.mr};
    });
  }
  if (dq != nullptr)
    tileGemm<kFma, false>(qb.mp, ds, kBc, s.kn.data(), job.dp, dq, job.dp, true, [&](std::int64_t t) {
      return Span{job.dp, 0, tile_visible(t)};
    });
}

// The float32 dQ accumulator of each query head of a group, [Sq rounded up to kBr] x dp apiece.
inline std::size_t dqHeadSize(const BackwardJob& job) {
  return static_cast<std::size_t>(blocks(job.n.sq, kBr) * kBr * job.dp);
}

// dK and dV of key block kb of (batch, key/value head) pair bkv, over every query block of each query head
// of its group that sees it (heads in order, then query blocks); with dq_heads (the group's dQ accumulators,
// dqHeadSize() apiece), dQ as well.
template <typename T, bool kFma>
[[gnu::always_inline]] inline void keyTaskBody(const BackwardJob& job, std::int64_t bkv, std::int64_t kb,
                                               BackwardScratch& s, float* dq_heads) {
  const Sizes& n = job.n;
  const KeyBlock key = loadKeyBlock<T>(job, bkv, kb, s);
  std::fill(s.dk.begin(), s.dk.end(), 0.0f);
  std::fill(s.dv.begin(), s.dv.end(), 0.0f);
  const std::int64_t first = job.causal ? key.j0 / kBr : 0;  // earlier queries see none of these keys
  const std::int64_t group = n.group();
  for (std::int64_t g = 0; g < group; ++g) {
    const std::int64_t bh = (bkv / n.kv_heads) * n.heads + (bkv % n.kv_heads) * group + g;
    float* dq_head = dq_heads != nullptr ? dq_heads + static_cast<std::size_t>(g) * dqHeadSize(job) : nullptr;
    for (std::int64_t qb = first; qb < blocks(n.sq, kBr); ++qb) {
      const QueryBlock query = loadQueryBlock<T>(job, bh, qb, s);
      pairGradients<kFma>(job, query, key, s, s.dk.data(), s.dv.data(),
                          dq_head != nullptr ? dq_head + query.i0 * job.dp : nullptr);
    }
  }
  const Slices<T> gk(job.grad_k), gv(job.grad_v);
  storeRows(s.dk.data(), job.dp, key.nc, n.d, kLn2, gk.slice(bkv, n.kv_heads) + key.j0 * gk.rs, gk.rs, gk.cs);
  storeRows(s.dv.data(), job.dvp, key.nc, n.dv, 1.0f, gv.slice(bkv, n.kv_heads) + key.j0 * gv.rs, gv.rs,
            gv.cs);
}

// dQ of query block qb of bh, over every key block it sees.
template <typename T, bool kFma>
[[gnu::always_inline]] inline void queryTaskBody(const BackwardJob& job, std::int64_t bh, std::int64_t qb,
                                                 BackwardScratch& s) {
  const Sizes& n = job.n;
  const QueryBlock query = loadQueryBlock<T>(job, bh, qb, s);
  std::fill(s.dq.begin(), s.dq.end(), 0.0f);
  const std::int64_t kv_end = job.causal ? std::min(n.sk, query.i0 + query.mr) : n.sk;
  for (std::int64_t kb = 0; kb < blocks(kv_end, kBc); ++kb) {
    const KeyBlock key = loadKeyBlock<T>(job, kvPair(n, bh), kb, s);
    pairGradients<kFma>(job, query, key, s, nullptr, nullptr, s.dq.data());
  }
  const Slices<T> gq(job.grad_q);
  storeRows(s.dq.data(), job.dp, query.mr, n.d, job.scale, gq.slice(bh, n.heads) + query.i0 * gq.rs, gq.rs,
            gq.cs);
}

// One (batch, key/value head): every key block, with dQ accumulated for each query head of the group.
template <typename T, bool kFma>
[[gnu::always_inline]] inline void headTaskBody(const BackwardJob& job, std::int64_t bkv, BackwardScratch& s,
                                                std::vector<float>& dq_heads) {
  const Sizes& n = job.n;
  const std::int64_t group = n.group();
  dq_heads.assign(static_cast<std::size_t>(group) * dqHeadSize(job), 0.0f);
  for (std::int64_t kb = 0; kb < blocks(n.sk, kBc); ++kb)
    keyTaskBody<T, kFma>(job, bkv, kb, s, dq_heads.data());
  const Slices<T> gq(job.grad_q);
  for (std::int64_t g = 0; g < group; ++g) {
    const std::int64_t bh = (bkv / n.kv_heads) * n.heads + (bkv % n.kv_heads) * group + g;
    storeRows(dq_heads.data() + static_cast<std::size_t>(g) * dqHeadSize(job), job.dp, n.sq, n.d, job.scale,
              gq.slice(bh, n.heads), gq.rs, gq.cs);
  }
}

template <typename T>
[[gnu::target("avx2,fma")]] void keyTaskAvx2(const BackwardJob& job, std::int64_t bkv, std::int64_t kb,
                                             BackwardScratch& s) {
  keyTaskBody<T, true>(job, bkv, kb, s, nullptr);
}
template <typename T>
void keyTaskPortable(const BackwardJob& job, std::int64_t bkv, std::int64_t kb, BackwardScratch& s) {
  keyTaskBody<T, false>(job, bkv, kb, s, nullptr);
}
template <typename T>
[[gnu::target("avx2,fma")]] void queryTaskAvx2(const BackwardJob& job, std::int64_t bh, std::int64_t qb,
                                               BackwardScratch& s) {
  queryTaskBody<T, true>(job, bh, qb, s);
}
template <typename T>
void queryTaskPortable(const BackwardJob& job, std::int64_t bh, std::int64_t qb, BackwardScratch& s) {
  queryTaskBody<T, false>(job, bh, qb, s);
}
template <typename T>
[[gnu::target("avx2,fma")]] void headTaskAvx2(const BackwardJob& job, std::int64_t bkv, BackwardScratch& s,
                                              std::vector<float>& dq_heads) {
  headTaskBody<T, true>(job, bkv, s, dq_heads);
}
template <typename T>
void headTaskPortable(const BackwardJob& job, std::int64_t bkv, BackwardScratch& s,
                      std::vector<float>& dq_heads) {
  headTaskBody<T, false>(job, bkv, s, dq_heads);
}

// lse2 and D of every row.
template <typename T>
void rowStatistics(const BackwardJob& job, int cores, std::vector<float>& lse2, std::vector<float>& delta) {
  const Sizes& n = job.n;
  const std::int64_t rows = n.batch * n.heads * n.sq;
  const Slices<const T> go(job.grad_o), o(job.o);
  const float* lse = typed<const float>(job.lse);
  parallelFor(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(n.dv, 1)), cores,
              [&](std::int64_t begin, std::int64_t end) {
                for (std::int64_t row = begin; row < end; ++row) {
                  const std::int64_t bh = row / n.sq, i = row % n.sq;
                  const T* g = go.slice(bh, n.heads) + i * go.rs;
                  const T* y = o.slice(bh, n.heads) + i * o.rs;
                  float d = 0.0f;
                  for (std::int64_t e = 0; e < n.dv; ++e)
                    d += load<float>(g[e * go.cs]) * load<float>(y[e * o.cs]);
                  const float l = lse[(bh / n.heads) * job.lse.stride(0) +
                                      (bh % n.heads) * job.lse.stride(1) + i * job.lse.stride(2)];
                  lse2[static_cast<std::size_t>(row)] = l == -kInf ? kInf : l * kLog2e;
                  delta[static_cast<std::size_t>(row)] = d;
                }
              });
}

template <typename T>
void backwardKernel(BackwardJob job, int cores) {
  const Sizes& n = job.n;
  const std::int64_t heads = n.batch * n.heads;
  std::vector<float> lse2(static_cast<std::size_t>(heads * n.sq)), delta(lse2.size());
  rowStatistics<T>(job, cores, lse2, delta);
  job.lse2 = lse2.data();
  job.delta = delta.data();
  const bool fma = cpuHasAvx2Fma();
  const auto make = [&] { return BackwardScratch(job); };
  const std::int64_t kv_pairs = n.batch * n.kv_heads;  // a task's dK/dV: one key/value head's
  if (kv_pairs >= cores) {
    const auto run = fma ? &headTaskAvx2<T> : &headTaskPortable<T>;
    struct HeadScratch {
      BackwardScratch s;
      std::vector<float> dq_heads;
    };
    runTasks<HeadScratch>(
        kv_pairs, cores,
        [&] {
          return HeadScratch{make(), {}};
        },
        [&](std::int64_t bkv, HeadScratch& h) { run(job, bkv, h.s, h.dq_heads); });
    return;
  }
  const std::int64_t k_blocks = blocks(n.sk, kBc), q_blocks = blocks(n.sq, kBr);
  const auto key_task = fma ? &keyTaskAvx2<T> : &keyTaskPortable<T>;
  runTasks<BackwardScratch>(kv_pairs * k_blocks, cores, make, [&](std::int64_t t, BackwardScratch& s) {
    key_task(job, t % kv_pairs, t / kv_pairs, s);  // the first key block (most queries) first
  });
  const auto query_task = fma ? &queryTaskAvx2<T> : &queryTaskPortable<T>;
  runTasks<BackwardScratch>(heads * q_blocks, cores, make, [&](std::int64_t t, BackwardScratch& s) {
    query_task(job, t % heads, q_blocks - 1 - t / heads, s);  // the last query block first
  });
}

// Calls f.template operator()<T>() for the device's floating storage types.
template <typename F>
void dispatchDevice(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      f.template operator()<float>();
      break;
    case MLUOP_DTYPE_HALF:
      f.template operator()<Half>();
      break;
    case MLUOP_DTYPE_BFLOAT16:
      f.template operator()<BFloat16>();
      break;
    default:
      break;
  }
}

// ---- variable-length attention: each packed sequence run as one batch entry of the dense kernels ----

// Every element of a packed [T, H, X] tensor set to value.
template <typename T>
void fillPacked(const TensorView& t, float value) {
  T* d = typed<T>(t);
  const T v = store<T>(value);
  for (std::int64_t i = 0; i < t.dim(0); ++i)
    for (std::int64_t h = 0; h < t.dim(1); ++h)
      for (std::int64_t e = 0; e < t.dim(2); ++e) d[i * t.stride(0) + h * t.stride(1) + e * t.stride(2)] = v;
}

void fillLse(const TensorView& lse, float value) {
  float* d = typed<float>(lse);
  for (std::int64_t h = 0; h < lse.dim(0); ++h)
    for (std::int64_t i = 0; i < lse.dim(1); ++i) d[h * lse.stride(0) + i * lse.stride(1)] = value;
}

// The offsets of both sides, or nothing when they do not describe sequences inside q's and k's rows (the
// call cannot report it: the outputs become NaN).
bool sequenceOffsets(const TensorView& cu_seqlens_q, const TensorView& cu_seqlens_k, std::int64_t tq,
                     std::int64_t tk, std::vector<std::int64_t>& cu_q, std::vector<std::int64_t>& cu_k) {
  cu_q = attention::readOffsets(cu_seqlens_q);
  cu_k = attention::readOffsets(cu_seqlens_k);
  return attention::validOffsets(cu_q, tq) && attention::validOffsets(cu_k, tk);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows no sequence covers (padding past the last offset) get o = 0 and lse = -inf, as a row that sees no key.
template <typename T>
void varlenForwardKernel(const attention_varlen_forward_args& a, int cores) {
  std::vector<std::int64_t> cu_q, cu_k;
  const bool valid = sequenceOffsets(a.cu_seqlens_q, a.cu_seqlens_k, a.q.dim(0), a.k.dim(0), cu_q, cu_k);
  fillPacked<T>(a.o, valid ? 0.0f : kNaN);
  fillLse(a.lse, valid ? -kInf : kNaN);
  if (!valid) return;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    if (cu_q[b + 1] == cu_q[b]) continue;
    ForwardJob job;
    job.q = attention::sequenceView(a.q, cu_q[b], cu_q[b + 1]);
    job.k = attention::sequenceView(a.k, cu_k[b], cu_k[b + 1]);
    job.v = attention::sequenceView(a.v, cu_k[b], cu_k[b + 1]);
    job.o = attention::sequenceView(a.o, cu_q[b], cu_q[b + 1]);
    job.lse = attention::sequenceLse(a.lse, cu_q[b], cu_q[b + 1]);
    job.n = attention::sizesOf(job.q, job.k, job.v);
    job.causal = a.causal;
    job.scale_log2 = static_cast<float>(attention::effectiveScale(a.scale, job.n.d) * 1.4426950408889634);
    job.dp = roundUp(job.n.d, kNr);
    job.dvp = roundUp(job.n.dv, kNr);
    forwardKernel<T>(job, cores);
  }
}

// Gradients of rows no sequence covers are 0.
template <typename T>
void varlenBackwardKernel(const attention_varlen_backward_args& a, int cores) {
  std::vector<std::int64_t> cu_q, cu_k;
  const bool valid = sequenceOffsets(a.cu_seqlens_q, a.cu_seqlens_k, a.q.dim(0), a.k.dim(0), cu_q, cu_k);
  for (const TensorView* g : {&a.grad_q, &a.grad_k, &a.grad_v}) fillPacked<T>(*g, valid ? 0.0f : kNaN);
  if (!valid) return;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    if (cu_q[b + 1] == cu_q[b] || cu_k[b + 1] == cu_k[b]) continue;  // no key or no query: zero gradients
    const auto rows = [&](const TensorView& t, const std::vector<std::int64_t>& cu) {
      return attention::sequenceView(t, cu[b], cu[b + 1]);
    };
    BackwardJob job;
    job.grad_o = rows(a.grad_o, cu_q);
    job.q = rows(a.q, cu_q);
    job.k = rows(a.k, cu_k);
    job.v = rows(a.v, cu_k);
    job.o = rows(a.o, cu_q);
    job.lse = attention::sequenceLse(a.lse, cu_q[b], cu_q[b + 1]);
    job.grad_q = rows(a.grad_q, cu_q);
    job.grad_k = rows(a.grad_k, cu_k);
    job.grad_v = rows(a.grad_v, cu_k);
    job.n = attention::sizesOf(job.q, job.k, job.v);
    job.causal = a.causal;
    const double scale = attention::effectiveScale(a.scale, job.n.d);
    job.scale = static_cast<float>(scale);
    job.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
    job.dp = roundUp(job.n.d, kNr);
    job.dvp = roundUp(job.n.dv, kNr);
    backwardKernel<T>(job, cores);
  }
}

}  // namespace

Status device(const Launch& launch, const attention_varlen_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.q.dtype, [&]<typename T>() { varlenForwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const attention_varlen_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.q.dtype, [&]<typename T>() { varlenBackwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const scaled_dot_product_attention_forward_args& a) {
  ForwardJob job;
  job.q = a.q;
  job.k = a.k;
  job.v = a.v;
  job.o = a.o;
  job.lse = a.lse;
  job.n = attention::sizesOf(a.q, a.k, a.v);
  job.causal = a.causal;
  job.scale_log2 = static_cast<float>(attention::effectiveScale(a.scale, job.n.d) * 1.4426950408889634);
  job.dp = roundUp(job.n.d, kNr);
  job.dvp = roundUp(job.n.dv, kNr);
  return launch.enqueue([job, cores = launch.cores()] {
    dispatchDevice(job.q.dtype, [&]<typename T>() { forwardKernel<T>(job, cores); });
  });
}

Status device(const Launch& launch, const scaled_dot_product_attention_backward_args& a) {
  BackwardJob job;
  job.grad_o = a.grad_o;
  job.q = a.q;
  job.k = a.k;
  job.v = a.v;
  job.o = a.o;
  job.lse = a.lse;
  job.grad_q = a.grad_q;
  job.grad_k = a.grad_k;
  job.grad_v = a.grad_v;
  job.n = attention::sizesOf(a.q, a.k, a.v);
  job.causal = a.causal;
  const double scale = attention::effectiveScale(a.scale, job.n.d);
  job.scale = static_cast<float>(scale);
  job.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  job.dp = roundUp(job.n.d, kNr);
  job.dvp = roundUp(job.n.dv, kNr);
  return launch.enqueue([job, cores = launch.cores()] {
    dispatchDevice(job.q.dtype, [&]<typename T>() { backwardKernel<T>(job, cores); });
  });
}

}  // namespace mlu
