// gemm_shapes.h — the shape rules of the matrix-product and convolution ops (matmul's broadcast batch
// dims, linear's flattening, a convolution's geometry), shared by the argument checks, the device kernels
// and the CPU reference so that all three agree on what a call means. Header-only: runtime/ops is compiled
// into both libraries.
#pragma once

#include <mlu/op_args.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

namespace mlu::gemm_shapes {

// "[2, 3]" for a list of dims.
template <typename It>
inline std::string dimsString(It begin, It end) {
  std::string s = "[";
  for (It it = begin; it != end; ++it) s += (it == begin ? "" : ", ") + std::to_string(*it);
  return s + "]";
}

// True when some two logical positions of t address the same element (e.g. a 0-stride broadcast view).
// Sorting the dims by stride, each stride must reach past everything the smaller-strided dims span.
inline bool overlapsItself(const TensorView& t) {
  if (t.numel() <= 1) return false;
  std::array<int, MLUOP_DIM_MAX> order{};
  int n = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.dim(d) > 1) order[static_cast<std::size_t>(n++)] = d;
  }
  // Insertion sort by stride (at most 8 dims; std::sort trips GCC 12's -Warray-bounds here).
  for (int i = 1; i < n; ++i) {
    for (int j = i; j > 0 && t.stride(order[static_cast<std::size_t>(j)]) <
                                 t.stride(order[static_cast<std::size_t>(j - 1)]);
         --j) {
      std::swap(order[static_cast<std::size_t>(j)], order[static_cast<std::size_t>(j - 1)]);
    }
  }
  std::int64_t span = 0;  // elements covered by the dims visited so far, minus one
  for (int i = 0; i < n; ++i) {
    const int d = order[static_cast<std::size_t>(i)];
    if (t.stride(d) <= span) return true;
    span += (t.dim(d) - 1) * t.stride(d);
  }
  return false;
}

// ---- matmul ----

// What matmul(trans_a, trans_b, a, b) computes: c[batch..., m, n] = sum_k a[batch..., m, k] b[batch..., k, n]
// with the batch dims of a and b right-aligned and broadcast (numpy rules).
struct MatmulShape {
  std::int64_t m = 0, n = 0, k = 0;
  int batch_ndim = 0;                               // batch dims of the output
  std::array<std::int64_t, MLUOP_DIM_MAX> batch{};  // their sizes
  // Element strides of a, b and c along each output batch dim (0 where broadcast or absent).
  std::array<std::int64_t, MLUOP_DIM_MAX> a_batch_stride{}, b_batch_stride{}, c_batch_stride{};
  // Strides of a as [m, k] and of b as [k, n], after the transpose flags.
  std::int64_t a_row_stride = 0, a_col_stride = 0, b_row_stride = 0, b_col_stride = 0;

  std::int64_t batchCount() const {
    std::int64_t count = 1;
    for (int d = 0; d < batch_ndim; ++d) count *= batch[static_cast<std::size_t>(d)];
    return count;
  }
  // The shape c must have.
  std::string outputString() const {
    std::array<std::int64_t, MLUOP_DIM_MAX> dims{};
    std::copy(batch.begin(), batch.begin() + batch_ndim, dims.begin());
    dims[static_cast<std::size_t>(batch_ndim)] = m;
    dims[static_cast<std::size_t>(batch_ndim) + 1] = n;
    return dimsString(dims.begin(), dims.begin() + batch_ndim + 2);
  }
};

// The shape of matmul(a, b). Callers check first that a and b have at least 2 dims and that
// matmulProblem() is empty.
inline MatmulShape matmulShape(bool trans_a, bool trans_b, const TensorView& a, const TensorView& b) {
  MatmulShape s;
  const int na = a.ndim, nb = b.ndim;
  s.m = trans_a ? a.dim(na - 1) : a.dim(na - 2);
  s.k = trans_a ? a.dim(na - 2) : a.dim(na - 1);
  s.n = trans_b ? b.dim(nb - 2) : b.dim(nb - 1);
  s.a_row_stride = trans_a ? a.stride(na - 1) : a.stride(na - 2);
  s.a_col_stride = trans_a ? a.stride(na - 2) : a.stride(na - 1);
  s.b_row_stride = trans_b ? b.stride(nb - 1) : b.stride(nb - 2);
  s.b_col_stride = trans_b ? b.stride(nb - 2) : b.stride(nb - 1);
  s.batch_ndim = std::max(na, nb) - 2;
  for (int d = 0; d < s.batch_ndim; ++d) {
    const auto i = static_cast<std::size_t>(d);
    const int da = d - (s.batch_ndim - (na - 2));  // the matching dim of a, or negative when absent
    const int db = d - (s.batch_ndim - (nb - 2));
    const std::int64_t sa = da >= 0 ? a.dim(da) : 1;
    const std::int64_t sb = db >= 0 ? b.dim(db) : 1;
    s.batch[i] = sa == 1 ? sb : sa;
    s.a_batch_stride[i] = (da >= 0 && sa != 1) ? a.stride(da) : 0;
    s.b_batch_stride[i] = (db >= 0 && sb != 1) ? b.stride(db) : 0;
  }
  return s;
}

