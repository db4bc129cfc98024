#include "events.h"

#include <chrono>

namespace opscope::profiler {
namespace {

// The calling thread's buffer, and the queue it belongs to (a test may make several queues).
struct Local {
  const EventQueue* owner = nullptr;
  std::shared_ptr<ThreadBuffer> buffer;
};
thread_local Local t_local;

// A copy of the events of a thread's partial chunk published since the last collect() (nullptr when
// there are none); the caller holds the buffer's lock.
std::unique_ptr<Chunk> copyUntaken(const ThreadBuffer& buffer) {
  if (!buffer.chunk) return nullptr;
  const std::size_t n = buffer.chunk->count.load(std::memory_order_acquire);
  if (n <= buffer.chunk->taken) return nullptr;
  auto copy = std::make_unique<Chunk>();
  for (std::size_t i = buffer.chunk->taken; i < n; ++i) copy->events[i] = buffer.chunk->events[i];
  copy->taken = buffer.chunk->taken;
  copy->count.store(n, std::memory_order_relaxed);
  return copy;
}

}  // namespace

ThreadBuffer& EventQueue::local() {
  if (t_local.owner == this) return *t_local.buffer;
  auto buffer = std::make_shared<ThreadBuffer>();
  {
    std::lock_guard lock(mutex_);
    buffer->chunk = fresh();
    buffer->current.store(buffer->chunk.get(), std::memory_order_release);
    buffers_.push_back(buffer);
  }
  t_local.owner = this;
  t_local.buffer = std::move(buffer);
  return *t_local.buffer;
}

std::unique_ptr<Chunk> EventQueue::fresh() {
  if (spare_.empty()) return std::make_unique<Chunk>();
  std::unique_ptr<Chunk> chunk = std::move(spare_.back());
  spare_.pop_back();
  chunk->count.store(0, std::memory_order_relaxed);
  chunk->taken = 0;
  return chunk;
}

void EventQueue::rotate(ThreadBuffer& buffer) {
  std::lock_guard buffer_lock(buffer.mutex);
  std::lock_guard lock(mutex_);
  if (closed()) return;
  full_.push_back(std::move(buffer.chunk));
  buffer.chunk = fresh();
  buffer.current.store(buffer.chunk.get(), std::memory_order_release);
  ready_.notify_one();
}

Event* EventQueue::reserve() {
  if (closed()) return nullptr;
  ThreadBuffer& buffer = local();
  Chunk* chunk = buffer.current.load(std::memory_order_relaxed);
  std::size_t n = chunk->count.load(std::memory_order_relaxed);
  if (n == Chunk::kCapacity) {
    rotate(buffer);
    if (closed()) return nullptr;
    chunk = buffer.current.load(std::memory_order_relaxed);
    n = 0;
  }
  return &chunk->events[n];
}

void EventQueue::commit() {
  // Only the owning thread writes its chunk's count, and reserve() just made room: count < capacity.
  Chunk* chunk = t_local.buffer->current.load(std::memory_order_relaxed);
  chunk->count.store(chunk->count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void EventQueue::append(const Event& e) {
  if (Event* slot = reserve()) {
    *slot = e;
    commit();
  }
}

void EventQueue::addEnqueued(std::uint64_t n) {
  if (n == 0) return;
  ThreadBuffer& buffer = local();
  buffer.enqueued.store(buffer.enqueued.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

std::uint64_t EventQueue::enqueued() {
  std::lock_guard lock(mutex_);
  std::uint64_t sum = 0;
  for (const auto& buffer : buffers_) sum += buffer->enqueued.load(std::memory_order_relaxed);
  return sum;
}

void EventQueue::waitForFull(int timeout_ms) {
  std::unique_lock lock(mutex_);
  if (full_.empty()) ready_.wait_for(lock, std::chrono::milliseconds(timeout_ms));
}

std::vector<std::unique_ptr<Chunk>> EventQueue::takeFull() {
  std::lock_guard lock(mutex_);
  std::vector<std::unique_ptr<Chunk>> out;
  while (!full_.empty()) {
    out.push_back(std::move(full_.front()));
    full_.pop_front();
  }
  return out;
}

std::vector<std::unique_ptr<Chunk>> EventQueue::collect() {
  std::vector<std::unique_ptr<Chunk>> out = takeFull();
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    std::lock_guard lock(mutex_);
    buffers = buffers_;
  }
  for (auto& buffer : buffers) {
    std::lock_guard lock(buffer->mutex);
    if (auto copy = copyUntaken(*buffer)) {
      buffer->chunk->taken = copy->count.load(std::memory_order_relaxed);
      out.push_back(std::move(copy));
    }
  }
  return out;
}

void EventQueue::recycle(std::unique_ptr<Chunk> chunk) {
  std::lock_guard lock(mutex_);
  if (spare_.size() < 16) spare_.push_back(std::move(chunk));
}

void EventQueue::wake() {
  std::lock_guard lock(mutex_);
  ready_.notify_all();
}

std::vector<std::unique_ptr<Chunk>> EventQueue::close(bool try_only) {
  std::vector<std::unique_ptr<Chunk>> out;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (try_only) {
      if (!lock.try_lock()) return out;
    } else {
      lock.lock();
    }
    closed_.store(true, std::memory_order_release);
    while (!full_.empty()) {
      out.push_back(std::move(full_.front()));
      full_.pop_front();
    }
    buffers = buffers_;
  }
  for (auto& buffer : buffers) {
    std::unique_lock lock(buffer->mutex, std::defer_lock);
    if (try_only) {
      if (!lock.try_lock()) continue;
    } else {
      lock.lock();
    }
    // The owner may still be appending to this chunk: only the events published so far are read, and the
    // chunk stays owned by the buffer (the owner's later appends go nowhere once closed() is seen).
    if (auto copy = copyUntaken(*buffer)) out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace opscope::profiler
