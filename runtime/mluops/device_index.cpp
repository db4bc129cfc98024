// Device kernels of the indexing (embedding forward/backward, index_select, gather, scatter_add), joining
// (concat, split), where and comparison (eq, lt, gt) ops.
//
// Every tensor may have arbitrary (non-negative) strides; the kernels walk them with reduce::Cursor
// (additions only) over chunks of the output split across the simulated cores with parallelFor. Selection
// and joining ops move stored elements unchanged (no rounding). Accumulating ops (embedding_backward,
// scatter_add) add in float32 for the floating dtypes (half types rounded once, when stored) and in 64-bit
// two's complement for the integer dtypes, in a fixed order that does not depend on the number of cores:
// every output row (embedding_backward) or output line (scatter_add) is owned by one chunk, so there are no
// races and no atomics.
//
// Index values are device data, read only when the kernel runs, so a bad one cannot be reported by the
// call. An index outside [0, size) gives NaN (floating outputs) or 0 (integer and bool outputs) for the
// element or row it selects (embedding_forward, index_select, gather); its contribution is skipped by the
// accumulating ops (embedding_backward, scatter_add). Nothing is ever read or written out of bounds. The
// CPU reference does the same.
#include "device.h"

#include "element.h"
#include "elementwise_shapes.h"
#include "index_shapes.h"
#include "math_ops.h"
#include "reduce_shapes.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlu {
namespace {

using reduce::Cursor;
using reduce::IndexSpace;

// Elements per chunk below which a kernel is not split further across cores.
constexpr std::int64_t kGrain = std::int64_t{1} << 14;

std::int64_t grainFor(std::int64_t work_per_item) {
  return std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, work_per_item));
}

Status noKernel(const TensorView& t) {
  return {MLUOP_STATUS_INTERNAL_ERROR, fmt::format("no kernel for dtype {}", dtypeName(t.dtype))};
}

// Reads index values of an int64 or int32 tensor at element offsets.
struct IndexReader {
  const void* data = nullptr;
  bool wide = true;

  explicit IndexReader(const TensorView& t) : data(t.data), wide(t.dtype == MLUOP_DTYPE_INT64) {}
  std::int64_t operator()(std::int64_t offset) const {
    return wide ? static_cast<const std::int64_t*>(data)[offset]
                : static_cast<std::int64_t>(static_cast<const std::int32_t*>(data)[offset]);
  }
};

template <typename T>
constexpr bool kFloatingStorage = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                  std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// What an out-of-range index selects: NaN for the floating dtypes, 0 (false) for the others.
template <typename T>
T invalidElement() {
  if constexpr (kFloatingStorage<T>) {
    return store<T>(std::numeric_limits<float>::quiet_NaN());
  } else {
    return T{};
  }
}

// The device's floating dtypes (validate and the device rules have refused the others).
template <typename F>
bool dispatchDeviceFloating(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      f.template operator()<float>();
      return true;
    case MLUOP_DTYPE_HALF:
      f.template operator()<Half>();
      return true;
    case MLUOP_DTYPE_BFLOAT16:
      f.template operator()<BFloat16>();
      return true;
    default:
      return false;
  }
}

// ---- selection: y[i] = x[base_i + index_i * x_step] (index_select, gather) ----

// y and two views over y's shape: `x_base` (x's strides, 0 along the selected dim) and `index` (the index
// element each y element uses). A y element reads x at x_base + index * x_step when the index is in
// [0, limit).
Status selectKernel(const Launch& launch, const TensorView& y, const TensorView& x_base,
                    const TensorView& index, std::int64_t x_step, std::int64_t limit) {
  const int cores = launch.cores();
  Status status = noKernel(y);
  dispatchAll(y.dtype, [&]<typename T>() {
    const IndexSpace ys = reduce::allDims(y), xs = reduce::allDims(x_base), is = reduce::allDims(index);
    const IndexReader read(index);
    T* const out = typed<T>(y);
    const T* const in = typed<const T>(x_base);
    const std::int64_t n = y.numel();
    status = launch.enqueue([=] {
      parallelFor(n, kGrain, cores, [&](std::int64_t begin, std::int64_t end) {
        Cursor cy(ys, begin), cx(xs, begin), ci(is, begin);
        for (std::int64_t i = begin; i < end; ++i, cy.next(), cx.next(), ci.next()) {
          const std::int64_t v = read(ci.offset());
          out[cy.offset()] = v >= 0 && v < limit ? in[cx.offset() + v * x_step] : invalidElement<T>();
        }
      });
    });
  });
  return status;
}

