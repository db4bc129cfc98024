// Argument checks of the fill, copy/cast, permute, broadcasting binary (pow too), unary and their backward
// (gelu, silu, sin, cos, pow_scalar too), random (Philox) ops, sgd ops. The shape rules live in
// elementwise_shapes.h, shared with the device kernels and the CPU reference. Messages say what is wrong
// with the actual values; the entry point prefixes the op.
#include "element.h"
#include "elementwise_shapes.h"
#include "math_ops.h"
#include "validate.h"
#include "view_overlap.h"

#include "checks.h"

#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace mlu {
namespace {

using elementwise::broadcastShapes;
using elementwise::sameShape;

Status checkSameShape(std::string_view name, const TensorView& t, std::string_view ref_name,
                      const TensorView& ref) {
  if (sameShape(t, ref)) return Status::success();
  return badParam("{} has shape {} but {} has shape {}; they must be equal", name, t.shapeString(), ref_name,
                  ref.shapeString());
}

// An output must address a distinct element at every logical position (no broadcast views).
Status checkOutput(std::string_view name, const TensorView& t) {
  if (!elementwise::overlapsItself(t)) return Status::success();
  return badParam(
      "{} (shape {}, strides {}) overlaps itself; an output needs a distinct element at every "
      "position",
      name, t.shapeString(), elementwise::stridesString(t));
}

// x -> y of the same floating dtype and shape (unary ops and the scalar forms).
Status checkUnary(const TensorView& x, const TensorView& y) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", y));
  MLU_RETURN_IF_ERROR(checks::floating("x", x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", y, "x", x));
  MLU_RETURN_IF_ERROR(checkSameShape("y", y, "x", x));
  return checkOutput("y", y);
}

// c has the shape a and b broadcast to, and addresses a distinct element at every position.
Status checkBroadcastOutput(const TensorView& a, const TensorView& b, const TensorView& c) {
  TensorView shape;
  if (!broadcastShapes(a, b, shape)) {
    return badParam("a has shape {} and b {}, which do not broadcast", a.shapeString(), b.shapeString());
  }
  if (!sameShape(c, shape)) {
    return badParam("c has shape {} but a {} and b {} broadcast to {}", c.shapeString(), a.shapeString(),
                    b.shapeString(), shape.shapeString());
  }
  return checkOutput("c", c);
}

// c = a op b with numpy broadcasting; a, b and c of one floating dtype.
Status checkBinary(const TensorView& a, const TensorView& b, const TensorView& c) {
  MLU_RETURN_IF_ERROR(checks::tensor("a", a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", b));
  MLU_RETURN_IF_ERROR(checks::tensor("c", c));
  MLU_RETURN_IF_ERROR(checks::floating("a", a));
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", b, "a", a));
  MLU_RETURN_IF_ERROR(checks::sameDtype("c", c, "a", a));
  return checkBroadcastOutput(a, b, c);
}

// grad_output and the forward tensor (x or y) -> grad_input, all of one floating dtype and shape.
Status checkBackward(const TensorView& grad_output, std::string_view saved_name, const TensorView& saved,
                     const TensorView& grad_input) {
  MLU_RETURN_IF_ERROR(checks::tensor("grad_output", grad_output));
  MLU_RETURN_IF_ERROR(checks::tensor(saved_name, saved));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_input", grad_input));
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype(saved_name, saved, "grad_output", grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", grad_input, "grad_output", grad_output));
  MLU_RETURN_IF_ERROR(checkSameShape(saved_name, saved, "grad_output", grad_output));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_input", grad_input, "grad_output", grad_output));
  return checkOutput("grad_input", grad_input);
}

// The dropout probability: p in [0, 1] (p == 1 drops everything).
Status checkDropoutP(float p) {
  if (p >= 0.0f && p <= 1.0f) return Status::success();
  return badParam("p = {} is outside [0, 1]", p);
}

Status checkMask(const TensorView& mask, std::string_view ref_name, const TensorView& ref) {
  MLU_RETURN_IF_ERROR(checks::tensor("mask", mask));
  if (mask.dtype != MLUOP_DTYPE_UINT8) return badParam("mask is {}; it must be uint8", dtypeName(mask.dtype));
  return checkSameShape("mask", mask, ref_name, ref);
}

// The largest finite value of a floating dtype (float64's for the others).
double largestFinite(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_HALF:
      return 65504.0;
    case MLUOP_DTYPE_BFLOAT16:
      return static_cast<double>(bfloat16ToFloat(0x7f7f));
    case MLUOP_DTYPE_FLOAT:
      return static_cast<double>(std::numeric_limits<float>::max());
    default:
      return std::numeric_limits<double>::max();
  }
}

// Whether `value` can be stored in dtype without overflow (PyTorch refuses fill values that overflow;
// integer fills truncate toward zero). Returns the range for the message.
template <typename T>
bool fitsInteger(double value, std::string& range) {
  using L = std::numeric_limits<T>;
  range = fmt::format("[{}, {}]", static_cast<std::int64_t>(L::min()), L::max());
  if (std::isnan(value)) return false;
  const double t = std::trunc(value);
  // min and max + 1 are powers of two (or 0), exact in double.
  return t >= static_cast<double>(L::min()) && t < std::ldexp(1.0, L::digits);
}

// Whether `value` (truncated toward zero) fits an integer dtype; true for the other dtypes. range: the
// dtype's range, for the message.
bool fitsIntegerDtype(double value, mluopDataType_t dtype, std::string& range) {
  switch (dtype) {
    case MLUOP_DTYPE_INT8:
      return fitsInteger<std::int8_t>(value, range);
    case MLUOP_DTYPE_INT16:
      return fitsInteger<std::int16_t>(value, range);
    case MLUOP_DTYPE_INT32:
      return fitsInteger<std::int32_t>(value, range);
    case MLUOP_DTYPE_INT64:
      return fitsInteger<std::int64_t>(value, range);
    case MLUOP_DTYPE_UINT8:
      return fitsInteger<std::uint8_t>(value, range);
    default:
      return true;
  }
}

Status checkFillValue(double value, mluopDataType_t dtype) {
  std::string range;
  bool fits = fitsIntegerDtype(value, dtype, range);  // the floating dtypes and bool: any value
  if (dtype == MLUOP_DTYPE_UINT8) {
    // PyTorch lets an integer fill value from -255 to -1 wrap into uint8 (-1 -> 255, as c10's overflow
    // check allows negative integers to wrap), and refuses a negative non-integer one.
    fits = fits || (value >= -255 && value < 0 && value == std::trunc(value));
    range = "[0, 255], or a whole number from -255 to -1, which wraps";
  }
  if (!fits) return badParam("value {} cannot be stored in {} (range {})", value, dtypeName(dtype), range);
  const double largest = largestFinite(dtype);
  if (isFloating(dtype) && std::isfinite(value) && std::fabs(value) > largest) {
    return badParam("value {} overflows {} (largest finite value {})", value, dtypeName(dtype), largest);
  }
  return Status::success();
}

// The dtypes an integer-capable op takes: the classes its kernels instantiate for (math_ops.h).
using math::Accepts;

bool isIntegerDtype(mluopDataType_t t) { return t != MLUOP_DTYPE_BOOL && !isFloating(t) && dtypeSize(t) > 0; }

Status checkAccepts(std::string_view name, const TensorView& t, Accepts kinds) {
  const bool floating = isFloating(t.dtype), integer = isIntegerDtype(t.dtype),
             boolean = t.dtype == MLUOP_DTYPE_BOOL;
  switch (kinds) {
    case Accepts::kFloatingOrInteger:
      if (floating || integer) return Status::success();
      return badParam("{} is {}; the op takes floating and integer tensors, not bool", name,
                      dtypeName(t.dtype));
    case Accepts::kIntegerOrBool:
      if (integer || boolean) return Status::success();
      return badParam("{} is {}; bitwise ops take integer or bool tensors", name, dtypeName(t.dtype));
    case Accepts::kAny:
      return Status::success();
  }
  return Status::success();
}

// x -> y of one dtype and shape, x of the given kinds.
Status checkUnaryOf(const TensorView& x, const TensorView& y, Accepts kinds) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", y));
  MLU_RETURN_IF_ERROR(checkAccepts("x", x, kinds));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", y, "x", x));
  MLU_RETURN_IF_ERROR(checkSameShape("y", y, "x", x));
  return checkOutput("y", y);
}

// c = a op b with numpy broadcasting, a, b and c of one dtype of the given kinds.
Status checkBinaryOf(const TensorView& a, const TensorView& b, const TensorView& c, Accepts kinds) {
  MLU_RETURN_IF_ERROR(checks::tensor("a", a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", b));
  MLU_RETURN_IF_ERROR(checks::tensor("c", c));
  MLU_RETURN_IF_ERROR(checkAccepts("a", a, kinds));
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", b, "a", a));
  MLU_RETURN_IF_ERROR(checks::sameDtype("c", c, "a", a));
  return checkBroadcastOutput(a, b, c);
}

// A clamp bound for x's dtype: for an integer dtype a whole number within its range (PyTorch would
// promote the result to a floating dtype otherwise).
Status checkClampBound(std::string_view name, double bound, mluopDataType_t dtype) {
  if (isFloating(dtype)) return Status::success();  // any value, NaN and inf included
  std::string range;
  if (fitsIntegerDtype(bound, dtype, range) && bound == std::trunc(bound)) return Status::success();
  return badParam("{} = {} is not a whole number in {}'s range {} (an integer tensor is clamped to integers)",
                  name, bound, dtypeName(dtype), range);
}

// A scalar operand of an op on integer or bool tensors: PyTorch would promote the result to a floating
// dtype for a fractional scalar (and refuses one that overflows the dtype); our output keeps x's dtype, so
// a whole number in the dtype's range is required (any whole number for bool, read as != 0).
Status checkIntegralScalar(std::string_view name, double value, mluopDataType_t dtype) {
  if (isFloating(dtype)) return Status::success();
  if (dtype == MLUOP_DTYPE_BOOL) {
    if (value == std::trunc(value)) return Status::success();
    return badParam("{} = {} is not a whole number (a bool tensor takes whole-number scalars)", name, value);
  }
  std::string range;
  if (fitsIntegerDtype(value, dtype, range) && value == std::trunc(value)) return Status::success();
  return badParam("{} = {} is not a whole number in {}'s range {} (the result keeps x's integer dtype)", name,
                  value, dtypeName(dtype), range);
}

// True division: a and b of one dtype; c of that dtype when it is floating, else (integer or bool a and
// b, as PyTorch's int / int) any floating dtype.
Status checkDivide(const TensorView& a, const TensorView& b, const TensorView& c) {
  MLU_RETURN_IF_ERROR(checks::tensor("a", a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", b));
  MLU_RETURN_IF_ERROR(checks::tensor("c", c));
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", b, "a", a));
  if (isFloating(a.dtype)) {
    MLU_RETURN_IF_ERROR(checks::sameDtype("c", c, "a", a));
  } else if (!isFloating(c.dtype)) {
    return badParam("c is {}; dividing {} tensors gives a floating result (true division)",
                    dtypeName(c.dtype), dtypeName(a.dtype));
  }
  return checkBroadcastOutput(a, b, c);
}

std::string intsString(const IntList& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

Status validate(const fill_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checkFillValue(a.value, a.y.dtype));
  return checkOutput("y", a.y);
}

Status validate(const copy_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checkSameShape("y", a.y, "x", a.x));
  return checkOutput("y", a.y);
}

Status validate(const permute_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  const int nd = a.x.ndim;
  if (static_cast<int>(a.dims.size()) != nd) {
    return badParam("dims {} has {} entries but x has {} dims", intsString(a.dims), a.dims.size(), nd);
  }
  std::array<bool, MLUOP_DIM_MAX> seen{};
  for (std::size_t i = 0; i < a.dims.size(); ++i) {
    const int d = a.dims[i];
    if (d < -nd || d >= nd) {
      return badParam("dims[{}] = {} is out of range for a {}-d tensor (expected {} to {})", i, d, nd, -nd,
                      nd - 1);
    }
    const int normalized = d < 0 ? d + nd : d;
    if (seen[static_cast<std::size_t>(normalized)]) {
      return badParam("dims {} repeat dim {}; it must be a permutation of 0..{}", intsString(a.dims),
                      normalized, nd - 1);
    }
    seen[static_cast<std::size_t>(normalized)] = true;
  }
  const TensorView expected = elementwise::permutedView(a.x, elementwise::normalizedDims(a.dims, nd));
  if (!sameShape(a.y, expected)) {
    return badParam("y has shape {} but x {} permuted by {} has shape {}", a.y.shapeString(),
                    a.x.shapeString(), intsString(a.dims), expected.shapeString());
  }
  return checkOutput("y", a.y);
}

// The arithmetic takes every dtype PyTorch's does: floating, integer (wrapping) and bool (add is or, mul
// is and), except sub and neg of bool, which PyTorch refuses too.
Status validate(const add_args& a) {
  MLU_RETURN_IF_ERROR(checkBinaryOf(a.a, a.b, a.c, Accepts::kAny));
  return checkIntegralScalar("alpha", a.alpha, a.a.dtype);
}

Status validate(const sub_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kFloatingOrInteger); }

Status validate(const mul_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kAny); }

Status validate(const div_args& a) { return checkDivide(a.a, a.b, a.c); }

Status validate(const maximum_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kAny); }

Status validate(const minimum_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kAny); }

Status validate(const add_scalar_args& a) {
  MLU_RETURN_IF_ERROR(checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger));
  return checkIntegralScalar("value", a.value, a.x.dtype);
}

Status validate(const mul_scalar_args& a) {
  MLU_RETURN_IF_ERROR(checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger));
  return checkIntegralScalar("value", a.value, a.x.dtype);
}

