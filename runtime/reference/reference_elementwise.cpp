// CPU reference of the fill, copy/cast, permute, broadcasting binary (pow too), unary and their backward
// (gelu, silu, sin, cos, pow_scalar too), random (Philox) ops, sgd ops. Plainly written: one element at a
// time in row-major order of the output, every operand addressed through its strides (inputs broadcast to
// the output's shape), arithmetic in double with the std:: functions, one rounding when stored. Random
// numbers come from philox.h, as on the device.
#include <mlu/reference.h>

#include "element.h"
#include "elementwise_shapes.h"
#include "math_ops.h"
#include "philox.h"
#include "validate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlu::reference {
namespace {

using elementwise::broadcastTo;

Status noKernel(const TensorView& t) {
  return {MLUOP_STATUS_INTERNAL_ERROR, fmt::format("no reference for dtype {}", dtypeName(t.dtype))};
}

// y[i] = fn(x[i]) in double, x and y of one floating dtype.
template <typename Fn>
Status unary(const TensorView& x, const TensorView& y, Fn fn) {
  const TensorView xv = broadcastTo(x, y);
  const OffsetWalker wx(xv), wy(y);
  return dispatchFloating(y.dtype,
                          [&]<typename T>() {
                            const T* in = typed<const T>(x);
                            T* out = typed<T>(y);
                            if (wx.contiguous() && wy.contiguous()) {
                              for (std::int64_t i = 0; i < y.numel(); ++i)
                                out[i] = store<T>(fn(load<double>(in[i])));
                              return;
                            }
                            for (std::int64_t i = 0; i < y.numel(); ++i) {
                              out[wy.offsetOf(i)] = store<T>(fn(load<double>(in[wx.offsetOf(i)])));
                            }
                          })
             ? Status::success()
             : noKernel(y);
}

// c[i] = fn(a[i], b[i]) in double with a and b broadcast to c's shape, all of one floating dtype.
template <typename Fn>
Status binary(const TensorView& a, const TensorView& b, const TensorView& c, Fn fn) {
  const TensorView av = broadcastTo(a, c), bv = broadcastTo(b, c);
  const OffsetWalker wa(av), wb(bv), wc(c);
  return dispatchFloating(c.dtype,
                          [&]<typename T>() {
                            const T* pa = typed<const T>(a);
                            const T* pb = typed<const T>(b);
                            T* pc = typed<T>(c);
                            if (wa.contiguous() && wb.contiguous() && wc.contiguous()) {
                              for (std::int64_t i = 0; i < c.numel(); ++i)
                                pc[i] = store<T>(fn(load<double>(pa[i]), load<double>(pb[i])));
                              return;
                            }
                            for (std::int64_t i = 0; i < c.numel(); ++i) {
                              pc[wc.offsetOf(i)] = store<T>(
                                  fn(load<double>(pa[wa.offsetOf(i)]), load<double>(pb[wb.offsetOf(i)])));
                            }
                          })
             ? Status::success()
             : noKernel(c);
}

// ---- the integer-capable ops (math_ops.h): double for the floating dtypes, the stored type otherwise ----

template <typename T>
using Compute = std::conditional_t<std::is_integral_v<T>, T, double>;

template <typename T>
Compute<T> toCompute(T v) {
  if constexpr (std::is_integral_v<T>) {
    return v;
  } else {
    return load<double>(v);
  }
}

template <typename T>
T fromCompute(Compute<T> v) {
  if constexpr (std::is_integral_v<T>) {
    return v;
  } else {
    return store<T>(v);
  }
}

// out[i] = fn(in[i]...) in each dtype's compute type, every operand of out's dtype (one A accepts); inputs
// broadcast to out's shape.
template <math::Accepts A, typename Fn, typename... In>
Status mapTyped(const TensorView& out, Fn fn, const In&... inputs) {
  // The broadcast views outlive the walkers, which hold references to them.
  const std::array<TensorView, sizeof...(In)> views{broadcastTo(inputs, out)...};
  bool ok = false;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    const OffsetWalker wo(out);
    const std::array<OffsetWalker, sizeof...(In)> wi{OffsetWalker(views[I])...};
    dispatchAll(out.dtype, [&]<typename T>() {
      if constexpr (math::accepts<A, T>()) {
        ok = true;
        T* o = typed<T>(out);
        const std::array<const T*, sizeof...(In)> in{typed<const T>(inputs)...};
        for (std::int64_t i = 0; i < out.numel(); ++i)
          o[wo.offsetOf(i)] =
              fromCompute<T>(static_cast<Compute<T>>(fn(toCompute(in[I][wi[I].offsetOf(i)])...)));
      }
    });
  }
  (std::index_sequence_for<In...>{});
  return ok ? Status::success() : noKernel(out);
}