// ---- strided copies (concat, split) ----

// Copies src into dst (same shape and dtype) for each pair, in one kernel.
Status copyKernel(const Launch& launch, const std::vector<std::pair<TensorView, TensorView>>& pairs) {
  const int cores = launch.cores();
  Status status = noKernel(pairs.front().first);
  dispatchAll(pairs.front().first.dtype, [&]<typename T>() {
    status = launch.enqueue([pairs, cores] {
      for (const auto& pair : pairs) {
        const TensorView& dst = pair.first;
        const TensorView& src = pair.second;
        const IndexSpace ds = reduce::allDims(dst), ss = reduce::allDims(src);
        T* const out = typed<T>(dst);
        const T* const in = typed<const T>(src);
        parallelFor(dst.numel(), kGrain, cores, [&](std::int64_t begin, std::int64_t end) {
          Cursor cd(ds, begin), cs(ss, begin);
          for (std::int64_t i = begin; i < end; ++i, cd.next(), cs.next()) out[cd.offset()] = in[cs.offset()];
        });
      }
    });
  });
  return status;
}

// ---- comparisons ----

// The value an element is compared as: float32 for the floating dtypes (exact for the half types), the
// stored value for the integer dtypes and bool.
template <typename T>
auto compareValue(T v) {
  if constexpr (kFloatingStorage<T>) {
    return load<float>(v);
  } else {
    return v;
  }
}

template <typename Cmp>
Status compareKernel(const Launch& launch, const TensorView& a, const TensorView& b, const TensorView& c,
                     Cmp cmp) {
  const int cores = launch.cores();
  const IndexSpace as = reduce::allDims(elementwise::broadcastTo(a, c));
  const IndexSpace bs = reduce::allDims(elementwise::broadcastTo(b, c));
  const IndexSpace cs = reduce::allDims(c);
  const std::int64_t n = c.numel();
  bool* const out = typed<bool>(c);
  Status status = noKernel(a);
  dispatchAll(a.dtype, [&]<typename T>() {
    const T* const pa = typed<const T>(a);
    const T* const pb = typed<const T>(b);
    status = launch.enqueue([=] {
      parallelFor(n, kGrain, cores, [&](std::int64_t begin, std::int64_t end) {
        Cursor ca(as, begin), cb(bs, begin), cc(cs, begin);
        for (std::int64_t i = begin; i < end; ++i, ca.next(), cb.next(), cc.next()) {
          out[cc.offset()] = cmp(compareValue(pa[ca.offset()]), compareValue(pb[cb.offset()]));
        }
      });
    });
  });
  return status;
}

// ---- scatter_add accumulation ----

// The accumulator of scatter_add: float32 for the floating dtypes, 64-bit two's complement (wrapping, as
// the stored integer type does) for the integer dtypes.
template <typename T>
struct Accumulator {
  using type = std::conditional_t<kFloatingStorage<T>, float, std::uint64_t>;
  static type of(T v) {
    if constexpr (kFloatingStorage<T>) {
      return load<float>(v);
    } else {
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
    }
  }
  static T stored(type v) {
    if constexpr (kFloatingStorage<T>) {
      return store<T>(v);
    } else {
      return static_cast<T>(static_cast<std::int64_t>(v));  // modular (C++20)
    }
  }
};

}  // namespace

Status device(const Launch& launch, const embedding_forward_args& a) {
  const TensorView weight = a.weight, indices = a.indices, y = a.y;
  const int cores = launch.cores();
  const int last = y.ndim - 1;
  const IndexSpace is = reduce::allDims(indices);
  const IndexSpace rows = reduce::dimsOf(y, 1u << last, false);  // y without its last dim: one row per index
  const std::int64_t n = indices.numel(), vocab = weight.dim(0), width = weight.dim(1);
  const std::int64_t w_row = weight.stride(0), w_col = weight.stride(1), y_col = y.stride(last);
  const IndexReader read(indices);
  Status status = noKernel(weight);
  dispatchDeviceFloating(weight.dtype, [&]<typename T>() {
    const T* const w = typed<const T>(weight);
    T* const out = typed<T>(y);
    status = launch.enqueue([=] {
      if (width == 0) return;
      parallelFor(n, grainFor(width), cores, [&](std::int64_t begin, std::int64_t end) {
        Cursor ci(is, begin), cy(rows, begin);
        for (std::int64_t i = begin; i < end; ++i, ci.next(), cy.next()) {
          const std::int64_t v = read(ci.offset());
          T* const dst = out + cy.offset();
          if (v < 0 || v >= vocab) {
            for (std::int64_t k = 0; k < width; ++k) dst[k * y_col] = invalidElement<T>();
            continue;
          }
          const T* const src = w + v * w_row;
          for (std::int64_t k = 0; k < width; ++k) dst[k * y_col] = src[k * w_col];
        }
      });
    });
  });
  return status;
}