Status validate(const neg_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger); }

Status validate(const abs_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kAny); }

Status validate(const exp_args& a) { return checkUnary(a.x, a.y); }

Status validate(const log_args& a) { return checkUnary(a.x, a.y); }

Status validate(const sqrt_args& a) { return checkUnary(a.x, a.y); }

Status validate(const rsqrt_args& a) { return checkUnary(a.x, a.y); }

Status validate(const tanh_args& a) { return checkUnary(a.x, a.y); }

Status validate(const sigmoid_args& a) { return checkUnary(a.x, a.y); }

Status validate(const relu_args& a) { return checkUnary(a.x, a.y); }

Status validate(const relu_backward_args& a) { return checkBackward(a.grad_output, "x", a.x, a.grad_input); }

Status validate(const sigmoid_backward_args& a) {
  return checkBackward(a.grad_output, "y", a.y, a.grad_input);
}

Status validate(const tanh_backward_args& a) { return checkBackward(a.grad_output, "y", a.y, a.grad_input); }

Status validate(const gelu_args& a) { return checkUnary(a.x, a.y); }

Status validate(const gelu_backward_args& a) { return checkBackward(a.grad_output, "x", a.x, a.grad_input); }

Status validate(const silu_args& a) { return checkUnary(a.x, a.y); }

