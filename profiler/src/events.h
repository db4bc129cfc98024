// events.h — the profiler's records and where threads put them: a fixed-size Event per span, counter
// value or flow, appended without locks to the recording thread's own chunk; full chunks go to a queue the
// writer thread drains.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace opscope::profiler {

enum class EventKind : std::uint8_t {
  kOp,         // an op call on a host thread
  kRuntime,    // a runtime call on a host thread
  kTools,      // opscope's own work around an op (capture, auto-compare, overflow check) on a host thread
  kDevice,     // a task on a device queue (activity record)
  kMemory,     // device memory in use (counter)
  kStep,       // a training step, from one opscope_step() to the next, on the thread that called it
  kFramework,  // a frame of the program's framework (a module, a PyTorch op, a backward call), host thread
};

// Bits of Event::sub for kTools.
inline constexpr std::uint8_t kToolCapture = 1;
inline constexpr std::uint8_t kToolCompare = 2;
inline constexpr std::uint8_t kToolOverflow = 4;

inline constexpr std::size_t kScalarSlots = 8;

struct Event {
  EventKind kind = EventKind::kOp;
  std::uint8_t sub = 0;      // kOp: OpCall::Fallback; kRuntime: RuntimeCallKind; kDevice: activity kind;
                             // kTools: kTool* bits; kFramework: FrameworkFrame::Kind
  std::uint16_t op = 0;      // mlu::OpId (kOp, kTools); kRuntime collective: opscope::Collective;
                             // kFramework: 1 when the framework ran it on the CPU
  std::uint32_t name = 0;    // kOp: argument signature id; kDevice: interned task name
  std::uint32_t thread = 0;  // opscope's thread number (host events)
  std::uint32_t tid = 0;     // OS thread id (host events)
  std::int32_t device = 0;
  std::int32_t status = 0;        // the call's or task's status
  std::uint64_t correlation = 0;  // kOp: seq; kRuntime: its correlation id; kDevice: the task's; kStep: step
  std::int64_t start_ns = 0;      // CLOCK_MONOTONIC
  std::int64_t end_ns = 0;
  std::uint64_t queue = 0;       // queue id
  std::uint64_t value = 0;       // kRuntime/kDevice: bytes; kMemory: bytes in use; kFramework: its depth
  std::uint64_t task = 0;        // kDevice: task id
  std::uint64_t enqueued = 0;    // kOp/kRuntime: tasks the call enqueued
  const char* symbol = nullptr;  // kRuntime: the runtime function; kFramework: its name; kOp: the outermost
                                 // framework op (null: none); all interned, alive to the end
  const void* site = nullptr;    // kOp, kFramework: the FrameworkSite (op_call.h), null when none
  const char* region = nullptr;  // kOp: OpCall::region (interned by the hook, NUL-ended), null when none
  std::uint8_t flow_end = 0;     // kDevice: the first task of its correlation on this queue
  std::uint8_t scalars = 0;      // kOp: scalar slots used
  // kOp: the scalar arguments' bytes, in schema order; kRuntime collective: comm, seq, count, dtype, op,
  // peer, rank, size (CollectiveCall's)
  std::array<std::uint64_t, kScalarSlots> scalar{};
};

// A block of events filled by one thread; `count` is published with release after each event is written,
// so a reader that loads it with acquire sees complete events.
struct Chunk {
  static constexpr std::size_t kCapacity = 2048;
  std::array<Event, kCapacity> events;
  std::atomic<std::size_t> count{0};
  std::size_t taken = 0;  // events before this were already drained by collect()
};

// One thread's current chunk. Only the owning thread appends; `mutex` guards replacing the chunk, so the
// final drain can read a partial chunk of another thread.
struct ThreadBuffer {
  std::mutex mutex;
  std::unique_ptr<Chunk> chunk;
  std::atomic<Chunk*> current{nullptr};
  // Tasks the owner's traced calls enqueued (only the owner writes it: no locked add on the op's path).
  std::atomic<std::uint64_t> enqueued{0};
};

// The buffers of every thread that recorded, and the full chunks waiting for the writer.
class EventQueue {
 public:
  // Appends e to the calling thread's chunk (allocating one on first use). Drops it once closed.
  void append(const Event& e);
  // Appends an event that fill(Event&) writes in place in the chunk (starting from Event{}): no copy.
  template <typename F>
  void emplace(F&& fill) {
    Event* slot = reserve();
    if (slot == nullptr) return;
    // Copied from a blank rather than assigned Event{}: GCC zeroes the latter with `rep stos`, whose
    // start-up was half of the profiler's cost per op call (perf annotate of bench_profiler).
    static constexpr Event kBlank{};
    std::memcpy(slot, &kBlank, sizeof(Event));
    fill(*slot);
    commit();
  }

  // Adds n to the calling thread's count of tasks its traced calls enqueued.
  void addEnqueued(std::uint64_t n);
  // The sum of every thread's count.
  std::uint64_t enqueued();

  // Writer side: waits up to timeout_ms for a full chunk to be there.
  void waitForFull(int timeout_ms);
  // The full chunks (possibly none).
  std::vector<std::unique_ptr<Chunk>> takeFull();
  // Everything recorded so far, without closing: the full chunks, then a copy of each thread's partial
  // chunk from where the last collect() stopped (those events are not returned again).
  std::vector<std::unique_ptr<Chunk>> collect();
  // Returns a drained chunk for reuse.
  void recycle(std::unique_ptr<Chunk> chunk);
  // Wakes a writer waiting in takeFull.
  void wake();

  // Stops accepting events and returns everything not yet taken: the full chunks, then each thread's
  // partial chunk. try_only: skip a thread whose buffer lock is held (on a fatal signal).
  std::vector<std::unique_ptr<Chunk>> close(bool try_only);
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  // The calling thread's next free slot (rotating to a fresh chunk when full), or nullptr once closed;
  // commit() publishes it (the same thread, right after).
  Event* reserve();
  void commit();
  ThreadBuffer& local();
  void rotate(ThreadBuffer& buffer);
  std::unique_ptr<Chunk> fresh();

  std::atomic<bool> closed_{false};
  std::mutex mutex_;  // guards the members below
  std::vector<std::shared_ptr<ThreadBuffer>> buffers_;
  std::deque<std::unique_ptr<Chunk>> full_;
  std::vector<std::unique_ptr<Chunk>> spare_;
  std::condition_variable ready_;
};

}  // namespace opscope::profiler
