// Device kernels of the normalization (layer_norm, rms_norm, batch_norm, forward and backward) and rotary
// position embedding (rope, forward and backward) ops.
//
// Device numerics, on purpose not the reference's: elements are loaded into float32 (float16/bfloat16 are
// rounded once, when stored); the statistics are float32; sums accumulate in float32 inside fixed blocks
// (kSumBlock elements of a row, in blocked_sum.h's 8 lanes; kRowBlock rows of a column, sequentially) and the
// block sums are then added pairwise, so the order depends only on the shapes, never on the number of cores.
// layer_norm and batch_norm take the variance in two passes (mean first), which stays accurate for large
// means.
//
// layer_norm/rms_norm split the rows (the leading dims) across the cores; each row is gathered into a
// float32 buffer (a plain loop when its normalized dims are dense, a strided walk otherwise), normalized
// and stored. Their weight/bias gradients are column sums over the rows: each block of kRowBlock rows
// sums into its own partial row, and the partials are added pairwise afterwards, so there are no races.
// batch_norm splits the channels across the cores. rope builds a cos/sin table (angles in float64, cos and
// sin rounded to float32) and splits the [B, S, H] rows across the cores.
#include "blocked_sum.h"
#include "device.h"

#include "element.h"
#include "norm_shapes.h"
#include "reduce_shapes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mlu {
namespace {

using reduce::Cursor;
using reduce::IndexSpace;

constexpr std::int64_t kRowBlock = 32;  // rows of a weight gradient column summed sequentially
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Calls f.template operator()<T>() for the device's floating storage types (validate and the device rules
// have already refused everything else).
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

// Chunk size for parallelFor: at least ~kWorkPerChunk elements of work per chunk.
constexpr std::int64_t kWorkPerChunk = 16384;
std::int64_t grainFor(std::int64_t work_per_item) {
  return std::max<std::int64_t>(1, kWorkPerChunk / std::max<std::int64_t>(1, work_per_item));
}

// Some dims of a tensor walked in row-major order: dense when element k is simply at offset k.
struct Walk {
  IndexSpace space;
  bool dense = true;
  std::int64_t run = 1;  // elements of the innermost dims that lie one after another (stride 1)
  IndexSpace outer;      // the dims outside that run: one run of elements per index