Status validate(const hardsigmoid_args& a) { return checkUnary(a.x, a.y); }

Status validate(const hardsigmoid_backward_args& a) {
  return checkBackward(a.grad_output, "x", a.x, a.grad_input);
}

Status validate(const hardswish_args& a) { return checkUnary(a.x, a.y); }

Status validate(const hardswish_backward_args& a) {
  return checkBackward(a.grad_output, "x", a.x, a.grad_input);
}

Status validate(const silu_backward_args& a) { return checkBackward(a.grad_output, "x", a.x, a.grad_input); }

Status validate(const sin_args& a) { return checkUnary(a.x, a.y); }

Status validate(const cos_args& a) { return checkUnary(a.x, a.y); }

Status validate(const pow_args& a) { return checkBinary(a.a, a.b, a.c); }

Status validate(const bitwise_and_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kIntegerOrBool); }

Status validate(const bitwise_or_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kIntegerOrBool); }

Status validate(const bitwise_xor_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kIntegerOrBool); }

Status validate(const bitwise_not_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kIntegerOrBool); }

Status validate(const remainder_args& a) { return checkBinaryOf(a.a, a.b, a.c, Accepts::kFloatingOrInteger); }

Status validate(const floor_divide_args& a) {
  return checkBinaryOf(a.a, a.b, a.c, Accepts::kFloatingOrInteger);
}

