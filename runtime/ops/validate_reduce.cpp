// Argument checks of the reduction (sum, mean, norm, var, max, min, argmax), softmax, loss (nll_loss,
// cross_entropy) and pooling (max_pool2d, avg_pool2d, adaptive_avg_pool2d) ops. The shape rules themselves
// live in reduce_shapes.h, which the device kernels and the CPU reference share.
#include "elementwise_shapes.h"
#include "reduce_shapes.h"
#include "validate.h"

#include "checks.h"

#include <cmath>

namespace mlu {
namespace {

using reduce::expectShape;
using reduce::Shape;
using reduce::shapeOf;

Status checkInt64(std::string_view name, const TensorView& t) {
  if (t.dtype == MLUOP_DTYPE_INT64) return Status::success();
  return badParam("{} is {}; expected int64", name, dtypeName(t.dtype));
}

Status checkSameShape(std::string_view name, const TensorView& t, std::string_view ref_name,
                      const TensorView& ref) {
  if (shapeOf(t) == shapeOf(ref)) return Status::success();
  return badParam("{} has shape {} but {} has shape {}; they must have the same shape", name, t.shapeString(),
                  ref_name, ref.shapeString());
}

// sum and mean.
template <typename Args>
Status validateSumLike(const Args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(a.dims, a.x.ndim, mask));
  return expectShape("y", a.y, reduce::reducedShape(a.x, mask, a.keepdim));
}

// The shape of a max/min/argmax result over dim d (0-d stays 0-d).
Status checkDimReduction(const TensorView& x, int dim, bool keepdim, Shape& result) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(dim, x.ndim, "dim", d));
  result.clear();
  if (x.ndim == 0) return Status::success();
  if (x.dim(d) == 0) {
    return badParam("reduction dim {} of x with shape {} has size 0; the result of an empty dim is undefined",
                    d, x.shapeString());
  }
  result = reduce::reducedShape(x, 1u << d, keepdim);
  return Status::success();
}

// x of a dtype max/min/argmax compare: floating, integer, and bool when allowed (PyTorch's argmax refuses
// bool).
Status checkComparable(const TensorView& x, bool allow_bool) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", x));
  if (x.dtype == MLUOP_DTYPE_BOOL && !allow_bool) return badParam("x is bool; argmax takes numeric tensors");
  return Status::success();
}

template <typename Args>
Status validateMaxMin(const Args& a) {
  MLU_RETURN_IF_ERROR(checkComparable(a.x, true));
  MLU_RETURN_IF_ERROR(checks::sameDtype("values", a.values, "x", a.x));
  MLU_RETURN_IF_ERROR(checkInt64("indices", a.indices));
  Shape result;
  MLU_RETURN_IF_ERROR(checkDimReduction(a.x, a.dim, a.keepdim, result));
  MLU_RETURN_IF_ERROR(expectShape("values", a.values, result));
  return expectShape("indices", a.indices, result);
}

// softmax/log_softmax forward: y = f(x) along dim.
template <typename Args>
Status validateSoftmaxForward(const Args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  return checkSameShape("y", a.y, "x", a.x);
}

// softmax/log_softmax backward: grad_input from y and grad_output, all of one shape.
template <typename Args>
Status validateSoftmaxBackward(const Args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_output", a.grad_output, "y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "y", a.y));
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.y.ndim, "dim", d));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_output", a.grad_output, "y", a.y));
  return checkSameShape("grad_input", a.grad_input, "y", a.y);
}

Status checkReduction(int reduction) {
  if (reduction == MLUOP_REDUCTION_NONE || reduction == MLUOP_REDUCTION_MEAN ||
      reduction == MLUOP_REDUCTION_SUM) {
    return Status::success();
  }
  return badParam("reduction = {}; expected 0 (none), 1 (mean) or 2 (sum)", reduction);
}

// The scores of a loss (input, logits or grad_input) — [C], [N, C] or [N, C, d1, ..., dk] — and its int64
// target: 0-d, [N] or [N, d1, ..., dk] (the scores' shape without the class dim), as PyTorch's.
Shape targetShape(const TensorView& scores) {
  Shape shape;
  for (int d = 0; d < scores.ndim; ++d)
    if (d != reduce::lossClassDim(scores)) shape.push_back(scores.dim(d));
  return shape;
}