Status device(const Launch& launch, const embedding_backward_args& a) {
  const TensorView grad_output = a.grad_output, indices = a.indices, grad_weight = a.grad_weight;
  const int cores = launch.cores();
  const int last = grad_output.ndim - 1;
  const IndexSpace is = reduce::allDims(indices);
  const IndexSpace rows = reduce::dimsOf(grad_output, 1u << last, false);
  const std::int64_t n = indices.numel(), vocab = grad_weight.dim(0), width = grad_weight.dim(1);
  const std::int64_t gw_row = grad_weight.stride(0), gw_col = grad_weight.stride(1);
  const std::int64_t go_col = grad_output.stride(last);
  const std::int64_t padding_idx = a.padding_idx;
  const IndexReader read(indices);
  Status status = noKernel(grad_output);
  dispatchDeviceFloating(grad_output.dtype, [&]<typename T>() {
    const T* const go = typed<const T>(grad_output);
    T* const gw = typed<T>(grad_weight);
    status = launch.enqueue([=] {
      // Bucket the positions of the valid indices by embedding row (a stable counting sort), so that each
      // row is summed by one chunk, in position order.
      std::vector<std::int64_t> start(static_cast<std::size_t>(vocab) + 1, 0);
      std::vector<std::int64_t> row_of(static_cast<std::size_t>(n), -1);
      if (n > 0) {
        Cursor ci(is, 0);
        for (std::int64_t i = 0; i < n; ++i, ci.next()) {
          const std::int64_t v = read(ci.offset());
          if (v < 0 || v >= vocab || v == padding_idx) continue;
          row_of[static_cast<std::size_t>(i)] = v;
          ++start[static_cast<std::size_t>(v) + 1];
        }
      }
      for (std::size_t v = 0; v < static_cast<std::size_t>(vocab); ++v) start[v + 1] += start[v];
      std::vector<std::int64_t> positions(static_cast<std::size_t>(start.back()));
      {
        std::vector<std::int64_t> next(start.begin(), start.end() - 1);
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t v = row_of[static_cast<std::size_t>(i)];
          if (v >= 0) positions[static_cast<std::size_t>(next[static_cast<std::size_t>(v)]++)] = i;
        }
      }
      const std::int64_t per_row = width * std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, vocab));
      parallelFor(vocab, grainFor(per_row), cores, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> acc(static_cast<std::size_t>(width));
        for (std::int64_t v = begin; v < end; ++v) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          const auto first = start[static_cast<std::size_t>(v)],
                     stop = start[static_cast<std::size_t>(v) + 1];
          for (std::int64_t p = first; p < stop; ++p) {
            const T* const src = go + rows.offset(positions[static_cast<std::size_t>(p)]);
            for (std::int64_t k = 0; k < width; ++k)
              acc[static_cast<std::size_t>(k)] += load<float>(src[k * go_col]);
          }
          T* const dst = gw + v * gw_row;
          for (std::int64_t k = 0; k < width; ++k)
            dst[k * gw_col] = store<T>(acc[static_cast<std::size_t>(k)]);
        }
      });
    });
  });
  return status;
}

Status device(const Launch& launch, const index_select_args& a) {
  const int d = index_shapes::dimOf(a.dim, a.x.ndim);
  const auto du = static_cast<std::size_t>(d);
  TensorView x_base = a.x;  // x over y's shape, without the selected dim's stride
  x_base.dims = a.y.dims;
  x_base.strides[du] = 0;
  TensorView index = a.y;  // the index over y's shape: element k along d is index[k]
  index.dtype = a.index.dtype;
  index.data = a.index.data;
  index.strides.fill(0);
  index.strides[du] = a.index.ndim == 1 ? a.index.stride(0) : 0;
  return selectKernel(launch, a.y, x_base, index, a.x.stride(d), a.x.dim(d));
}

