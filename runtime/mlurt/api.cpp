// The exported C API of libmlurt: argument checks, then the runtime's objects do the work.
#include "errors.h"
#include "runtime.h"

#include "../common/raw_enum.h"

#include <mlu/mlurt.h>

#include <cstring>
#include <exception>
#include <memory>
#include <new>

using namespace mlurt;
using mlu::rawEnum;

namespace {

// Runs an API body, turning an escaping exception into a status: nothing may unwind into C callers.
template <typename Body>
mlurtStatus_t guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(MLURT_ERROR_OUT_OF_MEMORY, "{}: out of host memory", function);
  } catch (const std::exception& e) {
    return fail(MLURT_ERROR_INTERNAL, "{}: internal error: {}", function, e.what());
  } catch (...) {
    return fail(MLURT_ERROR_INTERNAL, "{}: internal error", function);
  }
}

// In a child forked from a process where the runtime loaded, nothing of the device works (Runtime::
// inForkedChild): each entry point says so instead of waiting on the parent's workers.
mlurtStatus_t forkedChild(const char* function) {
  return fail(MLURT_ERROR_NOT_PERMITTED,
              "{}: the MLU runtime was loaded before this process was forked, so it cannot be used in the "
              "forked child (start the child with exec, or use multiprocessing's 'spawn' method)",
              function);
}
#define MLURT_NOT_IN_FORKED_CHILD(name) \
  if (Runtime::inForkedChild()) return forkedChild(name)

mlurtStatus_t nullArgument(const char* function, const char* argument) {
  return fail(MLURT_ERROR_INVALID_VALUE, "{}: {} is NULL", function, argument);
}

const char* kindName(mlurtMemcpyKind_t kind) {
  switch (kind) {
    case MLURT_MEMCPY_HOST_TO_DEVICE:
      return "H2D";
    case MLURT_MEMCPY_DEVICE_TO_HOST:
      return "D2H";
    case MLURT_MEMCPY_DEVICE_TO_DEVICE:
      return "D2D";
    case MLURT_MEMCPY_HOST_TO_HOST:
      return "H2H";
  }
  return "?";
}

const char* memoryName(const mlurtPointerAttributes_t& a) {
  switch (a.type) {
    case MLURT_MEMORY_HOST:
      return "host memory";
    case MLURT_MEMORY_PINNED:
      return "pinned host memory";
    case MLURT_MEMORY_DEVICE:
      return "device memory";
    case MLURT_MEMORY_UNKNOWN:
      break;
  }
  return a.device >= 0 ? "in a device's range but not allocated (freed?)" : "unknown memory";
}

// Checks that [ptr, ptr + size) is device memory inside one live allocation (want_device) or host memory.
// Returns the device that owns it (or -1 for host memory) through *device.
mlurtStatus_t checkRange(const char* function, const char* what, const void* ptr, std::size_t size,
                         bool want_device, const char* direction, int* device) {
  const mlurtPointerAttributes_t a = Runtime::get().attributes(ptr);
  *device = a.device;
  const bool is_device = a.type == MLURT_MEMORY_DEVICE;
  if (want_device && a.type == MLURT_MEMORY_UNKNOWN && a.device >= 0) {
    return fail(MLURT_ERROR_INVALID_POINTER,
                "{}: {} {} lies in device {}'s memory but in no live allocation "
                "(freed?)",
                function, what, ptr, a.device);
  }
  if (want_device != is_device || (!want_device && a.device >= 0)) {
    if (direction == nullptr) {
      return fail(MLURT_ERROR_INVALID_POINTER, "{}: {} {} is {}, not device memory", function, what, ptr,
                  memoryName(a));
    }
    return fail(MLURT_ERROR_INVALID_MEMCPY_DIRECTION, "{}: direction {} needs {} {} to be {}, but it is {}",
                function, direction, what, ptr, want_device ? "device memory" : "host memory", memoryName(a));
  }
  if (is_device) {
    const std::size_t offset =
        static_cast<std::size_t>(static_cast<const char*>(ptr) - static_cast<const char*>(a.base));
    if (size > a.size - offset) {
      return fail(
          MLURT_ERROR_INVALID_VALUE,
          "{}: {} bytes at offset {} of {} run past the end of its {}-byte allocation at {} (device {})",
          function, size, offset, what, a.size, a.base, a.device);
    }
  }
  return MLURT_SUCCESS;
}

