// CPU reference of the matrix-product and convolution ops, in float64 through OpenBLAS (dense.h): matmul,
// linear and each batch entry of a batched matmul are one dgemm on gathered float64 matrices; the
// convolutions are lowered to dgemm by im2col (forward and filter gradient) and col2im (data gradient), a
// chunk of images at a time. Every output is rounded once into its dtype. The device's GEMM engine is
// float32 blocked code of its own: the two share nothing but the shape rules (gemm_shapes.h).
#include <mlu/reference.h>

#include "../ops/element.h"
#include "../ops/gemm_shapes.h"
#include "../ops/validate.h"
#include "dense.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mlu::reference {
namespace {

using dense::Matrix;
using gemm_shapes::ConvGeometry;

// Elements of an im2col matrix per chunk of images: ~16 MiB of float64, enough for dgemm to run at speed.
constexpr std::int64_t kColumnBudget = std::int64_t{1} << 21;

// Offset in elements of [i0, i1, i2, i3] in a 4-d tensor.
std::int64_t offset4(const TensorView& t, std::int64_t i0, std::int64_t i1, std::int64_t i2,
                     std::int64_t i3) {
  return i0 * t.stride(0) + i1 * t.stride(1) + i2 * t.stride(2) + i3 * t.stride(3);
}

// The geometry of a validated convolution from its input-side shape and its filter shape.
ConvGeometry geometry(const ConvParams& p, const TensorView& input, const TensorView& filter) {
  return gemm_shapes::convGeometry(p, input.dim(0), input.dim(1), input.dim(2), input.dim(3), filter.dim(0),
                                   filter.dim(2), filter.dim(3));
}

// How a convolution is cut into GEMMs: per group, per chunk of `images` images. A row of the column matrix
// is one (input channel of the group, kernel row, kernel column); a column is one (image of the chunk,
// output pixel).
struct Lowering {
  ConvGeometry g;
  std::int64_t cg = 0, coutg = 0;  // input and output channels per group
  std::int64_t rows = 0;           // cg * kh * kw
  std::int64_t pixels = 0;         // ho * wo
  std::int64_t images = 1;         // images per chunk

  explicit Lowering(const ConvGeometry& geometry)
      : g(geometry),
        cg(g.cinPerGroup()),
        coutg(g.coutPerGroup()),
        rows(cg * g.kh * g.kw),
        pixels(g.ho * g.wo) {
    const std::int64_t per_image = std::max<std::int64_t>(1, rows * pixels);
    images = std::clamp<std::int64_t>(kColumnBudget / per_image, 1, std::max<std::int64_t>(1, g.n));
  }
  std::int64_t chunkSize(std::int64_t n0) const { return std::min(images, g.n - n0); }
  // The input row and column that kernel tap (i, j) of output pixel (oh, ow) reads.
  std::int64_t inputRow(std::int64_t oh, std::int64_t i) const {
    return oh * g.stride_h - g.pad_h + i * g.dil_h;
  }
  std::int64_t inputCol(std::int64_t ow, std::int64_t j) const {
    return ow * g.stride_w - g.pad_w + j * g.dil_w;
  }
};

// col [rows, nb * pixels] = the input patches of images [n0, n0 + nb) of group `group` (0 in the padding).
template <typename T>
void im2col(const Lowering& L, const TensorView& x, std::int64_t n0, std::int64_t nb, std::int64_t group,
            Matrix& col) {
  const T* xp = typed<const T>(x);
  col.shape(L.rows, nb * L.pixels);  // every element is written below, 0 in the padding
  const ConvGeometry& g = L.g;
  for (std::int64_t img = 0; img < nb; ++img) {
    for (std::int64_t ci = 0; ci < L.cg; ++ci) {
      const T* plane = xp + offset4(x, n0 + img, group * L.cg + ci, 0, 0);
      for (std::int64_t i = 0; i < g.kh; ++i) {
        for (std::int64_t j = 0; j < g.kw; ++j) {
          double* dst = col.row((ci * g.kh + i) * g.kw + j) + img * L.pixels;
          for (std::int64_t oh = 0; oh < g.ho; ++oh) {
            double* out = dst + oh * g.wo;
            const std::int64_t h = L.inputRow(oh, i);
            if (h < 0 || h >= g.h) {
              std::fill_n(out, g.wo, 0.0);
              continue;
            }
            const T* line = plane + h * x.stride(2);
            for (std::int64_t ow = 0; ow < g.wo; ++ow) {
              const std::int64_t c = L.inputCol(ow, j);
              out[ow] = c >= 0 && c < g.w ? load<double>(line[c * x.stride(3)]) : 0.0;
            }
          }
        }
      }
    }
  }
}

// Adds col [rows, nb * pixels] back onto the input positions it was read from: out [nb * cg, h * w].
void col2im(const Lowering& L, const Matrix& col, std::int64_t nb, Matrix& out) {
  const ConvGeometry& g = L.g;
  out.resize(nb * L.cg, g.h * g.w);
  for (std::int64_t img = 0; img < nb; ++img) {
    for (std::int64_t ci = 0; ci < L.cg; ++ci) {
      double* plane = out.row(img * L.cg + ci);
      for (std::int64_t i = 0; i < g.kh; ++i) {
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const double* src = col.row((ci * g.kh + i) * g.kw + j) + img * L.pixels;
          for (std::int64_t oh = 0; oh < g.ho; ++oh) {
            const std::int64_t h = L.inputRow(oh, i);
            if (h < 0 || h >= g.h) continue;
            for (std::int64_t ow = 0; ow < g.wo; ++ow) {
              const std::int64_t c = L.inputCol(ow, j);
              if (c >= 0 && c < g.w) plane[h * g.w + c] += src[oh * g.wo + ow];
            }
          }
        }
      }
    }
  }
}

