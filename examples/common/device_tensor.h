// device_tensor.h — the small tensor helper the demo programs share: a device buffer with its descriptor
// (RAII), host<->device transfers with dtype conversion, and error checks that stop the program with the
// library's message. It uses only the public C APIs (mlu/mlurt.h, mlu/mluops.h), as any program would.
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

// A device tensor. Copies are shallow: they share the memory and the descriptor (like torch tensors).
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Allocates an uninitialized tensor on the current device.
  DeviceTensor(Dims dims, mluopDataType_t dtype);

  // The same memory seen with other dims (same element count).
  DeviceTensor reshaped(Dims dims) const;

  mluopTensorDescriptor_t desc() const { return desc_.get(); }
  void* data() const { return memory_.get(); }
  const Dims& dims() const { return dims_; }
  mluopDataType_t dtype() const { return dtype_; }
  std::int64_t numel() const;
  std::size_t bytes() const;

  // Copies host values in, converting float -> the tensor's floating dtype (synchronous).
  void upload(const std::vector<float>& values);
  void upload(const std::vector<std::int64_t>& values);
  // Copies the values out as float (synchronous; waits for the work queued before it on the device).
  std::vector<float> download() const;
  std::vector<std::int64_t> downloadInt64() const;

 private:
  Dims dims_;
  mluopDataType_t dtype_ = MLUOP_DTYPE_INVALID;
  std::shared_ptr<void> memory_;
  std::shared_ptr<mluopTensorStruct> desc_;
};

// "float32" / "float16" / "bfloat16" -> dtype; MLUOP_DTYPE_INVALID for anything else.
mluopDataType_t parseFloatDtype(const std::string& name);

}  // namespace examples