struct CopyPlan {
  mlurtMemcpyKind_t kind = MLURT_MEMCPY_HOST_TO_HOST;
  int device = -1;  // device whose queue performs a synchronous copy; -1: a host-to-host copy
};

mlurtStatus_t planCopy(const char* function, void* dst, const void* src, std::size_t size, int raw_kind,
                       CopyPlan* plan) {
  if (raw_kind < MLURT_MEMCPY_HOST_TO_DEVICE || raw_kind > MLURT_MEMCPY_HOST_TO_HOST) {
    return fail(MLURT_ERROR_INVALID_VALUE, "{}: {} is not a copy direction", function, raw_kind);
  }
  const auto kind = static_cast<mlurtMemcpyKind_t>(raw_kind);
  plan->kind = kind;
  if (dst == nullptr) return nullArgument(function, "dst");
  if (src == nullptr) return nullArgument(function, "src");
  const bool dst_device = kind == MLURT_MEMCPY_HOST_TO_DEVICE || kind == MLURT_MEMCPY_DEVICE_TO_DEVICE;
  const bool src_device = kind == MLURT_MEMCPY_DEVICE_TO_HOST || kind == MLURT_MEMCPY_DEVICE_TO_DEVICE;
  int dst_dev = -1;
  int src_dev = -1;
  if (auto s = checkRange(function, "dst", dst, size, dst_device, kindName(kind), &dst_dev)) return s;
  if (auto s = checkRange(function, "src", src, size, src_device, kindName(kind), &src_dev)) return s;
  plan->device = src_device ? src_dev : dst_dev;
  return MLURT_SUCCESS;
}

Task copyTask(void* dst, const void* src, std::size_t size, mlurtMemcpyKind_t kind) {
  Task task;
  task.kind = MLURT_ACTIVITY_MEMCPY;
  task.name = std::string("memcpy ") + kindName(kind);
  task.bytes = size;
  task.body = [dst, src, size] {
    std::memmove(dst, src, size);
    return MLURT_SUCCESS;
  };
  return task;
}

Task memsetTask(void* ptr, int value, std::size_t size) {
  Task task;
  task.kind = MLURT_ACTIVITY_MEMSET;
  task.name = "memset";
  task.bytes = size;
  task.body = [ptr, value, size] {
    std::memset(ptr, value, size);
    return MLURT_SUCCESS;
  };
  return task;
}

}  // namespace

extern "C" {

// ---- devices ----

MLURT_API mlurtStatus_t mlurtGetDeviceCount(int* count) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtGetDeviceCount");
  if (count == nullptr) return nullArgument("mlurtGetDeviceCount", "count");
  *count = Runtime::get().deviceCount();
  return MLURT_SUCCESS;
}

MLURT_API mlurtStatus_t mlurtSetDevice(int device) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtSetDevice");
  if (Runtime::get().device(device, "mlurtSetDevice") == nullptr) return MLURT_ERROR_INVALID_DEVICE;
  Runtime::setCurrentDevice(device);
  return MLURT_SUCCESS;
}

MLURT_API mlurtStatus_t mlurtGetDevice(int* device) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtGetDevice");
  if (device == nullptr) return nullArgument("mlurtGetDevice", "device");
  *device = Runtime::currentDevice();
  return MLURT_SUCCESS;
}

MLURT_API mlurtStatus_t mlurtGetDeviceProperties(mlurtDeviceProp_t* prop, int device) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtGetDeviceProperties");
  if (prop == nullptr) return nullArgument("mlurtGetDeviceProperties", "prop");
  Device* dev = Runtime::get().device(device, "mlurtGetDeviceProperties");
  if (dev == nullptr) return MLURT_ERROR_INVALID_DEVICE;
  *prop = mlurtDeviceProp_t{};
  fmt::format_to_n(prop->name, sizeof(prop->name) - 1, "MLU-SIM #{}", device);
  prop->device = device;
  prop->coreCount = dev->cores;
  prop->totalMem = dev->memory.capacity();
  prop->memAlignment = kDeviceAlignment;
  prop->addressBase = dev->memory.base();
  prop->addressLimit = dev->memory.base() + dev->memory.capacity();
  return MLURT_SUCCESS;
}

MLURT_API mlurtStatus_t mlurtDeviceSynchronize(void) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtDeviceSynchronize");
  return guarded("mlurtDeviceSynchronize", [] {
    Runtime& rt = Runtime::get();
    const int device = Runtime::currentDevice();
    mlurtStatus_t first = MLURT_SUCCESS;
    std::string message;
    for (const auto& q : rt.queuesOf(device)) {
      const mlurtStatus_t s = q->sync();
      if (s != MLURT_SUCCESS && first == MLURT_SUCCESS) {
        first = s;
        message = mlurtGetLastErrorMessage();
      }
    }
    return first == MLURT_SUCCESS ? first : setLastError(first, std::move(message));
  });
}