// c = a / b for integer or bool a and b into a floating c, in double (PyTorch's true division).
Status divideIntegers(const TensorView& a, const TensorView& b, const TensorView& c) {
  const TensorView av = broadcastTo(a, c), bv = broadcastTo(b, c);
  const OffsetWalker wa(av), wb(bv), wc(c);
  bool ok = false;
  dispatchFloating(c.dtype, [&]<typename D>() {
    dispatchAll(a.dtype, [&]<typename S>() {
      if constexpr (std::is_integral_v<S>) {
        ok = true;
        const S* pa = typed<const S>(a);
        const S* pb = typed<const S>(b);
        D* pc = typed<D>(c);
        for (std::int64_t i = 0; i < c.numel(); ++i) {
          pc[wc.offsetOf(i)] =
              store<D>(static_cast<double>(pa[wa.offsetOf(i)]) / static_cast<double>(pb[wb.offsetOf(i)]));
        }
      }
    });
  });
  return ok ? Status::success() : noKernel(c);
}

// The arithmetic ops on integer and bool tensors, in their own type (math_ops.h: wrapping; bool add is
// or, mul is and); the floating dtypes take the double paths.
template <typename Fn>
Status integerMap(const TensorView& out, Fn fn, const TensorView& a, const TensorView& b) {
  return mapTyped<math::Accepts::kIntegerOrBool>(out, fn, a, b);
}

// The standard normal of element i of a normal draw: Box-Muller on words 2 (i % 2) and 2 (i % 2) + 1 of
// block offset + i / 2 (see philox.h), as the device draws it.
double standardNormalAt(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  const philox::Counter words = philox::block(seed, offset + i / 2);
  const std::size_t w = 2 * (i % 2);
  const double u1 = static_cast<double>((words[w] >> 8) + 1) / 16777216.0;
  const double u2 = static_cast<double>(words[w + 1] >> 8) / 16777216.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// A double truncated toward zero into integer type D, saturating at its range; NaN -> 0.
template <typename D>
D truncateToInteger(double v) {
  if (std::isnan(v)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  if (v <= static_cast<double>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
  return static_cast<D>(std::trunc(v));
}

// One element cast from S to D with PyTorch's rules, as the device's copy: integers wrap, floats truncate
// toward zero into integers (saturating at the range, NaN -> 0; into uint8 through int64, wrapping, as
// PyTorch does), bool is != 0, integers reach the 16-bit floats through float32, floats round to nearest
// even.
template <typename D, typename S>
D cast(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return load<double>(v) != 0.0;
  } else if constexpr (std::is_integral_v<S> && std::is_integral_v<D>) {
    return static_cast<D>(v);  // modular for narrowing (C++20)
  } else if constexpr (std::is_integral_v<S>) {
    if constexpr (std::is_same_v<D, double>) {
      return static_cast<double>(v);
    } else {
      return store<D>(static_cast<float>(v));
    }
  } else if constexpr (std::is_same_v<D, std::uint8_t>) {
    return floatToUint8(load<double>(v));
  } else if constexpr (std::is_integral_v<D>) {
    return truncateToInteger<D>(load<double>(v));
  } else {
    return store<D>(load<double>(v));
  }
}

// y = x elementwise with a cast, any dtypes, any strides (x already has y's shape).
Status copyCast(const TensorView& x, const TensorView& y) {
  const OffsetWalker wx(x), wy(y);
  bool ok = false;
  dispatchAll(y.dtype, [&]<typename D>() {
    ok = dispatchAll(x.dtype, [&]<typename S>() {
      const S* in = typed<const S>(x);
      D* out = typed<D>(y);
      for (std::int64_t i = 0; i < y.numel(); ++i) out[wy.offsetOf(i)] = cast<D>(in[wx.offsetOf(i)]);
    });
  });
  return ok ? Status::success() : noKernel(y);
}

// The uniform number of element i for dropout and uniform (see philox.h).
double uniformAt(std::uint64_t seed, std::uint64_t offset, std::uint64_t i) {
  const philox::Counter words = philox::block(seed, offset + i / 4);
  return philox::uniformOf(words[i % 4]);
}

// GELU: x Phi(x) with Phi(x) = erfc(-x / sqrt 2) / 2 (= (1 + erf(x / sqrt 2)) / 2, without the
// cancellation for negative x), or PyTorch's tanh approximation.
double gelu(double x, bool approximate_tanh) {
  if (approximate_tanh) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);
}

// d gelu / dx: Phi(x) + x phi(x), or the derivative of the tanh form.
double geluDerivative(double x, bool approximate_tanh) {
  if (approximate_tanh) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    const double t = std::tanh(k * (x + 0.044715 * x * x * x));
    if (t * t == 1.0) return 0.5 * (1.0 + t);  // saturated: the second term is 0, even for infinite x
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
  }
  const double phi = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  return 0.5 * std::erfc(-x / std::numbers::sqrt2) + x * phi;
}

}  // namespace