Status validate(const clamp_args& a) {
  MLU_RETURN_IF_ERROR(checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger));
  if (!a.has_min && !a.has_max) return badParam("neither min nor max is given; clamp needs at least one");
  if (a.has_min) MLU_RETURN_IF_ERROR(checkClampBound("min", a.min, a.x.dtype));
  if (a.has_max) MLU_RETURN_IF_ERROR(checkClampBound("max", a.max, a.x.dtype));
  return Status::success();
}

Status validate(const floor_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger); }

Status validate(const ceil_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger); }

Status validate(const round_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger); }

Status validate(const trunc_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kFloatingOrInteger); }

Status validate(const sign_args& a) { return checkUnaryOf(a.x, a.y, Accepts::kAny); }

Status validate(const reciprocal_args& a) { return checkUnary(a.x, a.y); }

Status validate(const erf_args& a) { return checkUnary(a.x, a.y); }

// Any exponent, NaN included (the result is then NaN, except 1 ** NaN = 1 as in PyTorch).
Status validate(const pow_scalar_args& a) { return checkUnary(a.x, a.y); }

Status validate(const dropout_forward_args& a) {
  MLU_RETURN_IF_ERROR(checkDropoutP(a.p));
  MLU_RETURN_IF_ERROR(checkUnary(a.x, a.y));
  MLU_RETURN_IF_ERROR(checkMask(a.mask, "x", a.x));
  return checkOutput("mask", a.mask);
}

