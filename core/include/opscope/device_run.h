// device_run.h — an op run again on the device by a tool, from its argument struct, on device memory of the
// tool's own: what the dtype cast (OP_DTYPE_CAST: an op run in float32 in place of float16 or bfloat16) and
// the perturbation check (OP_PERTURB: an op run again on perturbed inputs) do.
//
// The op is called through the real kernel library's entry point (the next definition after libopscope.so,
// runtime_access.h), with descriptors made for the call, so that no tool sees it as a call of the program.
// Device memory comes from the runtime under the hook's recursion guard (a tool's own calls are not seen),
// and is counted as opscope's own (own_memory.h).
#pragma once

#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <mlu/op_args.h>

#include <cstddef>
#include <string>

namespace opscope {

// Calls op's entry point of the real kernel library with *args (op's argument struct) on handle, and returns
// its status (the op is enqueued on the handle's queue, as any call of it). Throws std::runtime_error when
// the library has no such entry point.
mluopStatus_t invokeOnDevice(mluopHandle_t handle, mlu::OpId op, const void* args);

template <typename Args>
mluopStatus_t invokeOnDevice(mluopHandle_t handle, const Args& args) {
  return invokeOnDevice(handle, mlu::opIdOf<Args>(), &args);
}

// The kernel library's message for the last failed call on this thread ("" when it has none).
std::string lastDeviceError();

// Device memory a tool holds for its own work, freed when it ends. The caller makes sure the device is done
// with it first (syncs the queue that uses it).
class DeviceScratch {
 public:
  DeviceScratch() = default;
  // bytes on device (the current device of the thread); 0 holds nothing. Throws std::runtime_error when the
  // runtime refuses (out of device memory).
  DeviceScratch(int device, std::size_t bytes);
  DeviceScratch(DeviceScratch&& other) noexcept { *this = std::move(other); }
  DeviceScratch& operator=(DeviceScratch&& other) noexcept;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch() { release(); }
  void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void release();
  void* data_ = nullptr;
  std::size_t size_ = 0;
  int device_ = 0;
};

}  // namespace opscope