Status run(const fill_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const OffsetWalker wy(args.y);
  const bool ok = dispatchAll(args.y.dtype, [&]<typename T>() {
    const T value = cast<T>(args.value);
    for (std::int64_t i = 0; i < args.y.numel(); ++i) typed<T>(args.y)[wy.offsetOf(i)] = value;
  });
  return ok ? Status::success() : noKernel(args.y);
}

Status run(const copy_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return copyCast(args.x, args.y);
}

Status run(const permute_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  // Element (i0, i1, ...) of y is element (j...) of x with j[dims[k]] = i[k].
  const IntList dims = elementwise::normalizedDims(args.dims, args.x.ndim);
  const TensorView& x = args.x;
  const TensorView& y = args.y;
  const std::size_t es = x.elementSize();
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    std::int64_t rest = i, x_offset = 0, y_offset = 0;
    for (int k = y.ndim - 1; k >= 0; --k) {
      const std::int64_t index = rest % y.dim(k);
      rest /= y.dim(k);
      y_offset += index * y.stride(k);
      x_offset += index * x.stride(dims[static_cast<std::size_t>(k)]);
    }
    std::memcpy(static_cast<char*>(y.data) + static_cast<std::size_t>(y_offset) * es,
                static_cast<const char*>(x.data) + static_cast<std::size_t>(x_offset) * es, es);
  }
  return Status::success();
}

Status run(const add_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double alpha = args.alpha;
  if (!isFloating(args.c.dtype)) {
    return integerMap(
        args.c, [alpha](auto x, auto y) { return math::addScaled(x, y, static_cast<decltype(x)>(alpha)); },
        args.a, args.b);
  }
  return binary(args.a, args.b, args.c, [alpha](double a, double b) { return a + alpha * b; });
}

Status run(const sub_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.c.dtype)) {
    return integerMap(
        args.c, [](auto x, auto y) { return math::wrapSub(x, y); }, args.a, args.b);
  }
  return binary(args.a, args.b, args.c, [](double a, double b) { return a - b; });
}

Status run(const mul_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.c.dtype)) {
    return integerMap(
        args.c, [](auto x, auto y) { return math::wrapMul(x, y); }, args.a, args.b);
  }
  return binary(args.a, args.b, args.c, [](double a, double b) { return a * b; });
}

Status run(const div_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.a.dtype)) return divideIntegers(args.a, args.b, args.c);
  return binary(args.a, args.b, args.c, [](double a, double b) { return a / b; });
}

Status run(const maximum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.c.dtype)) {
    return integerMap(
        args.c, [](auto x, auto y) { return std::max(x, y); }, args.a, args.b);
  }
  return binary(args.a, args.b, args.c, [](double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return std::max(a, b);
  });
}

Status run(const minimum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.c.dtype)) {
    return integerMap(
        args.c, [](auto x, auto y) { return std::min(x, y); }, args.a, args.b);
  }
  return binary(args.a, args.b, args.c, [](double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return std::min(a, b);
  });
}