Status validate(const dropout_backward_args& a) {
  MLU_RETURN_IF_ERROR(checkDropoutP(a.p));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_input", a.grad_input));
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_input", a.grad_input, "grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checkSameShape("grad_input", a.grad_input, "grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checkMask(a.mask, "grad_output", a.grad_output));
  return checkOutput("grad_input", a.grad_input);
}

Status validate(const uniform_args& a) {
  if (!std::isfinite(a.low) || !std::isfinite(a.high)) {
    return badParam("low = {} and high = {} must be finite", a.low, a.high);
  }
  // low == high gives low everywhere (PyTorch's uniform_ accepts from <= to).
  if (!(a.low <= a.high)) return badParam("low = {} is above high = {}", a.low, a.high);
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::floating("y", a.y));
  // As PyTorch: high - low must be representable in y's dtype.
  if (a.high - a.low > largestFinite(a.y.dtype)) {
    return badParam("[low, high) = [{}, {}) is wider than the largest {} value {}", a.low, a.high,
                    dtypeName(a.y.dtype), largestFinite(a.y.dtype));
  }
  return checkOutput("y", a.y);
}

Status validate(const normal_args& a) {
  if (!std::isfinite(a.mean)) return badParam("mean = {} must be finite", a.mean);
  // std = 0 gives mean everywhere (PyTorch's normal_ accepts std >= 0).
  if (!(a.std >= 0) || !std::isfinite(a.std)) return badParam("std = {} must be finite and >= 0", a.std);
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::floating("y", a.y));
  return checkOutput("y", a.y);
}

// A tensor that broadcasts to y's shape (numpy rules: y's shape is the broadcast result).
Status checkBroadcastsTo(std::string_view name, const TensorView& t, std::string_view y_name,
                         const TensorView& y) {
  TensorView shape;
  if (broadcastShapes(t, y, shape) && sameShape(shape, y)) return Status::success();
  return badParam("{} has shape {}, which does not broadcast to {}'s shape {}", name, t.shapeString(), y_name,
                  y.shapeString());
}

