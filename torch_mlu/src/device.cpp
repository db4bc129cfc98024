// device.cpp — the simulated MLU as PyTorch's PrivateUse1 device: its allocator (the caching allocator's
// device memory, caching_allocator.h) and its device guard (PyTorch's current device is the runtime's current
// device; every PyTorch stream of the device is the device's default queue, the one the kernel library's
// handles use).
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "caching_allocator.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

void freeMemory(void* ptr) { freeDeviceMemory(ptr); }

class MluAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) const override {
    const int device = currentDevice();
    void* ptr = bytes > 0 ? allocateDeviceMemory(bytes, device) : nullptr;
    return {ptr, ptr, &freeMemory, c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(device))};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &freeMemory; }
};

MluAllocator allocator;  // PyTorch's allocator table holds a pointer to it for the life of the process

struct RegisterAllocator {
  RegisterAllocator() { c10::SetAllocator(kDeviceType, &allocator); }
} register_allocator;

class MluGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kDeviceType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (old.index() != d.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return {kDeviceType, static_cast<c10::DeviceIndex>(currentDevice())};
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDeviceType, "torch_mlu: not an MLU device: ", d);
    checkRuntime(mlurtSetDevice(d.index()), "mlurtSetDevice");
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { mlurtSetDevice(d.index()); }

  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(torch_mlu::deviceCount());
  }
  bool queryStream(const c10::Stream& s) const override {
    mlurtQueue_t queue = nullptr;
    checkRuntime(mlurtQueueGetDefault(s.device_index(), &queue), "mlurtQueueGetDefault");
    return mlurtQueueQuery(queue) == MLURT_SUCCESS;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    mlurtQueue_t queue = nullptr;
    checkRuntime(mlurtQueueGetDefault(s.device_index(), &queue), "mlurtQueueGetDefault");
    checkRuntime(mlurtQueueSync(queue), "mlurtQueueSync");
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, MluGuard);

}  // namespace
}  // namespace torch_mlu
