// CPU reference of the reduction (sum, mean, norm, var, max, min, argmax), softmax, loss (nll_loss,
// cross_entropy) and pooling (max_pool2d, avg_pool2d, adaptive_avg_pool2d) ops: plain loops in float64 over
// the tensors' elements copied into row-major order, std:: math, results rounded once into the output dtype.
//
// As on the device (see device_reduce.cpp): a loss target outside [0, C) that is not ignore_index gives a
// NaN loss (it counts for the mean) and a NaN gradient row; max_pool2d_backward skips indices outside
// the input plane.
#include <mlu/reference.h>

#include "../ops/validate.h"
#include "element.h"
#include "reduce_shapes.h"
#include "tensor_io.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace mlu::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::int64_t> readInt64(const TensorView& t) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  const OffsetWalker walk(t);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = typed<const std::int64_t>(t)[walk.offsetOf(static_cast<std::int64_t>(i))];
  return v;
}

void writeInt64(const TensorView& t, const std::vector<std::int64_t>& v) {
  const OffsetWalker walk(t);
  for (std::size_t i = 0; i < v.size(); ++i)
    typed<std::int64_t>(t)[walk.offsetOf(static_cast<std::int64_t>(i))] = v[i];
}

// All elements of an integer or bool tensor, in row-major order, as int64 (exact).
std::vector<std::int64_t> readIntegers(const TensorView& t) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  const OffsetWalker walk(t);
  dispatchAll(t.dtype, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<std::int64_t>(typed<const T>(t)[walk.offsetOf(static_cast<std::int64_t>(i))]);
    }
  });
  return v;
}

// Stores row-major int64 values into an integer or bool tensor (modular conversion; bool is != 0).
void writeIntegers(const TensorView& t, const std::vector<std::int64_t>& v) {
  const OffsetWalker walk(t);
  dispatchAll(t.dtype, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      for (std::size_t i = 0; i < v.size(); ++i)
        typed<T>(t)[walk.offsetOf(static_cast<std::int64_t>(i))] = static_cast<T>(v[i]);
    }
  });
}

// The output index of row-major element i of x when the dims in mask are reduced away.
std::int64_t outputOf(const TensorView& x, std::uint32_t mask, std::int64_t i) {
  std::int64_t out = 0, scale = 1;
  for (int d = x.ndim - 1; d >= 0; --d) {
    const std::int64_t index = i % x.dim(d);
    i /= x.dim(d);
    if ((mask >> d) & 1u) continue;
    out += index * scale;
    scale *= x.dim(d);
  }
  return out;
}

int dimOf(int dim, int ndim) {
  int d = 0;
  (void)reduce::normalizeDim(dim, ndim, "dim", d);  // validated already
  return d;
}

// ---- sum / mean ----

Status sumOrMean(const TensorView& x, const TensorView& y, const IntList& dims, bool mean) {
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(dims, x.ndim, mask));
  std::int64_t outputs = 1;
  std::int64_t count = 1;  // elements per output
  for (int d = 0; d < x.ndim; ++d) (((mask >> d) & 1u) ? count : outputs) *= x.dim(d);
  if (!isFloating(x.dtype)) {  // integers and bool: an exact int64 sum, wrapping (no mean: validated)
    const std::vector<std::int64_t> xv = readIntegers(x);
    std::vector<std::uint64_t> acc(static_cast<std::size_t>(outputs), 0);
    for (std::size_t i = 0; i < xv.size(); ++i)
      acc[static_cast<std::size_t>(outputOf(x, mask, static_cast<std::int64_t>(i)))] +=
          static_cast<std::uint64_t>(xv[i]);
    writeIntegers(y, std::vector<std::int64_t>(acc.begin(), acc.end()));
    return Status::success();
  }
  const std::vector<double> xv = read(x);
  std::vector<double> acc(static_cast<std::size_t>(outputs), 0.0);
  for (std::size_t i = 0; i < xv.size(); ++i)
    acc[static_cast<std::size_t>(outputOf(x, mask, static_cast<std::int64_t>(i)))] += xv[i];
  if (mean) {
    for (double& v : acc) v = count == 0 ? kNaN : v / static_cast<double>(count);
  }
  write(y, acc);
  return Status::success();
}

// ---- norm / var ----