Status run(const add_scalar_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double value = args.value;
  if (!isFloating(args.y.dtype)) {
    return mapTyped<math::Accepts::kIntegerOrBool>(
        args.y, [value](auto x) { return math::wrapAdd(x, static_cast<decltype(x)>(value)); }, args.x);
  }
  return unary(args.x, args.y, [value](double x) { return x + value; });
}

Status run(const mul_scalar_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double value = args.value;
  if (!isFloating(args.y.dtype)) {
    return mapTyped<math::Accepts::kIntegerOrBool>(
        args.y, [value](auto x) { return math::wrapMul(x, static_cast<decltype(x)>(value)); }, args.x);
  }
  return unary(args.x, args.y, [value](double x) { return x * value; });
}

Status run(const neg_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.y.dtype)) {
    return mapTyped<math::Accepts::kIntegerOrBool>(
        args.y, [](auto x) { return math::wrapNeg(x); }, args.x);
  }
  return unary(args.x, args.y, [](double x) { return -x; });
}

Status run(const abs_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (!isFloating(args.y.dtype)) {
    return mapTyped<math::Accepts::kIntegerOrBool>(
        args.y, [](auto x) { return math::absOf(x); }, args.x);
  }
  return unary(args.x, args.y, [](double x) { return std::fabs(x); });
}

Status run(const exp_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::exp(x); });
}

Status run(const log_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::log(x); });
}

Status run(const sqrt_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::sqrt(x); });
}

Status run(const rsqrt_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return 1.0 / std::sqrt(x); });
}

Status run(const tanh_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::tanh(x); });
}

Status run(const sigmoid_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

Status run(const relu_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); });
}

Status run(const relu_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.grad_output, args.x, args.grad_input,
                [](double g, double x) { return x > 0.0 ? g : 0.0; });
}

Status run(const sigmoid_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.grad_output, args.y, args.grad_input,
                [](double g, double y) { return g * y * (1.0 - y); });
}

Status run(const tanh_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.grad_output, args.y, args.grad_input,
                [](double g, double y) { return g * (1.0 - y * y); });
}

Status run(const gelu_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const bool approximate_tanh = args.approximate_tanh;
  return unary(args.x, args.y, [approximate_tanh](double x) { return gelu(x, approximate_tanh); });
}

Status run(const gelu_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const bool approximate_tanh = args.approximate_tanh;
  return binary(args.grad_output, args.x, args.grad_input,
                [approximate_tanh](double g, double x) { return g * geluDerivative(x, approximate_tanh); });
}

namespace {
// MobileNetV3's activations (PyTorch's definitions, NaN handled as its kernels do).
double hardsigmoidOf(double x) { return std::isnan(x) ? x : std::clamp(x + 3.0, 0.0, 6.0) / 6.0; }
}  // namespace

Status run(const hardsigmoid_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, hardsigmoidOf);
}

Status run(const hardsigmoid_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.grad_output, args.x, args.grad_input,
                [](double g, double x) { return x > -3.0 && x < 3.0 ? g / 6.0 : 0.0; });
}

Status run(const hardswish_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return x * hardsigmoidOf(x); });
}

Status run(const hardswish_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.grad_output, args.x, args.grad_input, [](double g, double x) {
    if (x < -3.0) return 0.0;
    return x <= 3.0 ? g * (x / 3.0 + 0.5) : g;
  });
}

Status run(const silu_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return x / (1.0 + std::exp(-x)); });
}

Status run(const silu_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.grad_output, args.x, args.grad_input, [](double g, double x) {
    const double s = 1.0 / (1.0 + std::exp(-x));
    return g * s * (1.0 + x * (1.0 - s));
  });
}

Status run(const bitwise_and_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kIntegerOrBool>(
      args.c, [](auto x, auto y) { return x & y; }, args.a, args.b);
}

Status run(const bitwise_or_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kIntegerOrBool>(
      args.c, [](auto x, auto y) { return x | y; }, args.a, args.b);
}

Status run(const bitwise_xor_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kIntegerOrBool>(
      args.c, [](auto x, auto y) { return x ^ y; }, args.a, args.b);
}