MLURT_API mlurtStatus_t mlurtMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtMemGetInfo");
  if (freeBytes == nullptr) return nullArgument("mlurtMemGetInfo", "freeBytes");
  if (totalBytes == nullptr) return nullArgument("mlurtMemGetInfo", "totalBytes");
  Device* dev = Runtime::get().device(Runtime::currentDevice(), "mlurtMemGetInfo");
  const MemoryUsage usage = dev->memory.usage();
  *totalBytes = dev->memory.capacity();
  *freeBytes = *totalBytes - usage.in_use;
  return MLURT_SUCCESS;
}

MLURT_API mlurtStatus_t mlurtDeviceGetCounters(int device, mlurtDeviceCounters_t* counters) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtDeviceGetCounters");
  if (counters == nullptr) return nullArgument("mlurtDeviceGetCounters", "counters");
  Device* dev = Runtime::get().device(device, "mlurtDeviceGetCounters");
  if (dev == nullptr) return MLURT_ERROR_INVALID_DEVICE;
  const MemoryUsage usage = dev->memory.usage();
  counters->bytesInUse = usage.in_use;
  counters->peakBytesInUse = usage.peak;
  counters->liveAllocations = usage.live;
  counters->totalAllocations = usage.total;
  counters->tasksRun = dev->tasks_run.load(std::memory_order_relaxed);
  return MLURT_SUCCESS;
}

// ---- memory ----

MLURT_API mlurtStatus_t mlurtMalloc(void** ptr, size_t size) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtMalloc");
  if (ptr == nullptr) return nullArgument("mlurtMalloc", "ptr");
  *ptr = nullptr;
  if (size == 0) return MLURT_SUCCESS;
  return guarded("mlurtMalloc", [&] {
    return Runtime::get().device(Runtime::currentDevice(), "mlurtMalloc")->memory.allocate(size, ptr);
  });
}

MLURT_API mlurtStatus_t mlurtFree(void* ptr) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtFree");
  if (ptr == nullptr) return MLURT_SUCCESS;
  return guarded("mlurtFree", [&] {
    Runtime& rt = Runtime::get();
    const mlurtPointerAttributes_t a = rt.attributes(ptr);
    if (a.device < 0) {
      return fail(MLURT_ERROR_INVALID_POINTER, "mlurtFree: {} is {}, not device memory{}", ptr, memoryName(a),
                  a.type == MLURT_MEMORY_PINNED ? " (use mlurtHostFree)" : "");
    }
    if (a.type == MLURT_MEMORY_DEVICE) rt.waitForWork(a.device);  // queued work may still use the memory
    return rt.device(a.device, "mlurtFree")->memory.release(ptr);
  });
}

MLURT_API mlurtStatus_t mlurtHostMalloc(void** ptr, size_t size) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtHostMalloc");
  if (ptr == nullptr) return nullArgument("mlurtHostMalloc", "ptr");
  *ptr = nullptr;
  if (size == 0) return MLURT_SUCCESS;
  return guarded("mlurtHostMalloc", [&] { return Runtime::get().hostAllocate(size, ptr); });
}

MLURT_API mlurtStatus_t mlurtHostFree(void* ptr) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtHostFree");
  if (ptr == nullptr) return MLURT_SUCCESS;
  return guarded("mlurtHostFree", [&] {
    Runtime& rt = Runtime::get();
    if (rt.attributes(ptr).type == MLURT_MEMORY_PINNED) rt.waitForWork(-1);  // async copies may still use it
    return rt.hostRelease(ptr);
  });
}

MLURT_API mlurtStatus_t mlurtPointerGetAttributes(mlurtPointerAttributes_t* attributes, const void* ptr) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtPointerGetAttributes");
  if (attributes == nullptr) return nullArgument("mlurtPointerGetAttributes", "attributes");
  *attributes = Runtime::get().attributes(ptr);
  return MLURT_SUCCESS;
}

