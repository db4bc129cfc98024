// gemm_util.h — helpers for the matrix-product and convolution tests: convolution descriptors and device
// workspaces (RAII), device/host tensor pairs with identical contents, tolerances scaled for sums of K
// products, and central finite differences.
#pragma once

#include "op_harness.h"

#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace optest {

// A convolution descriptor (padding, stride, dilation: {h, w}).
class ConvDesc {
 public:
  ConvDesc(std::array<int, 2> padding = {0, 0}, std::array<int, 2> stride = {1, 1},
           std::array<int, 2> dilation = {1, 1}, int groups = 1) {
    EXPECT_EQ(mluopCreateConvolutionDescriptor(&desc_), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(mluopSetConvolutionDescriptor(desc_, padding.data(), stride.data(), dilation.data(), groups),
              MLUOP_STATUS_SUCCESS)
        << mluopGetLastErrorMessage();
    params_ = mlu::ConvParams{padding, stride, dilation, groups};
  }
  ~ConvDesc() { mluopDestroyConvolutionDescriptor(desc_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  mluopConvolutionDescriptor_t get() const { return desc_; }
  operator mluopConvolutionDescriptor_t() const { return desc_; }
  // The same parameters as the C++ side (mlu::reference::run) takes them.
  const mlu::ConvParams& params() const { return params_; }

 private:
  mluopConvolutionDescriptor_t desc_ = nullptr;
  mlu::ConvParams params_;
};

// Device scratch memory of a given size (none for 0 bytes: data() is NULL).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) {
      EXPECT_EQ(mlurtMalloc(&data_, bytes_), MLURT_SUCCESS) << mlurtGetLastErrorMessage();
    }
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) mlurtFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// The same values in a device tensor (for the op) and a host tensor (for the reference), with the same
// strides, so both read identical elements.
struct TensorPair {
  Tensor dev;
  Tensor host;
};
inline TensorPair makePair(mluopDataType_t dtype, const Dims& dims, const std::vector<double>& values,
                           const Dims& strides = {}) {
  return {Tensor::device(dtype, dims, values, strides), Tensor::host(dtype, dims, values, strides)};
}
// An output pair with the same dims and strides, filled with a value the op must overwrite.
inline TensorPair makeOutput(mluopDataType_t dtype, const Dims& dims, const Dims& strides = {}) {
  const std::vector<double> stale(static_cast<std::size_t>(numel(dims)), 123.0);
  return {Tensor::device(dtype, dims, stale, strides), Tensor::host(dtype, dims, stale, strides)};
}

// Strides of a row-major buffer of shape storage_dims, read with its dims permuted: view dim i is storage
// dim perm[i] (e.g. perm {1, 0} gives a transposed view of a matrix). Returns {view dims, view strides}.
inline std::pair<Dims, Dims> permutedView(const Dims& storage_dims, const std::vector<int>& perm) {
  const Dims storage_strides = contiguousStrides(storage_dims);
  Dims dims(perm.size()), strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    dims[i] = storage_dims[static_cast<std::size_t>(perm[i])];
    strides[i] = storage_strides[static_cast<std::size_t>(perm[i])];
  }
  return {dims, strides};
}

// The device computes a sum of K products in float32 (blocked), the reference in double: float32 results
// differ by rounding that grows like sqrt(K), so the absolute tolerance is scaled by sqrt(K). For float16
// and bfloat16 the final rounding dominates and the default tolerance already holds.
inline Tolerance sumTolerance(mluopDataType_t dtype, std::int64_t k) {
  Tolerance t = toleranceFor(dtype);
  t.atol *= std::sqrt(static_cast<double>(std::max<std::int64_t>(k, 1)));
  return t;
}

inline const char* dtypeLabel(mluopDataType_t dtype) { return mluopGetNameOfDataType(dtype); }

inline const std::vector<mluopDataType_t>& deviceDtypes() {
  static const std::vector<mluopDataType_t> kDtypes = {MLUOP_DTYPE_FLOAT, MLUOP_DTYPE_HALF,
                                                       MLUOP_DTYPE_BFLOAT16};
  return kDtypes;
}

}  // namespace optest