// The elements of x grouped by output: groups[o] holds, in row-major order, the elements reduced into
// output o (the reduced dims in `mask`).
std::vector<std::vector<double>> groupsOf(const TensorView& x, std::uint32_t mask) {
  const std::vector<double> xv = read(x);
  std::int64_t outputs = 1;
  for (int d = 0; d < x.ndim; ++d) outputs *= ((mask >> d) & 1u) ? 1 : x.dim(d);
  std::vector<std::vector<double>> groups(static_cast<std::size_t>(outputs));
  for (std::size_t i = 0; i < xv.size(); ++i)
    groups[static_cast<std::size_t>(outputOf(x, mask, static_cast<std::int64_t>(i)))].push_back(xv[i]);
  return groups;
}

// The p-norm of v in float64: max / min |x| for p = ±inf (NaN if any), the count of nonzero elements for
// p = 0, else (sum |x|^p)^(1/p) (p = 2 through l2Norm). Empty: 0 (validated: p >= 0 finite there).
double pNorm(const std::vector<double>& v, double p);

// sqrt(sum x^2) in float64 (float32 and the half types cannot overflow it).
double l2Norm(const std::vector<double>& v) {
  double sum = 0.0;
  for (const double x : v) sum += x * x;
  return std::sqrt(sum);
}

double pNorm(const std::vector<double>& v, double p) {
  if (p == 2.0) return l2Norm(v);
  if (v.empty()) return 0.0;
  if (std::isinf(p)) {
    double m = p > 0 ? 0.0 : kInf;
    for (const double x : v) {
      if (std::isnan(x)) return kNaN;
      m = p > 0 ? std::max(m, std::fabs(x)) : std::min(m, std::fabs(x));
    }
    return m;
  }
  double sum = 0.0;
  for (const double x : v) sum += p == 0.0 ? (x != 0.0 ? 1.0 : 0.0) : std::pow(std::fabs(x), p);
  return p == 0.0 ? sum : std::pow(sum, 1.0 / p);
}

// Two-pass variance: sum (x - mean)^2 / (N - 1) or / N; NaN when that divisor is not positive.
double variance(const std::vector<double>& v, bool unbiased) {
  const auto n = static_cast<double>(v.size());
  const double divisor = unbiased ? n - 1.0 : n;
  if (divisor <= 0.0) return kNaN;
  double mean = 0.0;
  for (const double x : v) mean += x;
  mean /= n;
  double m2 = 0.0;
  for (const double x : v) m2 += (x - mean) * (x - mean);
  return m2 / divisor;
}

// ---- adaptive_avg_pool2d ----

// The inputs [begin, end) that output o of `out` averages along an axis of `in`:
// begin = floor(o * in / out), end = ceil((o + 1) * in / out).
struct AdaptiveSpan {
  std::int64_t begin, end;
};
AdaptiveSpan adaptiveSpan(std::int64_t o, std::int64_t in, std::int64_t out) {
  const auto begin =
      static_cast<std::int64_t>(std::floor(static_cast<double>(o * in) / static_cast<double>(out)));
  const auto end =
      static_cast<std::int64_t>(std::ceil(static_cast<double>((o + 1) * in) / static_cast<double>(out)));
  return {begin, end};
}

// ---- max / min / argmax ----

// The first extremum along dim d of row-major values xv (double for floating x, int64 for integers and
// bool), or the first NaN.
template <bool kMax, typename V>
void extremum(const TensorView& x, const std::vector<V>& xv, int d, std::vector<V>& values,
              std::vector<std::int64_t>& indices) {
  const auto isNan = [](V v) {
    if constexpr (std::is_floating_point_v<V>) {
      return std::isnan(v);
    } else {
      return false;
    }
  };
  const Axis ax = axisOf(x, d);
  values.assign(static_cast<std::size_t>(ax.outer * ax.inner), V{0});
  indices.assign(values.size(), 0);
  for (std::int64_t o = 0; o < ax.outer; ++o) {
    for (std::int64_t i = 0; i < ax.inner; ++i) {
      V best = xv[ax.at(o, 0, i)];
      std::int64_t best_k = 0;
      for (std::int64_t k = 1; k < ax.size; ++k) {
        if (isNan(best)) break;
        const V v = xv[ax.at(o, k, i)];
        const bool better = kMax ? v > best : v < best;
        if (better || isNan(v)) {
          best = v;
          best_k = k;
        }
      }
      values[static_cast<std::size_t>(o * ax.inner + i)] = best;
      indices[static_cast<std::size_t>(o * ax.inner + i)] = best_k;
    }
  }
}

