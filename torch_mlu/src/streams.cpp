#include "streams.h"

#include <c10/util/Exception.h>

#include <array>
#include <map>
#include <mutex>

#include "../../runtime/common/no_destructor.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

// The queues of every device's stream pool, made on first use and never destroyed (PyTorch may use a
// stream during the interpreter's teardown).
class StreamPool {
 public:
  mlurtQueue_t queue(int device, c10::StreamId id) {
    TORCH_CHECK(id >= 0 && id <= kStreamPoolSize, "torch_mlu: no stream ", id, " on MLU ", device,
                " (streams are 0, the default queue, to ", kStreamPoolSize, ")");
    std::lock_guard lock(mutex_);
    Device& d = devices_[device];
    mlurtQueue_t& q = d.queues[static_cast<std::size_t>(id)];
    if (q != nullptr) return q;
    if (id == 0) {
      checkRuntime(mlurtQueueGetDefault(device, &q), "mlurtQueueGetDefault");
      return q;
    }
    // mlurtQueueCreate makes the queue on the current device.
    int current = 0;
    checkRuntime(mlurtGetDevice(&current), "mlurtGetDevice");
    checkRuntime(mlurtSetDevice(device), "mlurtSetDevice");
    const mlurtStatus_t status = mlurtQueueCreate(&q);
    mlurtSetDevice(current);
    if (status != MLURT_SUCCESS) q = nullptr;
    checkRuntime(status, "mlurtQueueCreate");
    return q;
  }
  c10::StreamId next(int device) {
    std::lock_guard lock(mutex_);
    Device& d = devices_[device];
    d.next = d.next % kStreamPoolSize + 1;
    return d.next;
  }

 private:
  struct Device {
    std::array<mlurtQueue_t, kStreamPoolSize + 1> queues{};
    c10::StreamId next = 0;
  };
  std::mutex mutex_;
  std::map<int, Device> devices_;
};

StreamPool& pool() {
  static mlu::NoDestructor<StreamPool> instance;
  return instance.get();
}

// The calling thread's current stream per device (MLU_SIM_DEVICE_COUNT is at most 64).
constexpr int kMaxDevices = 64;
thread_local std::array<c10::StreamId, kMaxDevices> t_current{};

// A device index as PyTorch may give it (-1: the current device), checked.
int checkDevice(int device) {
  if (device < 0) device = currentDevice();
  TORCH_CHECK(device < kMaxDevices, "torch_mlu: no MLU ", device);
  return device;
}

}  // namespace

mlurtQueue_t queueOf(int device, c10::StreamId id) {
  device = checkDevice(device);
  return pool().queue(device, id);
}

c10::StreamId currentStreamId(int device) {
  device = checkDevice(device);
  return t_current[static_cast<std::size_t>(device)];
}

c10::StreamId exchangeStreamId(int device, c10::StreamId id) {
  device = checkDevice(device);
  TORCH_CHECK(id >= 0 && id <= kStreamPoolSize, "torch_mlu: no stream ", id, " on MLU ", device);
  const c10::StreamId old = t_current[static_cast<std::size_t>(device)];
  t_current[static_cast<std::size_t>(device)] = id;
  return old;
}

c10::StreamId nextPoolStream(int device) {
  device = checkDevice(device);
  return pool().next(device);
}

bool streamIdle(int device, c10::StreamId id) {
  return mlurtQueueQuery(queueOf(device, id)) == MLURT_SUCCESS;
}

void synchronizeStream(int device, c10::StreamId id) {
  checkRuntime(mlurtQueueSync(queueOf(device, id)), "mlurtQueueSync");
}

mlurtQueue_t currentQueue() {
  const int device = currentDevice();
  return queueOf(device, currentStreamId(device));
}

}  // namespace torch_mlu