// The group's filter [coutg, rows] (w [cout, cg, kh, kw]).
template <typename T>
void gatherFilter(const Lowering& L, const TensorView& w, std::int64_t group, Matrix& out) {
  const T* wp = typed<const T>(w);
  out.shape(L.coutg, L.rows);  // written whole below
  for (std::int64_t co = 0; co < L.coutg; ++co) {
    double* dst = out.row(co);
    for (std::int64_t ci = 0; ci < L.cg; ++ci) {
      for (std::int64_t i = 0; i < L.g.kh; ++i) {
        for (std::int64_t j = 0; j < L.g.kw; ++j)
          *dst++ = load<double>(wp[offset4(w, group * L.coutg + co, ci, i, j)]);
      }
    }
  }
}

// The plane t[n, c, :, :] of a 4-d tensor, row-major into dst, as float64.
template <typename T>
void loadPlane(const TensorView& t, std::int64_t n, std::int64_t c, double* dst) {
  const std::int64_t rows = t.dim(2), cols = t.dim(3);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* line = typed<const T>(t) + offset4(t, n, c, r, 0);
    for (std::int64_t col = 0; col < cols; ++col) dst[r * cols + col] = load<double>(line[col * t.stride(3)]);
  }
}

// Stores the row-major plane src into t[n, c, :, :], rounding once to T.
template <typename T>
void storePlane(const double* src, const TensorView& t, std::int64_t n, std::int64_t c) {
  const std::int64_t rows = t.dim(2), cols = t.dim(3);
  for (std::int64_t r = 0; r < rows; ++r) {
    T* line = typed<T>(t) + offset4(t, n, c, r, 0);
    for (std::int64_t col = 0; col < cols; ++col) line[col * t.stride(3)] = store<T>(src[r * cols + col]);
  }
}

// The group's output-side tensor t [n, cout, ho, wo] for images [n0, n0 + nb) as [coutg, nb * pixels].
template <typename T>
void gatherOutputSide(const Lowering& L, const TensorView& t, std::int64_t n0, std::int64_t nb,
                      std::int64_t group, Matrix& out) {
  out.shape(L.coutg, nb * L.pixels);  // written whole below
  for (std::int64_t co = 0; co < L.coutg; ++co) {
    for (std::int64_t img = 0; img < nb; ++img)
      loadPlane<T>(t, n0 + img, group * L.coutg + co, out.row(co) + img * L.pixels);
  }
}

}  // namespace