template <bool kMax, typename Args>
Status maxMin(const Args& a) {
  MLU_RETURN_IF_ERROR(validate(a));
  std::vector<std::int64_t> indices;
  const int d = dimOf(a.dim, a.x.ndim);
  if (isFloating(a.x.dtype)) {
    std::vector<double> values;
    extremum<kMax>(a.x, read(a.x), d, values, indices);
    write(a.values, values);
  } else {
    std::vector<std::int64_t> values;
    extremum<kMax>(a.x, readIntegers(a.x), d, values, indices);
    writeIntegers(a.values, values);
  }
  writeInt64(a.indices, indices);
  return Status::success();
}

// ---- softmax / log_softmax ----

// softmax (or log_softmax) of each row along dim d.
template <bool kLog>
void softmax(const TensorView& x, const TensorView& y, int d) {
  const std::vector<double> xv = read(x);
  std::vector<double> yv(xv.size());
  const Axis ax = axisOf(x, d);
  for (std::int64_t o = 0; o < ax.outer; ++o) {
    for (std::int64_t i = 0; i < ax.inner; ++i) {
      double m = -kInf;  // the max of the row (a NaN then spreads through the sum)
      for (std::int64_t k = 0; k < ax.size; ++k) {
        if (xv[ax.at(o, k, i)] > m) m = xv[ax.at(o, k, i)];
      }
      double sum = 0.0;
      for (std::int64_t k = 0; k < ax.size; ++k) sum += std::exp(xv[ax.at(o, k, i)] - m);
      for (std::int64_t k = 0; k < ax.size; ++k) {
        const double shifted = xv[ax.at(o, k, i)] - m;
        yv[ax.at(o, k, i)] = kLog ? shifted - std::log(sum) : std::exp(shifted) / sum;
      }
    }
  }
  write(y, yv);
}

// softmax: grad_input = y * (g - sum(g * y)); log_softmax: grad_input = g - exp(y) * sum(g).
template <bool kLog>
void softmaxBackward(const TensorView& y, const TensorView& grad_output, const TensorView& grad_input,
                     int d) {
  const std::vector<double> yv = read(y);
  const std::vector<double> gv = read(grad_output);
  std::vector<double> out(yv.size());
  const Axis ax = axisOf(y, d);
  for (std::int64_t o = 0; o < ax.outer; ++o) {
    for (std::int64_t i = 0; i < ax.inner; ++i) {
      double sum = 0.0;
      for (std::int64_t k = 0; k < ax.size; ++k) {
        const std::size_t e = ax.at(o, k, i);
        sum += kLog ? gv[e] : gv[e] * yv[e];
      }
      for (std::int64_t k = 0; k < ax.size; ++k) {
        const std::size_t e = ax.at(o, k, i);
        out[e] = kLog ? gv[e] - std::exp(yv[e]) * sum : yv[e] * (gv[e] - sum);
      }
    }
  }
  write(grad_input, out);
}

// ---- nll_loss / cross_entropy ----

// The class weights of a loss: w[c] from the optional weight tensor, else 1; a target outside [0, C)
// weighs 1 (its loss is NaN anyway).
struct ClassWeights {
  std::vector<double> w;  // empty: all 1
  std::int64_t classes = 0;
  double of(std::int64_t t) const {
    return w.empty() || t < 0 || t >= classes ? 1.0 : w[static_cast<std::size_t>(t)];
  }
  double total() const {
    double sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) sum += of(c);
    return sum;
  }
};
ClassWeights classWeights(const TensorView& weight, std::int64_t classes) {
  return ClassWeights{read(weight), classes};
}

// A loss's scores in row-major order: [C] (one row), [N, C] or [N, C, d1, ...] (N·d1···dk rows); element
// (row r, class c) is at ((r / S) C + c) S + r % S with S = d1···dk. Targets and per-row outputs are
// row-major in r.
struct LossLayout {
  std::int64_t rows = 1, classes = 0, spatial = 1;
  std::size_t at(std::int64_t r, std::int64_t c) const {
    return static_cast<std::size_t>(((r / spatial) * classes + c) * spatial + r % spatial);
  }
};
LossLayout lossLayout(const TensorView& scores) {
  LossLayout l;
  l.classes = reduce::lossClasses(scores);
  for (int d = 2; d < scores.ndim; ++d) l.spatial *= scores.dim(d);
  l.rows = (scores.ndim == 1 ? 1 : scores.dim(0)) * l.spatial;
  return l;
}

