// red_zones.h — memcheck's guard bytes: each device allocation is made larger by a red zone on each side,
// painted with kRedZoneByte and checked after every op that wrote to the block and when the block is freed
// (an overflow then shows as a changed byte). Both are done by memcheck's own kernels on its own queue of the
// device, for many blocks at once: the zones of the blocks allocated since the last op are painted by one
// kernel before the next op runs, and the zones of a batch of blocks are checked by one kernel that leaves a
// flag per block (only a damaged block's zones are then copied back to be described). Freed blocks wait in
// the quarantine before they go back to the runtime, so that a use after the free is still seen and the
// address is not handed out again at once.
#pragma once

#include "allocation.h"
#include "spare_nodes.h"

#include <opscope/runtime_access.h>

#include <mlu/mlurt.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace opscope::memcheck {

inline constexpr unsigned char kRedZoneByte = 0xFB;
inline constexpr std::size_t kDeviceAlignment = 256;

// Zones waiting to be painted, per device, before memcheck paints them without being asked (a program that
// allocates without running an op in between).
inline constexpr std::size_t kMaxUnpaintedZones = 8192;

// The bytes the runtime counts in use for an allocation of size bytes (it rounds each up to its alignment):
// what memcheck tells own_memory.h it holds is counted the same way.
inline std::int64_t counted(std::size_t size) {
  return static_cast<std::int64_t>((size + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment);
}

// The front red zone for a configured size: rounded up to the device's alignment, so that the program's
// pointer stays aligned as mlurtMalloc promises (0 stays 0).
std::size_t frontRedZone(std::size_t configured);

// What was written into a block's red zones, given as read back (front bytes, then back bytes): "" when
// intact, else e.g. "4 bytes past the end of a 4096-byte allocation" and/or "… before the start …".
std::string redZoneDamage(const unsigned char* zones, std::size_t front, std::size_t back, std::size_t size);
// The same from how far the writes went: bytes from the furthest one before the start, one past the furthest
// after the end (0: none).
std::string redZoneDamage(std::size_t before, std::size_t past, std::size_t size);

// A freed device block waiting in the quarantine.
struct Quarantined {
  LiveAllocation allocation;
  StackId free_stack = 0;
};

// Freed blocks by address, oldest first out. Plain data: the tool's lock guards it.
class Quarantine {
 public:
  explicit Quarantine(std::size_t cap_bytes) : cap_(cap_bytes) {}
  // Holds a freed block (counted with its red zones). Once over the cap, the oldest leave until three
  // quarters of it are left: returned, for the caller to check and give back to the runtime.
  std::vector<Quarantined> hold(const Quarantined& block);
  bool holds(std::uintptr_t ptr) const { return blocks_.count(ptr) != 0; }  // a block starting at ptr
  const Quarantined* containing(std::uintptr_t ptr) const;
  std::vector<Quarantined> all() const;
  // Lets every block go (returned, for the caller to check and give back): the device has no room left.
  std::vector<Quarantined> releaseAll();
  std::size_t bytes() const { return bytes_; }

 private:
  using Blocks = std::map<std::uintptr_t, Quarantined>;
  const std::size_t cap_;
  Blocks blocks_;
  SpareNodes<Blocks> spare_;  // the nodes of blocks that left, for the next ones (as many as left)
  std::deque<std::uintptr_t> order_;
  std::size_t bytes_ = 0;
};

// The real runtime functions memcheck allocates, frees, paints and reads its red zones with, unseen by the
// hook.
struct Runtime {
  decltype(&mlurtMalloc) malloc = realRuntimeFunction<decltype(&mlurtMalloc)>("mlurtMalloc");
  decltype(&mlurtFree) free = realRuntimeFunction<decltype(&mlurtFree)>("mlurtFree");
  decltype(&mlurtQueueSync) queue_sync = realRuntimeFunction<decltype(&mlurtQueueSync)>("mlurtQueueSync");
  decltype(&mlurtQueueCreate) queue_create =
      realRuntimeFunction<decltype(&mlurtQueueCreate)>("mlurtQueueCreate");
  decltype(&mlurtMemsetAsync) memset_async =
      realRuntimeFunction<decltype(&mlurtMemsetAsync)>("mlurtMemsetAsync");
  decltype(&mlurtMemcpyAsync) memcpy_async =
      realRuntimeFunction<decltype(&mlurtMemcpyAsync)>("mlurtMemcpyAsync");
  decltype(&mlurtLaunchKernel) launch_kernel =
      realRuntimeFunction<decltype(&mlurtLaunchKernel)>("mlurtLaunchKernel");
  decltype(&mlurtDeviceSynchronize) device_sync =
      realRuntimeFunction<decltype(&mlurtDeviceSynchronize)>("mlurtDeviceSynchronize");
  decltype(&mlurtLaunchHostFunc) launch_host_func =
      realRuntimeFunction<decltype(&mlurtLaunchHostFunc)>("mlurtLaunchHostFunc");
  decltype(&mlurtGetDevice) get_device = realRuntimeFunction<decltype(&mlurtGetDevice)>("mlurtGetDevice");
  decltype(&mlurtSetDevice) set_device = realRuntimeFunction<decltype(&mlurtSetDevice)>("mlurtSetDevice");
  decltype(&mlurtQueueGetId) queue_get_id =
      realRuntimeFunction<decltype(&mlurtQueueGetId)>("mlurtQueueGetId");
  bool ok() const {
    return malloc && free && queue_sync && device_sync && get_device && set_device && queue_create &&
           memset_async && memcpy_async && launch_kernel && launch_host_func;
  }
  int currentDevice() const;  // 0 when it cannot say
  // The runtime's id of a queue, the same for every handle of it (nullptr: the current device's default
  // queue); the handle itself when the runtime cannot say.
  std::uint64_t queueId(mlurtQueue_t queue) const;
};

// The red zones on the device: painting, checking, repainting. Thread-safe.
class RedZones {
 public:
  // The device memory memcheck keeps for its check kernel's flags stays until the process ends: the tool
  // lives as long as the program, and the runtime may be gone before the tool is destroyed.
  RedZones(const Runtime& rt, std::size_t front, std::size_t back) : rt_(rt), front_(front), back_(back) {}
  RedZones(const RedZones&) = delete;
  RedZones& operator=(const RedZones&) = delete;

  bool enabled() const { return front_ != 0 || back_ != 0; }
  std::size_t front() const { return front_; }
  std::size_t back() const { return back_; }

  // A block of front + size + back bytes on the current device, the program's pointer in *user. Its zones
  // are painted before the next op, copy or memset (settle()), or the next check. MLURT_ERROR_INTERNAL when
  // memcheck has no queue on the device to paint them with.
  mlurtStatus_t allocate(std::size_t size, void** user);
  // Gives a block (a live or quarantined allocation) back to the runtime.
  void release(const LiveAllocation& a);
  // Paints the zones allocated since the last time and waits for it: the program's work is not ordered
  // after memcheck's queues, so an overflow could otherwise land before the paint and be painted over.
  void settle();
  // The same with no wait: the zones are painted on the program's own queue, where its next op runs, after
  // the work it queued there before (which may still use a piece's padding) and before that op. Only when
  // every zone waiting is on `device` and, when a program allocator's pieces are among them, the program's
  // work on the device goes through this queue alone (single_queue: a piece another queue still uses could
  // be painted under it); false otherwise, and settle() must do it.
  bool settleOn(mlurtQueue_t queue, int device, bool single_queue);
  // Whether zones wait to be painted (settle() and settleOn() have nothing to do otherwise).
  bool paintPending() const { return paint_pending_.load(std::memory_order_acquire); }
  // Checks blocks' zones (all on `device`) on the program's queue after the op that wrote them, with no
  // wait: a kernel leaves how far each block's zones were written in device memory of the queue's. The
  // findings of a batch of checks are copied back at once, when that memory is full or at flushChecks(), and
  // a host function on the queue then hands done() each check's blocks and their damage (as check()), for
  // a check that found some; damaged zones are repainted. False when it could not be queued (check() then).
  using CheckDone = std::function<void(const std::vector<LiveAllocation>&, const std::vector<std::string>&)>;
  bool checkOn(mlurtQueue_t queue, int device, std::vector<LiveAllocation> blocks, CheckDone done);
  // Queues the looking at the checks queued so far on `queue` (nullptr: on every queue): done when that
  // queue has run them (before a sync of the program's returns, when called before it).
  void flushChecks(mlurtQueue_t queue);
  // flushChecks(nullptr), and waits until every device memcheck has a queue on has run everything queued.
  void waitAll();
  // The damage of each block's zones (as redZoneDamage; "" when intact or unreadable), looked at once the
  // writes queued before are done on memcheck's queues. Damaged zones are repainted: one overflow is reported
  // once.
  std::vector<std::string> check(const std::vector<LiveAllocation>& blocks);
  // Paints the zones of a block memcheck did not make (a piece a program's own allocator hands out, its zones
  // in the padding the allocator left) before the next op, copy or memset. Such an allocator hands a piece
  // out again once the work that used it is queued, not done (stream-ordered reuse, as PyTorch's): that work
  // may still read or write the padding, so the device runs it before the paint.
  void paint(const LiveAllocation& a);
  // Repaints the back zone of a block a synchronous copy or memset has just written into.
  void repaintBack(const LiveAllocation& a);
  // Repaints both zones of a block (a damaged one), before the next op, copy or memset.
  void repaint(const LiveAllocation& a);
  // Waits until the devices have run everything queued (as mlurtFree does): false when one cannot be waited
  // for (from a queue's own thread).
  bool waitForDevices(const std::set<int>& devices);

  // A range of device memory: a zone.
  struct Span {
    unsigned char* data = nullptr;
    std::size_t bytes = 0;
  };

  // What memcheck's kernel on a program queue does: the checks of the ops queued on it since the last such
  // kernel, then the paint of the zones its next op needs (the checks read zones of blocks the ops before
  // wrote; the paint is for the op after).
  //
  // With several queues, a block's zones may have been painted by such a kernel on another queue, which
  // nothing orders before the check: the check of such a block is skipped when that paint has not run yet
  // (its zones would read as written). It is looked at again at the next op that writes it, or at its free.
  struct PaintProgress {
    std::uint64_t launched = 0;          // paint kernels queued on the queue (guarded by RedZones::mutex_)
    std::atomic<std::uint64_t> done{0};  // the last of them that has run
  };
  struct ReachArgs {
    std::vector<Span> zones;         // two per block: front, back
    std::uint64_t* found = nullptr;  // device memory: two per block (reach(): before, past)
    std::vector<Span> paint;         // zones to paint after the checks
    // The paint of zones [from, to) was queued on another queue as its paint kernel number `seq`.
    struct After {
      std::size_t from = 0, to = 0;
      std::shared_ptr<const PaintProgress> progress;
      std::uint64_t seq = 0;
    };
    std::vector<After> after;
    std::shared_ptr<PaintProgress> progress;  // this queue's, when the kernel paints
    std::uint64_t seq = 0;                    // its number among this queue's paint kernels
  };

 private:
  struct Device {
    mlurtQueue_t queue = nullptr;    // memcheck's queue on it, made at first use
    std::vector<Span> unpainted;     // zones to paint
    unsigned char* flags = nullptr;  // device memory for the check kernel's flags (one byte per block)
    std::size_t flag_bytes = 0;
    bool unreliable = false;  // a paint could not be launched: its zones are not looked at
    bool drain = false;       // zones of a program allocator's piece to paint: wait for the device first
  };
  Device* deviceLocked(int device);  // requires mutex_; null when it has no queue
  void paintLocked(Device& d);       // requires mutex_: launches the kernel painting d.unpainted
  void queuePaint(int device, Span zone);
  // Device memory on which checkOn()'s kernels leave their findings, one per program queue (the checks on
  // one queue run in order: each has its place until the batch's copy, queued before the next batch's
  // first kernel), and the checks queued since the last copy; guarded by mutex_.
  // A batch of checks in flight on one queue: what its host function needs once the queue has run the
  // kernels and the copy of their findings.
  struct Batch {
    struct Check {
      std::vector<LiveAllocation> blocks;
      std::size_t at = 0;  // its first block's place in the findings
      CheckDone done;
    };
    std::vector<Check> checks;
    std::vector<std::uint64_t> found;  // the kernels' findings, copied back: two per block
    RedZones* zones = nullptr;
    bool lost = false;  // a kernel of its checks could not be launched: it reports nothing
  };
  static constexpr std::size_t kFindingsBlocks = 1024;
  struct Findings {
    std::uint64_t* data = nullptr;  // 2 per block, kFindingsBlocks blocks
    std::size_t used = 0;           // blocks
    std::unique_ptr<Batch> batch;
    // The checks not yet in a kernel (with the zones to paint before the next op, when settleOn() launches
    // them): one kernel per op at most.
    std::unique_ptr<ReachArgs> pending;
  };
  std::map<mlurtQueue_t, Findings> findings_;
  std::map<std::uint64_t, std::shared_ptr<PaintProgress>> progress_;  // by the id of a queue painted on
  bool launchPendingLocked(mlurtQueue_t queue, Findings& f);
  std::unique_ptr<Batch> launchBatchLocked(mlurtQueue_t queue, Findings& f);
  void finishFailedBatch(mlurtQueue_t queue, std::unique_ptr<Batch> batch);
  static void finishBatch(void* batch);

  const Runtime& rt_;
  const std::size_t front_;
  const std::size_t back_;
  std::mutex mutex_;
  std::map<int, Device> devices_;           // guarded by mutex_
  std::atomic<bool> paint_pending_{false};  // zones waiting to be painted, or painted and not waited for
};

}  // namespace opscope::memcheck