Status run(const matmul_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  gemm_shapes::MatmulShape s = gemm_shapes::matmulShape(args.trans_a, args.trans_b, args.a, args.b);
  gemm_shapes::setOutputStrides(s, args.c);
  const TensorView& c = args.c;
  const std::int64_t c_row_stride = c.stride(c.ndim - 2), c_col_stride = c.stride(c.ndim - 1);
  dispatchFloating(c.dtype, [&]<typename T>() {
    const T* a = typed<T>(args.a);
    const T* b = typed<T>(args.b);
    T* out = typed<T>(c);
    Matrix am, bm, cm;
    cm.shape(s.m, s.n);                     // the dgemm's output, beta 0
    std::int64_t last_a = -1, last_b = -1;  // the batch offsets already gathered (broadcast entries repeat)
    for (std::int64_t batch = 0; batch < s.batchCount(); ++batch) {
      // Offsets of this batch entry in a, b and c: its index in each batch dim, times that dim's stride.
      std::int64_t a_off = 0, b_off = 0, c_off = 0, rest = batch;
      for (int d = s.batch_ndim - 1; d >= 0; --d) {
        const auto i = static_cast<std::size_t>(d);
        const std::int64_t index = rest % s.batch[i];
        rest /= s.batch[i];
        a_off += index * s.a_batch_stride[i];
        b_off += index * s.b_batch_stride[i];
        c_off += index * s.c_batch_stride[i];
      }
      if (a_off != last_a) dense::gather(a + a_off, s.m, s.k, s.a_row_stride, s.a_col_stride, am);
      if (b_off != last_b) dense::gather(b + b_off, s.k, s.n, s.b_row_stride, s.b_col_stride, bm);
      last_a = a_off;
      last_b = b_off;
      dense::gemm(false, false, 1.0, am, bm, 0.0, cm);
      dense::scatter(cm, out + c_off, c_row_stride, c_col_stride);
    }
  });
  return Status::success();
}

Status run(const linear_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &x = args.x, &w = args.weight, &y = args.y;
  const int last = x.ndim - 1;
  const std::int64_t in = x.dim(last), out = w.dim(0);
  std::int64_t rows = 1;  // the leading dims of x (and y), flattened
  for (int d = 0; d < last; ++d) rows *= x.dim(d);
  dispatchFloating(y.dtype, [&]<typename T>() {
    const T* xp = typed<T>(x);
    T* yp = typed<T>(y);
    // The offsets of each flattened row in x and y (their leading dims may be strided).
    std::vector<std::int64_t> x_off(static_cast<std::size_t>(rows)), y_off(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t xo = 0, yo = 0, rest = r;
      for (int d = last - 1; d >= 0; --d) {
        const std::int64_t index = rest % x.dim(d);
        rest /= x.dim(d);
        xo += index * x.stride(d);
        yo += index * y.stride(d);
      }
      x_off[static_cast<std::size_t>(r)] = xo;
      y_off[static_cast<std::size_t>(r)] = yo;
    }
    Matrix xm, wm, ym;
    xm.shape(rows, in);   // gathered whole below
    ym.shape(rows, out);  // the bias, or beta 0
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* src = xp + x_off[static_cast<std::size_t>(r)];
      double* dst = xm.row(r);
      for (std::int64_t i = 0; i < in; ++i) dst[i] = load<double>(src[i * x.stride(last)]);
    }
    dense::gather(typed<T>(w), out, in, w.stride(0), w.stride(1), wm);
    if (args.bias.present) {
      const T* bp = typed<T>(args.bias);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t o = 0; o < out; ++o)
          ym.at(r, o) = load<double>(bp[o * gemm_shapes::linearBiasStep(args.bias)]);
      }
    }
    dense::gemm(false, true, 1.0, xm, wm, args.bias.present ? 1.0 : 0.0, ym);
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* src = ym.row(r);
      T* dst = yp + y_off[static_cast<std::size_t>(r)];
      for (std::int64_t o = 0; o < out; ++o) dst[o * y.stride(last)] = store<T>(src[o]);
    }
  });
  return Status::success();
}