MLURT_API mlurtStatus_t mlurtMemcpy(void* dst, const void* src, size_t size, mlurtMemcpyKind_t kind) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtMemcpy");
  const int raw_kind = rawEnum(kind);
  return guarded("mlurtMemcpy", [&] {
    if (size == 0) return MLURT_SUCCESS;
    CopyPlan plan;
    if (auto s = planCopy("mlurtMemcpy", dst, src, size, raw_kind, &plan)) return s;
    if (plan.device < 0) {
      std::memmove(dst, src, size);
      return MLURT_SUCCESS;
    }
    auto q = Runtime::get().defaultQueue(plan.device, "mlurtMemcpy");
    return q ? q->run(copyTask(dst, src, size, plan.kind)) : mlurtPeekAtLastError();
  });
}

MLURT_API mlurtStatus_t mlurtMemcpyAsync(void* dst, const void* src, size_t size, mlurtQueue_t queue,
                                         mlurtMemcpyKind_t kind) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtMemcpyAsync");
  const int raw_kind = rawEnum(kind);
  return guarded("mlurtMemcpyAsync", [&] {
    auto q = Runtime::get().queue(queue, "mlurtMemcpyAsync");
    if (!q) return mlurtPeekAtLastError();
    if (size == 0) return MLURT_SUCCESS;
    CopyPlan plan;
    if (auto s = planCopy("mlurtMemcpyAsync", dst, src, size, raw_kind, &plan)) return s;
    return q->enqueue(copyTask(dst, src, size, plan.kind));
  });
}

MLURT_API mlurtStatus_t mlurtMemset(void* ptr, int value, size_t size) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtMemset");
  return guarded("mlurtMemset", [&] {
    if (size == 0) return MLURT_SUCCESS;
    if (ptr == nullptr) return nullArgument("mlurtMemset", "ptr");
    int device = -1;
    if (auto s = checkRange("mlurtMemset", "ptr", ptr, size, true, nullptr, &device)) return s;
    auto q = Runtime::get().defaultQueue(device, "mlurtMemset");
    return q ? q->run(memsetTask(ptr, value, size)) : mlurtPeekAtLastError();
  });
}

MLURT_API mlurtStatus_t mlurtMemsetAsync(void* ptr, int value, size_t size, mlurtQueue_t queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtMemsetAsync");
  return guarded("mlurtMemsetAsync", [&] {
    auto q = Runtime::get().queue(queue, "mlurtMemsetAsync");
    if (!q) return mlurtPeekAtLastError();
    if (size == 0) return MLURT_SUCCESS;
    if (ptr == nullptr) return nullArgument("mlurtMemsetAsync", "ptr");
    int device = -1;
    if (auto s = checkRange("mlurtMemsetAsync", "ptr", ptr, size, true, nullptr, &device)) return s;
    return q->enqueue(memsetTask(ptr, value, size));
  });
}

// ---- queues ----

MLURT_API mlurtStatus_t mlurtQueueCreate(mlurtQueue_t* queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueCreate");
  if (queue == nullptr) return nullArgument("mlurtQueueCreate", "queue");
  return guarded("mlurtQueueCreate",
                 [&] { return Runtime::get().createQueue(Runtime::currentDevice(), queue); });
}

MLURT_API mlurtStatus_t mlurtQueueDestroy(mlurtQueue_t queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueDestroy");
  return guarded("mlurtQueueDestroy", [&] { return Runtime::get().destroyQueue(queue); });
}

MLURT_API mlurtStatus_t mlurtQueueSync(mlurtQueue_t queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueSync");
  return guarded("mlurtQueueSync", [&] {
    auto q = Runtime::get().queue(queue, "mlurtQueueSync");
    return q ? q->sync() : mlurtPeekAtLastError();
  });
}

MLURT_API mlurtStatus_t mlurtQueueQuery(mlurtQueue_t queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueQuery");
  return guarded("mlurtQueueQuery", [&] {
    auto q = Runtime::get().queue(queue, "mlurtQueueQuery");
    return q ? q->query() : mlurtPeekAtLastError();
  });
}

MLURT_API mlurtStatus_t mlurtQueueGetDefault(int device, mlurtQueue_t* queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueGetDefault");
  if (queue == nullptr) return nullArgument("mlurtQueueGetDefault", "queue");
  return guarded("mlurtQueueGetDefault", [&] {
    auto q = Runtime::get().defaultQueue(device, "mlurtQueueGetDefault");
    if (!q) return mlurtPeekAtLastError();
    *queue = Runtime::handleOf(*q);
    return MLURT_SUCCESS;
  });
}