// The divisor of a mean: the summed weights of the rows whose target is not ignore_index (PyTorch's
// total_weight; their count without weights).
double meanDivisor(const std::vector<std::int64_t>& target, std::int64_t ignore_index,
                   const ClassWeights& w) {
  double total = 0.0;
  for (const std::int64_t t : target) total += t == ignore_index ? 0.0 : w.of(t);
  return total;
}

// Writes per-row losses as the op's output: themselves, their sum or their sum / divisor (mean).
void writeLoss(int reduction, const std::vector<double>& losses, double divisor, const TensorView& output) {
  if (reduction == MLUOP_REDUCTION_NONE) {
    write(output, losses);
    return;
  }
  double total = 0.0;
  for (const double l : losses) total += l;
  if (reduction == MLUOP_REDUCTION_MEAN) total /= divisor;  // 0 / 0: NaN
  write(output, {total});
}

// -w[t] log_prob[r, t] for each row, t = target[r] (0 if ignored, NaN if t is not a class).
std::vector<double> nllRows(const std::vector<double>& log_prob, const LossLayout& l,
                            const std::vector<std::int64_t>& target, std::int64_t ignore_index,
                            const ClassWeights& w) {
  std::vector<double> losses(static_cast<std::size_t>(l.rows), 0.0);
  for (std::int64_t r = 0; r < l.rows; ++r) {
    const std::int64_t t = target[static_cast<std::size_t>(r)];
    if (t == ignore_index) continue;
    losses[static_cast<std::size_t>(r)] = t >= 0 && t < l.classes ? -w.of(t) * log_prob[l.at(r, t)] : kNaN;
  }
  return losses;
}

// The factor row i's gradient is scaled by: grad_output[i] (none), grad_output[] (sum) or
// grad_output[] / the mean's divisor (a zero divisor gives inf, and NaN gradients, as PyTorch's).
double gradScale(int reduction, const std::vector<double>& g, std::int64_t i, double divisor) {
  if (reduction == MLUOP_REDUCTION_NONE) return g[static_cast<std::size_t>(i)];
  if (reduction == MLUOP_REDUCTION_SUM) return g[0];
  return g[0] / divisor;
}

// The scores with each row replaced by its log_softmax over the classes.
std::vector<double> logSoftmaxRows(const std::vector<double>& x, const LossLayout& l) {
  std::vector<double> out(x.size());
  for (std::int64_t r = 0; r < l.rows; ++r) {
    double m = -kInf;
    for (std::int64_t j = 0; j < l.classes; ++j) m = x[l.at(r, j)] > m ? x[l.at(r, j)] : m;
    double sum = 0.0;
    for (std::int64_t j = 0; j < l.classes; ++j) sum += std::exp(x[l.at(r, j)] - m);
    for (std::int64_t j = 0; j < l.classes; ++j) out[l.at(r, j)] = x[l.at(r, j)] - m - std::log(sum);
  }
  return out;
}

// ---- pooling ----

// PyTorch's window of output position o along an axis: the input range [begin, end) and the number of
// positions it covers counting padding.
struct Span {
  std::int64_t begin, end, with_padding;
};
Span spanOf(std::int64_t o, std::int64_t kernel, std::int64_t stride, std::int64_t pad, std::int64_t size) {
  std::int64_t begin = o * stride - pad;
  std::int64_t end = std::min(begin + kernel, size + pad);
  const std::int64_t with_padding = end - begin;
  begin = std::max<std::int64_t>(begin, 0);
  end = std::min(end, size);
  return {begin, end, with_padding};
}

double avgDivisor(const Span& sh, const Span& sw, bool count_include_pad) {
  return static_cast<double>(count_include_pad ? sh.with_padding * sw.with_padding
                                               : (sh.end - sh.begin) * (sw.end - sw.begin));
}

}  // namespace

Status run(const sum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return sumOrMean(args.x, args.y, args.dims, false);
}

Status run(const mean_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return sumOrMean(args.x, args.y, args.dims, true);
}

