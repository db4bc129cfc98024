// CPU reference of the normalization (layer_norm, rms_norm, batch_norm, forward and backward) and rotary
// position embedding (rope, forward and backward) ops: plain float64 loops over the tensors' elements
// copied into row-major order, std:: math, results rounded once into the outputs' dtypes.
//
// Semantics shared with the device (device_norm.cpp): the mean and rstd of an empty row (or the batch
// statistics of a channel with no elements) are NaN; batch_norm leaves the running stats alone when a
// channel has no elements; in inference, save_mean/save_invstd (when given) get the running mean and
// 1/sqrt(running_var + eps).
#include <mlu/reference.h>

#include "../ops/validate.h"
#include "element.h"
#include "norm_shapes.h"
#include "tensor_io.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mlu::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::size_t at(std::int64_t row, std::int64_t k, std::int64_t cols) {
  return static_cast<std::size_t>(row * cols + k);
}

// x as rows: the leading dims (rows) by the last normalized_ndim dims (cols).
struct Rows {
  std::int64_t rows, cols;
};
Rows rowsOf(const TensorView& x, int normalized_ndim) {
  const int lead = x.ndim - normalized_ndim;
  return {norm::product(norm::leadingShape(x, lead)), norm::product(norm::trailingShape(x, lead))};
}

// ---- layer_norm / rms_norm ----

// layer_norm (centered) or rms_norm (not): y = (x - mean) * rstd * weight + bias.
Status normForward(bool centered, int normalized_ndim, double eps, const TensorView& x,
                   const TensorView& weight, const TensorView& bias, const TensorView& y,
                   const TensorView& mean, const TensorView& rstd) {
  const Rows r = rowsOf(x, normalized_ndim);
  const std::vector<double> xv = read(x), w = read(weight), b = read(bias);
  std::vector<double> yv(xv.size()), mv(static_cast<std::size_t>(r.rows)), rv(mv.size());
  for (std::int64_t i = 0; i < r.rows; ++i) {
    double mu = 0;
    if (centered) {
      for (std::int64_t k = 0; k < r.cols; ++k) mu += xv[at(i, k, r.cols)];
      mu = r.cols == 0 ? kNaN : mu / static_cast<double>(r.cols);
    }
    double ss = 0;
    for (std::int64_t k = 0; k < r.cols; ++k) ss += (xv[at(i, k, r.cols)] - mu) * (xv[at(i, k, r.cols)] - mu);
    const double var = r.cols == 0 ? kNaN : ss / static_cast<double>(r.cols);
    const double rs = 1.0 / std::sqrt(var + eps);
    for (std::int64_t k = 0; k < r.cols; ++k) {
      double v = (xv[at(i, k, r.cols)] - mu) * rs;
      if (!w.empty()) v *= w[static_cast<std::size_t>(k)];
      if (!b.empty()) v += b[static_cast<std::size_t>(k)];
      yv[at(i, k, r.cols)] = v;
    }
    mv[static_cast<std::size_t>(i)] = mu;
    rv[static_cast<std::size_t>(i)] = rs;
  }
  write(y, yv);
  write(mean, mv);
  write(rstd, rv);
  return Status::success();
}

// With xhat = (x - mean) * rstd and g = grad_output * weight, per row:
//   grad_input = rstd * (g - mean(g) - xhat * mean(g * xhat))   (rms_norm: without the mean(g) term)
//   grad_weight = sum over rows of grad_output * xhat, grad_bias = sum over rows of grad_output.
Status normBackward(bool centered, int normalized_ndim, const TensorView& grad_output, const TensorView& x,
                    const TensorView& mean, const TensorView& rstd, const TensorView& weight,
                    const TensorView& grad_input, const TensorView& grad_weight,
                    const TensorView& grad_bias) {
  const Rows r = rowsOf(x, normalized_ndim);
  const std::vector<double> go = read(grad_output), xv = read(x), mv = read(mean), rv = read(rstd),
                            w = read(weight);
  std::vector<double> gi(xv.size()), gw(static_cast<std::size_t>(r.cols), 0.0), gb(gw.size(), 0.0);
  std::vector<double> xhat(gw.size()), g(gw.size());
  for (std::int64_t i = 0; i < r.rows; ++i) {
    const double mu = centered ? mv[static_cast<std::size_t>(i)] : 0.0;
    const double rs = rv[static_cast<std::size_t>(i)];
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t k = 0; k < r.cols; ++k) {
      const auto kk = static_cast<std::size_t>(k);
      const double dy = go[at(i, k, r.cols)];
      xhat[kk] = (xv[at(i, k, r.cols)] - mu) * rs;
      g[kk] = w.empty() ? dy : dy * w[kk];
      sum_g += g[kk];
      sum_gx += g[kk] * xhat[kk];
      gw[kk] += dy * xhat[kk];
      gb[kk] += dy;
    }
    const double n = static_cast<double>(r.cols);
    for (std::int64_t k = 0; k < r.cols; ++k) {
      const auto kk = static_cast<std::size_t>(k);
      gi[at(i, k, r.cols)] = rs * (g[kk] - (centered ? sum_g / n : 0.0) - xhat[kk] * sum_gx / n);
    }
  }
  write(grad_input, gi);
  write(grad_weight, gw);
  write(grad_bias, gb);
  return Status::success();
}