Status device(const Launch& launch, const gather_args& a) {
  if (a.index.numel() == 0) return launch.enqueue([] {});  // nothing to gather (x's shape may not match)
  const TensorView x = index_shapes::atLeast1d(a.x), index = index_shapes::atLeast1d(a.index),
                   y = index_shapes::atLeast1d(a.y);
  const int d = index_shapes::dimOf(a.dim, x.ndim);
  TensorView x_base = x;  // x over index's shape, without the gathered dim's stride
  x_base.dims = index.dims;
  x_base.strides[static_cast<std::size_t>(d)] = 0;
  return selectKernel(launch, y, x_base, index, x.stride(d), x.dim(d));
}

Status device(const Launch& launch, const scatter_add_args& a) {
  const TensorView y = a.y, index = a.index, src = a.src;
  const int d = index_shapes::dimOf(a.dim, y.ndim);
  const std::uint32_t mask = 1u << d;
  // One line per position of index's other dims: each writes only the y line with the same position.
  TensorView y_lines = y, src_lines = src;
  y_lines.dims = index.dims;
  src_lines.dims = index.dims;
  const IndexSpace ls_index = reduce::dimsOf(index, mask, false);
  const IndexSpace ls_y = reduce::dimsOf(y_lines, mask, false);
  const IndexSpace ls_src = reduce::dimsOf(src_lines, mask, false);
  const std::int64_t lines = ls_index.count(), m = index.dim(d), limit = y.dim(d);
  const std::int64_t i_step = index.stride(d), s_step = src.stride(d), y_step = y.stride(d);
  const IndexReader read(index);
  const int cores = launch.cores();
  Status status = noKernel(y);
  dispatchAll(y.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using Acc = Accumulator<T>;
      T* const out = typed<T>(y);
      const T* const in = typed<const T>(src);
      status = launch.enqueue([=] {
        if (m == 0) return;
        parallelFor(lines, grainFor(m), cores, [&](std::int64_t begin, std::int64_t end) {
          std::vector<std::pair<std::int64_t, std::int64_t>> targets;  // (y position along d, k)
          for (std::int64_t line = begin; line < end; ++line) {
            const std::int64_t io = ls_index.offset(line), so = ls_src.offset(line), yo = ls_y.offset(line);
            targets.clear();
            for (std::int64_t k = 0; k < m; ++k) {
              const std::int64_t v = read(io + k * i_step);
              if (v >= 0 && v < limit) targets.emplace_back(v, k);
            }
            std::stable_sort(targets.begin(), targets.end(),
                             [](const auto& l, const auto& r) { return l.first < r.first; });
            for (std::size_t t = 0; t < targets.size();) {
              const std::int64_t v = targets[t].first;
              T& dst = out[yo + v * y_step];
              typename Acc::type acc = Acc::of(dst);
              for (; t < targets.size() && targets[t].first == v; ++t)
                acc += Acc::of(in[so + targets[t].second * s_step]);
              dst = Acc::stored(acc);
            }
          }
        });
      });
    }
  });
  return status;
}

Status device(const Launch& launch, const concat_args& a) {
  const int d = index_shapes::dimOf(a.dim, a.a.ndim);
  const std::int64_t na = a.a.dim(d);
  return copyKernel(launch, {{index_shapes::narrowed(a.y, d, 0, na), a.a},
                             {index_shapes::narrowed(a.y, d, na, a.b.dim(d)), a.b}});
}

Status device(const Launch& launch, const split_args& a) {
  const int d = index_shapes::dimOf(a.dim, a.x.ndim);
  const std::int64_t na = a.a.dim(d);
  return copyKernel(launch, {{a.a, index_shapes::narrowed(a.x, d, 0, na)},
                             {a.b, index_shapes::narrowed(a.x, d, na, a.b.dim(d))}});
}