// mean and std broadcast to y, all of one floating dtype (std's values are device data: a negative one
// gives NaN there, where PyTorch raises).
Status validate(const normal_tensor_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::tensor("mean", a.mean));
  MLU_RETURN_IF_ERROR(checks::tensor("std", a.std));
  MLU_RETURN_IF_ERROR(checks::floating("y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("mean", a.mean, "y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("std", a.std, "y", a.y));
  MLU_RETURN_IF_ERROR(checkBroadcastsTo("mean", a.mean, "y", a.y));
  MLU_RETURN_IF_ERROR(checkBroadcastsTo("std", a.std, "y", a.y));
  return checkOutput("y", a.y);
}

// x [..., D] with D even; cos and sin of one shape that broadcasts to [..., D/2]; y like x.
Status validate(const rotary_embedding_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("cos", a.cos));
  MLU_RETURN_IF_ERROR(checks::tensor("sin", a.sin));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::floating("x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("cos", a.cos, "x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("sin", a.sin, "x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  if (a.x.ndim < 1 || a.x.dim(a.x.ndim - 1) % 2 != 0) {
    return badParam("x has shape {}; its last dim (the rotated features) must exist and be even",
                    a.x.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkSameShape("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkSameShape("sin", a.sin, "cos", a.cos));
  const TensorView half = elementwise::rotaryHalves(a.x, false).first;
  MLU_RETURN_IF_ERROR(checkBroadcastsTo("cos", a.cos, "x's half [..., D/2]", half));
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  // In place (y is x: same data and strides) is fine, each pair read before it is written; a partial
  // overlap would read rotated values.
  const bool in_place = a.y.data == a.x.data && a.y.strides == a.x.strides;
  if (!in_place && view_overlap::overlap(a.y, a.x)) {
    return badParam(
        "y partially overlaps x in memory; it may be x itself (same data and strides) or separate memory");
  }
  if (view_overlap::overlap(a.y, a.cos) || view_overlap::overlap(a.y, a.sin)) {
    return badParam("y shares memory with cos or sin");
  }
  return Status::success();
}

Status validate(const sgd_step_args& a) {
  // PyTorch's SGD refuses negative (and NaN) hyper-parameters.
  if (!(a.lr >= 0)) return badParam("lr = {} must be non-negative", a.lr);
  if (!(a.momentum >= 0)) return badParam("momentum = {} must be non-negative", a.momentum);
  if (!(a.weight_decay >= 0)) return badParam("weight_decay = {} must be non-negative", a.weight_decay);
  if (!std::isfinite(a.dampening)) return badParam("dampening = {} must be finite", a.dampening);
  if (a.nesterov && (a.momentum <= 0 || a.dampening != 0)) {
    return badParam("nesterov needs a positive momentum and zero dampening (momentum = {}, dampening = {})",
                    a.momentum, a.dampening);
  }
  MLU_RETURN_IF_ERROR(checks::tensor("param", a.param));
  MLU_RETURN_IF_ERROR(checks::tensor("grad", a.grad));
  MLU_RETURN_IF_ERROR(checks::floating("param", a.param));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad", a.grad, "param", a.param));
  MLU_RETURN_IF_ERROR(checkSameShape("grad", a.grad, "param", a.param));
  MLU_RETURN_IF_ERROR(checkOutput("param", a.param));
  // With momentum and no buffer the step is a first step whose buffer (d) is not kept.
  if (a.momentum_buffer.present) {
    MLU_RETURN_IF_ERROR(checks::tensor("momentum_buffer", a.momentum_buffer));
    MLU_RETURN_IF_ERROR(checks::sameDtype("momentum_buffer", a.momentum_buffer, "param", a.param));
    MLU_RETURN_IF_ERROR(checkSameShape("momentum_buffer", a.momentum_buffer, "param", a.param));
    MLU_RETURN_IF_ERROR(checkOutput("momentum_buffer", a.momentum_buffer));
  }
  return Status::success();
}

}  // namespace mlu