Status run(const bitwise_not_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kIntegerOrBool>(
      args.y, [](auto x) { return math::bitwiseNot(x); }, args.x);
}

Status run(const remainder_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.c, [](auto x, auto y) { return math::remainder(x, y); }, args.a, args.b);
}

Status run(const floor_divide_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.c, [](auto x, auto y) { return math::floorDivide(x, y); }, args.a, args.b);
}

Status run(const clamp_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.y,
      [&](auto x) {
        return math::clamp(x, math::clampBounds<decltype(x)>(args.has_min, args.min, args.has_max, args.max));
      },
      args.x);
}

Status run(const floor_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.y, [](auto x) { return math::floorOf(x); }, args.x);
}

Status run(const ceil_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.y, [](auto x) { return math::ceilOf(x); }, args.x);
}

Status run(const round_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.y, [](auto x) { return math::roundOf(x); }, args.x);
}

Status run(const trunc_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kFloatingOrInteger>(
      args.y, [](auto x) { return math::truncOf(x); }, args.x);
}

Status run(const sign_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return mapTyped<math::Accepts::kAny>(
      args.y, [](auto x) { return math::sign(x); }, args.x);
}

Status run(const reciprocal_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return 1.0 / x; });
}

Status run(const erf_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::erf(x); });
}

Status run(const sin_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::sin(x); });
}

Status run(const cos_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return unary(args.x, args.y, [](double x) { return std::cos(x); });
}

Status run(const pow_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return binary(args.a, args.b, args.c, [](double a, double b) { return std::pow(a, b); });
}

Status run(const pow_scalar_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double exponent = args.exponent;
  return unary(args.x, args.y, [exponent](double x) { return std::pow(x, exponent); });
}

Status run(const dropout_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double p = args.p;
  const OffsetWalker wx(args.x), wy(args.y), wm(args.mask);
  auto* mask = typed<std::uint8_t>(args.mask);
  const bool ok = dispatchFloating(args.x.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < args.x.numel(); ++i) {
      const bool keep = uniformAt(args.seed, args.offset, static_cast<std::uint64_t>(i)) >= p;
      mask[wm.offsetOf(i)] = keep ? 1 : 0;
      const double factor = keep && p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
      typed<T>(args.y)[wy.offsetOf(i)] =
          store<T>(load<double>(typed<const T>(args.x)[wx.offsetOf(i)]) * factor);
    }
  });
  return ok ? Status::success() : noKernel(args.x);
}

Status run(const dropout_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double p = args.p;
  const OffsetWalker wg(args.grad_output), wm(args.mask), wi(args.grad_input);
  const auto* mask = typed<const std::uint8_t>(args.mask);
  const bool ok = dispatchFloating(args.grad_output.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < args.grad_output.numel(); ++i) {
      const double factor = mask[wm.offsetOf(i)] != 0 && p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
      typed<T>(args.grad_input)[wi.offsetOf(i)] =
          store<T>(load<double>(typed<const T>(args.grad_output)[wg.offsetOf(i)]) * factor);
    }
  });
  return ok ? Status::success() : noKernel(args.grad_output);
}

Status run(const uniform_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const OffsetWalker wy(args.y);
  const bool ok = dispatchFloating(args.y.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < args.y.numel(); ++i) {
      const double u = uniformAt(args.seed, args.offset, static_cast<std::uint64_t>(i));
      typed<T>(args.y)[wy.offsetOf(i)] = store<T>(args.low + (args.high - args.low) * u);
    }
  });
  return ok ? Status::success() : noKernel(args.y);
}

Status run(const normal_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const OffsetWalker wy(args.y);
  const bool ok = dispatchFloating(args.y.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < args.y.numel(); ++i) {
      const double z = standardNormalAt(args.seed, args.offset, static_cast<std::uint64_t>(i));
      typed<T>(args.y)[wy.offsetOf(i)] = store<T>(args.mean + args.std * z);
    }
  });
  return ok ? Status::success() : noKernel(args.y);
}