MLURT_API mlurtStatus_t mlurtQueueGetDevice(mlurtQueue_t queue, int* device) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueGetDevice");
  if (device == nullptr) return nullArgument("mlurtQueueGetDevice", "device");
  return guarded("mlurtQueueGetDevice", [&] {
    auto q = Runtime::get().queue(queue, "mlurtQueueGetDevice");
    if (!q) return mlurtPeekAtLastError();
    *device = q->device();
    return MLURT_SUCCESS;
  });
}

MLURT_API mlurtStatus_t mlurtQueueGetId(mlurtQueue_t queue, uint64_t* id) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueGetId");
  if (id == nullptr) return nullArgument("mlurtQueueGetId", "id");
  return guarded("mlurtQueueGetId", [&] {
    auto q = Runtime::get().queue(queue, "mlurtQueueGetId");
    if (!q) return mlurtPeekAtLastError();
    *id = q->id();
    return MLURT_SUCCESS;
  });
}

MLURT_API mlurtStatus_t mlurtLaunchHostFunc(mlurtQueue_t queue, mlurtHostFn_t fn, void* userData) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtLaunchHostFunc");
  return guarded("mlurtLaunchHostFunc", [&] {
    auto q = Runtime::get().queue(queue, "mlurtLaunchHostFunc");
    if (!q) return mlurtPeekAtLastError();
    if (fn == nullptr) return nullArgument("mlurtLaunchHostFunc", "fn");
    Task task;
    task.kind = MLURT_ACTIVITY_HOST_FUNC;
    task.name = "host_func";
    task.body = [fn, userData] {
      fn(userData);
      return MLURT_SUCCESS;
    };
    return q->enqueue(std::move(task));
  });
}

MLURT_API mlurtStatus_t mlurtLaunchKernel(mlurtQueue_t queue, const char* name, mlurtKernelFn_t fn,
                                          void* args, mlurtKernelArgsDeleter_t deleter, uint64_t* taskId) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtLaunchKernel");
  return guarded("mlurtLaunchKernel", [&] {
    // The queue owns args from here on, whether the launch succeeds or not.
    std::shared_ptr<void> owned(args, [deleter](void* p) {
      if (deleter != nullptr) deleter(p);
    });
    auto q = Runtime::get().queue(queue, "mlurtLaunchKernel");
    if (!q) return mlurtPeekAtLastError();
    if (name == nullptr) return nullArgument("mlurtLaunchKernel", "name");
    if (fn == nullptr) return nullArgument("mlurtLaunchKernel", "fn");
    Task task;
    task.kind = MLURT_ACTIVITY_KERNEL;
    task.name = name;
    task.body = [fn, owned = std::move(owned)] { return fn(owned.get()); };
    return q->enqueue(std::move(task), taskId);
  });
}

MLURT_API void mlurtKernelSetErrorMessage(const char* message) { setKernelMessage(message); }

// ---- notifiers ----

MLURT_API mlurtStatus_t mlurtNotifierCreate(mlurtNotifier_t* notifier, unsigned int flags) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtNotifierCreate");
  if (notifier == nullptr) return nullArgument("mlurtNotifierCreate", "notifier");
  if ((flags & ~static_cast<unsigned>(MLURT_NOTIFIER_DISABLE_TIMING)) != 0) {
    return fail(MLURT_ERROR_INVALID_VALUE, "mlurtNotifierCreate: unknown flags {:#x}", flags);
  }
  return guarded("mlurtNotifierCreate", [&] {
    return Runtime::get().createNotifier((flags & MLURT_NOTIFIER_DISABLE_TIMING) == 0, notifier);
  });
}

MLURT_API mlurtStatus_t mlurtNotifierDestroy(mlurtNotifier_t notifier) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtNotifierDestroy");
  return guarded("mlurtNotifierDestroy", [&] { return Runtime::get().destroyNotifier(notifier); });
}

MLURT_API mlurtStatus_t mlurtPlaceNotifier(mlurtNotifier_t notifier, mlurtQueue_t queue) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtPlaceNotifier");
  return guarded("mlurtPlaceNotifier", [&] {
    Runtime& rt = Runtime::get();
    auto n = rt.notifier(notifier, "mlurtPlaceNotifier");
    if (!n) return mlurtPeekAtLastError();
    auto q = rt.queue(queue, "mlurtPlaceNotifier");
    if (!q) return mlurtPeekAtLastError();
    const std::uint64_t generation = n->place();
    Task task;
    task.kind = MLURT_ACTIVITY_NOTIFIER;
    task.name = "notifier";
    task.body = [n, generation] {
      n->complete(generation, mlurtGetTimestampNs());
      return MLURT_SUCCESS;
    };
    const mlurtStatus_t s = q->enqueue(std::move(task));
    if (s != MLURT_SUCCESS) n->complete(generation, mlurtGetTimestampNs());  // nobody may wait forever
    return s;
  });
}

