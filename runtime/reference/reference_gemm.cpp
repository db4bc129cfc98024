// CPU reference of the matrix-product and convolution ops: plain loops straight from the definitions,
// accumulating in double and rounding once into the output dtype. Deliberately unrelated to the device
// kernels (no blocking, no im2col), so that comparing the two checks the device's algorithm.
#include <mlu/reference.h>

#include "../ops/element.h"
#include "../ops/gemm_shapes.h"
#include "../ops/validate.h"

#include <cstdint>
#include <vector>

namespace mlu::reference {
namespace {

using gemm_shapes::ConvGeometry;

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
      for (std::int64_t i = 0; i < s.m; ++i) {
        for (std::int64_t j = 0; j < s.n; ++j) {
          double sum = 0.0;
          for (std::int64_t k = 0; k < s.k; ++k) {
            sum += load<double>(a[a_off + i * s.a_row_stride + k * s.a_col_stride]) *
                   load<double>(b[b_off + k * s.b_row_stride + j * s.b_col_stride]);
          }
          out[c_off + i * c_row_stride + j * c_col_stride] = store<T>(sum);
        }
      }
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
    const T* wp = typed<T>(w);
    const T* bp = args.bias.present ? typed<T>(args.bias) : nullptr;
    T* yp = typed<T>(y);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t x_off = 0, y_off = 0, rest = r;
      for (int d = last - 1; d >= 0; --d) {
        const std::int64_t index = rest % x.dim(d);
        rest /= x.dim(d);
        x_off += index * x.stride(d);
        y_off += index * y.stride(d);
      }
      for (std::int64_t o = 0; o < out; ++o) {
        double sum = bp != nullptr ? load<double>(bp[o * args.bias.stride(0)]) : 0.0;
        for (std::int64_t i = 0; i < in; ++i) {
          sum += load<double>(xp[x_off + i * x.stride(last)]) *
                 load<double>(wp[o * w.stride(0) + i * w.stride(1)]);
        }
        yp[y_off + o * y.stride(last)] = store<T>(sum);
      }
    }
  });
  return Status::success();
}

Status run(const conv2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &x = args.x, &w = args.w, &y = args.y;
  const ConvGeometry g = geometry(args.conv_desc, x, w);
  const std::int64_t cg = g.cinPerGroup(), coutg = g.coutPerGroup();
  dispatchFloating(y.dtype, [&]<typename T>() {
    const T* xp = typed<T>(x);
    const T* wp = typed<T>(w);
    const T* bp = args.bias.present ? typed<T>(args.bias) : nullptr;
    T* yp = typed<T>(y);
    for (std::int64_t n = 0; n < g.n; ++n) {
      for (std::int64_t co = 0; co < g.cout; ++co) {
        const std::int64_t group = co / coutg;
        for (std::int64_t oh = 0; oh < g.ho; ++oh) {
          for (std::int64_t ow = 0; ow < g.wo; ++ow) {
            double sum = bp != nullptr ? load<double>(bp[co * args.bias.stride(0)]) : 0.0;
            for (std::int64_t ci = 0; ci < cg; ++ci) {
              for (std::int64_t i = 0; i < g.kh; ++i) {
                const std::int64_t h = oh * g.stride_h - g.pad_h + i * g.dil_h;
                if (h < 0 || h >= g.h) continue;
                for (std::int64_t j = 0; j < g.kw; ++j) {
                  const std::int64_t col = ow * g.stride_w - g.pad_w + j * g.dil_w;
                  if (col < 0 || col >= g.w) continue;
                  sum += load<double>(xp[offset4(x, n, group * cg + ci, h, col)]) *
                         load<double>(wp[offset4(w, co, ci, i, j)]);
                }
              }
            }
            yp[offset4(y, n, co, oh, ow)] = store<T>(sum);
          }
        }
      }
    }
  });
  return Status::success();
}

