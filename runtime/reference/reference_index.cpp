// CPU reference of the indexing (embedding forward/backward, index_select, gather, scatter_add), joining
// (concat, split), where and comparison (eq, lt, gt) ops. Plainly written: one output element at a time,
// its coordinates computed from its row-major position and every operand addressed through its strides;
// sums in float64 (int64 for the integer dtypes), rounded once when stored; comparisons in float64 for the
// floating dtypes and in int64 for the others.
//
// As on the device (see device_index.cpp): an index outside [0, size) selects NaN (floating dtypes) or 0
// (integer and bool dtypes), and its contribution is skipped by embedding_backward and scatter_add.
#include <mlu/reference.h>

#include "../ops/validate.h"
#include "element.h"
#include "elementwise_shapes.h"
#include "index_shapes.h"
#include "math_ops.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace mlu::reference {
namespace {

using Coords = std::vector<std::int64_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Status noKernel(const TensorView& t) {
  return {MLUOP_STATUS_INTERNAL_ERROR, fmt::format("no reference for dtype {}", dtypeName(t.dtype))};
}

// The coordinates of element `linear` (row-major) of a tensor with t's dims.
Coords coordsOf(const TensorView& t, std::int64_t linear) {
  Coords c(static_cast<std::size_t>(t.ndim));
  for (int d = t.ndim - 1; d >= 0; --d) {
    c[static_cast<std::size_t>(d)] = linear % t.dim(d);
    linear /= t.dim(d);
  }
  return c;
}

// The element offset of coordinates c in t.
std::int64_t offsetOf(const TensorView& t, const Coords& c) {
  std::int64_t off = 0;
  for (int d = 0; d < t.ndim; ++d) off += c[static_cast<std::size_t>(d)] * t.stride(d);
  return off;
}

// The row-major position of coordinates c in a tensor with t's dims.
std::int64_t linearOf(const TensorView& t, const Coords& c) {
  std::int64_t linear = 0;
  for (int d = 0; d < t.ndim; ++d) linear = linear * t.dim(d) + c[static_cast<std::size_t>(d)];
  return linear;
}

std::int64_t indexAt(const TensorView& index, std::int64_t offset) {
  if (index.dtype == MLUOP_DTYPE_INT64) return typed<const std::int64_t>(index)[offset];
  return typed<const std::int32_t>(index)[offset];
}

template <typename T>
constexpr bool kFloating =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The value an out-of-range index selects.
template <typename T>
T missing() {
  if constexpr (kFloating<T>) {
    return store<T>(kNaN);
  } else {
    return T{};
  }
}

// y[c] = x[c with c[d] replaced by pick(c)], or missing() when pick(c) is outside [0, x.dim(d)).
template <typename Pick>
Status select(const TensorView& x, const TensorView& y, int d, Pick pick) {
  const bool ok = dispatchAll(y.dtype, [&]<typename T>() {
    const T* in = typed<const T>(x);
    T* out = typed<T>(y);
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      Coords c = coordsOf(y, i);
      const std::int64_t y_off = offsetOf(y, c);
      const std::int64_t v = pick(c);
      if (v < 0 || v >= x.dim(d)) {
        out[y_off] = missing<T>();
        continue;
      }
      c[static_cast<std::size_t>(d)] = v;
      out[y_off] = in[offsetOf(x, c)];
    }
  });
  return ok ? Status::success() : noKernel(y);
}

// Copies the elements of src into dst (same dtype): dst[c + shift along d] = src[c] for every c of src.
Status place(const TensorView& src, const TensorView& dst, int d, std::int64_t shift) {
  const bool ok = dispatchAll(src.dtype, [&]<typename T>() {
    const T* in = typed<const T>(src);
    T* out = typed<T>(dst);
    for (std::int64_t i = 0; i < src.numel(); ++i) {
      Coords c = coordsOf(src, i);
      const std::int64_t s_off = offsetOf(src, c);
      c[static_cast<std::size_t>(d)] += shift;
      out[offsetOf(dst, c)] = in[s_off];
    }
  });
  return ok ? Status::success() : noKernel(src);
}