Status run(const max_args& args) { return maxMin<true>(args); }

Status run(const min_args& args) { return maxMin<false>(args); }

Status run(const argmax_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  std::vector<std::int64_t> indices;
  const int d = dimOf(args.dim, args.x.ndim);
  if (isFloating(args.x.dtype)) {
    std::vector<double> values;
    extremum<true>(args.x, read(args.x), d, values, indices);
  } else {
    std::vector<std::int64_t> values;
    extremum<true>(args.x, readIntegers(args.x), d, values, indices);
  }
  writeInt64(args.indices, indices);
  return Status::success();
}

Status run(const softmax_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  softmax<false>(args.x, args.y, dimOf(args.dim, args.x.ndim));
  return Status::success();
}

Status run(const softmax_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  softmaxBackward<false>(args.y, args.grad_output, args.grad_input, dimOf(args.dim, args.y.ndim));
  return Status::success();
}

Status run(const log_softmax_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  softmax<true>(args.x, args.y, dimOf(args.dim, args.x.ndim));
  return Status::success();
}

Status run(const log_softmax_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  softmaxBackward<true>(args.y, args.grad_output, args.grad_input, dimOf(args.dim, args.y.ndim));
  return Status::success();
}

Status run(const nll_loss_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const LossLayout l = lossLayout(args.input);
  const std::vector<std::int64_t> target = readInt64(args.target);
  const ClassWeights w = classWeights(args.weight, l.classes);
  writeLoss(args.reduction, nllRows(read(args.input), l, target, args.ignore_index, w),
            meanDivisor(target, args.ignore_index, w), args.output);
  return Status::success();
}

Status run(const nll_loss_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const LossLayout l = lossLayout(args.grad_input);
  const std::vector<std::int64_t> target = readInt64(args.target);
  const std::vector<double> g = read(args.grad_output);
  const ClassWeights w = classWeights(args.weight, l.classes);
  const double divisor = meanDivisor(target, args.ignore_index, w);
  std::vector<double> grad(static_cast<std::size_t>(args.grad_input.numel()), 0.0);
  for (std::int64_t r = 0; r < l.rows; ++r) {
    const std::int64_t t = target[static_cast<std::size_t>(r)];
    if (t == args.ignore_index) continue;
    if (t < 0 || t >= l.classes) {
      for (std::int64_t j = 0; j < l.classes; ++j) grad[l.at(r, j)] = kNaN;
      continue;
    }
    grad[l.at(r, t)] = -w.of(t) * gradScale(args.reduction, g, r, divisor);
  }
  write(args.grad_input, grad);
  return Status::success();
}

// PyTorch's cross entropy with class weights w and label smoothing e: a counted row's loss is
// (1 - e) (-w_t log p_t) + (e / C) sum_c (-w_c log p_c).
Status run(const cross_entropy_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const LossLayout l = lossLayout(args.logits);
  const std::vector<std::int64_t> target = readInt64(args.target);
  const std::vector<double> log_prob = logSoftmaxRows(read(args.logits), l);
  const ClassWeights w = classWeights(args.weight, l.classes);
  const double e = args.label_smoothing;
  std::vector<double> losses = nllRows(log_prob, l, target, args.ignore_index, w);
  for (std::int64_t r = 0; r < l.rows && e != 0.0; ++r) {
    const std::int64_t t = target[static_cast<std::size_t>(r)];
    if (t == args.ignore_index || t < 0 || t >= l.classes) continue;
    double smooth = 0.0;
    for (std::int64_t j = 0; j < l.classes; ++j) smooth -= w.of(j) * log_prob[l.at(r, j)];
    double& loss = losses[static_cast<std::size_t>(r)];
    loss = (1.0 - e) * loss + e / static_cast<double>(l.classes) * smooth;
  }
  writeLoss(args.reduction, losses, meanDivisor(target, args.ignore_index, w), args.output);
  return Status::success();
}