  Walk(const TensorView& t, std::uint32_t mask, bool selected) : space(reduce::dimsOf(t, mask, selected)) {
    std::int64_t expected = 1;
    int first_outer = space.ndim;  // the dims [first_outer, ndim) make the run
    for (int i = space.ndim - 1; i >= 0; --i) {
      const auto u = static_cast<std::size_t>(i);
      const bool continues = space.sizes[u] == 1 || space.strides[u] == expected;
      if (!continues) dense = false;
      if (continues && first_outer == i + 1) {
        first_outer = i;
        run *= space.sizes[u];
      }
      expected *= space.sizes[u];
    }
    outer = space;
    outer.ndim = first_outer;
  }
  std::int64_t count() const { return space.count(); }
};

// The dims from `first` on, as a bit mask.
std::uint32_t dimsFrom(int first, int ndim) { return ((1u << ndim) - 1u) & ~((1u << first) - 1u); }

// Loads the n elements `walk` visits from base into buf (float32).
template <typename T>
void gather(const T* base, const Walk& walk, std::int64_t n, float* buf) {
  if (walk.dense) {
    for (std::int64_t k = 0; k < n; ++k) buf[k] = load<float>(base[k]);
    return;
  }
  if (walk.run > 1) {  // run by run (a batch norm channel: one image plane after another)
    Cursor c(walk.outer, 0);
    for (std::int64_t k = 0; k < n; k += walk.run, c.next()) {
      const T* src = base + c.offset();
      for (std::int64_t j = 0; j < walk.run; ++j) buf[k + j] = load<float>(src[j]);
    }
    return;
  }
  Cursor c(walk.space, 0);
  for (std::int64_t k = 0; k < n; ++k, c.next()) buf[k] = load<float>(base[c.offset()]);
}

// Stores buf into the n elements `walk` visits from base, rounding once.
template <typename T>
void scatter(T* base, const Walk& walk, std::int64_t n, const float* buf) {
  if (walk.dense) {
    for (std::int64_t k = 0; k < n; ++k) base[k] = store<T>(buf[k]);
    return;
  }
  if (walk.run > 1) {
    Cursor c(walk.outer, 0);
    for (std::int64_t k = 0; k < n; k += walk.run, c.next()) {
      T* dst = base + c.offset();
      for (std::int64_t j = 0; j < walk.run; ++j) dst[j] = store<T>(buf[k + j]);
    }
    return;
  }
  Cursor c(walk.space, 0);
  for (std::int64_t k = 0; k < n; ++k, c.next()) base[c.offset()] = store<T>(buf[k]);
}

// All elements of a tensor of type T as float32, in row-major order (empty if absent).
template <typename T>
std::vector<float> loadAll(const TensorView& t) {
  if (!t.present) return {};
  const Walk walk(t, 0u, false);
  std::vector<float> v(static_cast<std::size_t>(walk.count()));
  gather(typed<const T>(t), walk, walk.count(), v.data());
  return v;
}

// Element i of a 1-d floating tensor of any device dtype, as float32; and the store.
float loadAt(const TensorView& t, std::int64_t i) {
  float v = 0.0f;
  dispatchDevice(t.dtype, [&]<typename T>() { v = load<float>(typed<const T>(t)[i * t.stride(0)]); });
  return v;
}
void storeAt(const TensorView& t, std::int64_t i, float v) {
  dispatchDevice(t.dtype, [&]<typename T>() { typed<T>(t)[i * t.stride(0)] = store<T>(v); });
}

// ---- layer_norm / rms_norm ----

// Everything a layer_norm/rms_norm kernel needs to know about its row split.
struct RowSplit {
  int lead;           // leading dims
  std::int64_t rows;  // their product
  std::int64_t cols;  // the product of the normalized dims
};
RowSplit rowSplitOf(const TensorView& x, int normalized_ndim) {
  const int lead = x.ndim - normalized_ndim;
  return {lead, norm::product(norm::leadingShape(x, lead)), norm::product(norm::trailingShape(x, lead))};
}

// y = (x - mean) * rstd * weight + bias per row; rms_norm (kCentered false) has mean 0 and no bias.
template <typename T, bool kCentered>
void normForwardKernel(int normalized_ndim, float eps, const TensorView& x, const TensorView& weight,
                       const TensorView& bias, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd, int cores) {
  const RowSplit rs = rowSplitOf(x, normalized_ndim);
  if (rs.rows == 0) return;
  const std::uint32_t inner = dimsFrom(rs.lead, x.ndim);
  const Walk x_rows(x, inner, false), x_cols(x, inner, true);
  const Walk y_rows(y, inner, false), y_cols(y, inner, true);
  const IndexSpace mean_at = reduce::allDims(mean), rstd_at = reduce::allDims(rstd);
  const std::vector<float> w = loadAll<T>(weight), b = loadAll<T>(bias);
  const T* xd = typed<const T>(x);
  T* yd = typed<T>(y);
  const std::int64_t k = rs.cols;
  const float inv_k = 1.0f / static_cast<float>(k);  // inf for k == 0: the empty row's stats are NaN
  parallelFor(rs.rows, grainFor(4 * k), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> buf(static_cast<std::size_t>(k));
    float* v = buf.data();
    for (std::int64_t r = begin; r < end; ++r) {
      gather(xd + x_rows.space.offset(r), x_cols, k, v);
      float mu = 0.0f;
      if constexpr (kCentered)
        mu = k == 0 ? kNaN : blockedSum(k, [&](std::int64_t i) { return v[i]; }) * inv_k;
      const float ss = blockedSum(k, [&](std::int64_t i) {
        const float d = v[i] - mu;
        return d * d;
      });
      const float r_std = 1.0f / std::sqrt((k == 0 ? kNaN : ss * inv_k) + eps);
      for (std::int64_t i = 0; i < k; ++i) v[i] = (v[i] - mu) * r_std;
      if (!w.empty()) {
        for (std::int64_t i = 0; i < k; ++i) v[i] *= w[static_cast<std::size_t>(i)];
      }
      if (!b.empty()) {
        for (std::int64_t i = 0; i < k; ++i) v[i] += b[static_cast<std::size_t>(i)];
      }
      scatter(yd + y_rows.space.offset(r), y_cols, k, v);
      if constexpr (kCentered) typed<float>(mean)[mean_at.offset(r)] = mu;
      typed<float>(rstd)[rstd_at.offset(r)] = r_std;
    }
  });
}