// Copies dst's elements out of src: dst[c] = src[c + shift along d] for every c of dst.
Status take(const TensorView& src, const TensorView& dst, int d, std::int64_t shift) {
  const bool ok = dispatchAll(src.dtype, [&]<typename T>() {
    const T* in = typed<const T>(src);
    T* out = typed<T>(dst);
    for (std::int64_t i = 0; i < dst.numel(); ++i) {
      Coords c = coordsOf(dst, i);
      const std::int64_t d_off = offsetOf(dst, c);
      c[static_cast<std::size_t>(d)] += shift;
      out[d_off] = in[offsetOf(src, c)];
    }
  });
  return ok ? Status::success() : noKernel(src);
}

// c[i] = cmp(a[i], b[i]) with a and b broadcast to c's shape, compared as float64 (floating dtypes) or
// int64 (the others).
template <typename Cmp>
Status compare(const TensorView& a, const TensorView& b, const TensorView& c, Cmp cmp) {
  const TensorView av = elementwise::broadcastTo(a, c), bv = elementwise::broadcastTo(b, c);
  const bool ok = dispatchAll(a.dtype, [&]<typename T>() {
    const T* pa = typed<const T>(a);
    const T* pb = typed<const T>(b);
    bool* out = typed<bool>(c);
    for (std::int64_t i = 0; i < c.numel(); ++i) {
      const Coords co = coordsOf(c, i);
      const T x = pa[offsetOf(av, co)], y = pb[offsetOf(bv, co)];
      if constexpr (kFloating<T>) {
        out[offsetOf(c, co)] = cmp(load<double>(x), load<double>(y));
      } else {
        out[offsetOf(c, co)] = cmp(static_cast<std::int64_t>(x), static_cast<std::int64_t>(y));
      }
    }
  });
  return ok ? Status::success() : noKernel(a);
}

}  // namespace

Status run(const embedding_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView& w = args.weight;
  const TensorView& y = args.y;
  const std::int64_t vocab = w.dim(0);
  const bool ok = dispatchFloating(w.dtype, [&]<typename T>() {
    const T* in = typed<const T>(w);
    T* out = typed<T>(y);
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      Coords c = coordsOf(y, i);
      const std::int64_t col = c.back();
      c.pop_back();
      const std::int64_t v = indexAt(args.indices, offsetOf(args.indices, c));
      c.push_back(col);
      out[offsetOf(y, c)] = v >= 0 && v < vocab ? in[v * w.stride(0) + col * w.stride(1)] : store<T>(kNaN);
    }
  });
  return ok ? Status::success() : noKernel(w);
}

Status run(const embedding_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView& go = args.grad_output;
  const TensorView& gw = args.grad_weight;
  const std::int64_t vocab = gw.dim(0), width = gw.dim(1);
  std::vector<double> sums(static_cast<std::size_t>(vocab * width), 0.0);
  const bool ok = dispatchFloating(go.dtype, [&]<typename T>() {
    const T* in = typed<const T>(go);
    for (std::int64_t i = 0; i < go.numel(); ++i) {
      Coords c = coordsOf(go, i);
      const double g = load<double>(in[offsetOf(go, c)]);
      const std::int64_t col = c.back();
      c.pop_back();
      const std::int64_t v = indexAt(args.indices, offsetOf(args.indices, c));
      if (v < 0 || v >= vocab || v == args.padding_idx) continue;
      sums[static_cast<std::size_t>(v * width + col)] += g;
    }
    T* out = typed<T>(gw);
    for (std::int64_t v = 0; v < vocab; ++v) {
      for (std::int64_t col = 0; col < width; ++col) {
        out[v * gw.stride(0) + col * gw.stride(1)] =
            store<T>(sums[static_cast<std::size_t>(v * width + col)]);
      }
    }
  });
  return ok ? Status::success() : noKernel(go);
}

Status run(const index_select_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const int d = index_shapes::dimOf(args.dim, args.x.ndim);
  const TensorView& index = args.index;
  const std::int64_t step = index.ndim == 1 ? index.stride(0) : 0;
  return select(args.x, args.y, d,
                [&](const Coords& c) { return indexAt(index, c[static_cast<std::size_t>(d)] * step); });
}

