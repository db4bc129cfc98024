#include "caching_allocator.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "../../runtime/common/no_destructor.h"
#include "mlu_context.h"
#include "opscope.h"
#include "streams.h"

namespace torch_mlu {

std::size_t pieceSize(std::size_t bytes, std::size_t padding) {
  const std::size_t want = bytes + padding;
  return (want + kPieceAlignment - 1) / kPieceAlignment * kPieceAlignment;
}

std::size_t segmentSize(std::size_t piece) {
  if (piece <= kSmallPiece) return kSmallSegment;
  if (piece < kLargeSegment / 2) return kLargeSegment;
  return (piece + kSmallSegment - 1) / kSmallSegment * kSmallSegment;
}

bool cachingEnabled() {
  static const bool enabled = [] {
    const char* off = std::getenv("PYTORCH_NO_MLU_MEMORY_CACHING");
    return off == nullptr || std::strcmp(off, "1") != 0;
  }();
  return enabled;
}

namespace {

// A piece of a segment, free or handed out. Pieces are kept by address; a segment's pieces are adjacent and
// cover it. A segment belongs to the stream it was allocated on, and so do its pieces.
struct Piece {
  std::size_t size = 0;
  std::uintptr_t segment = 0;  // the segment's start
  std::size_t segment_size = 0;
  c10::StreamId stream = 0;
  bool allocated = false;
  bool pending = false;                // freed, waiting for the other streams it was used on
  std::vector<c10::StreamId> used_on;  // other streams it was used on (record_stream)
};

// A freed piece that other streams may still be using: handed out again once their notifiers complete.
struct Pending {
  std::uintptr_t ptr = 0;
  std::vector<mlurtNotifier_t> notifiers;
};

// One device's cache. Free pieces are found best fit, by (stream, size, address), in the pool of their kind.
class DeviceCache {
 public:
  explicit DeviceCache(int device) : device_(device) {}

  void* allocate(std::size_t bytes, std::size_t padding, c10::StreamId stream) {
    const std::size_t size = pieceSize(bytes, padding);
    const bool small = size <= kSmallPiece;
    std::lock_guard lock(mutex_);
    releaseCompletedLocked(false);
    auto& pool = small ? small_free_ : large_free_;
    auto fits = [&] {
      auto it = pool.lower_bound({stream, size, 0});
      return it != pool.end() && std::get<0>(*it) == stream ? it : pool.end();
    };
    auto fit = fits();
    if (fit == pool.end()) {
      const std::size_t segment = segmentSize(size);
      void* base = nullptr;
      if (mlurtMalloc(&base, segment) != MLURT_SUCCESS) {
        // Out of device memory: wait for the pieces other streams still use, give back every segment no
        // tensor uses, and look again before a second try.
        releaseCompletedLocked(true);
        releaseFreeSegmentsLocked();
        fit = fits();
        if (fit == pool.end()) {
          const mlurtStatus_t status = mlurtMalloc(&base, segment);
          TORCH_CHECK(status == MLURT_SUCCESS, "torch_mlu: out of memory on MLU ", device_,
                      ": tried to allocate ", bytes, " bytes (a ", segment, "-byte segment) with ",
                      stats_.allocated,
                      " bytes allocated and the cache emptied: ", mlurtGetErrorString(status));
        }
      }
      if (fit == pool.end())
        fit = addSegmentLocked(pool, reinterpret_cast<std::uintptr_t>(base), segment, stream);
    }
    const std::uintptr_t ptr = std::get<2>(*fit);
    pool.erase(fit);
    Piece& piece = pieces_.at(ptr);
    // Split off what the request does not need (a large piece only when at least 1 MiB is left, as the CUDA
    // allocator does, so that large segments are not cut into slivers).
    const std::size_t rest = piece.size - size;
    if (rest >= (small ? kPieceAlignment : kLargePieceSplit)) {
      pieces_[ptr + size] = Piece{rest, piece.segment, piece.segment_size, stream, false, false, {}};
      pool.insert({stream, rest, ptr + size});
      piece.size = size;
    }
    piece.allocated = true;
    stats_.allocated += piece.size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
    void* out = reinterpret_cast<void*>(ptr);
    opscope_pool_alloc(out, bytes);
    return out;
  }

