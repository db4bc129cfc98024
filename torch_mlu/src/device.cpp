// device.cpp — the simulated MLU as PyTorch's PrivateUse1 device: its allocator (the caching allocator's
// device memory, caching_allocator.h) and its device guard (PyTorch's current device is the runtime's
// current device; its streams are MLU queues and its events MLU notifiers: streams.h).
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "caching_allocator.h"
#include "mlu_context.h"
#include "streams.h"

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

// A stream of d (a device without an index is the current device).
c10::Stream streamOf(c10::Device d, c10::StreamId id) {
  const auto index = d.has_index() ? d.index() : static_cast<c10::DeviceIndex>(currentDevice());
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index), id);
}

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

  // Streams: each an MLU queue (streams.h); the current one per thread and device.
  c10::Stream getStream(c10::Device d) const noexcept override {
    return streamOf(d, currentStreamId(d.index()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return streamOf(d, 0); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    return streamOf(d, nextPoolStream(d.index()));
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return streamOf(s.device(), exchangeStreamId(s.device_index(), s.id()));
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(torch_mlu::deviceCount());
  }
  bool queryStream(const c10::Stream& s) const override { return streamIdle(s.device_index(), s.id()); }
  void synchronizeStream(const c10::Stream& s) const override {
    torch_mlu::synchronizeStream(s.device_index(), s.id());
  }

  // Events: MLU notifiers, made at their first record (PyTorch's default: without timestamps).
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device == -1 || device == s.device_index(), "torch_mlu: an event of MLU ", device,
                " recorded on a stream of MLU ", s.device_index());
    auto* notifier = reinterpret_cast<mlurtNotifier_t*>(event);
    if (*notifier == nullptr) {
      const unsigned flags =
          flag == c10::EventFlag::BACKEND_DEFAULT ? MLURT_NOTIFIER_DEFAULT : MLURT_NOTIFIER_DISABLE_TIMING;
      checkRuntime(mlurtNotifierCreate(notifier, flags), "mlurtNotifierCreate");
    }
    checkRuntime(mlurtPlaceNotifier(*notifier, queueOf(s.device_index(), s.id())), "mlurtPlaceNotifier");
  }
  void block(void* event, const c10::Stream& s) const override {
    if (event == nullptr) return;
    checkRuntime(
        mlurtQueueWaitNotifier(queueOf(s.device_index(), s.id()), static_cast<mlurtNotifier_t>(event)),
        "mlurtQueueWaitNotifier");
  }
  bool queryEvent(void* event) const override {
    return event == nullptr || mlurtNotifierQuery(static_cast<mlurtNotifier_t>(event)) == MLURT_SUCCESS;
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    if (event != nullptr) mlurtNotifierDestroy(static_cast<mlurtNotifier_t>(event));
  }
  // A tensor used on another stream than the one it was allocated on (Tensor.record_stream, autograd):
  // its memory is not handed out again until that stream has done what it was given so far.
  void recordDataPtrOnStream(const c10::DataPtr& data, const c10::Stream& s) const override {
    recordStream(data.get(), s.device_index(), s.id());
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, MluGuard);

}  // namespace
}  // namespace torch_mlu
