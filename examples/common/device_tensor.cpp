#include "device_tensor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>

namespace examples {

void check(mlurtStatus_t status, const char* what) {
  if (status == MLURT_SUCCESS) return;
  std::fprintf(stderr, "error: %s: %s\n  %s\n", what, mlurtGetErrorString(status),
               mlurtGetLastErrorMessage());
  std::exit(1);
}

void check(mluopStatus_t status, const char* what) {
  if (status == MLUOP_STATUS_SUCCESS) return;
  std::fprintf(stderr, "error: %s: %s\n  %s\n", what, mluopGetErrorString(status),
               mluopGetLastErrorMessage());
  std::exit(1);
}

Dims contiguousStrides(const Dims& dims) {
  Dims strides(dims.size());
  std::int64_t stride = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

DeviceTensor::DeviceTensor(Dims dims, mluopDataType_t dtype)
    : dims_(std::move(dims)), strides_(contiguousStrides(dims_)), dtype_(dtype) {
  void* p = nullptr;
  check(mlurtMalloc(&p, bytes()), "mlurtMalloc");
  memory_ = std::shared_ptr<void>(p, [](void* q) { mlurtFree(q); });
  data_ = p;
  describe();
}

void DeviceTensor::describe() {
  mluopTensorDescriptor_t d = nullptr;
  check(mluopCreateTensorDescriptor(&d), "mluopCreateTensorDescriptor");
  desc_ = std::shared_ptr<mluopTensorStruct>(d, mluopDestroyTensorDescriptor);
  check(mluopSetTensorDescriptorEx(d, MLUOP_LAYOUT_ARRAY, dtype_, static_cast<int>(dims_.size()),
                                   dims_.data(), strides_.data()),
        "mluopSetTensorDescriptorEx");
}

void DeviceTensor::requireContiguous(const char* what) const {
  if (contiguous()) return;
  std::fprintf(stderr, "error: %s needs a contiguous tensor\n", what);
  std::exit(1);
}

DeviceTensor DeviceTensor::reshaped(Dims dims) const {
  requireContiguous("reshaped");
  DeviceTensor t = view(dims, contiguousStrides(dims));
  if (t.numel() != numel()) {
    std::fprintf(stderr, "error: reshaped: %lld elements cannot become %lld\n",
                 static_cast<long long>(numel()), static_cast<long long>(t.numel()));
    std::exit(1);
  }
  return t;
}

DeviceTensor DeviceTensor::view(Dims dims, Dims strides, std::int64_t offset) const {
  if (dims.size() != strides.size()) {
    std::fprintf(stderr, "error: view: %zu dims but %zu strides\n", dims.size(), strides.size());
    std::exit(1);
  }
  DeviceTensor t;
  t.dims_ = std::move(dims);
  t.strides_ = std::move(strides);
  t.dtype_ = dtype_;
  t.memory_ = memory_;
  t.data_ = static_cast<char*>(data_) + offset * static_cast<std::int64_t>(mluopGetSizeOfDataType(dtype_));
  t.describe();
  return t;
}

std::int64_t DeviceTensor::numel() const {
  return std::accumulate(dims_.begin(), dims_.end(), std::int64_t{1}, std::multiplies<>());
}

std::size_t DeviceTensor::bytes() const {
  return static_cast<std::size_t>(numel()) * mluopGetSizeOfDataType(dtype_);
}

void DeviceTensor::upload(const std::vector<float>& values) {
  requireContiguous("upload");
  const std::size_t n = static_cast<std::size_t>(numel());
  if (values.size() != n) {
    std::fprintf(stderr, "error: upload of %zu values into a tensor of %zu\n", values.size(), n);
    std::exit(1);
  }
  if (dtype_ == MLUOP_DTYPE_FLOAT) {
    check(mlurtMemcpy(data(), values.data(), bytes(), MLURT_MEMCPY_HOST_TO_DEVICE), "upload");
    return;
  }
  std::vector<std::uint16_t> half(n);
  for (std::size_t i = 0; i < n; ++i) {
    half[i] = dtype_ == MLUOP_DTYPE_HALF ? mluopFloatToHalf(values[i]) : mluopFloatToBfloat16(values[i]);
  }
  check(mlurtMemcpy(data(), half.data(), bytes(), MLURT_MEMCPY_HOST_TO_DEVICE), "upload");
}

void DeviceTensor::upload(const std::vector<std::int64_t>& values) {
  requireContiguous("upload");
  if (dtype_ != MLUOP_DTYPE_INT64 || values.size() != static_cast<std::size_t>(numel())) {
    std::fprintf(stderr, "error: upload of %zu int64 values into a %s tensor of %lld\n", values.size(),
                 mluopGetNameOfDataType(dtype_), static_cast<long long>(numel()));
    std::exit(1);
  }
  check(mlurtMemcpy(data(), values.data(), bytes(), MLURT_MEMCPY_HOST_TO_DEVICE), "upload");
}

std::vector<float> DeviceTensor::download() const {
  requireContiguous("download");
  const std::size_t n = static_cast<std::size_t>(numel());
  std::vector<float> out(n);
  if (dtype_ == MLUOP_DTYPE_FLOAT) {
    check(mlurtMemcpy(out.data(), data(), bytes(), MLURT_MEMCPY_DEVICE_TO_HOST), "download");
    return out;
  }
  std::vector<std::uint16_t> half(n);
  check(mlurtMemcpy(half.data(), data(), bytes(), MLURT_MEMCPY_DEVICE_TO_HOST), "download");
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = dtype_ == MLUOP_DTYPE_HALF ? mluopHalfToFloat(half[i]) : mluopBfloat16ToFloat(half[i]);
  }
  return out;
}

std::vector<std::int64_t> DeviceTensor::downloadInt64() const {
  requireContiguous("download");
  std::vector<std::int64_t> out(static_cast<std::size_t>(numel()));
  check(mlurtMemcpy(out.data(), data(), bytes(), MLURT_MEMCPY_DEVICE_TO_HOST), "download");
  return out;
}

mluopDataType_t parseFloatDtype(const std::string& name) {
  if (name == "float32") return MLUOP_DTYPE_FLOAT;
  if (name == "float16") return MLUOP_DTYPE_HALF;
  if (name == "bfloat16") return MLUOP_DTYPE_BFLOAT16;
  return MLUOP_DTYPE_INVALID;
}

}  // namespace examples