// Per row, with xhat = (x - mean) * rstd and g = grad_output * weight:
//   grad_input = rstd * (g - mean(g) - xhat * mean(g * xhat))   (rms_norm: without mean(g))
// and the column sums grad_weight = sum grad_output * xhat, grad_bias = sum grad_output.
template <typename T, bool kCentered>
void normBackwardKernel(int normalized_ndim, const TensorView& grad_output, const TensorView& x,
                        const TensorView& mean, const TensorView& rstd, const TensorView& weight,
                        const TensorView& grad_input, const TensorView& grad_weight,
                        const TensorView& grad_bias, int cores) {
  const RowSplit rs = rowSplitOf(x, normalized_ndim);
  const std::int64_t k = rs.cols;
  if (k == 0) return;
  const std::uint32_t inner = dimsFrom(rs.lead, x.ndim);
  const Walk x_rows(x, inner, false), x_cols(x, inner, true);
  const Walk go_rows(grad_output, inner, false), go_cols(grad_output, inner, true);
  const Walk gi_rows(grad_input, inner, false), gi_cols(grad_input, inner, true);
  const IndexSpace mean_at = reduce::allDims(mean), rstd_at = reduce::allDims(rstd);
  const std::vector<float> w = loadAll<T>(weight);
  const T* xd = typed<const T>(x);
  const T* god = typed<const T>(grad_output);
  T* gid = typed<T>(grad_input);
  const float inv_k = 1.0f / static_cast<float>(k);
  const std::int64_t blocks = (rs.rows + kRowBlock - 1) / kRowBlock;
  const auto partial_size = static_cast<std::size_t>(blocks * k);
  std::vector<float> pw(grad_weight.present ? partial_size : 0), pb(grad_bias.present ? partial_size : 0);
  parallelFor(blocks, grainFor(kRowBlock * 6 * k), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> xb(static_cast<std::size_t>(k)), gb(static_cast<std::size_t>(k));
    float* xh = xb.data();
    float* g = gb.data();
    for (std::int64_t blk = begin; blk < end; ++blk) {
      float* pwb = pw.empty() ? nullptr : pw.data() + blk * k;
      float* pbb = pb.empty() ? nullptr : pb.data() + blk * k;
      for (std::int64_t r = blk * kRowBlock; r < std::min(rs.rows, (blk + 1) * kRowBlock); ++r) {
        gather(xd + x_rows.space.offset(r), x_cols, k, xh);
        gather(god + go_rows.space.offset(r), go_cols, k, g);
        const float mu = kCentered ? typed<const float>(mean)[mean_at.offset(r)] : 0.0f;
        const float r_std = typed<const float>(rstd)[rstd_at.offset(r)];
        for (std::int64_t i = 0; i < k; ++i) xh[i] = (xh[i] - mu) * r_std;
        if (pwb != nullptr) {
          for (std::int64_t i = 0; i < k; ++i) pwb[i] += g[i] * xh[i];
        }
        if (pbb != nullptr) {
          for (std::int64_t i = 0; i < k; ++i) pbb[i] += g[i];
        }
        if (!w.empty()) {
          for (std::int64_t i = 0; i < k; ++i) g[i] *= w[static_cast<std::size_t>(i)];
        }
        const float c1 = kCentered ? blockedSum(k, [&](std::int64_t i) { return g[i]; }) * inv_k : 0.0f;
        const float c2 = blockedSum(k, [&](std::int64_t i) { return g[i] * xh[i]; }) * inv_k;
        for (std::int64_t i = 0; i < k; ++i) g[i] = r_std * ((g[i] - c1) - xh[i] * c2);
        scatter(gid + gi_rows.space.offset(r), gi_cols, k, g);
      }
    }
  });
  // The column sums: the block partials of each column added pairwise.
  const auto columnSums = [&](const std::vector<float>& partial, const TensorView& out) {
    if (!out.present) return;
    const IndexSpace out_at = reduce::allDims(out);
    T* od = typed<T>(out);
    parallelFor(k, grainFor(blocks + 1), cores, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> col(static_cast<std::size_t>(blocks));
      for (std::int64_t i = begin; i < end; ++i) {
        for (std::int64_t blk = 0; blk < blocks; ++blk)
          col[static_cast<std::size_t>(blk)] = partial[blk * k + i];
        od[out_at.offset(i)] = store<T>(pairwiseSum(col.data(), blocks));
      }
    });
  };
  columnSums(pw, grad_weight);
  columnSums(pb, grad_bias);
}

// ---- batch_norm ----

constexpr std::uint32_t kChannelDim = 1u << 1;

