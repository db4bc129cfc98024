// mlu_context.h — what every part of the PyTorch backend shares: error checks that turn a runtime or
// kernel-library status into a PyTorch error, the kernel-library handle of the calling thread, and tensor
// descriptors made from an at::Tensor's sizes, strides and dtype.
#pragma once

#include <ATen/ATen.h>
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <optional>
#include <string_view>

namespace torch_mlu {

inline constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

// Throws a PyTorch error (RuntimeError in Python) naming the call and the runtime's message.
void checkRuntime(mlurtStatus_t status, std::string_view call);
void checkOps(mluopStatus_t status, std::string_view op);

// The device the calling thread works on (mlurtGetDevice), and its number of devices.
int currentDevice();
int deviceCount();

// The kernel-library handle of the calling thread for the current device, bound to the thread's current
// stream of it (streams.h).
mluopHandle_t handle();

// The kernel library's dtype for a PyTorch dtype; nullopt when it has none (complex, quantized, ...).
std::optional<mluopDataType_t> toMluDtype(at::ScalarType type);

// A tensor descriptor (RAII) for a tensor's dtype, sizes and strides (a 0-d tensor is 0-d).
class Descriptor {
 public:
  explicit Descriptor(const at::Tensor& t);
  // Sizes and strides given explicitly (e.g. a view the kernel sees another way).
  Descriptor(const at::Tensor& t, at::IntArrayRef sizes, at::IntArrayRef strides);
  ~Descriptor();
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  mluopTensorDescriptor_t get() const { return desc_; }

 private:
  mluopTensorDescriptor_t desc_ = nullptr;
};

// Copies `host` (a CPU tensor of dst's sizes that nothing else holds, e.g. random numbers just drawn) into
// the MLU tensor dst as an op of the current stream: queued, not waited for, as a kernel is; the stream
// releases host once it has been copied.
void queueCopyFromHost(const at::Tensor& dst, at::Tensor host);

// Whether a tensor lives on the simulated MLU.
inline bool isMlu(const at::Tensor& t) { return t.defined() && t.device().type() == kDeviceType; }

}  // namespace torch_mlu