Status checkScoresAndTarget(std::string_view name, const TensorView& scores, const TensorView& target) {
  if (scores.ndim < 1) {
    return badParam("{} has shape {}; expected [C], [N, C] or [N, C, d1, ...]", name, scores.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkInt64("target", target));
  if (shapeOf(target) != targetShape(scores)) {
    return badParam("target has shape {} but {} has shape {}; expected target {}", target.shapeString(), name,
                    scores.shapeString(), reduce::listString(targetShape(scores)));
  }
  return Status::success();
}

// The optional class weights of a loss: [C], of the scores' dtype.
Status checkClassWeights(const TensorView& weight, std::string_view name, const TensorView& scores) {
  if (!weight.present) return Status::success();
  MLU_RETURN_IF_ERROR(checks::tensor("weight", weight));
  MLU_RETURN_IF_ERROR(checks::sameDtype("weight", weight, name, scores));
  const std::int64_t classes = reduce::lossClasses(scores);
  if (shapeOf(weight) != Shape{classes}) {
    return badParam("weight has shape {} but {} has {} classes; expected weight [{}]", weight.shapeString(),
                    name, classes, classes);
  }
  return Status::success();
}

// Label smoothing: any finite value (PyTorch documents [0, 1] and computes the same formula for others).
Status checkLabelSmoothing(double label_smoothing) {
  if (std::isfinite(label_smoothing)) return Status::success();
  return badParam("label_smoothing = {} must be finite", label_smoothing);
}

// The loss value's shape: the target's without reduction, [] (0-d) with mean or sum.
Shape lossShape(int reduction, const TensorView& scores) {
  return reduction == MLUOP_REDUCTION_NONE ? targetShape(scores) : Shape{};
}

// nll_loss/cross_entropy forward: scores (input or logits) and target -> output.
Status validateLossForward(int reduction, std::string_view name, const TensorView& scores,
                           const TensorView& target, const TensorView& output) {
  MLU_RETURN_IF_ERROR(checkReduction(reduction));
  MLU_RETURN_IF_ERROR(checks::floating(name, scores));
  MLU_RETURN_IF_ERROR(checks::sameDtype("output", output, name, scores));
  MLU_RETURN_IF_ERROR(checkScoresAndTarget(name, scores, target));
  return expectShape("output", output, lossShape(reduction, scores));
}

// The pooling output (y, indices, grad_output) must be [N, C, Ho, Wo] ([C, Ho, Wo] for an unbatched input).
Status checkPoolOutput(std::string_view name, const TensorView& t, const reduce::PoolGeometry& g) {
  return expectShape(name, t, g.outputShape());
}

// An output must address a distinct element at every position (the kernels write each once).
Status checkOutput(std::string_view name, const TensorView& t) {
  if (!elementwise::overlapsItself(t)) return Status::success();
  return badParam(
      "{} (shape {}, strides {}) overlaps itself; an output needs a distinct element at every position", name,
      t.shapeString(), elementwise::stridesString(t));
}

// norm and var: x -> y over a dim list (empty = every dim), like sum.
template <typename Args>
Status validateDimsReduction(const Args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(validateSumLike(a));
  return checkOutput("y", a.y);
}

// adaptive_avg_pool2d: the input [N, C, H, W] (x or grad_input) and the output [N, C, Ho, Wo] (y or
// grad_output); the output size comes from the output's dims. Empty windows are refused.
Status checkAdaptivePool(std::string_view in_name, const TensorView& in, std::string_view out_name,
                         const TensorView& out) {
  if (in.ndim != 4)
    return badParam("{} has shape {}; expected 4 dims [N, C, H, W]", in_name, in.shapeString());
  if (out.ndim != 4) {
    return badParam("{} has shape {}; expected 4 dims [N, C, Ho, Wo]", out_name, out.shapeString());
  }
  if (in.dim(0) != out.dim(0) || in.dim(1) != out.dim(1)) {
    return badParam("{} has shape {} but {} has shape {}; N and C must match", out_name, out.shapeString(),
                    in_name, in.shapeString());
  }
  if ((in.dim(2) == 0 || in.dim(3) == 0) && out.dim(2) * out.dim(3) > 0) {
    return badParam("{} has shape {}: an output of size [{}, {}] needs non-empty H and W", in_name,
                    in.shapeString(), out.dim(2), out.dim(3));
  }
  return Status::success();
}

}  // namespace

// sum takes integer and bool x too: y is then int64 (PyTorch's default for them) or x's own dtype (the sum
// wraps), exact either way.
Status validate(const sum_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  if (isFloating(a.x.dtype)) return validateSumLike(a);
  if (a.y.dtype != MLUOP_DTYPE_INT64 && a.y.dtype != a.x.dtype) {
    return badParam("y is {}; the sum of a {} tensor is int64 (or {})", dtypeName(a.y.dtype),
                    dtypeName(a.x.dtype), dtypeName(a.x.dtype));
  }
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(a.dims, a.x.ndim, mask));
  MLU_RETURN_IF_ERROR(expectShape("y", a.y, reduce::reducedShape(a.x, mask, a.keepdim)));
  return checkOutput("y", a.y);
}

Status validate(const mean_args& a) { return validateSumLike(a); }

Status validate(const max_args& a) { return validateMaxMin(a); }

Status validate(const min_args& a) { return validateMaxMin(a); }

Status validate(const argmax_args& a) {
  MLU_RETURN_IF_ERROR(checkComparable(a.x, false));
  MLU_RETURN_IF_ERROR(checkInt64("indices", a.indices));
  Shape result;
  MLU_RETURN_IF_ERROR(checkDimReduction(a.x, a.dim, a.keepdim, result));
  return expectShape("indices", a.indices, result);
}