// ---- batch_norm ----

// x [N, C, rest...] in row-major order: element (n, c, s) is at (n * C + c) * L + s.
struct Channels {
  std::int64_t n, c, l;
  explicit Channels(const TensorView& x) : n(x.dim(0)), c(x.dim(1)), l(1) {
    for (int d = 2; d < x.ndim; ++d) l *= x.dim(d);
  }
  std::size_t at(std::int64_t ni, std::int64_t ci, std::int64_t s) const {
    return static_cast<std::size_t>((ni * c + ci) * l + s);
  }
  double count() const { return static_cast<double>(n * l); }
};

Status batchNormForward(const batch_norm_forward_args& a) {
  const Channels ch(a.x);
  const std::vector<double> xv = read(a.x), w = read(a.weight), b = read(a.bias);
  std::vector<double> rm = read(a.running_mean), rv = read(a.running_var);
  std::vector<double> yv(xv.size()), sm(static_cast<std::size_t>(ch.c)), si(sm.size());
  const double m = ch.count();
  for (std::int64_t c = 0; c < ch.c; ++c) {
    const auto cc = static_cast<std::size_t>(c);
    double mu = 0, var = 0;
    if (a.training) {
      double sum = 0;
      for (std::int64_t n = 0; n < ch.n; ++n) {
        for (std::int64_t s = 0; s < ch.l; ++s) sum += xv[ch.at(n, c, s)];
      }
      mu = m == 0 ? kNaN : sum / m;
      double ss = 0;
      for (std::int64_t n = 0; n < ch.n; ++n) {
        for (std::int64_t s = 0; s < ch.l; ++s) ss += (xv[ch.at(n, c, s)] - mu) * (xv[ch.at(n, c, s)] - mu);
      }
      var = m == 0 ? kNaN : ss / m;
      if (!rm.empty() && m > 0) {
        rm[cc] = (1 - a.momentum) * rm[cc] + a.momentum * mu;
        rv[cc] = (1 - a.momentum) * rv[cc] + a.momentum * ss / (m - 1);  // unbiased
      }
    } else {
      mu = rm[cc];
      var = rv[cc];
    }
    const double invstd = 1.0 / std::sqrt(var + a.eps);
    const double scale = w.empty() ? invstd : invstd * w[cc];
    const double shift = b.empty() ? 0.0 : b[cc];
    for (std::int64_t n = 0; n < ch.n; ++n) {
      for (std::int64_t s = 0; s < ch.l; ++s) yv[ch.at(n, c, s)] = (xv[ch.at(n, c, s)] - mu) * scale + shift;
    }
    sm[cc] = mu;
    si[cc] = invstd;
  }
  write(a.y, yv);
  if (a.training) {
    write(a.running_mean, rm);
    write(a.running_var, rv);
  }
  write(a.save_mean, sm);
  write(a.save_invstd, si);
  return Status::success();
}

