// CPU reference of the sequence, sorting and selection ops (arange, cumsum, sort, topk): plain loops over
// the elements copied into row-major order, floating values in float64 and integers in int64. The order
// rules are the device's (device_sort.cpp): NaN above every number, equal values by position; cumsum
// accumulates in float64 (integers in int64, wrapping), rounded once per output element.
#include <mlu/reference.h>

#include "../ops/validate.h"
#include "element.h"
#include "reduce_shapes.h"
#include "tensor_io.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

namespace mlu::reference {
namespace {

// Every element of a tensor in row-major order: floating ones as float64, the others as int64 (exact).
struct Elements {
  bool floating = false;
  std::vector<double> f;
  std::vector<std::int64_t> i;
};

Elements readElements(const TensorView& t) {
  Elements e;
  e.floating = isFloating(t.dtype) || t.dtype == MLUOP_DTYPE_DOUBLE;
  if (e.floating) {
    e.f = read(t);
    return e;
  }
  e.i.resize(static_cast<std::size_t>(t.numel()));
  const OffsetWalker walk(t);
  dispatchAll(t.dtype, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      for (std::size_t k = 0; k < e.i.size(); ++k)
        e.i[k] = static_cast<std::int64_t>(typed<const T>(t)[walk.offsetOf(static_cast<std::int64_t>(k))]);
    }
  });
  return e;
}

void writeElements(const TensorView& t, const Elements& e) {
  if (e.floating) {
    write(t, e.f);
    return;
  }
  const OffsetWalker walk(t);
  dispatchAll(t.dtype, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      for (std::size_t k = 0; k < e.i.size(); ++k)
        typed<T>(t)[walk.offsetOf(static_cast<std::int64_t>(k))] = static_cast<T>(e.i[k]);
    }
  });
}

// The lines of t along `dim` (validated already).
Axis linesOf(const TensorView& t, int dim) {
  int d = 0;
  (void)reduce::normalizeDim(dim, t.ndim, "dim", d);
  return axisOf(t, d);
}

// Whether key a comes before key b ascending (NaN after every number).
template <typename K>
bool ascending(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
  }
  return a < b;
}

// The first k positions of every line of x in order, into values and indices (shaped as x with dim's
// size k).
template <typename K>
void select(const std::vector<K>& x, const Axis& in, bool descending, std::int64_t k, std::vector<K>& values,
            std::vector<std::int64_t>& indices) {
  Axis out = in;
  out.size = k;
  values.assign(static_cast<std::size_t>(in.outer * k * in.inner), K{});
  indices.assign(values.size(), 0);
  for (std::int64_t o = 0; o < in.outer; ++o) {
    for (std::int64_t n = 0; n < in.inner; ++n) {
      std::vector<std::int64_t> order(static_cast<std::size_t>(in.size));
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        const K ka = x[in.at(o, a, n)], kb = x[in.at(o, b, n)];
        return descending ? ascending(kb, ka) : ascending(ka, kb);
      });
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t from = order[static_cast<std::size_t>(j)];
        values[out.at(o, j, n)] = x[in.at(o, from, n)];
        indices[out.at(o, j, n)] = from;
      }
    }
  }
}

template <typename Args>
Status selectRun(const Args& a, bool descending, std::int64_t k) {
  const Elements x = readElements(a.x);
  const Axis lines = linesOf(a.x, a.dim);
  Elements values;
  values.floating = x.floating;
  Elements indices;
  if (x.floating) {
    select(x.f, lines, descending, k, values.f, indices.i);
  } else {
    select(x.i, lines, descending, k, values.i, indices.i);
  }
  writeElements(a.values, values);
  writeElements(a.indices, indices);
  return Status::success();
}

}  // namespace

Status run(const arange_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  Elements y;
  y.floating = isFloating(args.y.dtype) || args.y.dtype == MLUOP_DTYPE_DOUBLE;
  for (std::int64_t k = 0; k < args.y.dim(0); ++k) {
    const double v = args.start + static_cast<double>(k) * args.step;
    if (y.floating) {
      y.f.push_back(v);
    } else {
      y.i.push_back(static_cast<std::int64_t>(v));
    }
  }
  writeElements(args.y, y);
  return Status::success();
}

Status run(const cumsum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  Elements x = readElements(args.x);
  const Axis lines = linesOf(args.x, args.dim);
  for (std::int64_t o = 0; o < lines.outer; ++o) {
    for (std::int64_t n = 0; n < lines.inner; ++n) {
      double fsum = 0;
      std::uint64_t isum = 0;  // two's-complement wrap, as the device's int64 accumulator
      for (std::int64_t j = 0; j < lines.size; ++j) {
        const std::size_t at = lines.at(o, j, n);
        if (x.floating) {
          fsum += x.f[at];
          x.f[at] = fsum;
        } else {
          isum += static_cast<std::uint64_t>(x.i[at]);
          x.i[at] = static_cast<std::int64_t>(isum);
        }
      }
    }
  }
  writeElements(args.y, x);
  return Status::success();
}

Status run(const sort_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return selectRun(args, args.descending, linesOf(args.x, args.dim).size);
}

Status run(const topk_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return selectRun(args, args.largest, args.k);
}

}  // namespace mlu::reference