  // False when ptr is not a piece of this device's handed out. A piece used on other streams waits for
  // them (a notifier placed on each) before it is handed out again.
  bool free(void* p) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard lock(mutex_);
    auto it = pieces_.find(ptr);
    if (it == pieces_.end() || !it->second.allocated) return false;
    opscope_pool_free(p);
    Piece& piece = it->second;
    piece.allocated = false;
    stats_.allocated -= piece.size;
    if (piece.used_on.empty()) {
      releaseLocked(it);
      return true;
    }
    Pending pending{ptr, {}};
    for (c10::StreamId stream : piece.used_on) {
      // The streams were checked when recorded (recordStream), and their queues exist.
      mlurtQueue_t queue = queueOf(device_, stream);
      mlurtNotifier_t n = nullptr;
      if (mlurtNotifierCreate(&n, MLURT_NOTIFIER_DISABLE_TIMING) == MLURT_SUCCESS &&
          mlurtPlaceNotifier(n, queue) == MLURT_SUCCESS) {
        pending.notifiers.push_back(n);
        continue;
      }
      if (n != nullptr) mlurtNotifierDestroy(n);
      mlurtQueueSync(queue);  // no notifier to tell when the stream is done: wait for it now
    }
    piece.used_on.clear();
    piece.pending = true;
    pending_.push_back(std::move(pending));
    return true;
  }

  // Tensor.record_stream: the piece at ptr is used on `stream` too.
  void recordStream(std::uintptr_t ptr, c10::StreamId stream) {
    std::lock_guard lock(mutex_);
    auto it = pieces_.find(ptr);
    if (it == pieces_.end() || !it->second.allocated || it->second.stream == stream) return;
    auto& used = it->second.used_on;
    if (std::find(used.begin(), used.end(), stream) == used.end()) used.push_back(stream);
  }

  void emptyCache() {
    std::lock_guard lock(mutex_);
    releaseCompletedLocked(true);
    releaseFreeSegmentsLocked();
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  using Pieces = std::map<std::uintptr_t, Piece>;
  using Pool = std::set<std::tuple<c10::StreamId, std::size_t, std::uintptr_t>>;

  // A new segment from mlurtMalloc, one free piece in `pool`.
  Pool::iterator addSegmentLocked(Pool& pool, std::uintptr_t base, std::size_t segment,
                                  c10::StreamId stream) {
    pieces_[base] = Piece{segment, base, segment, stream, false, false, {}};
    stats_.reserved += segment;
    ++stats_.segments;
    return pool.insert({stream, segment, base}).first;
  }

  // Which pool a free piece is in: that of its segment's kind (pieces of a small segment stay small).
  Pool& poolOf(const Piece& piece) { return piece.segment_size == kSmallSegment ? small_free_ : large_free_; }

  static bool isFreeNeighbour(Pieces::iterator a, Pieces::iterator b) {
    return !a->second.allocated && !b->second.allocated && a->second.segment == b->second.segment &&
           a->first + a->second.size == b->first && !b->second.pending && !a->second.pending;
  }

  // A free piece into its pool, merged with its free neighbours of the same segment.
  void releaseLocked(Pieces::iterator it) {
    it->second.pending = false;
    auto next = std::next(it);
    if (next != pieces_.end() && isFreeNeighbour(it, next)) {
      poolOf(next->second).erase({next->second.stream, next->second.size, next->first});
      it->second.size += next->second.size;
      pieces_.erase(next);
    }
    if (it != pieces_.begin()) {
      auto prev = std::prev(it);
      if (isFreeNeighbour(prev, it)) {
        poolOf(prev->second).erase({prev->second.stream, prev->second.size, prev->first});
        prev->second.size += it->second.size;
        pieces_.erase(it);
        it = prev;
      }
    }
    poolOf(it->second).insert({it->second.stream, it->second.size, it->first});
  }

  // The pending pieces whose streams are done (wait: all of them, waiting for the streams) go back.
  void releaseCompletedLocked(bool wait) {
    for (auto p = pending_.begin(); p != pending_.end();) {
      bool done = true;
      for (mlurtNotifier_t n : p->notifiers) {
        done = done && (wait ? mlurtNotifierSync(n) : mlurtNotifierQuery(n)) == MLURT_SUCCESS;
      }
      if (!done) {
        ++p;
        continue;
      }
      for (mlurtNotifier_t n : p->notifiers) mlurtNotifierDestroy(n);
      releaseLocked(pieces_.find(p->ptr));
      p = pending_.erase(p);
    }
  }

  // Segments that are one free piece go back to the runtime (mlurtFree waits for the queued work).
  void releaseFreeSegmentsLocked() {
    for (auto it = pieces_.begin(); it != pieces_.end();) {
      const Piece& piece = it->second;
      if (piece.allocated || piece.pending || it->first != piece.segment ||
          piece.size != piece.segment_size) {
        ++it;
        continue;
      }
      poolOf(piece).erase({piece.stream, piece.size, it->first});
      mlurtFree(reinterpret_cast<void*>(it->first));
      stats_.reserved -= piece.size;
      --stats_.segments;
      it = pieces_.erase(it);
    }
  }

  std::mutex mutex_;
  const int device_;
  Pieces pieces_;
  // Small segments' free pieces are not mixed with large ones': a small request does not split a large
  // segment and keep it from going back.
  Pool small_free_;
  Pool large_free_;
  std::vector<Pending> pending_;
  MemoryStats stats_;
};

// The caches of every device, for the life of the process: PyTorch frees tensors during the interpreter's
// teardown, after static destructors may have run.
class Caches {
 public:
  DeviceCache& device(int index) {
    std::lock_guard lock(mutex_);
    return caches_.try_emplace(index, index).first->second;  // std::map: a cache never moves
  }
  template <typename F>
  void forEach(F f) {
    std::lock_guard lock(mutex_);
    for (auto& [index, cache] : caches_) f(index, cache);
  }