// Training-mode backward, per channel over its M elements, with xhat = (x - mean) * invstd:
//   grad_input = weight * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
//   grad_weight = sum(dy * xhat), grad_bias = sum(dy).
Status batchNormBackward(const batch_norm_backward_args& a) {
  const Channels ch(a.x);
  const std::vector<double> go = read(a.grad_output), xv = read(a.x), w = read(a.weight),
                            sm = read(a.save_mean), si = read(a.save_invstd);
  std::vector<double> gi(xv.size()), gw(static_cast<std::size_t>(ch.c)), gb(gw.size());
  const double m = ch.count();
  for (std::int64_t c = 0; c < ch.c; ++c) {
    const auto cc = static_cast<std::size_t>(c);
    double sum_dy = 0, sum_dyx = 0;
    for (std::int64_t n = 0; n < ch.n; ++n) {
      for (std::int64_t s = 0; s < ch.l; ++s) {
        const std::size_t e = ch.at(n, c, s);
        sum_dy += go[e];
        sum_dyx += go[e] * (xv[e] - sm[cc]) * si[cc];
      }
    }
    const double scale = (w.empty() ? 1.0 : w[cc]) * si[cc];
    for (std::int64_t n = 0; n < ch.n; ++n) {
      for (std::int64_t s = 0; s < ch.l; ++s) {
        const std::size_t e = ch.at(n, c, s);
        const double xhat = (xv[e] - sm[cc]) * si[cc];
        gi[e] = scale * (go[e] - sum_dy / m - xhat * sum_dyx / m);
      }
    }
    gw[cc] = sum_dyx;
    gb[cc] = sum_dy;
  }
  write(a.grad_input, gi);
  write(a.grad_weight, gw);
  write(a.grad_bias, gb);
  return Status::success();
}

// ---- rope ----

// Rotates each pair (x[i], x[i + D/2]) of x [B, S, H, D] by angle (s + position_offset) * theta^(-2i/D), or
// by minus that angle (backward). x is read completely before y is written, so y may be x.
Status rope(double theta, std::int64_t position_offset, bool inverse, const TensorView& x,
            const TensorView& y) {
  const std::int64_t nb = x.dim(0), ns = x.dim(1), nh = x.dim(2), nd = x.dim(3), half = nd / 2;
  const std::vector<double> xv = read(x);
  std::vector<double> yv(xv.size());
  // The angles depend on the position and the pair only: cos and sin are computed once per (s, i), the
  // same values for every batch entry and head.
  std::vector<double> cos_table(static_cast<std::size_t>(ns * half)), sin_table(cos_table.size());
  for (std::int64_t s = 0; s < ns; ++s) {
    const double pos = static_cast<double>(s + position_offset);
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = pos * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(nd));
      const auto k = static_cast<std::size_t>(s * half + i);
      cos_table[k] = std::cos(angle);
      sin_table[k] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    for (std::int64_t s = 0; s < ns; ++s) {
      const double* c = cos_table.data() + s * half;
      const double* sn = sin_table.data() + s * half;
      for (std::int64_t h = 0; h < nh; ++h) {
        const std::size_t base = static_cast<std::size_t>(((b * ns + s) * nh + h) * nd);
        const double* lo = xv.data() + base;
        const double* hi = lo + half;
        double* ylo = yv.data() + base;
        double* yhi = ylo + half;
        for (std::int64_t i = 0; i < half; ++i) {
          ylo[i] = lo[i] * c[i] - hi[i] * sn[i];
          yhi[i] = hi[i] * c[i] + lo[i] * sn[i];
        }
      }
    }
  }
  write(y, yv);
  return Status::success();
}

}  // namespace

Status run(const layer_norm_forward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return normForward(true, a.normalized_ndim, a.eps, a.x, a.weight, a.bias, a.y, a.mean, a.rstd);
}

Status run(const layer_norm_backward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return normBackward(true, a.normalized_ndim, a.grad_output, a.x, a.mean, a.rstd, a.weight, a.grad_input,
                      a.grad_weight, a.grad_bias);
}

Status run(const rms_norm_forward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return normForward(false, a.normalized_ndim, a.eps, a.x, a.weight, TensorView{}, a.y, TensorView{}, a.rstd);
}

Status run(const rms_norm_backward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return normBackward(false, a.normalized_ndim, a.grad_output, a.x, TensorView{}, a.rstd, a.weight,
                      a.grad_input, a.grad_weight, TensorView{});
}

Status run(const batch_norm_forward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return batchNormForward(a);
}

Status run(const batch_norm_backward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return batchNormBackward(a);
}

Status run(const rope_forward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return rope(a.theta, a.position_offset, false, a.x, a.y);
}

Status run(const rope_backward_args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  return rope(a.theta, a.position_offset, true, a.grad_output, a.grad_input);
}

}  // namespace mlu::reference
