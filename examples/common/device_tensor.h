// device_tensor.h — the device tensor the demo programs share: a device buffer with its descriptor (RAII),
// strided views into it, host<->device transfers with dtype conversion, and error checks that stop the
// program with the library's message. It uses only the public C APIs (mlu/mlurt.h, mlu/mluops.h), as any
// program would.
#pragma once

#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace examples {

// Stops the program (exit 1) with the runtime's or the kernel library's message when a call failed.
void check(mlurtStatus_t status, const char* what);
void check(mluopStatus_t status, const char* what);

using Dims = std::vector<std::int64_t>;

// Contiguous row-major strides of `dims`, in elements.
Dims contiguousStrides(const Dims& dims);

// A device tensor. Copies are shallow: they share the memory and the descriptor (like torch tensors).
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Allocates an uninitialized contiguous tensor on the current device.
  DeviceTensor(Dims dims, mluopDataType_t dtype);

  // The same memory seen with other dims (same element count; the tensor must be contiguous).
  DeviceTensor reshaped(Dims dims) const;
  // A strided view of the same memory, like torch.as_strided: element i of the view is at
  // offset + sum(index_k * strides_k) elements from the start of this tensor's data.
  DeviceTensor view(Dims dims, Dims strides, std::int64_t offset = 0) const;

  mluopTensorDescriptor_t desc() const { return desc_.get(); }
  void* data() const { return data_; }
  const Dims& dims() const { return dims_; }
  const Dims& strides() const { return strides_; }
  mluopDataType_t dtype() const { return dtype_; }
  bool defined() const { return data_ != nullptr || desc_ != nullptr; }
  bool contiguous() const { return strides_ == contiguousStrides(dims_); }
  std::int64_t numel() const;
  std::size_t bytes() const;  // numel() * element size (the bytes a contiguous tensor spans)

  // Copies host values in, converting float -> the tensor's floating dtype (synchronous; contiguous only).
  void upload(const std::vector<float>& values);
  void upload(const std::vector<std::int64_t>& values);
  // Copies the values out as float (synchronous; waits for the work queued before it on the device).
  std::vector<float> download() const;
  std::vector<std::int64_t> downloadInt64() const;

 private:
  void describe();  // (re)creates the descriptor from dims_, strides_ and dtype_
  void requireContiguous(const char* what) const;

  Dims dims_;
  Dims strides_;
  mluopDataType_t dtype_ = MLUOP_DTYPE_INVALID;
  std::shared_ptr<void> memory_;  // the allocation, shared by every view of it
  void* data_ = nullptr;          // this tensor's first element inside memory_
  std::shared_ptr<mluopTensorStruct> desc_;
};

// "float32" / "float16" / "bfloat16" -> dtype; MLUOP_DTYPE_INVALID for anything else.
mluopDataType_t parseFloatDtype(const std::string& name);

}  // namespace examples
