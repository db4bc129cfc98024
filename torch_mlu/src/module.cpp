// module.cpp — the torch_mlu operator namespace the Python package calls (torch.ops.torch_mlu.*): device
// count, synchronize, the caching allocator's figures and empty_cache, streams and events, and the ops that
// fell back to the CPU.
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "caching_allocator.h"
#include "fallback.h"
#include "framework_ops.h"
#include "mlu_context.h"
#include "opscope.h"
#include "streams.h"

#include "../../runtime/common/no_destructor.h"

namespace torch_mlu {
namespace {

int64_t deviceCountOp() { return deviceCount(); }

void synchronizeOp() { checkRuntime(mlurtDeviceSynchronize(), "mlurtDeviceSynchronize"); }

// The Python program has ended (its atexit handlers run): under opscope, the tools write their results
// now, before the interpreter's teardown frees what the program still held (opscope.h).
void programEndOp() {
  stopAttribution();
  opscope_program_end();
}

void emptyCacheOp() { emptyCache(); }

int checkedDevice(int64_t device) {
  TORCH_CHECK(device >= 0 && device < deviceCount(), "torch_mlu: no MLU ", device);
  return static_cast<int>(device);
}

// The caching allocator's figures for a device: [allocated, reserved, peak allocated, segments] in bytes.
std::vector<int64_t> memoryStatsOp(int64_t device) {
  const MemoryStats s = memoryStats(checkedDevice(device));
  return {static_cast<int64_t>(s.allocated), static_cast<int64_t>(s.reserved),
          static_cast<int64_t>(s.peak_allocated), static_cast<int64_t>(s.segments)};
}

// Streams and events for torch.mlu.Stream / torch.mlu.Event (streams.h): a stream is a device index and a
// stream id, an event the id of an MLU notifier held here until the Python object goes.
// torch.mlu.set_device / current_device: the calling thread's current MLU (the runtime's), where tensors
// made without an index go.
void setDeviceOp(int64_t device) { checkRuntime(mlurtSetDevice(checkedDevice(device)), "mlurtSetDevice"); }
int64_t currentDeviceOp() { return currentDevice(); }

int64_t currentStreamOp(int64_t device) { return currentStreamId(checkedDevice(device)); }
int64_t setStreamOp(int64_t device, int64_t stream) {
  return exchangeStreamId(checkedDevice(device), stream);
}
int64_t poolStreamOp(int64_t device) { return nextPoolStream(checkedDevice(device)); }
bool streamQueryOp(int64_t device, int64_t stream) { return streamIdle(checkedDevice(device), stream); }
void streamSynchronizeOp(int64_t device, int64_t stream) { synchronizeStream(checkedDevice(device), stream); }

class Events {
 public:
  int64_t create(bool timing) {
    mlurtNotifier_t n = nullptr;
    checkRuntime(mlurtNotifierCreate(&n, timing ? MLURT_NOTIFIER_DEFAULT : MLURT_NOTIFIER_DISABLE_TIMING),
                 "mlurtNotifierCreate");
    std::lock_guard lock(mutex_);
    notifiers_[++last_] = n;
    return last_;
  }
  mlurtNotifier_t get(int64_t id) {
    std::lock_guard lock(mutex_);
    auto it = notifiers_.find(id);
    TORCH_CHECK(it != notifiers_.end(), "torch_mlu: no event ", id);
    return it->second;
  }
  void destroy(int64_t id) {
    std::lock_guard lock(mutex_);
    if (auto it = notifiers_.find(id); it != notifiers_.end()) {
      mlurtNotifierDestroy(it->second);
      notifiers_.erase(it);
    }
  }

 private:
  std::mutex mutex_;
  std::map<int64_t, mlurtNotifier_t> notifiers_;
  int64_t last_ = 0;
};

Events& events() {
  static mlu::NoDestructor<Events> instance;  // Python may drop an Event during its teardown
  return instance.get();
}

int64_t eventCreateOp(bool timing) { return events().create(timing); }
void eventDestroyOp(int64_t event) { events().destroy(event); }
void eventRecordOp(int64_t event, int64_t device, int64_t stream) {
  checkRuntime(mlurtPlaceNotifier(events().get(event), queueOf(checkedDevice(device), stream)),
               "mlurtPlaceNotifier");
}
void eventWaitOp(int64_t event, int64_t device, int64_t stream) {
  checkRuntime(mlurtQueueWaitNotifier(queueOf(checkedDevice(device), stream), events().get(event)),
               "mlurtQueueWaitNotifier");
}
bool eventQueryOp(int64_t event) { return mlurtNotifierQuery(events().get(event)) == MLURT_SUCCESS; }
void eventSynchronizeOp(int64_t event) {
  checkRuntime(mlurtNotifierSync(events().get(event)), "mlurtNotifierSync");
}
double eventElapsedOp(int64_t start, int64_t end) {
  float ms = 0;
  checkRuntime(mlurtNotifierElapsedTime(&ms, events().get(start), events().get(end)),
               "mlurtNotifierElapsedTime");
  return ms;
}

// Tensor.record_stream for an MLU tensor.
void recordStreamOp(const at::Tensor& t, int64_t stream) {
  TORCH_CHECK(isMlu(t), "torch_mlu: record_stream of a tensor that is not on an MLU");
  recordStream(t.storage().data(), t.device().index(), stream);
}

// "name count" lines, one per op that fell back.
std::string fallbackOpsOp() {
  std::string out;
  for (const auto& [name, count] : fallbackCounts()) out += name + " " + std::to_string(count) + "\n";
  return out;
}

TORCH_LIBRARY(torch_mlu, m) {
  m.def("device_count", &deviceCountOp);
  m.def("synchronize", &synchronizeOp);
  m.def("set_device", &setDeviceOp);
  m.def("current_device", &currentDeviceOp);
  m.def("fallback_ops", &fallbackOpsOp);
  m.def("program_end", &programEndOp);
  m.def("empty_cache", &emptyCacheOp);
  m.def("memory_stats", &memoryStatsOp);
  m.def("current_stream", &currentStreamOp);
  m.def("set_stream", &setStreamOp);
  m.def("pool_stream", &poolStreamOp);
  m.def("stream_query", &streamQueryOp);
  m.def("stream_synchronize", &streamSynchronizeOp);
  m.def("event_create", &eventCreateOp);
  m.def("event_destroy", &eventDestroyOp);
  m.def("event_record", &eventRecordOp);
  m.def("event_wait", &eventWaitOp);
  m.def("event_query", &eventQueryOp);
  m.def("event_synchronize", &eventSynchronizeOp);
  m.def("event_elapsed_time", &eventElapsedOp);
  m.def("record_stream", &recordStreamOp);
}

}  // namespace
}  // namespace torch_mlu