// d loss_r / d x_j = (1 - e) w_t (p_j - [j = t]) + (e / C) (p_j W - w_j), W = sum_c w_c.
Status run(const cross_entropy_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const LossLayout l = lossLayout(args.logits);
  const std::vector<std::int64_t> target = readInt64(args.target);
  const std::vector<double> g = read(args.grad_output);
  const std::vector<double> log_prob = logSoftmaxRows(read(args.logits), l);
  const ClassWeights w = classWeights(args.weight, l.classes);
  const double divisor = meanDivisor(target, args.ignore_index, w);
  const double e = args.label_smoothing, total = w.total();
  std::vector<double> grad(static_cast<std::size_t>(args.logits.numel()), 0.0);
  for (std::int64_t r = 0; r < l.rows; ++r) {
    const std::int64_t t = target[static_cast<std::size_t>(r)];
    if (t == args.ignore_index) continue;
    const bool valid = t >= 0 && t < l.classes;
    const double scale = valid ? gradScale(args.reduction, g, r, divisor) : kNaN;
    for (std::int64_t j = 0; j < l.classes; ++j) {
      const double p = std::exp(log_prob[l.at(r, j)]);
      double d = (1.0 - e) * (valid ? w.of(t) : 1.0) * (p - (j == t ? 1.0 : 0.0));
      if (e != 0.0) d += e / static_cast<double>(l.classes) * (p * total - w.of(j));
      grad[l.at(r, j)] = d * scale;
    }
  }
  write(args.grad_logits, grad);
  return Status::success();
}

// Over the window's taps (every dh-th row, dw-th column) inside the input: the first maximum or the first
// NaN; the index starts at the first tap inside the input (PyTorch's).
Status run(const max_pool2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::maxPoolGeometry(args, "x", args.x, g));
  const std::vector<double> x = read(args.x);
  std::vector<double> y(static_cast<std::size_t>(g.n * g.c * g.ho * g.wo));
  std::vector<std::int64_t> indices(y.size());
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const double* in = x.data() + plane * g.h * g.w;
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const std::int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        std::int64_t h_first = h0, w_first = w0;
        while (h_first < 0) h_first += g.dh;
        while (w_first < 0) w_first += g.dw;
        double best = -kInf;  // what padding holds
        std::int64_t best_index = h_first * g.w + w_first;
        bool found_nan = false;
        for (std::int64_t i = 0; i < g.kh && !found_nan; ++i) {
          for (std::int64_t j = 0; j < g.kw && !found_nan; ++j) {
            const std::int64_t h = h0 + i * g.dh, w = w0 + j * g.dw;
            if (h < 0 || h >= g.h || w < 0 || w >= g.w) continue;
            const double v = in[h * g.w + w];
            found_nan = std::isnan(v);
            if (v > best || found_nan) {
              best = v;
              best_index = h * g.w + w;
            }
          }
        }
        const std::size_t o = static_cast<std::size_t>((plane * g.ho + oh) * g.wo + ow);
        y[o] = best;
        indices[o] = best_index;
      }
    }
  }
  write(args.y, y);
  writeInt64(args.indices, indices);
  return Status::success();
}

Status run(const max_pool2d_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::maxPoolGeometry(args, "grad_input", args.grad_input, g));
  const std::vector<double> go = read(args.grad_output);
  const std::vector<std::int64_t> indices = readInt64(args.indices);
  const std::int64_t plane_size = g.h * g.w;
  std::vector<double> gi(static_cast<std::size_t>(g.n * g.c * plane_size), 0.0);
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane) {
    for (std::int64_t o = 0; o < g.ho * g.wo; ++o) {
      const std::size_t e = static_cast<std::size_t>(plane * g.ho * g.wo + o);
      if (indices[e] < 0 || indices[e] >= plane_size) continue;  // names no input position
      gi[static_cast<std::size_t>(plane * plane_size + indices[e])] += go[e];
    }
  }
  write(args.grad_input, gi);
  return Status::success();
}

Status run(const avg_pool2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::poolGeometry(args.kernel, args.stride, args.padding, "x", args.x, g));
  const std::vector<double> x = read(args.x);
  std::vector<double> y(static_cast<std::size_t>(g.n * g.c * g.ho * g.wo));
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const double* in = x.data() + plane * g.h * g.w;
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const Span sh = spanOf(oh, g.kh, g.sh, g.ph, g.h);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const Span sw = spanOf(ow, g.kw, g.sw, g.pw, g.w);
        double sum = 0.0;
        for (std::int64_t h = sh.begin; h < sh.end; ++h) {
          for (std::int64_t w = sw.begin; w < sw.end; ++w) sum += in[h * g.w + w];
        }
        y[static_cast<std::size_t>((plane * g.ho + oh) * g.wo + ow)] =
            sum / avgDivisor(sh, sw, args.count_include_pad);
      }
    }
  }
  write(args.y, y);
  return Status::success();
}