// normal with tensor mean and std: mean[i] + std[i] z_i, z_i the standard normal of `normal` (same
// Philox words); NaN where std < 0 (as on the device).
Status run(const normal_tensor_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView mean = broadcastTo(args.mean, args.y), stddev = broadcastTo(args.std, args.y);
  const OffsetWalker wy(args.y), wm(mean), ws(stddev);
  const bool ok = dispatchFloating(args.y.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < args.y.numel(); ++i) {
      const double z = standardNormalAt(args.seed, args.offset, static_cast<std::uint64_t>(i));
      const double sd = load<double>(typed<const T>(stddev)[ws.offsetOf(i)]);
      const double m = load<double>(typed<const T>(mean)[wm.offsetOf(i)]);
      typed<T>(args.y)[wy.offsetOf(i)] =
          store<T>(sd < 0 ? std::numeric_limits<double>::quiet_NaN() : m + sd * z);
    }
  });
  return ok ? Status::success() : noKernel(args.y);
}

// Rotary embedding from given tables, in double: y1 = x1 c - x2 s, y2 = x1 s + x2 c over the halves of the
// last dim (s negated for conj). Computed into a buffer first, so y may be x.
Status run(const rotary_embedding_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const elementwise::RotaryHalves x = elementwise::rotaryHalves(args.x, args.interleaved);
  const elementwise::RotaryHalves y = elementwise::rotaryHalves(args.y, args.interleaved);
  const TensorView c = broadcastTo(args.cos, y.first), sn = broadcastTo(args.sin, y.first);
  const OffsetWalker w1(x.first), w2(x.second), wc(c), ws(sn), v1(y.first), v2(y.second);
  const double sign = args.conj ? -1.0 : 1.0;
  const std::int64_t n = y.first.numel();
  const bool ok = dispatchFloating(args.x.dtype, [&]<typename T>() {
    std::vector<double> out1(static_cast<std::size_t>(n)), out2(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const double a = load<double>(typed<const T>(x.first)[w1.offsetOf(i)]);
      const double b = load<double>(typed<const T>(x.second)[w2.offsetOf(i)]);
      const double cv = load<double>(typed<const T>(c)[wc.offsetOf(i)]);
      const double sv = sign * load<double>(typed<const T>(sn)[ws.offsetOf(i)]);
      out1[static_cast<std::size_t>(i)] = a * cv - b * sv;
      out2[static_cast<std::size_t>(i)] = a * sv + b * cv;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      typed<T>(y.first)[v1.offsetOf(i)] = store<T>(out1[static_cast<std::size_t>(i)]);
      typed<T>(y.second)[v2.offsetOf(i)] = store<T>(out2[static_cast<std::size_t>(i)]);
    }
  });
  return ok ? Status::success() : noKernel(args.x);
}

// torch.optim.SGD's step (maximize off), in double: d = grad + weight_decay * param; with momentum, buf = d
// at the first step (init_buffer, or no buffer to keep), else momentum * buf + (1 - dampening) * d; the
// step is along d + momentum * buf (nesterov) or buf.
Status run(const sgd_step_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double lr = args.lr, momentum = args.momentum, weight_decay = args.weight_decay;
  const double keep = 1.0 - static_cast<double>(args.dampening);
  const bool init = args.init_buffer || !args.momentum_buffer.present;
  const OffsetWalker wp(args.param), wg(args.grad), wb(args.momentum_buffer);
  const bool ok = dispatchFloating(args.param.dtype, [&]<typename T>() {
    for (std::int64_t i = 0; i < args.param.numel(); ++i) {
      T& param = typed<T>(args.param)[wp.offsetOf(i)];
      const double p = load<double>(param);
      const double d = load<double>(typed<const T>(args.grad)[wg.offsetOf(i)]) + weight_decay * p;
      double direction = d;
      if (momentum != 0.0) {
        double buf = d;
        if (!init) buf = momentum * load<double>(typed<T>(args.momentum_buffer)[wb.offsetOf(i)]) + keep * d;
        if (args.momentum_buffer.present) typed<T>(args.momentum_buffer)[wb.offsetOf(i)] = store<T>(buf);
        direction = args.nesterov ? d + momentum * buf : buf;
      }
      param = store<T>(p - lr * direction);
    }
  });
  return ok ? Status::success() : noKernel(args.param);
}

}  // namespace mlu::reference