Status run(const conv2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &x = args.x, &w = args.w, &y = args.y;
  const Lowering L(geometry(args.conv_desc, x, w));
  const ConvGeometry& g = L.g;
  dispatchFloating(y.dtype, [&]<typename T>() {
    const T* bp = args.bias.present ? typed<T>(args.bias) : nullptr;
    thread_local Matrix filter, col, out;  // scratch kept per thread: no fresh pages per call
    for (std::int64_t group = 0; group < g.groups; ++group) {
      gatherFilter<T>(L, w, group, filter);
      for (std::int64_t n0 = 0; n0 < g.n; n0 += L.images) {
        const std::int64_t nb = L.chunkSize(n0);
        im2col<T>(L, x, n0, nb, group, col);
        out.shape(L.coutg, nb * L.pixels);
        if (bp != nullptr) {
          for (std::int64_t co = 0; co < L.coutg; ++co)
            std::fill_n(out.row(co), out.cols,
                        load<double>(bp[(group * L.coutg + co) * args.bias.stride(0)]));
        }
        dense::gemm(false, false, 1.0, filter, col, bp != nullptr ? 1.0 : 0.0, out);
        for (std::int64_t co = 0; co < L.coutg; ++co) {
          for (std::int64_t img = 0; img < nb; ++img)
            storePlane<T>(out.row(co) + img * L.pixels, y, n0 + img, group * L.coutg + co);
        }
      }
    }
  });
  return Status::success();
}

Status run(const conv2d_backward_data_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &gy = args.grad_output, &w = args.w, &gx = args.grad_input;
  const Lowering L(geometry(args.conv_desc, gx, w));
  const ConvGeometry& g = L.g;
  // Every output position spreads its gradient back over the input pixels it read: the columns
  // filter^T . grad_output, added back onto the input by col2im.
  dispatchFloating(gx.dtype, [&]<typename T>() {
    thread_local Matrix filter, grad, col, sum;  // scratch kept per thread: no fresh pages per call
    for (std::int64_t group = 0; group < g.groups; ++group) {
      gatherFilter<T>(L, w, group, filter);
      for (std::int64_t n0 = 0; n0 < g.n; n0 += L.images) {
        const std::int64_t nb = L.chunkSize(n0);
        gatherOutputSide<T>(L, gy, n0, nb, group, grad);
        col.shape(L.rows, nb * L.pixels);
        dense::gemm(true, false, 1.0, filter, grad, 0.0, col);
        col2im(L, col, nb, sum);
        for (std::int64_t img = 0; img < nb; ++img) {
          for (std::int64_t ci = 0; ci < L.cg; ++ci)
            storePlane<T>(sum.row(img * L.cg + ci), gx, n0 + img, group * L.cg + ci);
        }
      }
    }
  });
  return Status::success();
}

Status run(const conv2d_backward_filter_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &x = args.x, &gy = args.grad_output, &gw = args.grad_w;
  const Lowering L(geometry(args.conv_desc, x, gw));
  const ConvGeometry& g = L.g;
  // grad_w of a group = sum over images of grad_output . columns^T.
  dispatchFloating(gw.dtype, [&]<typename T>() {
    T* gwp = typed<T>(gw);
    thread_local Matrix grad, col, sum;  // scratch kept per thread: no fresh pages per call
    for (std::int64_t group = 0; group < g.groups; ++group) {
      sum.resize(L.coutg, L.rows);
      for (std::int64_t n0 = 0; n0 < g.n; n0 += L.images) {
        const std::int64_t nb = L.chunkSize(n0);
        gatherOutputSide<T>(L, gy, n0, nb, group, grad);
        im2col<T>(L, x, n0, nb, group, col);
        dense::gemm(false, true, 1.0, grad, col, 1.0, sum);
      }
      for (std::int64_t co = 0; co < L.coutg; ++co) {
        const double* src = sum.row(co);
        for (std::int64_t ci = 0; ci < L.cg; ++ci) {
          for (std::int64_t i = 0; i < g.kh; ++i) {
            for (std::int64_t j = 0; j < g.kw; ++j)
              gwp[offset4(gw, group * L.coutg + co, ci, i, j)] = store<T>(*src++);
          }
        }
      }
    }
  });
  return Status::success();
}

Status run(const conv2d_backward_bias_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &gy = args.grad_output, &gb = args.grad_bias;
  dispatchFloating(gb.dtype, [&]<typename T>() {
    const T* gyp = typed<T>(gy);
    T* gbp = typed<T>(gb);
    for (std::int64_t co = 0; co < gy.dim(1); ++co) {
      double sum = 0.0;
      for (std::int64_t n = 0; n < gy.dim(0); ++n) {
        for (std::int64_t h = 0; h < gy.dim(2); ++h) {
          for (std::int64_t col = 0; col < gy.dim(3); ++col)
            sum += load<double>(gyp[offset4(gy, n, co, h, col)]);
        }
      }
      gbp[co * gb.stride(0)] = store<T>(sum);
    }
  });
  return Status::success();
}

}  // namespace mlu::reference