Status run(const gather_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  if (args.index.numel() == 0) return Status::success();  // nothing to gather (x's shape may not match)
  const TensorView x = index_shapes::atLeast1d(args.x), index = index_shapes::atLeast1d(args.index),
                   y = index_shapes::atLeast1d(args.y);
  const int d = index_shapes::dimOf(args.dim, x.ndim);
  return select(x, y, d, [&](const Coords& c) { return indexAt(index, offsetOf(index, c)); });
}

Status run(const scatter_add_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView& y = args.y;
  const TensorView& index = args.index;
  const TensorView& src = args.src;
  const int d = index_shapes::dimOf(args.dim, y.ndim);
  const bool ok = dispatchAll(y.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      // float64 sums for the floating dtypes, int64 (wrapping) for the integer ones.
      using Sum = std::conditional_t<kFloating<T>, double, std::uint64_t>;
      T* out = typed<T>(y);
      const T* in = typed<const T>(src);
      std::vector<Sum> sums(static_cast<std::size_t>(y.numel()));
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        const T v = out[offsetOf(y, coordsOf(y, i))];
        if constexpr (kFloating<T>) {
          sums[static_cast<std::size_t>(i)] = load<double>(v);
        } else {
          sums[static_cast<std::size_t>(i)] = static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
        }
      }
      for (std::int64_t i = 0; i < index.numel(); ++i) {
        Coords c = coordsOf(index, i);
        const std::int64_t v = indexAt(index, offsetOf(index, c));
        if (v < 0 || v >= y.dim(d)) continue;
        const T s = in[offsetOf(src, c)];
        c[static_cast<std::size_t>(d)] = v;
        Sum& sum = sums[static_cast<std::size_t>(linearOf(y, c))];
        if constexpr (kFloating<T>) {
          sum += load<double>(s);
        } else {
          sum += static_cast<std::uint64_t>(static_cast<std::int64_t>(s));
        }
      }
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        T& dst = out[offsetOf(y, coordsOf(y, i))];
        if constexpr (kFloating<T>) {
          dst = store<T>(sums[static_cast<std::size_t>(i)]);
        } else {
          dst = static_cast<T>(static_cast<std::int64_t>(sums[static_cast<std::size_t>(i)]));
        }
      }
    }
  });
  return ok ? Status::success() : noKernel(y);
}

Status run(const concat_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const int d = index_shapes::dimOf(args.dim, args.a.ndim);
  MLU_RETURN_IF_ERROR(place(args.a, args.y, d, 0));
  return place(args.b, args.y, d, args.a.dim(d));
}

Status run(const split_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const int d = index_shapes::dimOf(args.dim, args.x.ndim);
  MLU_RETURN_IF_ERROR(take(args.x, args.a, d, 0));
  return take(args.x, args.b, d, args.a.dim(d));
}

Status run(const where_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const TensorView& y = args.y;
  const TensorView cv = elementwise::broadcastTo(args.condition, y);
  const TensorView av = elementwise::broadcastTo(args.a, y), bv = elementwise::broadcastTo(args.b, y);
  const bool ok = dispatchAll(y.dtype, [&]<typename T>() {
    const auto* cond = static_cast<const unsigned char*>(args.condition.data);
    const T* pa = typed<const T>(args.a);
    const T* pb = typed<const T>(args.b);
    T* out = typed<T>(y);
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      const Coords c = coordsOf(y, i);
      const bool take_a = cond[offsetOf(cv, c)] != 0;
      out[offsetOf(y, c)] = take_a ? pa[offsetOf(av, c)] : pb[offsetOf(bv, c)];
    }
  });
  return ok ? Status::success() : noKernel(y);
}

Status run(const eq_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return x == y; });
}

Status run(const ne_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return x != y; });
}

Status run(const le_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return x <= y; });
}

Status run(const ge_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return x >= y; });
}

Status run(const logical_and_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return math::truth(x) && math::truth(y); });
}

Status run(const logical_or_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return math::truth(x) || math::truth(y); });
}

Status run(const logical_xor_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return math::truth(x) != math::truth(y); });
}

Status run(const logical_not_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.x, args.x, args.y, [](auto x, auto) { return !math::truth(x); });
}

Status run(const lt_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return x < y; });
}

Status run(const gt_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return compare(args.a, args.b, args.c, [](auto x, auto y) { return x > y; });
}

}  // namespace mlu::reference
