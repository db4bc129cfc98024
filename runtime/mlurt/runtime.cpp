#include "runtime.h"

#include <pthread.h>

#include "errors.h"

#include "../common/no_destructor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

namespace mlurt {
namespace {

// Handles are tagged identifiers, never pointers: a destroyed or made-up handle is always detected and
// identifiers are never reused.
constexpr std::uintptr_t kTagBits = 4;
constexpr std::uintptr_t kQueueTag = 0x5;
constexpr std::uintptr_t kNotifierTag = 0x9;

template <typename Handle>
Handle encode(std::uint64_t id, std::uintptr_t tag) {
  return reinterpret_cast<Handle>((static_cast<std::uintptr_t>(id) << kTagBits) | tag);
}

template <typename Handle>
std::uint64_t decode(Handle handle, std::uintptr_t tag) {
  const auto value = reinterpret_cast<std::uintptr_t>(handle);
  return (value & ((1u << kTagBits) - 1)) == tag ? value >> kTagBits : 0;
}

Config configOrExit() {
  auto loaded = loadConfig([](const char* name) { return std::getenv(name); });
  if (auto* message = std::get_if<std::string>(&loaded)) {
    std::fprintf(stderr, "mlurt: %s\n", message->c_str());
    std::exit(2);
  }
  return std::get<Config>(loaded);
}

// Per thread by contract (as CUDA's and CNRT's current device).
thread_local int tl_current_device = 0;

std::size_t pageSize() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

namespace {
// Set in the child of a fork (pthread_atfork, registered when the runtime loads): written only there, by the
// one thread the child has, before it runs anything else.
std::atomic<bool> g_forked_child{false};
}  // namespace

bool Runtime::inForkedChild() { return g_forked_child.load(std::memory_order_relaxed); }

Runtime& Runtime::get() {
  static mlu::NoDestructor<Runtime> instance(configOrExit());
  return instance.get();
}

Runtime::Runtime(const Config& config) {
  try {
    for (int i = 0; i < config.device_count; ++i) {
      devices_.push_back(std::make_unique<Device>(i, config.cores, config.memory_bytes));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlurt: %s (MLU_SIM_MEMORY_MB or MLU_SIM_DEVICE_COUNT too large?)\n", e.what());
    std::exit(2);
  }
  // Registered from the library's constructor, so it runs after the program's own static destructors.
  std::atexit([] { Runtime::get().shutdown(); });
  pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
}

Device* Runtime::device(int id, const char* function) {
  if (id < 0 || id >= deviceCount()) {
    fail(MLURT_ERROR_INVALID_DEVICE, "{}: device {} does not exist (there are {} devices: 0..{})", function,
         id, deviceCount(), deviceCount() - 1);
    return nullptr;
  }
  return devices_[static_cast<std::size_t>(id)].get();
}

int Runtime::currentDevice() { return tl_current_device; }
void Runtime::setCurrentDevice(int id) { tl_current_device = id; }

void Runtime::observe(Device& device, const mlurtActivityRecord_t& record) {
  device.tasks_run.fetch_add(1, std::memory_order_relaxed);
  std::shared_lock lock(activity_mutex_);
  if (activity_callback_ != nullptr) activity_callback_(&record, activity_user_data_);
}

std::shared_ptr<Queue> Runtime::makeQueue(Device& device, bool is_default) {
  const std::uint64_t id = next_handle_id_++;
  auto queue = std::make_shared<Queue>(
      device.id, id, is_default, [this, &device](const mlurtActivityRecord_t& r) { observe(device, r); });
  queues_.emplace(id, queue);
  return queue;
}

mlurtQueue_t Runtime::handleOf(const Queue& queue) { return encode<mlurtQueue_t>(queue.id(), kQueueTag); }

std::shared_ptr<Queue> Runtime::defaultQueue(int id, const char* function) {
  Device* dev = device(id, function);
  if (dev == nullptr) return nullptr;
  {
    std::shared_lock lock(handles_mutex_);
    if (dev->default_queue) return dev->default_queue;
  }
  std::unique_lock lock(handles_mutex_);
  if (!dev->default_queue) {
    if (shut_down_) {
      fail(MLURT_ERROR_SHUTDOWN, "{}: the runtime has shut down (the process is exiting)", function);
      return nullptr;
    }
    dev->default_queue = makeQueue(*dev, true);
  }
  return dev->default_queue;
}

std::shared_ptr<Queue> Runtime::queue(mlurtQueue_t handle, const char* function) {
  if (handle == nullptr) return defaultQueue(currentDevice(), function);
  const std::uint64_t id = decode(handle, kQueueTag);
  {
    std::shared_lock lock(handles_mutex_);
    auto it = queues_.find(id);
    if (id != 0 && it != queues_.end()) return it->second;
  }
  fail(MLURT_ERROR_INVALID_HANDLE, "{}: queue handle {} is not a live queue (destroyed, or never created)",
       function, static_cast<void*>(handle));
  return nullptr;
}

mlurtStatus_t Runtime::createQueue(int id, mlurtQueue_t* out) {
  Device* dev = device(id, "mlurtQueueCreate");
  if (dev == nullptr) return MLURT_ERROR_INVALID_DEVICE;
  std::unique_lock lock(handles_mutex_);
  if (shut_down_) return fail(MLURT_ERROR_SHUTDOWN, "mlurtQueueCreate: the runtime has shut down");
  *out = handleOf(*makeQueue(*dev, false));
  return MLURT_SUCCESS;
}

mlurtStatus_t Runtime::destroyQueue(mlurtQueue_t handle) {
  if (handle == nullptr) {
    return fail(MLURT_ERROR_INVALID_VALUE, "mlurtQueueDestroy: the default queue (NULL) cannot be destroyed");
  }
  auto q = queue(handle, "mlurtQueueDestroy");
  if (!q) return MLURT_ERROR_INVALID_HANDLE;
  if (q->isDefault()) {
    return fail(MLURT_ERROR_INVALID_VALUE, "mlurtQueueDestroy: queue {} is the default queue of device {}",
                q->id(), q->device());
  }
  if (q->onWorker()) {
    return fail(MLURT_ERROR_NOT_PERMITTED,
                "mlurtQueueDestroy: queue {} cannot be destroyed from its own worker", q->id());
  }
  {
    std::unique_lock lock(handles_mutex_);
    if (queues_.erase(q->id()) == 0) {
      return fail(MLURT_ERROR_INVALID_HANDLE, "mlurtQueueDestroy: queue {} was destroyed meanwhile", q->id());
    }
  }
  q->stop(true);  // drains the queue's work first
  return MLURT_SUCCESS;
}

std::vector<std::shared_ptr<Queue>> Runtime::queuesOf(int id) {
  std::vector<std::shared_ptr<Queue>> result;
  std::shared_lock lock(handles_mutex_);
  for (const auto& [qid, q] : queues_) {
    if (id < 0 || q->device() == id) result.push_back(q);
  }
  return result;
}

void Runtime::waitForWork(int device) {
  for (const auto& q : queuesOf(device)) q->waitIdle();
}

mlurtStatus_t Runtime::createNotifier(bool timing, mlurtNotifier_t* out) {
  std::unique_lock lock(handles_mutex_);
  const std::uint64_t id = next_handle_id_++;
  notifiers_.emplace(id, std::make_shared<Notifier>(timing));
  *out = encode<mlurtNotifier_t>(id, kNotifierTag);
  return MLURT_SUCCESS;
}

mlurtStatus_t Runtime::destroyNotifier(mlurtNotifier_t handle) {
  const std::uint64_t id = decode(handle, kNotifierTag);
  std::unique_lock lock(handles_mutex_);
  if (id == 0 || notifiers_.erase(id) == 0) {
    return fail(
        MLURT_ERROR_INVALID_HANDLE,
        "mlurtNotifierDestroy: notifier handle {} is not a live notifier (destroyed, or never created)",
        static_cast<void*>(handle));
  }
  return MLURT_SUCCESS;
}

std::shared_ptr<Notifier> Runtime::notifier(mlurtNotifier_t handle, const char* function) {
  const std::uint64_t id = decode(handle, kNotifierTag);
  {
    std::shared_lock lock(handles_mutex_);
    auto it = notifiers_.find(id);
    if (id != 0 && it != notifiers_.end()) return it->second;
  }
  fail(MLURT_ERROR_INVALID_HANDLE,
       "{}: notifier handle {} is not a live notifier (destroyed, or never created)", function,
       static_cast<void*>(handle));
  return nullptr;
}

mlurtStatus_t Runtime::hostAllocate(std::size_t size, void** out) {
  const std::size_t length = (size + pageSize() - 1) / pageSize() * pageSize();
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return fail(MLURT_ERROR_OUT_OF_MEMORY, "mlurtHostMalloc: out of host memory for {} bytes: {}", size,
                std::strerror(errno));
  }
  std::lock_guard lock(pinned_mutex_);
  pinned_.emplace(reinterpret_cast<std::uintptr_t>(p), size);
  *out = p;
  return MLURT_SUCCESS;
}

mlurtStatus_t Runtime::hostRelease(void* ptr) {
  std::size_t size = 0;
  {
    std::lock_guard lock(pinned_mutex_);
    auto it = pinned_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it != pinned_.end()) {
      size = it->second;
      pinned_.erase(it);
    }
  }
  if (size == 0) {
    const bool device = attributes(ptr).type == MLURT_MEMORY_DEVICE;
    return fail(MLURT_ERROR_INVALID_POINTER, "mlurtHostFree: {} is not live pinned memory ({})", ptr,
                device ? "it is device memory: use mlurtFree" : "double free, or not from mlurtHostMalloc");
  }
  const std::size_t length = (size + pageSize() - 1) / pageSize() * pageSize();
  munmap(ptr, length);
  return MLURT_SUCCESS;
}

mlurtPointerAttributes_t Runtime::attributes(const void* ptr) {
  mlurtPointerAttributes_t a{MLURT_MEMORY_UNKNOWN, -1, nullptr, 0};
  if (ptr == nullptr) return a;
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  for (const auto& dev : devices_) {
    if (!dev->memory.inRange(p)) continue;
    a.device = dev->id;
    if (auto alloc = dev->memory.find(p)) {
      a.type = MLURT_MEMORY_DEVICE;
      a.base = reinterpret_cast<void*>(alloc->base);
      a.size = alloc->size;
    }
    return a;
  }
  {
    std::lock_guard lock(pinned_mutex_);
    auto after = pinned_.upper_bound(p);
    if (after != pinned_.begin()) {
      auto it = std::prev(after);
      if (p < it->first + it->second) {
        a.type = MLURT_MEMORY_PINNED;
        a.base = reinterpret_cast<void*>(it->first);
        a.size = it->second;
        return a;
      }
    }
  }
  a.type = MLURT_MEMORY_HOST;
  return a;
}

void Runtime::setActivityCallback(mlurtActivityCallback_t callback, void* user_data) {
  std::unique_lock lock(activity_mutex_);
  activity_callback_ = callback;
  activity_user_data_ = user_data;
}

void Runtime::shutdown() {
  if (inForkedChild()) return;  // the parent's workers are not in this process: nothing to stop or join
  std::vector<std::shared_ptr<Queue>> all;
  {
    std::unique_lock lock(handles_mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    for (const auto& [id, q] : queues_) all.push_back(q);
  }
  // Ask every worker to stop first, so that queues waiting on each other's notifiers all keep draining.
  for (const auto& q : all) q->stop(false);
  for (const auto& q : all) q->stop(true);
}

}  // namespace mlurt

// Load the configuration (and stop on a malformed one) before main, as the environment contract says.
__attribute__((constructor)) static void mlurtLoad() { mlurt::Runtime::get(); }