template <typename T>
void batchNormForwardKernel(const batch_norm_forward_args& a, int cores) {
  const std::int64_t channels = a.x.dim(1);
  const Walk x_walk(a.x, kChannelDim, false), y_walk(a.y, kChannelDim, false);
  const std::int64_t m = x_walk.count();
  const float eps = static_cast<float>(a.eps), momentum = static_cast<float>(a.momentum);
  const float inv_m = 1.0f / static_cast<float>(m);
  const T* xd = typed<const T>(a.x);
  T* yd = typed<T>(a.y);
  parallelFor(channels, grainFor(4 * m), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> buf(static_cast<std::size_t>(m));
    float* v = buf.data();
    for (std::int64_t c = begin; c < end; ++c) {
      gather(xd + c * a.x.stride(1), x_walk, m, v);
      float mu = 0.0f, invstd = 0.0f;
      if (a.training) {
        mu = m == 0 ? kNaN : blockedSum(m, [&](std::int64_t i) { return v[i]; }) * inv_m;
        const float ss = blockedSum(m, [&](std::int64_t i) {
          const float d = v[i] - mu;
          return d * d;
        });
        invstd = 1.0f / std::sqrt((m == 0 ? kNaN : ss * inv_m) + eps);
        if (a.running_mean.present && m > 0) {
          const float unbiased = ss / static_cast<float>(m - 1);
          storeAt(a.running_mean, c, (1.0f - momentum) * loadAt(a.running_mean, c) + momentum * mu);
          storeAt(a.running_var, c, (1.0f - momentum) * loadAt(a.running_var, c) + momentum * unbiased);
        }
      } else {
        mu = loadAt(a.running_mean, c);
        invstd = 1.0f / std::sqrt(loadAt(a.running_var, c) + eps);
      }
      const float scale = a.weight.present ? invstd * loadAt(a.weight, c) : invstd;
      const float shift = a.bias.present ? loadAt(a.bias, c) : 0.0f;
      for (std::int64_t i = 0; i < m; ++i) v[i] = (v[i] - mu) * scale + shift;
      scatter(yd + c * a.y.stride(1), y_walk, m, v);
      if (a.save_mean.present) storeAt(a.save_mean, c, mu);
      if (a.save_invstd.present) storeAt(a.save_invstd, c, invstd);
    }
  });
}

template <typename T>
void batchNormBackwardKernel(const batch_norm_backward_args& a, int cores) {
  const std::int64_t channels = a.x.dim(1);
  const Walk x_walk(a.x, kChannelDim, false), go_walk(a.grad_output, kChannelDim, false),
      gi_walk(a.grad_input, kChannelDim, false);
  const std::int64_t m = x_walk.count();
  const float inv_m = 1.0f / static_cast<float>(m);
  const T* xd = typed<const T>(a.x);
  const T* god = typed<const T>(a.grad_output);
  T* gid = typed<T>(a.grad_input);
  parallelFor(channels, grainFor(5 * m), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> xb(static_cast<std::size_t>(m)), gb(static_cast<std::size_t>(m));
    float* xh = xb.data();
    float* g = gb.data();
    for (std::int64_t c = begin; c < end; ++c) {
      gather(xd + c * a.x.stride(1), x_walk, m, xh);
      gather(god + c * a.grad_output.stride(1), go_walk, m, g);
      const float mu = loadAt(a.save_mean, c), invstd = loadAt(a.save_invstd, c);
      for (std::int64_t i = 0; i < m; ++i) xh[i] = (xh[i] - mu) * invstd;
      const float sum_dy = blockedSum(m, [&](std::int64_t i) { return g[i]; });
      const float sum_dyx = blockedSum(m, [&](std::int64_t i) { return g[i] * xh[i]; });
      const float scale = a.weight.present ? invstd * loadAt(a.weight, c) : invstd;
      const float c1 = sum_dy * inv_m, c2 = sum_dyx * inv_m;
      for (std::int64_t i = 0; i < m; ++i) g[i] = scale * ((g[i] - c1) - xh[i] * c2);
      scatter(gid + c * a.grad_input.stride(1), gi_walk, m, g);
      if (a.grad_weight.present) storeAt(a.grad_weight, c, sum_dyx);
      if (a.grad_bias.present) storeAt(a.grad_bias, c, sum_dy);
    }
  });
}

// ---- rope ----

