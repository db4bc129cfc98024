// Device kernels of the sequence, sorting and selection ops (arange, cumsum, sort, topk).
//
// Every tensor may have arbitrary (non-negative) strides: the dim-wise kernels walk the other dims with
// reduce::IndexSpace and split those lines across the simulated cores with parallelFor, each line owned by
// one chunk. Values are compared in float32 for the floating dtypes (exact for the 16-bit ones) and in
// int64 for the integers and bool, with NaN above every number; equal values keep their index order, so a
// result never depends on the number of cores. sort and topk move stored elements unchanged.
//
// cumsum accumulates as PyTorch's CPU kernel does: float32 in float64, float16 and bfloat16 in float32
// (each output rounded once), integers in int64 with two's-complement wrap. arange computes start + i·step
// in float64 and rounds once.
#include "device.h"

#include "element.h"
#include "reduce_shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

namespace mlu {
namespace {

using reduce::DimSplit;
using reduce::splitAt;

// Lines per chunk below which a kernel is not split further across cores.
std::int64_t grainFor(std::int64_t work_per_line) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 14) / std::max<std::int64_t>(1, work_per_line));
}

Status noKernel(const TensorView& t) {
  return {MLUOP_STATUS_INTERNAL_ERROR, fmt::format("no kernel for dtype {}", dtypeName(t.dtype))};
}

// The sort key of a stored element: float32 or int64.
template <typename T>
using Key = std::conditional_t<std::is_integral_v<T>, std::int64_t, float>;

template <typename T>
Key<T> keyOf(T v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<std::int64_t>(v);
  } else {
    return load<float>(v);
  }
}

// a before b in ascending order, NaN last (integers have none).
template <typename K>
bool less(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// The order of one line: positions 0..n-1 sorted by their keys (descending or ascending), ties by position;
// only the first k are put in order when k < n (topk).
template <typename K>
void orderLine(const std::vector<K>& keys, bool descending, std::int64_t k,
               std::vector<std::int64_t>& order) {
  order.resize(keys.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  const auto before = [&](std::int64_t a, std::int64_t b) {
    const K ka = keys[static_cast<std::size_t>(a)], kb = keys[static_cast<std::size_t>(b)];
    if (descending ? less(kb, ka) : less(ka, kb)) return true;
    if (descending ? less(ka, kb) : less(kb, ka)) return false;
    return a < b;  // equal (or both NaN): by position
  };
  if (k < static_cast<std::int64_t>(order.size())) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
}

// values/indices along dim d get the first `k` positions of each line of x in order.
template <typename T>
void selectKernel(const TensorView& x, const TensorView& values, const TensorView& indices, int d,
                  bool descending, std::int64_t k, int cores) {
  const DimSplit xs = splitAt(x, d), vs = splitAt(values, d), is = splitAt(indices, d);
  const std::int64_t lines = xs.others.count();
  const T* const xd = typed<const T>(x);
  T* const vd = typed<T>(values);
  auto* const id = typed<std::int64_t>(indices);
  parallelFor(lines, grainFor(xs.size * 8), cores, [&](std::int64_t begin, std::int64_t end) {
    std::vector<Key<T>> keys(static_cast<std::size_t>(xs.size));
    std::vector<std::int64_t> order;
    for (std::int64_t line = begin; line < end; ++line) {
      const std::int64_t xb = xs.others.offset(line);
      for (std::int64_t j = 0; j < xs.size; ++j)
        keys[static_cast<std::size_t>(j)] = keyOf(xd[xb + j * xs.stride]);
      orderLine(keys, descending, k, order);
      const std::int64_t vb = vs.others.offset(line), ib = is.others.offset(line);
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t from = order[static_cast<std::size_t>(j)];
        vd[vb + j * vs.stride] = xd[xb + from * xs.stride];
        id[ib + j * is.stride] = from;
      }
    }
  });
}

template <typename Args>
Status launchSelect(const Launch& launch, const Args& a, bool descending, std::int64_t k) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  if (a.values.numel() == 0) return launch.enqueue([] {});
  Status status = noKernel(a.x);
  dispatchAll(a.x.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, double>) {
      status = launch.enqueue(
          [x = a.x, values = a.values, indices = a.indices, d, descending, k, cores = launch.cores()] {
            selectKernel<T>(x, values, indices, d, descending, k, cores);
          });
    }
  });
  return status;
}

// The accumulator of cumsum for a stored type: PyTorch's CPU accumulate type.
template <typename T>
using Accumulator = std::conditional_t<std::is_integral_v<T>, std::int64_t,
                                       std::conditional_t<std::is_same_v<T, float>, double, float>>;

template <typename T, typename Y>
void cumsumKernel(const TensorView& x, const TensorView& y, int d, int cores) {
  const DimSplit xs = splitAt(x, d), ys = splitAt(y, d);
  const T* const xd = typed<const T>(x);
  Y* const yd = typed<Y>(y);
  parallelFor(xs.others.count(), grainFor(xs.size), cores, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      const std::int64_t xb = xs.others.offset(line), yb = ys.others.offset(line);
      Accumulator<T> sum{};
      for (std::int64_t j = 0; j < xs.size; ++j) {
        const T v = xd[xb + j * xs.stride];  // read before y (which may be x) is written
        if constexpr (std::is_integral_v<T>) {
          sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(sum) +
                                          static_cast<std::uint64_t>(static_cast<std::int64_t>(v)));
          yd[yb + j * ys.stride] = static_cast<Y>(sum);  // wraps into a narrower y
        } else {
          sum += load<Accumulator<T>>(v);
          yd[yb + j * ys.stride] = store<Y>(sum);
        }
      }
    }
  });
}

}  // namespace

Status device(const Launch& launch, const arange_args& a) {
  Status status = noKernel(a.y);
  dispatchAll(a.y.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, double> && !std::is_same_v<T, bool>) {
      status = launch.enqueue([y = a.y, start = a.start, step = a.step, cores = launch.cores()] {
        T* const out = typed<T>(y);
        const std::int64_t stride = y.stride(0);
        parallelFor(y.dim(0), std::int64_t{1} << 14, cores, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end; ++i) {
            const double v = start + static_cast<double>(i) * step;
            if constexpr (std::is_integral_v<T>) {
              out[i * stride] =
                  static_cast<T>(static_cast<std::int64_t>(v));  // whole and in range (validate)
            } else {
              out[i * stride] = store<T>(v);
            }
          }
        });
      });
    }
  });
  return status;
}

Status device(const Launch& launch, const cumsum_args& a) {
  int d = 0;
  MLU_RETURN_IF_ERROR(reduce::normalizeDim(a.dim, a.x.ndim, "dim", d));
  if (a.y.numel() == 0) return launch.enqueue([] {});
  Status status = noKernel(a.x);
  dispatchAll(a.x.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, double>) {
      const auto run = [&]<typename Y>() {
        status = launch.enqueue(
            [x = a.x, y = a.y, d, cores = launch.cores()] { cumsumKernel<T, Y>(x, y, d, cores); });
      };
      if (a.y.dtype == a.x.dtype) {
        run.template operator()<T>();
      } else {
        run.template operator()<std::int64_t>();
      }
    }
  });
  return status;
}

Status device(const Launch& launch, const sort_args& a) {
  const std::int64_t size = a.x.ndim == 0 ? 1 : a.x.dim(a.dim < 0 ? a.dim + a.x.ndim : a.dim);
  return launchSelect(launch, a, a.descending, size);
}

Status device(const Launch& launch, const topk_args& a) { return launchSelect(launch, a, a.largest, a.k); }

}  // namespace mlu