 private:
  std::mutex mutex_;
  std::map<int, DeviceCache> caches_;
};

Caches& caches() {
  static mlu::NoDestructor<Caches> instance;
  return instance.get();
}

// memcheck's red zone after each piece (0 without opscope's memcheck), asked once: the hook's settings do
// not change during a run.
std::size_t padding() {
  static const std::size_t bytes = opscope_pool_padding();
  return bytes;
}

std::atomic<bool> g_device_used{false};

}  // namespace

bool deviceUsed() { return g_device_used.load(std::memory_order_relaxed); }

void* allocateDeviceMemory(std::size_t bytes, int device) {
  g_device_used.store(true, std::memory_order_relaxed);
  if (!cachingEnabled()) {
    void* ptr = nullptr;
    checkRuntime(mlurtMalloc(&ptr, bytes), "mlurtMalloc");
    return ptr;
  }
  return caches().device(device).allocate(bytes, padding(), currentStreamId(device));
}

void freeDeviceMemory(void* ptr) {
  if (ptr == nullptr) return;
  if (!cachingEnabled()) {
    mlurtFree(ptr);  // waits for the work queued on the device, which may still use the memory
    return;
  }
  bool freed = false;
  caches().forEach([&](int, DeviceCache& cache) { freed = freed || cache.free(ptr); });
  // Called from a tensor's destructor: said, not thrown.
  if (!freed)
    std::fprintf(stderr, "torch_mlu: freeing %p, which the caching allocator did not hand out\n", ptr);
}

void recordStream(void* ptr, int device, c10::StreamId stream) {
  queueOf(device, stream);  // a stream that exists, or PyTorch's error now (not when the tensor is freed)
  if (ptr == nullptr || !cachingEnabled()) return;  // uncached: mlurtFree waits for every queue
  caches().device(device).recordStream(reinterpret_cast<std::uintptr_t>(ptr), stream);
}

void emptyCache() {
  caches().forEach([](int, DeviceCache& cache) { cache.emptyCache(); });
}

MemoryStats memoryStats(int device) { return caches().device(device).stats(); }

}  // namespace torch_mlu