Status device(const Launch& launch, const where_args& a) {
  const TensorView y = a.y;
  const int cores = launch.cores();
  const IndexSpace ks = reduce::allDims(elementwise::broadcastTo(a.condition, y));
  const IndexSpace as = reduce::allDims(elementwise::broadcastTo(a.a, y));
  const IndexSpace bs = reduce::allDims(elementwise::broadcastTo(a.b, y));
  const IndexSpace ys = reduce::allDims(y);
  const auto* const cond = typed<const std::uint8_t>(a.condition);  // bool and uint8: one byte, != 0
  const std::int64_t n = y.numel();
  Status status = noKernel(y);
  dispatchAll(y.dtype, [&]<typename T>() {
    const T* const pa = typed<const T>(a.a);
    const T* const pb = typed<const T>(a.b);
    T* const out = typed<T>(y);
    // Row by row along y's innermost dim (each operand's step there is 0 when it is broadcast): the
    // offsets are worked out once per row, not stepped per element (causal attention's masked_fill is a [64,
    // 64] mask over [B, H, 64, 64] scores).
    const std::int64_t inner = y.ndim == 0 ? 1 : std::max<std::int64_t>(y.dim(y.ndim - 1), 1);
    const auto step = [&](const IndexSpace& space) {
      return space.ndim == 0 ? 0 : space.strides[space.ndim - 1];
    };
    const std::int64_t sk = step(ks), sa = step(as), sb = step(bs), sy = step(ys);
    // Rows whose y and condition are dense and whose a and b are dense or one value take a loop of
    // constant steps, which the compiler vectorizes.
    const auto unit = [](std::int64_t s) { return s == 0 || s == 1; };
    const bool dense_rows = sy == 1 && sk == 1 && unit(sa) && unit(sb);
    // The spaces of the rows (y's dims but the innermost), walked by cursors: no division per row.
    const auto rowsOf = [](IndexSpace space) {
      if (space.ndim > 0) --space.ndim;
      return space;
    };
    const IndexSpace kr = rowsOf(ks), ar = rowsOf(as), br = rowsOf(bs), yr = rowsOf(ys);
    status = launch.enqueue([=] {
      parallelFor(n / inner, grainFor(inner), cores, [&](std::int64_t begin, std::int64_t end) {
        reduce::Cursor kc(kr, begin), ac(ar, begin), bc(br, begin), yc(yr, begin);
        for (std::int64_t r = begin; r < end; ++r, kc.next(), ac.next(), bc.next(), yc.next()) {
          const std::uint8_t* const c0 = cond + kc.offset();
          const T* const a0 = pa + ac.offset();
          const T* const b0 = pb + bc.offset();
          T* const y0 = out + yc.offset();
          if (dense_rows) {
            const auto row = [&]<std::int64_t kA, std::int64_t kB>() {
              for (std::int64_t j = 0; j < inner; ++j) {  // both loaded, then selected: a blend
                const T va = a0[j * kA], vb = b0[j * kB];
                y0[j] = c0[j] != 0 ? va : vb;
              }
            };
            if (sa == 0 && sb == 1) {
              row.template operator()<0, 1>();
            } else if (sa == 1 && sb == 0) {
              row.template operator()<1, 0>();
            } else if (sa == 1) {
              row.template operator()<1, 1>();
            } else {
              row.template operator()<0, 0>();
            }
            continue;
          }
          for (std::int64_t j = 0; j < inner; ++j) y0[j * sy] = c0[j * sk] != 0 ? a0[j * sa] : b0[j * sb];
        }
      });
    });
  });
  return status;
}

Status device(const Launch& launch, const eq_args& a) {
  return compareKernel(launch, a.a, a.b, a.c, [](auto x, auto y) { return x == y; });
}

Status device(const Launch& launch, const ne_args& a) {
  return compareKernel(launch, a.a, a.b, a.c, [](auto x, auto y) { return x != y; });
}

Status device(const Launch& launch, const le_args& a) {
  return compareKernel(launch, a.a, a.b, a.c, [](auto x, auto y) { return x <= y; });
}

Status device(const Launch& launch, const ge_args& a) {
  return compareKernel(launch, a.a, a.b, a.c, [](auto x, auto y) { return x >= y; });
}

Status device(const Launch& launch, const logical_and_args& a) {
  return compareKernel(launch, a.a, a.b, a.c,
                       [](auto x, auto y) { return math::truth(x) && math::truth(y); });
}

Status device(const Launch& launch, const logical_or_args& a) {
  return compareKernel(launch, a.a, a.b, a.c,
                       [](auto x, auto y) { return math::truth(x) || math::truth(y); });
}

Status device(const Launch& launch, const logical_xor_args& a) {
  return compareKernel(launch, a.a, a.b, a.c,
                       [](auto x, auto y) { return math::truth(x) != math::truth(y); });
}

// x read as both operands of the comparison kernel (validate() gave y x's shape).
Status device(const Launch& launch, const logical_not_args& a) {
  return compareKernel(launch, a.x, a.x, a.y, [](auto x, auto) { return !math::truth(x); });
}

Status device(const Launch& launch, const lt_args& a) {
  return compareKernel(launch, a.a, a.b, a.c, [](auto x, auto y) { return x < y; });
}

Status device(const Launch& launch, const gt_args& a) {
  return compareKernel(launch, a.a, a.b, a.c, [](auto x, auto y) { return x > y; });
}

}  // namespace mlu
