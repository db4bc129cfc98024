// tensor_io.h — how the CPU reference reads and writes tensors: every element of a (possibly strided)
// floating tensor as float64 in row-major order of its shape, and back, rounded once to the tensor's dtype.
// An absent optional tensor reads as nothing and is not written.
#pragma once

#include "element.h"

#include <mlu/op_args.h>

#include <cstdint>
#include <vector>

namespace mlu::reference {

// All elements of a floating tensor, in row-major order of its shape, as float64 (empty if absent).
inline std::vector<double> read(const TensorView& t) {
  if (!t.present) return {};
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  const OffsetWalker walk(t);
  dispatchFloating(t.dtype, [&]<typename T>() {
    const T* data = typed<const T>(t);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = load<double>(data[walk.offsetOf(static_cast<std::int64_t>(i))]);
  });
  return v;
}

// Stores row-major values into a floating tensor, rounding to its dtype (nothing if absent).
inline void write(const TensorView& t, const std::vector<double>& v) {
  if (!t.present) return;
  const OffsetWalker walk(t);
  dispatchFloating(t.dtype, [&]<typename T>() {
    T* data = typed<T>(t);
    for (std::size_t i = 0; i < v.size(); ++i)
      data[walk.offsetOf(static_cast<std::int64_t>(i))] = store<T>(v[i]);
  });
}

// A dim of a row-major tensor: element (o, k, i) is at (o * size + k) * inner + i. A 0-d tensor is one
// element along a dim of size 1.
struct Axis {
  std::int64_t outer = 1, size = 1, inner = 1;
  std::size_t at(std::int64_t o, std::int64_t k, std::int64_t i) const {
    return static_cast<std::size_t>((o * size + k) * inner + i);
  }
};
// Dim d (normalized) of t.
inline Axis axisOf(const TensorView& t, int d) {
  Axis a;
  if (t.ndim == 0) return a;
  for (int i = 0; i < d; ++i) a.outer *= t.dim(i);
  a.size = t.dim(d);
  for (int i = d + 1; i < t.ndim; ++i) a.inner *= t.dim(i);
  return a;
}

}  // namespace mlu::reference