Status run(const avg_pool2d_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(
      reduce::poolGeometry(args.kernel, args.stride, args.padding, "grad_input", args.grad_input, g));
  const std::vector<double> go = read(args.grad_output);
  std::vector<double> gi(static_cast<std::size_t>(g.n * g.c * g.h * g.w), 0.0);
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane) {
    double* out = gi.data() + plane * g.h * g.w;
    for (std::int64_t oh = 0; oh < g.ho; ++oh) {
      const Span sh = spanOf(oh, g.kh, g.sh, g.ph, g.h);
      for (std::int64_t ow = 0; ow < g.wo; ++ow) {
        const Span sw = spanOf(ow, g.kw, g.sw, g.pw, g.w);
        const double share = go[static_cast<std::size_t>((plane * g.ho + oh) * g.wo + ow)] /
                             avgDivisor(sh, sw, args.count_include_pad);
        for (std::int64_t h = sh.begin; h < sh.end; ++h) {
          for (std::int64_t w = sw.begin; w < sw.end; ++w) out[h * g.w + w] += share;
        }
      }
    }
  }
  write(args.grad_input, gi);
  return Status::success();
}

Status run(const norm_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(args.dims, args.x.ndim, mask));
  std::vector<double> y;
  for (const std::vector<double>& group : groupsOf(args.x, mask)) y.push_back(pNorm(group, args.p));
  write(args.y, y);
  return Status::success();
}

Status run(const var_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(args.dims, args.x.ndim, mask));
  std::vector<double> y;
  for (const std::vector<double>& group : groupsOf(args.x, mask)) y.push_back(variance(group, args.unbiased));
  write(args.y, y);
  return Status::success();
}

Status run(const adaptive_avg_pool2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const std::int64_t planes = args.x.dim(0) * args.x.dim(1);
  const std::int64_t h = args.x.dim(2), w = args.x.dim(3), ho = args.y.dim(2), wo = args.y.dim(3);
  const std::vector<double> x = read(args.x);
  std::vector<double> y(static_cast<std::size_t>(planes * ho * wo));
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    for (std::int64_t oh = 0; oh < ho; ++oh) {
      const AdaptiveSpan sh = adaptiveSpan(oh, h, ho);
      for (std::int64_t ow = 0; ow < wo; ++ow) {
        const AdaptiveSpan sw = adaptiveSpan(ow, w, wo);
        double sum = 0.0;
        for (std::int64_t i = sh.begin; i < sh.end; ++i) {
          for (std::int64_t j = sw.begin; j < sw.end; ++j)
            sum += x[static_cast<std::size_t>((plane * h + i) * w + j)];
        }
        const auto count = static_cast<double>((sh.end - sh.begin) * (sw.end - sw.begin));
        y[static_cast<std::size_t>((plane * ho + oh) * wo + ow)] = sum / count;
      }
    }
  }
  write(args.y, y);
  return Status::success();
}

Status run(const adaptive_avg_pool2d_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView& gin = args.grad_input;
  const std::int64_t planes = gin.dim(0) * gin.dim(1);
  const std::int64_t h = gin.dim(2), w = gin.dim(3), ho = args.grad_output.dim(2),
                     wo = args.grad_output.dim(3);
  const std::vector<double> go = read(args.grad_output);
  std::vector<double> gi(static_cast<std::size_t>(planes * h * w), 0.0);
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    for (std::int64_t oh = 0; oh < ho; ++oh) {
      const AdaptiveSpan sh = adaptiveSpan(oh, h, ho);
      for (std::int64_t ow = 0; ow < wo; ++ow) {
        const AdaptiveSpan sw = adaptiveSpan(ow, w, wo);
        const auto count = static_cast<double>((sh.end - sh.begin) * (sw.end - sw.begin));
        const double share = go[static_cast<std::size_t>((plane * ho + oh) * wo + ow)] / count;
        for (std::int64_t i = sh.begin; i < sh.end; ++i) {
          for (std::int64_t j = sw.begin; j < sw.end; ++j)
            gi[static_cast<std::size_t>((plane * h + i) * w + j)] += share;
        }
      }
    }
  }
  write(gin, gi);
  return Status::success();
}

}  // namespace mlu::reference
