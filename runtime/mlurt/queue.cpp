#include "queue.h"

#include "errors.h"

#include <chrono>
#include <exception>
#include <utility>

namespace mlurt {
namespace {

// Process-wide task ids, so activity records and launches can be matched across queues.
std::atomic<std::uint64_t> g_next_task_id{1};

// The message the running kernel of this worker thread attached to its failure.
thread_local std::string tl_kernel_message;

// The id tasks enqueued by this thread are tagged with (mlurtSetCorrelationId).
thread_local std::uint64_t tl_correlation = 0;
// Tasks this thread has enqueued.
thread_local std::uint64_t tl_enqueued = 0;

}  // namespace

std::uint64_t nowNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

namespace {

// Spins (with a pause hint) while done() is false, for at most kSpinNs.
template <typename Done>
void spinUntil(Done done) {
  constexpr std::uint64_t kSpinNs = 20'000;
  const std::uint64_t deadline = nowNs() + kSpinNs;
  for (unsigned i = 1;; ++i) {
    if (done()) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 0 && nowNs() > deadline) return;
  }
}

}  // namespace

std::uint64_t setCorrelation(std::uint64_t id) { return std::exchange(tl_correlation, id); }
std::uint64_t enqueuedCount() { return tl_enqueued; }

void setKernelMessage(const char* message) { tl_kernel_message = message == nullptr ? "" : message; }

Queue::Queue(int device, std::uint64_t id, bool is_default, TaskObserver observer)
    : device_(device), id_(id), is_default_(is_default), observer_(std::move(observer)) {
  worker_ = std::thread([this] { workerLoop(); });
}

Queue::~Queue() { stop(true); }

bool Queue::onWorker() const {
  return worker_id_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

void Queue::pushLocked(std::uint64_t task_id, Task task) {
  task.correlation = tl_correlation;
  ++tl_enqueued;
  tasks_.emplace_back(task_id, std::move(task));
  submitted_.store(submitted_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (worker_sleeping_) work_ready_.notify_one();
}

mlurtStatus_t Queue::enqueue(Task task, std::uint64_t* task_id) {
  const std::uint64_t id = g_next_task_id.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  if (stopping_.load(std::memory_order_relaxed)) {
    return fail(MLURT_ERROR_SHUTDOWN,
                "queue {} of device {} has stopped (runtime shut down or queue destroyed)", id_, device_);
  }
  pushLocked(id, std::move(task));
  if (task_id != nullptr) *task_id = id;
  return MLURT_SUCCESS;
}

void Queue::waitCompleted(std::uint64_t position, std::unique_lock<std::mutex>& lock) {
  if (lock.owns_lock()) lock.unlock();
  spinUntil([&] { return completed_.load(std::memory_order_acquire) >= position; });
  lock.lock();
  ++waiters_;
  work_done_.wait(lock, [&] { return completed_.load(std::memory_order_relaxed) >= position; });
  --waiters_;
}

mlurtStatus_t Queue::run(Task task) {
  if (onWorker()) {
    return fail(MLURT_ERROR_NOT_PERMITTED,
                "a synchronous call from a task of queue {} would wait for itself; use the Async form", id_);
  }
  auto result = std::make_shared<std::pair<mlurtStatus_t, std::string>>(MLURT_SUCCESS, std::string());
  auto body = std::move(task.body);
  task.body = [body = std::move(body), result] {
    result->first = body();
    result->second = tl_kernel_message;
    return result->first;
  };
  std::unique_lock lock(mutex_);
  if (stopping_.load(std::memory_order_relaxed)) {
    return fail(MLURT_ERROR_SHUTDOWN, "queue {} of device {} has stopped", id_, device_);
  }
  pushLocked(g_next_task_id.fetch_add(1, std::memory_order_relaxed), std::move(task));
  waitCompleted(submitted_.load(std::memory_order_relaxed), lock);
  if (result->first != MLURT_SUCCESS) return setLastError(result->first, result->second);
  return MLURT_SUCCESS;
}

mlurtStatus_t Queue::takeFailure() {
  if (!failure_) return MLURT_SUCCESS;
  Failure failure = std::move(*failure_);
  failure_.reset();
  if (failure.more > 0) failure.message += fmt::format(" (and {} later task(s) failed too)", failure.more);
  return setLastError(failure.status, std::move(failure.message));
}

mlurtStatus_t Queue::sync() {
  if (onWorker()) {
    return fail(
        MLURT_ERROR_NOT_PERMITTED,
        "queue {} cannot be synchronized from its own worker (a host function or kernel running on it)", id_);
  }
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  waitCompleted(submitted_.load(std::memory_order_acquire), lock);
  return takeFailure();
}

void Queue::waitIdle() {
  if (onWorker()) return;
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  waitCompleted(submitted_.load(std::memory_order_acquire), lock);
}

mlurtStatus_t Queue::query() {
  std::lock_guard lock(mutex_);
  if (failure_) return takeFailure();
  return completed_.load(std::memory_order_relaxed) == submitted_.load(std::memory_order_relaxed)
             ? MLURT_SUCCESS
             : MLURT_ERROR_NOT_READY;
}

void Queue::stop(bool join) {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_relaxed);
    work_ready_.notify_all();
  }
  // A task that calls exit() runs the shutdown on this very worker: it cannot join itself.
  if (join && worker_.joinable() && !onWorker()) worker_.join();
}

void Queue::workerLoop() {
  worker_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  std::unique_lock lock(mutex_);
  for (;;) {
    if (tasks_.empty() && !stopping_.load(std::memory_order_relaxed)) {
      // Work often follows work: spin briefly before paying for a sleep and a wake-up.
      lock.unlock();
      spinUntil([&] {
        return submitted_.load(std::memory_order_acquire) != completed_.load(std::memory_order_relaxed) ||
               stopping_.load(std::memory_order_relaxed);
      });
      lock.lock();
      worker_sleeping_ = true;
      work_ready_.wait(lock, [&] { return !tasks_.empty() || stopping_.load(std::memory_order_relaxed); });
      worker_sleeping_ = false;
    }
    if (tasks_.empty()) break;  // stopping, and drained
    auto [task_id, task] = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();

    tl_kernel_message.clear();
    const std::uint64_t start = nowNs();
    mlurtStatus_t status;
    try {
      status = task.body();
    } catch (const std::exception& e) {
      status = MLURT_ERROR_INTERNAL;
      tl_kernel_message = fmt::format("threw {}", e.what());
    } catch (...) {
      status = MLURT_ERROR_INTERNAL;
      tl_kernel_message = "threw an exception";
    }
    const std::uint64_t end = nowNs();
    if (observer_) {
      const mlurtActivityRecord_t record{
          task.kind, task.name.c_str(), device_, id_, task_id, start, end, task.bytes,
          status,    task.correlation};
      observer_(record);
    }
    std::string message;
    if (status != MLURT_SUCCESS) {
      message = fmt::format("queue {} (device {}): task #{} '{}' failed: {}", id_, device_, task_id,
                            task.name, statusName(status));
      if (!tl_kernel_message.empty()) message += ": " + tl_kernel_message;
    }
    task = Task{};  // release what the task holds (kernel arguments) before reporting completion

    lock.lock();
    if (status != MLURT_SUCCESS) {
      if (failure_) {
        ++failure_->more;
      } else {
        const mlurtStatus_t sticky = status == MLURT_ERROR_INTERNAL ? status : MLURT_ERROR_LAUNCH_FAILED;
        failure_ = Failure{sticky, std::move(message)};
      }
    }
    completed_.store(completed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    if (waiters_ > 0) work_done_.notify_all();
  }
}

}  // namespace mlurt