MLURT_API mlurtStatus_t mlurtNotifierQuery(mlurtNotifier_t notifier) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtNotifierQuery");
  return guarded("mlurtNotifierQuery", [&] {
    auto n = Runtime::get().notifier(notifier, "mlurtNotifierQuery");
    if (!n) return mlurtPeekAtLastError();
    return n->done() ? MLURT_SUCCESS : MLURT_ERROR_NOT_READY;
  });
}

MLURT_API mlurtStatus_t mlurtNotifierSync(mlurtNotifier_t notifier) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtNotifierSync");
  return guarded("mlurtNotifierSync", [&] {
    auto n = Runtime::get().notifier(notifier, "mlurtNotifierSync");
    if (!n) return mlurtPeekAtLastError();
    n->waitFor(n->placed());
    return MLURT_SUCCESS;
  });
}

MLURT_API mlurtStatus_t mlurtQueueWaitNotifier(mlurtQueue_t queue, mlurtNotifier_t notifier) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtQueueWaitNotifier");
  return guarded("mlurtQueueWaitNotifier", [&] {
    Runtime& rt = Runtime::get();
    auto n = rt.notifier(notifier, "mlurtQueueWaitNotifier");
    if (!n) return mlurtPeekAtLastError();
    auto q = rt.queue(queue, "mlurtQueueWaitNotifier");
    if (!q) return mlurtPeekAtLastError();
    const std::uint64_t generation = n->placed();
    if (generation == 0) return MLURT_SUCCESS;  // never placed: nothing to wait for
    Task task;
    task.kind = MLURT_ACTIVITY_QUEUE_WAIT;
    task.name = "queue_wait";
    task.body = [n, generation] {
      n->waitFor(generation);
      return MLURT_SUCCESS;
    };
    return q->enqueue(std::move(task));
  });
}

MLURT_API mlurtStatus_t mlurtNotifierElapsedTime(float* ms, mlurtNotifier_t start, mlurtNotifier_t end) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtNotifierElapsedTime");
  if (ms == nullptr) return nullArgument("mlurtNotifierElapsedTime", "ms");
  return guarded("mlurtNotifierElapsedTime", [&] {
    Runtime& rt = Runtime::get();
    auto a = rt.notifier(start, "mlurtNotifierElapsedTime");
    if (!a) return mlurtPeekAtLastError();
    auto b = rt.notifier(end, "mlurtNotifierElapsedTime");
    if (!b) return mlurtPeekAtLastError();
    for (const auto* n : {a.get(), b.get()}) {
      const char* which = n == a.get() ? "start" : "end";
      if (!n->timing()) {
        return fail(
            MLURT_ERROR_NOTIFIER_TIMING_DISABLED,
            "mlurtNotifierElapsedTime: the {} notifier was created with MLURT_NOTIFIER_DISABLE_TIMING",
            which);
      }
      const Notifier::Stamp stamp = n->stamp();
      if (stamp.placed == 0) {
        return fail(MLURT_ERROR_NOTIFIER_NOT_PLACED,
                    "mlurtNotifierElapsedTime: the {} notifier was never placed", which);
      }
      if (!stamp.done) {
        return fail(MLURT_ERROR_NOT_READY, "mlurtNotifierElapsedTime: the {} notifier has not completed yet",
                    which);
      }
    }
    const auto a_ns = static_cast<double>(a->stamp().ns);
    const auto b_ns = static_cast<double>(b->stamp().ns);
    *ms = static_cast<float>((b_ns - a_ns) / 1e6);
    return MLURT_SUCCESS;
  });
}

// ---- timing and activity ----

MLURT_API uint64_t mlurtGetTimestampNs(void) { return nowNs(); }

MLURT_API uint64_t mlurtSetCorrelationId(uint64_t id) { return setCorrelation(id); }
MLURT_API uint64_t mlurtGetEnqueuedCount(void) { return enqueuedCount(); }

MLURT_API mlurtStatus_t mlurtSetActivityCallback(mlurtActivityCallback_t callback, void* userData) {
  MLURT_NOT_IN_FORKED_CHILD("mlurtSetActivityCallback");
  Runtime::get().setActivityCallback(callback, userData);
  return MLURT_SUCCESS;
}

}  // extern "C"
