// A device queue: tasks run in order by a worker thread of the queue's own.
#pragma once

#include <mlu/mlurt.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace mlurt {

// One unit of device work. body returns MLURT_SUCCESS or an error status; a kernel may add a message with
// mlurtKernelSetErrorMessage while it runs.
struct Task {
  mlurtActivityKind_t kind = MLURT_ACTIVITY_KERNEL;
  std::string name;
  std::function<mlurtStatus_t()> body;
  std::size_t bytes = 0;
  std::uint64_t correlation = 0;  // set by enqueue from the calling thread's correlation id
};

// Reports each finished task (activity callback and device counters); installed by the runtime.
using TaskObserver = std::function<void(const mlurtActivityRecord_t&)>;

class Queue {
 public:
  Queue(int device, std::uint64_t id, bool is_default, TaskObserver observer);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  int device() const { return device_; }
  std::uint64_t id() const { return id_; }
  bool isDefault() const { return is_default_; }

  // Appends a task; *task_id (may be null) receives its process-wide id. Fails once the queue stopped.
  mlurtStatus_t enqueue(Task task, std::uint64_t* task_id = nullptr);
  // Appends a task and waits until it has run; returns the task's own status (records its error).
  mlurtStatus_t run(Task task);
  // Waits until everything enqueued before the call has run; returns (and clears) the sticky error.
  mlurtStatus_t sync();
  // Waits until everything enqueued before the call has run, leaving a sticky error for the next sync.
  // Does nothing when called from this queue's own worker.
  void waitIdle();
  // SUCCESS when idle, NOT_READY when busy, or the sticky error (cleared).
  mlurtStatus_t query();
  // Lets the worker finish every queued task, then joins it. Later enqueues fail with SHUTDOWN.
  // With join = false only asks the worker to stop after draining.
  void stop(bool join);

  // True when called from this queue's own worker thread (a host function or kernel on it).
  bool onWorker() const;

 private:
  struct Failure {
    mlurtStatus_t status;
    std::string message;
    std::uint64_t more = 0;  // failures after the first, before it was reported
  };

  void workerLoop();
  // Waits (spinning briefly, then sleeping) until completed_ >= position; returns with mutex_ held.
  void waitCompleted(std::uint64_t position, std::unique_lock<std::mutex>& lock);
  void pushLocked(std::uint64_t task_id, Task task);  // requires mutex_; wakes the worker if it sleeps
  mlurtStatus_t takeFailure();                        // requires mutex_

  const int device_;
  const std::uint64_t id_;
  const bool is_default_;
  const TaskObserver observer_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<std::pair<std::uint64_t, Task>> tasks_;  // (task id, task)
  // Written under mutex_, read without it by the short spins that save a sleep/wake round trip.
  std::atomic<std::uint64_t> submitted_{0};  // tasks ever enqueued
  std::atomic<std::uint64_t> completed_{0};  // tasks finished
  std::atomic<bool> stopping_{false};
  std::optional<Failure> failure_;
  bool worker_sleeping_ = false;  // the worker waits on work_ready_
  int waiters_ = 0;               // threads waiting on work_done_
  std::thread worker_;
  std::atomic<std::thread::id> worker_id_{};
};

// The device clock: CLOCK_MONOTONIC (steady_clock) in nanoseconds.
std::uint64_t nowNs();

// The calling thread's correlation id (mlurtSetCorrelationId), given to the tasks it enqueues.
std::uint64_t setCorrelation(std::uint64_t id);
// Tasks the calling thread has enqueued (mlurtGetEnqueuedCount).
std::uint64_t enqueuedCount();

// Sets the message a running kernel attaches to its failure (the worker's thread-local slot).
void setKernelMessage(const char* message);

}  // namespace mlurt