Status run(const conv2d_backward_data_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &gy = args.grad_output, &w = args.w, &gx = args.grad_input;
  const ConvGeometry g = geometry(args.conv_desc, gx, w);
  const std::int64_t cg = g.cinPerGroup(), coutg = g.coutPerGroup();
  // Every output position spreads its gradient back over the input pixels it read.
  std::vector<double> sum(static_cast<std::size_t>(g.n * g.c * g.h * g.w), 0.0);
  auto at = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t col) -> double& {
    return sum[static_cast<std::size_t>(((n * g.c + c) * g.h + h) * g.w + col)];
  };
  dispatchFloating(gx.dtype, [&]<typename T>() {
    const T* gyp = typed<T>(gy);
    const T* wp = typed<T>(w);
    for (std::int64_t n = 0; n < g.n; ++n) {
      for (std::int64_t co = 0; co < g.cout; ++co) {
        const std::int64_t group = co / coutg;
        for (std::int64_t oh = 0; oh < g.ho; ++oh) {
          for (std::int64_t ow = 0; ow < g.wo; ++ow) {
            const double grad = load<double>(gyp[offset4(gy, n, co, oh, ow)]);
            for (std::int64_t ci = 0; ci < cg; ++ci) {
              for (std::int64_t i = 0; i < g.kh; ++i) {
                const std::int64_t h = oh * g.stride_h - g.pad_h + i * g.dil_h;
                if (h < 0 || h >= g.h) continue;
                for (std::int64_t j = 0; j < g.kw; ++j) {
                  const std::int64_t col = ow * g.stride_w - g.pad_w + j * g.dil_w;
                  if (col < 0 || col >= g.w) continue;
                  at(n, group * cg + ci, h, col) += grad * load<double>(wp[offset4(w, co, ci, i, j)]);
                }
              }
            }
          }
        }
      }
    }
    T* gxp = typed<T>(gx);
    for (std::int64_t n = 0; n < g.n; ++n) {
      for (std::int64_t c = 0; c < g.c; ++c) {
        for (std::int64_t h = 0; h < g.h; ++h) {
          for (std::int64_t col = 0; col < g.w; ++col)
            gxp[offset4(gx, n, c, h, col)] = store<T>(at(n, c, h, col));
        }
      }
    }
  });
  return Status::success();
}

Status run(const conv2d_backward_filter_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView &x = args.x, &gy = args.grad_output, &gw = args.grad_w;
  const ConvGeometry g = geometry(args.conv_desc, x, gw);
  const std::int64_t cg = g.cinPerGroup(), coutg = g.coutPerGroup();
  dispatchFloating(gw.dtype, [&]<typename T>() {
    const T* xp = typed<T>(x);
    const T* gyp = typed<T>(gy);
    T* gwp = typed<T>(gw);
    for (std::int64_t co = 0; co < g.cout; ++co) {
      const std::int64_t group = co / coutg;
      for (std::int64_t ci = 0; ci < cg; ++ci) {
        for (std::int64_t i = 0; i < g.kh; ++i) {
          for (std::int64_t j = 0; j < g.kw; ++j) {
            double sum = 0.0;
            for (std::int64_t n = 0; n < g.n; ++n) {
              for (std::int64_t oh = 0; oh < g.ho; ++oh) {
                const std::int64_t h = oh * g.stride_h - g.pad_h + i * g.dil_h;
                if (h < 0 || h >= g.h) continue;
                for (std::int64_t ow = 0; ow < g.wo; ++ow) {
                  const std::int64_t col = ow * g.stride_w - g.pad_w + j * g.dil_w;
                  if (col < 0 || col >= g.w) continue;
                  sum += load<double>(gyp[offset4(gy, n, co, oh, ow)]) *
                         load<double>(xp[offset4(x, n, group * cg + ci, h, col)]);
                }
              }
            }
            gwp[offset4(gw, co, ci, i, j)] = store<T>(sum);
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
