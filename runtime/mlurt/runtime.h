// The process-wide state of the simulated MLU: devices, the queue and notifier handle tables, pinned host
// memory and the activity callback.
#pragma once

#include "config.h"
#include "device_memory.h"
#include "notifier.h"
#include "queue.h"

#include <mlu/mlurt.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlurt {

struct Device {
  Device(int id_, int cores_, std::size_t memory_bytes) : id(id_), cores(cores_), memory(id_, memory_bytes) {}
  const int id;
  const int cores;
  DeviceMemory memory;
  std::atomic<std::uint64_t> tasks_run{0};
  std::shared_ptr<Queue> default_queue;  // created on first use; guarded by Runtime's handle mutex
};

class Runtime {
 public:
  // The one runtime of the process. Created when the library is loaded and never destroyed, so programs
  // may still call the runtime from their own static destructors; its worker threads are stopped at exit.
  static Runtime& get();

  explicit Runtime(const Config& config);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int deviceCount() const { return static_cast<int>(devices_.size()); }
  // The device, or nullptr after recording MLURT_ERROR_INVALID_DEVICE.
  Device* device(int id, const char* function);
  // The calling thread's current device.
  static int currentDevice();
  static void setCurrentDevice(int id);

  // Queues. A null handle means the default queue of the current device. Failures are recorded as the
  // calling thread's last error and give nullptr.
  std::shared_ptr<Queue> queue(mlurtQueue_t handle, const char* function);
  std::shared_ptr<Queue> defaultQueue(int device, const char* function);
  mlurtStatus_t createQueue(int device, mlurtQueue_t* out);
  mlurtStatus_t destroyQueue(mlurtQueue_t handle);
  // Queues of a device (-1: of every device).
  std::vector<std::shared_ptr<Queue>> queuesOf(int device);
  // Waits for the work already queued on a device (-1: on every device), as a free must.
  void waitForWork(int device);
  static mlurtQueue_t handleOf(const Queue& queue);

  // Notifiers, with the same conventions.
  mlurtStatus_t createNotifier(bool timing, mlurtNotifier_t* out);
  mlurtStatus_t destroyNotifier(mlurtNotifier_t handle);
  std::shared_ptr<Notifier> notifier(mlurtNotifier_t handle, const char* function);

  // Pinned host memory.
  mlurtStatus_t hostAllocate(std::size_t size, void** out);
  mlurtStatus_t hostRelease(void* ptr);

  // What ptr points to.
  mlurtPointerAttributes_t attributes(const void* ptr);

  void setActivityCallback(mlurtActivityCallback_t callback, void* user_data);

  // Drains every queue and joins the workers; afterwards work can no longer be enqueued. Nothing in a forked
  // child, which has none of the parent's workers to join.
  void shutdown();

  // Whether this process is a child forked (without exec) from one where the runtime had loaded: its
  // queues' worker threads, devices and locks are the parent's, copied at an instant, and cannot work, so
  // every call of the API fails with MLURT_ERROR_NOT_PERMITTED saying so (CUDA's rule for a forked child)
  // instead of waiting for ever on a worker that does not exist.
  static bool inForkedChild();

 private:
  void observe(Device& device, const mlurtActivityRecord_t& record);
  std::shared_ptr<Queue> makeQueue(Device& device, bool is_default);

  std::vector<std::unique_ptr<Device>> devices_;

  std::shared_mutex handles_mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Queue>> queues_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Notifier>> notifiers_;
  std::uint64_t next_handle_id_ = 1;
  bool shut_down_ = false;

  std::mutex pinned_mutex_;
  std::map<std::uintptr_t, std::size_t> pinned_;  // base -> size asked for

  // Held shared while a callback runs, so that after mlurtSetActivityCallback returns the old callback is
  // no longer running.
  std::shared_mutex activity_mutex_;
  mlurtActivityCallback_t activity_callback_ = nullptr;
  void* activity_user_data_ = nullptr;
};

}  // namespace mlurt