Status validate(const softmax_forward_args& a) { return validateSoftmaxForward(a); }

Status validate(const softmax_backward_args& a) { return validateSoftmaxBackward(a); }

Status validate(const log_softmax_forward_args& a) { return validateSoftmaxForward(a); }

Status validate(const log_softmax_backward_args& a) { return validateSoftmaxBackward(a); }

Status validate(const nll_loss_forward_args& a) {
  MLU_RETURN_IF_ERROR(validateLossForward(a.reduction, "input", a.input, a.target, a.output));
  return checkClassWeights(a.weight, "input", a.input);
}

Status validate(const nll_loss_backward_args& a) {
  MLU_RETURN_IF_ERROR(checkReduction(a.reduction));
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checkScoresAndTarget("grad_input", a.grad_input, a.target));
  MLU_RETURN_IF_ERROR(checkClassWeights(a.weight, "grad_input", a.grad_input));
  return expectShape("grad_output", a.grad_output, lossShape(a.reduction, a.grad_input));
}

Status validate(const cross_entropy_forward_args& a) {
  MLU_RETURN_IF_ERROR(checkLabelSmoothing(a.label_smoothing));
  MLU_RETURN_IF_ERROR(validateLossForward(a.reduction, "logits", a.logits, a.target, a.output));
  return checkClassWeights(a.weight, "logits", a.logits);
}

Status validate(const cross_entropy_backward_args& a) {
  MLU_RETURN_IF_ERROR(checkReduction(a.reduction));
  MLU_RETURN_IF_ERROR(checks::floating("logits", a.logits));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_output", a.grad_output, "logits", a.logits));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_logits", a.grad_logits, "logits", a.logits));
  MLU_RETURN_IF_ERROR(checkScoresAndTarget("logits", a.logits, a.target));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_logits", a.grad_logits, "logits", a.logits));
  MLU_RETURN_IF_ERROR(checkLabelSmoothing(a.label_smoothing));
  MLU_RETURN_IF_ERROR(checkClassWeights(a.weight, "logits", a.logits));
  return expectShape("grad_output", a.grad_output, lossShape(a.reduction, a.logits));
}

Status validate(const max_pool2d_forward_args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkInt64("indices", a.indices));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::maxPoolGeometry(a, "x", a.x, g));
  MLU_RETURN_IF_ERROR(checkPoolOutput("y", a.y, g));
  return checkPoolOutput("indices", a.indices, g);
}

Status validate(const max_pool2d_backward_args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checkInt64("indices", a.indices));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::maxPoolGeometry(a, "grad_input", a.grad_input, g));
  MLU_RETURN_IF_ERROR(checkPoolOutput("grad_output", a.grad_output, g));
  return checkPoolOutput("indices", a.indices, g);
}

Status validate(const avg_pool2d_forward_args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::poolGeometry(a.kernel, a.stride, a.padding, "x", a.x, g));
  return checkPoolOutput("y", a.y, g);
}

Status validate(const avg_pool2d_backward_args& a) {
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "grad_output", a.grad_output));
  reduce::PoolGeometry g;
  MLU_RETURN_IF_ERROR(reduce::poolGeometry(a.kernel, a.stride, a.padding, "grad_input", a.grad_input, g));
  return checkPoolOutput("grad_output", a.grad_output, g);
}

// Any p but NaN (p = inf, -inf, 0, 1, 2, any other, negative too); p = ±inf and p < 0 have no identity, so
// an empty reduction is refused for them (PyTorch's vector_norm refuses it too).
Status validate(const norm_args& a) {
  MLU_RETURN_IF_ERROR(validateDimsReduction(a));
  if (std::isnan(a.p)) return badParam("p is NaN; expected a number (inf, -inf, 0, 1, 2, ...)");
  std::uint32_t mask = 0;
  MLU_RETURN_IF_ERROR(reduce::reducedDimMask(a.dims, a.x.ndim, mask));
  const bool empty = reduce::dimsOf(a.x, mask, true).count() == 0 && a.y.numel() > 0;
  if (empty && (std::isinf(a.p) || a.p < 0)) {
    return badParam("the reduction over an empty dim of x {} has no value for p = {} (no identity)",
                    a.x.shapeString(), a.p);
  }
  return Status::success();
}

Status validate(const var_args& a) { return validateDimsReduction(a); }

Status validate(const adaptive_avg_pool2d_forward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkAdaptivePool("x", a.x, "y", a.y));
  return checkOutput("y", a.y);
}

Status validate(const adaptive_avg_pool2d_backward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_input", a.grad_input));
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checkAdaptivePool("grad_input", a.grad_input, "grad_output", a.grad_output));
  return checkOutput("grad_input", a.grad_input);
}

}  // namespace mlu
