// dense.h — the float64 matrix products of the CPU reference: strided tensors gathered into contiguous
// float64 matrices, multiplied by OpenBLAS's cblas_dgemm, and scattered back rounded once to the output
// dtype. OpenBLAS is a different library and a different algorithm from the device's float32 GEMM engine,
// so comparing the two still checks the device; float64 products of float32 (or 16-bit) inputs are exact
// and their float64 sums carry ~1e-16 relative error, far below anything the float32 outputs can show.
#pragma once

#include "element.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace mlu::reference::dense {

// std::allocator whose value-initialization leaves doubles uninitialized: a matrix that is written whole
// (gathered, or a dgemm output with beta 0) costs no zeroing pass over memory first.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialization: no value for a double
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

// A row-major float64 matrix that owns its elements.
struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double, DefaultInitAllocator<double>> data;

  Matrix() = default;
  Matrix(std::int64_t r, std::int64_t c, double fill = 0.0)
      : rows(r), cols(c), data(static_cast<std::size_t>(r * c), fill) {}
  // Zeroed r x c.
  void resize(std::int64_t r, std::int64_t c) {
    rows = r;
    cols = c;
    data.assign(static_cast<std::size_t>(r * c), 0.0);
  }
  // r x c with unspecified elements (for a dgemm output with beta 0, or a matrix written whole): no
  // zeroing pass (not even of grown storage), and the storage is reused when it is large enough.
  void shape(std::int64_t r, std::int64_t c) {
    rows = r;
    cols = c;
    data.resize(static_cast<std::size_t>(r * c));
  }
  double* row(std::int64_t r) { return data.data() + r * cols; }
  const double* row(std::int64_t r) const { return data.data() + r * cols; }
  double& at(std::int64_t r, std::int64_t c) { return data[static_cast<std::size_t>(r * cols + c)]; }
  double at(std::int64_t r, std::int64_t c) const { return data[static_cast<std::size_t>(r * cols + c)]; }
};

// c = alpha * op(a) * op(b) + beta * c, where op transposes when asked: op(a) is [c.rows, k], op(b) is
// [k, c.cols]. All three are row-major with their own column counts as leading dimensions.
void gemm(bool trans_a, bool trans_b, double alpha, const Matrix& a, const Matrix& b, double beta, Matrix& c);

// The rows x cols matrix at base (in elements of T) with the given strides, as float64.
template <typename T>
void gather(const T* base, std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
            std::int64_t col_stride, Matrix& out) {
  out.rows = rows;
  out.cols = cols;
  out.data.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* src = base + r * row_stride;
    double* dst = out.row(r);
    if (col_stride == 1) {
      for (std::int64_t c = 0; c < cols; ++c) dst[c] = load<double>(src[c]);
    } else {
      for (std::int64_t c = 0; c < cols; ++c) dst[c] = load<double>(src[c * col_stride]);
    }
  }
}

// Stores m into the rows x cols matrix at base with the given strides, rounding once to T.
template <typename T>
void scatter(const Matrix& m, T* base, std::int64_t row_stride, std::int64_t col_stride) {
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const double* src = m.row(r);
    T* dst = base + r * row_stride;
    if (col_stride == 1) {
      for (std::int64_t c = 0; c < m.cols; ++c) dst[c] = store<T>(src[c]);
    } else {
      for (std::int64_t c = 0; c < m.cols; ++c) dst[c * col_stride] = store<T>(src[c]);
    }
  }
}

}  // namespace mlu::reference::dense