// Rotates the pairs (x[i], x[i + D/2]) of every [b, s, h] row of x by (s + position_offset) * inv_freq_i
// (sign -1: backward). A row is read completely before it is written, so y may be x itself.
template <typename T>
void ropeKernel(double theta, std::int64_t position_offset, float sign, const TensorView& x,
                const TensorView& y, int cores) {
  if (x.numel() == 0) return;
  const std::int64_t ns = x.dim(1), nh = x.dim(2), nd = x.dim(3), half = nd / 2;
  // The cos/sin table of every position and frequency: angles in float64 (exact for large positions).
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[static_cast<std::size_t>(i)] =
        std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(nd));
  std::vector<float> cos_t(static_cast<std::size_t>(ns * half)), sin_t(cos_t.size());
  parallelFor(ns, grainFor(half * 40), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t s = begin; s < end; ++s) {
      const auto pos = static_cast<double>(s + position_offset);
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = pos * inv_freq[static_cast<std::size_t>(i)];
        cos_t[static_cast<std::size_t>(s * half + i)] = static_cast<float>(std::cos(angle));
        sin_t[static_cast<std::size_t>(s * half + i)] = sign * static_cast<float>(std::sin(angle));
      }
    }
  });
  const T* xd = typed<const T>(x);
  T* yd = typed<T>(y);
  const std::int64_t xs0 = x.stride(0), xs1 = x.stride(1), xs2 = x.stride(2), xs3 = x.stride(3);
  const std::int64_t ys0 = y.stride(0), ys1 = y.stride(1), ys2 = y.stride(2), ys3 = y.stride(3);
  const bool dense = xs3 == 1 && ys3 == 1;
  parallelFor(x.dim(0) * ns * nh, grainFor(2 * nd), cores, [&](std::int64_t begin, std::int64_t end) {
    // The row goes through float32 buffers: the loads, the rotation and the stores are separate loops
    // without aliasing (y may be x), which the compiler vectorizes.
    std::vector<float> buf(static_cast<std::size_t>(2 * nd));
    float* in = buf.data();
    float* out = in + nd;
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t h = row % nh, s = (row / nh) % ns, b = row / (nh * ns);
      const T* xp = xd + b * xs0 + s * xs1 + h * xs2;
      T* yp = yd + b * ys0 + s * ys1 + h * ys2;
      const float* cs = cos_t.data() + s * half;
      const float* sn = sin_t.data() + s * half;
      if (dense) {
        for (std::int64_t i = 0; i < nd; ++i) in[i] = load<float>(xp[i]);
      } else {
        for (std::int64_t i = 0; i < nd; ++i) in[i] = load<float>(xp[i * xs3]);
      }
      for (std::int64_t i = 0; i < half; ++i) {
        out[i] = in[i] * cs[i] - in[i + half] * sn[i];
        out[i + half] = in[i + half] * cs[i] + in[i] * sn[i];
      }
      if (dense) {
        for (std::int64_t i = 0; i < nd; ++i) yp[i] = store<T>(out[i]);
      } else {
        for (std::int64_t i = 0; i < nd; ++i) yp[i * ys3] = store<T>(out[i]);
      }
    }
  });
}

}  // namespace

Status device(const Launch& launch, const layer_norm_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype, [&]<typename T>() {
      normForwardKernel<T, true>(a.normalized_ndim, static_cast<float>(a.eps), a.x, a.weight, a.bias, a.y,
                                 a.mean, a.rstd, cores);
    });
  });
}

Status device(const Launch& launch, const layer_norm_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype, [&]<typename T>() {
      normBackwardKernel<T, true>(a.normalized_ndim, a.grad_output, a.x, a.mean, a.rstd, a.weight,
                                  a.grad_input, a.grad_weight, a.grad_bias, cores);
    });
  });
}

Status device(const Launch& launch, const rms_norm_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype, [&]<typename T>() {
      normForwardKernel<T, false>(a.normalized_ndim, static_cast<float>(a.eps), a.x, a.weight, TensorView{},
                                  a.y, TensorView{}, a.rstd, cores);
    });
  });
}

Status device(const Launch& launch, const rms_norm_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype, [&]<typename T>() {
      normBackwardKernel<T, false>(a.normalized_ndim, a.grad_output, a.x, TensorView{}, a.rstd, a.weight,
                                   a.grad_input, a.grad_weight, TensorView{}, cores);
    });
  });
}

Status device(const Launch& launch, const batch_norm_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype, [&]<typename T>() { batchNormForwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const batch_norm_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype, [&]<typename T>() { batchNormBackwardKernel<T>(a, cores); });
  });
}

Status device(const Launch& launch, const rope_forward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.x.dtype,
                   [&]<typename T>() { ropeKernel<T>(a.theta, a.position_offset, 1.0f, a.x, a.y, cores); });
  });
}

Status device(const Launch& launch, const rope_backward_args& a) {
  return launch.enqueue([a, cores = launch.cores()] {
    dispatchDevice(a.grad_output.dtype, [&]<typename T>() {
      ropeKernel<T>(a.theta, a.position_offset, -1.0f, a.grad_output, a.grad_input, cores);
    });
  });
}

}  // namespace mlu
