#include "launch.h"

#include "context.h"

#include "../common/no_destructor.h"

#include "../ops/element.h"

#include <mlu/mlurt.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

namespace mlu {
namespace {

// The worker threads shared by every kernel of the process: kernels of several queues may split work at
// the same time, and a waiting caller helps run pending chunks, so no call can starve another.
class WorkerPool {
 public:
  // Never destroyed: queue workers may still run kernels while the process exits.
  static WorkerPool& get() {
    static NoDestructor<WorkerPool> pool;
    return pool.get();
  }
  WorkerPool() {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i + 1 < hw; ++i) threads_.emplace_back([this] { loop(); });
  }

  void run(std::int64_t n, std::int64_t chunks, const std::function<void(std::int64_t, std::int64_t)>& fn) {
    struct Batch {
      std::mutex mutex;
      std::condition_variable done_cv;
      std::int64_t remaining;
    };
    auto batch = std::make_shared<Batch>();
    batch->remaining = chunks - 1;
    const std::int64_t per = (n + chunks - 1) / chunks;
    {
      std::lock_guard lock(mutex_);
      for (std::int64_t c = 1; c < chunks; ++c) {
        const std::int64_t b = c * per;
        const std::int64_t e = std::min(n, b + per);
        tasks_.push_back([batch, b, e, &fn] {
          if (b < e) fn(b, e);
          std::lock_guard l(batch->mutex);
          if (--batch->remaining == 0) batch->done_cv.notify_all();
        });
        pending_.fetch_add(1, std::memory_order_release);
      }
      if (sleeping_ > 0) ready_.notify_all();
    }
    fn(0, std::min(n, per));
    // Help with queued chunks (ours or others') until ours are done.
    for (;;) {
      {
        std::unique_lock l(batch->mutex);
        if (batch->remaining == 0) return;
      }
      std::function<void()> task;
      {
        std::lock_guard lock(mutex_);
        if (!tasks_.empty()) {
          task = std::move(tasks_.front());
          tasks_.pop_front();
          pending_.fetch_sub(1, std::memory_order_relaxed);
        }
      }
      if (task) {
        task();
        continue;
      }
      std::unique_lock l(batch->mutex);
      batch->done_cv.wait(l, [&] { return batch->remaining == 0; });
      return;
    }
  }

 private:
  void loop() {
    for (;;) {
      // Kernels come back to back: look for work a little while before paying for a sleep and a wake-up.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
      for (unsigned i = 1; pending_.load(std::memory_order_acquire) == 0; ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        ++sleeping_;
        ready_.wait(lock, [&] { return !tasks_.empty(); });
        --sleeping_;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        pending_.fetch_sub(1, std::memory_order_relaxed);
      }
      task();
    }
  }

  static constexpr int kSpinMicros = 20;
  std::atomic<std::int64_t> pending_{0};  // tasks queued and not yet taken
  int sleeping_ = 0;                      // workers waiting on ready_ (guarded by mutex_)

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
};

// Applies the value-changing faults to the first output after the kernel ran.
void applyOutputFaults(const std::vector<Fault>& faults, const TensorView& out) {
  for (const Fault& f : faults) {
    if (f.kind == FaultKind::kOob) {
      // Write past the end of the output's extent, as a kernel with an off-by-N bug would.
      auto* end = static_cast<unsigned char*>(out.data) + out.extentBytes();
      std::memset(end, 0xa5, static_cast<std::size_t>(f.value));
      continue;
    }
    if (f.kind != FaultKind::kNan && f.kind != FaultKind::kScale && f.kind != FaultKind::kOffset) continue;
    const std::int64_t n = out.numel();
    if (n == 0) continue;
    OffsetWalker walk(out);
    dispatchAll(out.dtype, [&]<typename T>() {
      T* data = typed<T>(out);
      bool any = false;
      for (std::int64_t i = 0; i < n; ++i) {
        if (!faultSelects(static_cast<std::uint64_t>(i), f.fraction)) continue;
        any = true;
        T& x = data[walk.offsetOf(i)];
        const double v = load<double>(x);
        if (f.kind == FaultKind::kNan) {
          x = store<T>(std::numeric_limits<double>::quiet_NaN());
        } else {
          x = store<T>(f.kind == FaultKind::kScale ? v * f.value : v + f.value);
        }
      }
      // A planted NaN fault always shows: at least one element, even in a small tensor.
      if (!any && f.kind == FaultKind::kNan) data[0] = store<T>(std::numeric_limits<double>::quiet_NaN());
    });
  }
}

struct Job {
  std::function<void()> body;
  std::vector<Fault> faults;
  TensorView first_output;
};

mlurtStatus_t runJob(void* p) {
  auto* job = static_cast<Job*>(p);
  for (const Fault& f : job->faults) {
    if (f.kind == FaultKind::kDelay)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.value));
  }
  job->body();
  if (job->first_output.present) applyOutputFaults(job->faults, job->first_output);
  return MLURT_SUCCESS;
}

void deleteJob(void* p) { std::unique_ptr<Job> owned(static_cast<Job*>(p)); }

}  // namespace

Launch::Launch(const mluopContext& ctx, std::string_view op, const std::vector<Fault>* faults,
               TensorView first_output)
    : ctx_(ctx), op_(op), faults_(faults), first_output_(first_output), cores_(std::max(1, ctx.cores)) {}

Status Launch::enqueue(std::function<void()> body) const {
  auto job = std::make_unique<Job>();
  job->body = std::move(body);
  if (faults_ != nullptr) job->faults = *faults_;
  job->first_output = first_output_;
  const std::string name(op_);
  // The runtime owns the job from here on, whether the launch succeeds or not.
  if (mlurtLaunchKernel(ctx_.queue, name.c_str(), runJob, job.release(), deleteJob, nullptr) !=
      MLURT_SUCCESS) {
    return {MLUOP_STATUS_EXECUTION_FAILED,
            fmt::format("the runtime refused the kernel: {}", mlurtGetLastErrorMessage())};
  }
  return Status::success();
}

void parallelFor(std::int64_t n, std::int64_t grain, int ways,
                 const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  const std::int64_t chunks = std::clamp<std::int64_t>(n / std::max<std::int64_t>(grain, 1), 1, ways);
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  WorkerPool::get().run(n, chunks, fn);
}

}  // namespace mlu