// The batch dims of a and b that do not broadcast: an empty string when they all do, else "[..] and [..]".
inline std::string matmulBatchMismatch(const TensorView& a, const TensorView& b) {
  const int ba = a.ndim - 2, bb = b.ndim - 2;
  const int nd = std::max(ba, bb);
  for (int d = 0; d < nd; ++d) {
    const int da = d - (nd - ba), db = d - (nd - bb);
    const std::int64_t sa = da >= 0 ? a.dim(da) : 1;
    const std::int64_t sb = db >= 0 ? b.dim(db) : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      return dimsString(a.dims.begin(), a.dims.begin() + ba) + " and " +
             dimsString(b.dims.begin(), b.dims.begin() + bb);
    }
  }
  return {};
}

// Fills the output batch strides of s from c (which has s.batch_ndim + 2 dims).
inline void setOutputStrides(MatmulShape& s, const TensorView& c) {
  for (int d = 0; d < s.batch_ndim; ++d) s.c_batch_stride[static_cast<std::size_t>(d)] = c.stride(d);
}

// ---- convolution ----

// The sizes of a 2-d convolution y = conv(x, w): x [n, c, h, w], w [cout, c / groups, kh, kw],
// y [n, cout, ho, wo].
struct ConvGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t cout = 0, kh = 0, kw = 0;
  std::int64_t ho = 0, wo = 0;
  std::int64_t groups = 1;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;

  std::int64_t cinPerGroup() const { return c / groups; }
  std::int64_t coutPerGroup() const { return cout / groups; }
  // Rows of one group's im2col matrix: (input channel, kernel row, kernel column).
  std::int64_t colRows() const { return cinPerGroup() * kh * kw; }
  // Columns of the im2col matrix: output positions.
  std::int64_t outPixels() const { return ho * wo; }
  // "[n, cout, ho, wo]"
  std::string outputString() const {
    const std::array dims{n, cout, ho, wo};
    return dimsString(dims.begin(), dims.end());
  }
};

// Output size of one spatial dim: floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1, or a value <= 0 when
// the dilated kernel does not fit in the padded input.
inline std::int64_t convOutSize(std::int64_t in, int pad, int dil, std::int64_t k, int stride) {
  const std::int64_t span =
      in + 2 * static_cast<std::int64_t>(pad) - static_cast<std::int64_t>(dil) * (k - 1) - 1;
  if (span < 0) return 0;
  return span / stride + 1;
}

// The geometry from the input shape [n, c, h, w], the filter shape [cout, c / groups, kh, kw] and the
// descriptor's parameters (output size computed; callers check that it is positive).
inline ConvGeometry convGeometry(const ConvParams& p, std::int64_t n, std::int64_t c, std::int64_t h,
                                 std::int64_t w, std::int64_t cout, std::int64_t kh, std::int64_t kw) {
  ConvGeometry g;
  g.n = n;
  g.c = c;
  g.h = h;
  g.w = w;
  g.cout = cout;
  g.kh = kh;
  g.kw = kw;
  g.groups = p.groups;
  g.pad_h = p.padding[0];
  g.pad_w = p.padding[1];
  g.stride_h = p.stride[0];
  g.stride_w = p.stride[1];
  g.dil_h = p.dilation[0];
  g.dil_w = p.dilation[1];
  g.ho = convOutSize(h, g.pad_h, g.dil_h, kh, g.stride_h);
  g.wo = convOutSize(w, g.pad_w, g.dil_w, kw, g.stride_w);
  return g;
}

// A 1x1 kernel with stride 1 and no padding: the input itself is the im2col matrix.
inline bool isPointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

// linear's bias along the output features: its step between features in elements — the stride of its last
// dim, 0 when that dim (or the whole bias, 0-d) has size 1 and broadcasts. validate() admits a bias that
// broadcasts to y with every dim but the last of size 1 (PyTorch's addmm broadcasting, e.g. [1, out]), or
// any bias that broadcasts to an empty y.
inline std::int64_t linearBiasStep(const TensorView& bias) {
  if (bias.ndim == 0 || bias.dim(bias.ndim - 1) == 1) return 0;
  return bias.stride(bias.ndim - 1);
}

}  // namespace mlu::gemm_shapes
