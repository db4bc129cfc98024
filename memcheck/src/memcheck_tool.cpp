#include <opscope/memcheck/memcheck_tool.h>

#include "report.h"
#include "stacks.h"
#include "symbolizer.h"

#include <opscope/private_file.h>
#include <opscope/runtime_access.h>

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace opscope::memcheck {
namespace {

// Frees remembered after they happened, to tell a double free from a free of a pointer never allocated.
constexpr std::size_t kFreedRemembered = 1 << 16;
// The byte red zones are painted with; the front red zone is rounded up to the device's alignment, so the
// program's pointer stays aligned as mlurtMalloc promises.
constexpr unsigned char kRedZoneByte = 0xFB;
constexpr std::size_t kDeviceAlignment = 256;

// The real runtime functions: memcheck allocates, frees, paints and reads its red zones with them, unseen
// by the hook.
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
  decltype(&mlurtDeviceSynchronize) device_sync =
      realRuntimeFunction<decltype(&mlurtDeviceSynchronize)>("mlurtDeviceSynchronize");
  decltype(&mlurtGetDevice) get_device = realRuntimeFunction<decltype(&mlurtGetDevice)>("mlurtGetDevice");
  decltype(&mlurtSetDevice) set_device = realRuntimeFunction<decltype(&mlurtSetDevice)>("mlurtSetDevice");
  bool ok() const {
    return malloc && free && queue_sync && device_sync && get_device && set_device && queue_create &&
           memset_async && memcpy_async;
  }
};

// A freed device block waiting in the quarantine.
struct Quarantined {
  LiveAllocation allocation;
  StackId free_stack = 0;
};

struct Freed {
  std::size_t size = 0;
  int device = 0;
  StackId alloc_stack = 0;
  StackId free_stack = 0;
};

class Memcheck final : public Tool {
 public:
  Memcheck(const Config& config, const RunInfo& run)
      : config_(config),
        run_(run),
        origin_ns_(monotonicNs()),
        front_(config.mem_check_redzone == 0
                   ? 0
                   : (config.mem_check_redzone + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment),
        back_(config.mem_check_redzone),
        quarantine_cap_(config.mem_check_quarantine_mb << 20),
        stacks_(config.mem_check_backtrace_depth,
                moduleRangeOf(reinterpret_cast<const void*>(&makeMemcheckTool))) {}

  ToolId id() const override { return ToolId::kMemcheck; }
  // Every op: its tensors are checked against the allocation table before it runs, its outputs' red zones
  // after.
  bool wants(const OpCall& call) const override { return call.args_ok; }

  bool replace(RuntimeCall& call) override {
    if (!rt_.ok()) return false;
    if (call.kind == RuntimeCallKind::kMalloc) return allocateDevice(call);
    if (call.kind == RuntimeCallKind::kFree) return freeDevice(call);
    // A copy or memset may write into a red zone: the paint must be there before it.
    if (call.kind == RuntimeCallKind::kMemcpy || call.kind == RuntimeCallKind::kMemcpyAsync ||
        call.kind == RuntimeCallKind::kMemset || call.kind == RuntimeCallKind::kMemsetAsync) {
      settlePaint();
    }
    return false;
  }

  void onRuntimeCall(const RuntimeCall& call) override {
    switch (call.kind) {
      case RuntimeCallKind::kMalloc:
        if (!call.replaced && call.status == MLURT_SUCCESS && call.ptr != nullptr) record(call, 0, 0);
        return;
      case RuntimeCallKind::kHostMalloc:
        if (call.status == MLURT_SUCCESS && call.ptr != nullptr) record(call, 0, 0);
        return;
      case RuntimeCallKind::kFree:
        if (!call.replaced && call.ptr != nullptr) badFree(call, capture());
        return;
      case RuntimeCallKind::kHostFree:
        if (call.ptr != nullptr) hostFree(call);
        return;
      case RuntimeCallKind::kMemcpy:
      case RuntimeCallKind::kMemcpyAsync:
        checkRange(call, call.ptr, call.size, "writes");
        checkRange(call, call.src, call.size, "reads");
        return;
      case RuntimeCallKind::kMemset:
      case RuntimeCallKind::kMemsetAsync:
        checkRange(call, call.ptr, call.size, "writes");
        return;
      default:
        return;
    }
  }

  void before(OpCall& call) override {
    settlePaint();  // the op may write into a red zone: the paint must be there before it
    // Each tensor (and workspace) must lie inside a live allocation: not in freed memory, not past an end.
    StackId stack = 0;
    bool captured = false;
    auto site = [&] {
      if (!captured) stack = capture();
      captured = true;
      return stack;
    };
    call.withArgs([&](const auto& args) {
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, mlu::TensorView>) {
          if (value.present && value.data != nullptr) {
            checkArgument(call, meta, value.data, value.extentBytes(), site);
          }
        } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
          if (value.data != nullptr && value.size > 0)
            checkArgument(call, meta, value.data, value.size, site);
        }
      });
    });
  }

  void after(OpCall& call) override {
    if (back_ == 0 && front_ == 0) return;
    // The allocations the op wrote into: once its queue has run it, their red zones must be intact.
    std::vector<std::uintptr_t> written;
    call.withArgs([&](const auto& args) {
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, mlu::TensorView>) {
          if (meta.writes() && value.present && value.data != nullptr) {
            written.push_back(reinterpret_cast<std::uintptr_t>(value.data));
          }
        } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
          if (value.data != nullptr) written.push_back(reinterpret_cast<std::uintptr_t>(value.data));
        }
      });
    });
    if (written.empty()) return;
    if (call.queue != nullptr && rt_.queue_sync(call.queue) != MLURT_SUCCESS) return;
    std::vector<LiveAllocation> blocks;
    {
      std::lock_guard lock(mutex_);
      for (std::uintptr_t p : written) {
        if (const LiveAllocation* a = containing(p, true); a != nullptr && (a->front || a->back)) {
          if (std::find_if(blocks.begin(), blocks.end(), [&](const auto& b) { return b.ptr == a->ptr; }) ==
              blocks.end()) {
            blocks.push_back(*a);
          }
        }
      }
    }
    const std::vector<std::string> damages = checkRedZones(blocks);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const LiveAllocation& a = blocks[i];
      const std::string& damage = damages[i];
      if (damage.empty()) continue;
      MemoryError e;
      e.kind = "heap-buffer-overflow";
      e.message =
          fmt::format("on {}: {}, written by {} #{}", placeName(a.device), damage, call.name, call.seq);
      e.stack = capture();
      e.alloc_stack = a.stack;
      e.op_seq = call.seq;
      error(std::move(e), fmt::format("{}", call.name));
    }
  }

  void flush() override {
    // The blocks still in the quarantine: their red zones too (the program has ended; its queues drain).
    std::vector<Quarantined> waiting;
    {
      std::lock_guard lock(mutex_);
      for (auto& [ptr, q] : quarantine_) waiting.push_back(q);
    }
    checkFreed(waiting);
    writeReports();
  }

  void flushOnSignal() override {
    // A program killed by a signal still holds its memory: there is nothing to call a leak, and
    // symbolizing is not safe in a signal handler. The errors were printed when found.
    if (written_.load()) return;  // MEM_CHECK_ABORT_ON_ERROR wrote it before aborting
    std::fputs("opscope memcheck: the program was ended by a signal; no leak report\n", stderr);
  }

 private:
  StackId capture() { return config_.mem_check_backtrace ? stacks_.capture() : 0; }

  // mlurtMalloc: the real block holds a red zone on each side of the program's bytes.
  bool allocateDevice(RuntimeCall& call) {
    if (call.out == nullptr || call.size == 0 || (front_ == 0 && back_ == 0)) return false;
    void* block = nullptr;
    call.status = rt_.malloc(&block, front_ + call.size + back_);
    if (call.status != MLURT_SUCCESS) return true;
    auto* base = static_cast<unsigned char*>(block);
    // Painted on memcheck's own queue, without waiting: whoever reads the red zones syncs that queue first.
    mlurtQueue_t queue = queueFor(currentDevice());
    if (queue == nullptr ||
        (front_ > 0 && rt_.memset_async(base, kRedZoneByte, front_, queue) != MLURT_SUCCESS) ||
        (back_ > 0 &&
         rt_.memset_async(base + front_ + call.size, kRedZoneByte, back_, queue) != MLURT_SUCCESS)) {
      rt_.free(block);
      call.status = MLURT_ERROR_INTERNAL;
      return true;
    }
    paint_pending_.store(true, std::memory_order_release);
    *call.out = base + front_;
    call.ptr = *call.out;
    record(call, front_, back_);
    return true;
  }

  // mlurtFree of a live device allocation: its red zones are checked, then the block waits in the
  // quarantine. A pointer still in the quarantine is a double free, refused as the runtime would.
  bool freeDevice(RuntimeCall& call) {
    if (call.ptr == nullptr) return false;
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    const StackId stack = capture();
    LiveAllocation a;
    {
      std::unique_lock lock(mutex_);
      const auto it = live_.find(ptr);
      if (it == live_.end() || it->second.device == kPinnedHost) {
        if (quarantine_.count(ptr) == 0) return false;  // the runtime decides; onRuntimeCall reports it
        call.status = MLURT_ERROR_INVALID_POINTER;
        badFreeLocked(call, stack);
        lock.unlock();
        reportPending();
        return true;
      }
      a = it->second;
      live_.erase(it);
      sample(call.host_start_ns - origin_ns_, call.op_seq, a.device, in_use_[a.device] -= a.size);
    }
    // Into the quarantine (freed blocks are held back from the runtime until MEM_CHECK_QUARANTINE_MB wait
    // behind them, so that an op that still uses one is seen, and the address is not handed out again at
    // once). Its red zones are checked when it leaves, a batch at a time, or at exit: the writes they would
    // show were all made before the free.
    std::vector<Quarantined> evicted;
    {
      std::lock_guard lock(mutex_);
      remember(ptr, Freed{a.size, a.device, a.stack, stack});
      quarantine_[ptr] = Quarantined{a, stack};
      quarantine_order_.push_back(ptr);
      quarantine_bytes_ += a.front + a.size + a.back;
      if (quarantine_bytes_ > quarantine_cap_) {
        while (quarantine_bytes_ > quarantine_cap_ / 4 * 3 && !quarantine_order_.empty()) {
          const auto q = quarantine_.find(quarantine_order_.front());
          quarantine_order_.pop_front();
          if (q == quarantine_.end()) continue;
          const LiveAllocation& old = q->second.allocation;
          quarantine_bytes_ -= old.front + old.size + old.back;
          evicted.push_back(q->second);
          quarantine_.erase(q);
        }
      }
    }
    call.status = MLURT_SUCCESS;
    if (!evicted.empty()) {
      checkFreed(evicted);
      for (const Quarantined& q : evicted) {
        rt_.free(reinterpret_cast<unsigned char*>(q.allocation.ptr) - q.allocation.front);
      }
    }
    return true;
  }

  // Freed blocks' red zones, once the devices they are on have run everything queued (as mlurtFree waits):
  // damage is reported with the free's backtrace and the allocation's.
  void checkFreed(const std::vector<Quarantined>& freed) {
    std::vector<LiveAllocation> blocks;
    std::set<int> devices;
    for (const Quarantined& q : freed) {
      if (q.allocation.front || q.allocation.back) {
        blocks.push_back(q.allocation);
        devices.insert(q.allocation.device);
      }
    }
    if (blocks.empty()) return;
    int current = 0;
    rt_.get_device(&current);
    bool idle = true;
    for (int device : devices) {
      rt_.set_device(device);
      idle = rt_.device_sync() == MLURT_SUCCESS && idle;
    }
    rt_.set_device(current);
    if (!idle) return;  // freed from a queue's own thread: the device cannot be waited for there
    const std::vector<std::string> damages = checkRedZones(blocks);
    std::size_t i = 0;
    for (const Quarantined& q : freed) {
      if (!(q.allocation.front || q.allocation.back)) continue;
      const std::string& damage = damages[i++];
      if (damage.empty()) continue;
      MemoryError e;
      e.kind = "heap-buffer-overflow";
      e.message =
          fmt::format("on {}: {}, found after it was freed at:", placeName(q.allocation.device), damage);
      e.stack = q.free_stack;
      e.alloc_stack = q.allocation.stack;
      e.op_seq = q.allocation.op_seq;
      error(std::move(e), fmt::format("{:#x}", q.allocation.ptr));
    }
  }

  // Waits for the red-zone paint enqueued since the last wait (the program's own work is not ordered after
  // memcheck's queues, so an overflow could otherwise land before the paint and be painted over).
  void settlePaint() {
    if (!paint_pending_.exchange(false, std::memory_order_acq_rel)) return;
    std::lock_guard lock(queue_mutex_);
    for (const auto& [device, queue] : queues_) {
      if (queue != nullptr) rt_.queue_sync(queue);
    }
  }

  // memcheck's own queue on a device (created at first use): paints and reads red zones.
  mlurtQueue_t queueFor(int device) {
    std::lock_guard lock(queue_mutex_);
    mlurtQueue_t& queue = queues_[device];
    if (queue == nullptr) {
      int current = 0;
      rt_.get_device(&current);
      rt_.set_device(device);
      if (rt_.queue_create(&queue) != MLURT_SUCCESS) queue = nullptr;
      rt_.set_device(current);
    }
    return queue;
  }

  void record(const RuntimeCall& call, std::size_t front, std::size_t back) {
    LiveAllocation a;
    a.ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    a.size = call.size;
    a.device = call.kind == RuntimeCallKind::kHostMalloc ? kPinnedHost : currentDevice();
    a.thread = call.thread;
    a.op_seq = call.op_seq;
    // Now, not call.host_end_ns: when memcheck made the allocation itself (replace) the hook has not set
    // that yet.
    a.time_ns = monotonicNs() - origin_ns_;
    a.stack = capture();
    a.front = front;
    a.back = back;
    std::lock_guard lock(mutex_);
    live_[a.ptr] = a;
    freed_.erase(a.ptr);  // the address is in use again
    std::uint64_t& in_use = in_use_[a.device];
    in_use += a.size;
    sample(a.time_ns, a.op_seq, a.device, in_use);
    Peak& peak = peaks_[a.device];
    peak.device = a.device;
    if (in_use > peak.bytes) {
      peak.bytes = in_use;
      peak.op_seq = a.op_seq;
    }
  }

  int currentDevice() {
    int device = 0;
    if (rt_.get_device == nullptr || rt_.get_device(&device) != MLURT_SUCCESS) return 0;
    return device;
  }

  void hostFree(const RuntimeCall& call) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    const StackId stack = capture();
    {
      std::lock_guard lock(mutex_);
      if (const auto it = live_.find(ptr); it != live_.end() && it->second.device == kPinnedHost) {
        sample(call.host_start_ns - origin_ns_, call.op_seq, kPinnedHost,
               in_use_[kPinnedHost] -= it->second.size);
        remember(ptr, Freed{it->second.size, kPinnedHost, it->second.stack, stack});
        live_.erase(it);
        return;
      }
    }
    badFree(call, stack);
  }

  void badFree(const RuntimeCall& call, StackId stack) {
    {
      std::lock_guard lock(mutex_);
      badFreeLocked(call, stack);
    }
    reportPending();
  }

  // A free that matches no live allocation: which mistake it is, reported once per site (after the lock).
  void badFreeLocked(const RuntimeCall& call, StackId stack) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    MemoryError e;
    e.stack = stack;
    e.op_seq = call.op_seq;
    const char* what = call.kind == RuntimeCallKind::kHostFree ? "mlurtHostFree" : "mlurtFree";
    if (const auto it = freed_.find(ptr); it != freed_.end()) {
      e.kind = "double-free";
      e.message = fmt::format("{} of {:#x}, a {}-byte allocation on {} that was already freed", what, ptr,
                              it->second.size, placeName(it->second.device));
      e.alloc_stack = it->second.alloc_stack;
      e.free_stack = it->second.free_stack;
    } else if (const LiveAllocation* owner = containing(ptr, false)) {
      e.kind = "interior-free";
      e.message = fmt::format("{} of {:#x}, {} bytes inside a {}-byte allocation on {} at {:#x}", what, ptr,
                              ptr - owner->ptr, owner->size, placeName(owner->device), owner->ptr);
      e.alloc_stack = owner->stack;
    } else if (const auto live = live_.find(ptr); live != live_.end()) {
      // Allocated, by the other allocator: pinned host memory passed to mlurtFree, or device memory to
      // mlurtHostFree.
      const LiveAllocation& a = live->second;
      const bool pinned = a.device == kPinnedHost;
      e.kind = "alloc-dealloc-mismatch";
      e.message = fmt::format("{} of {:#x}, a {}-byte allocation on {} made by {} (free it with {})", what,
                              ptr, a.size, placeName(a.device), pinned ? "mlurtHostMalloc" : "mlurtMalloc",
                              pinned ? "mlurtHostFree" : "mlurtFree");
      e.alloc_stack = a.stack;
    } else {
      e.kind = "invalid-free";
      e.message = fmt::format("{} of {:#x}, which was never allocated", what, ptr);
    }
    pending_.push_back({std::move(e), fmt::format("{:#x}", ptr)});
  }

  // What a range [p, p + bytes) the program hands over touches: the live allocation it starts in and runs
  // past the end of, or the quarantined (freed) block it points into. Nothing for a range that fits, or that
  // is in no allocation memcheck knows.
  struct Touch {
    bool freed = false;       // into a quarantined block (else: past the end of a live one)
    LiveAllocation block;     // the allocation
    StackId free_stack = 0;   // freed: the free's backtrace
    std::uintptr_t past = 0;  // past the end: by how many bytes
  };
  std::optional<Touch> touches(std::uintptr_t p, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    if (const LiveAllocation* a = containing(p, true)) {
      if (p + bytes <= a->ptr + a->size) return std::nullopt;
      return Touch{false, *a, 0, p + bytes - (a->ptr + a->size)};
    }
    if (const Quarantined* q = quarantined(p)) return Touch{true, q->allocation, q->free_stack, 0};
    return std::nullopt;
  }

  // A tensor or workspace of an op: inside freed memory (use after free) or past its allocation's end.
  template <typename Site>
  void checkArgument(const OpCall& call, const mlu::ArgMeta& meta, const void* data, std::size_t bytes,
                     Site& site) {
    const auto p = reinterpret_cast<std::uintptr_t>(data);
    const std::optional<Touch> t = touches(p, bytes);
    if (!t) return;
    MemoryError e;
    if (t->freed) {
      e.kind = "use-after-free";
      e.message = fmt::format(
          "{} #{} argument {} at {:#x} is {} bytes inside a {}-byte allocation on {} that was freed",
          call.name, call.seq, meta.name, p, p - t->block.ptr, t->block.size, placeName(t->block.device));
      e.free_stack = t->free_stack;
    } else {
      e.kind = "out-of-bounds-argument";
      e.message = fmt::format(
          "{} #{} argument {} spans {} bytes from {:#x}, {} bytes past the end of a {}-byte allocation on {}",
          call.name, call.seq, meta.name, bytes, p, t->past, t->block.size, placeName(t->block.device));
    }
    e.alloc_stack = t->block.stack;
    e.stack = site();
    e.op_seq = call.seq;
    error(std::move(e), fmt::format("{} {}", call.name, meta.name));
  }

  // A copy's or memset's range: inside freed memory, or past an allocation's end.
  void checkRange(const RuntimeCall& call, const void* data, std::size_t bytes, const char* does) {
    if (data == nullptr || bytes == 0) return;
    const auto p = reinterpret_cast<std::uintptr_t>(data);
    const std::optional<Touch> t = touches(p, bytes);
    if (!t) return;
    MemoryError e;
    std::optional<LiveAllocation> repaint;
    if (t->freed) {
      e.kind = "use-after-free";
      e.message =
          fmt::format("{} {} {:#x}, {} bytes inside a {}-byte allocation on {} that was freed", call.symbol,
                      does, p, p - t->block.ptr, t->block.size, placeName(t->block.device));
      e.free_stack = t->free_stack;
    } else {
      e.kind = "heap-buffer-overflow";
      e.message =
          fmt::format("on {}: {} {} {} bytes from {:#x}, {} bytes past the end of a {}-byte allocation",
                      placeName(t->block.device), call.symbol, does, bytes, p, t->past, t->block.size);
      // A synchronous write has landed in the red zone: repainted, so that the check at free does not
      // report it again. (An asynchronous one may not have run yet; the check at free reports it.)
      const bool sync = call.kind == RuntimeCallKind::kMemcpy || call.kind == RuntimeCallKind::kMemset;
      if (sync && std::string_view(does) == "writes") repaint = t->block;
    }
    e.alloc_stack = t->block.stack;
    if (repaint && repaint->back > 0) {
      if (mlurtQueue_t queue = queueFor(repaint->device)) {
        rt_.memset_async(reinterpret_cast<unsigned char*>(repaint->ptr) + repaint->size, kRedZoneByte,
                         repaint->back, queue);
      }
    }
    e.stack = capture();
    e.op_seq = call.op_seq;
    error(std::move(e), std::string(call.symbol));
  }

  // The red zones of device blocks whose writers have finished, read back: per block "" when intact, else
  // what was written ("4 bytes past the end of a 4096-byte allocation"). Damaged zones are repainted, so
  // that one overflow is reported once. The copies go on memcheck's queues, behind the paint.
  std::vector<std::string> checkRedZones(const std::vector<LiveAllocation>& blocks) {
    std::vector<std::string> damage(blocks.size());
    std::vector<std::vector<unsigned char>> zones(blocks.size());
    std::set<mlurtQueue_t> used;
    std::vector<bool> read(blocks.size(), false);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const LiveAllocation& a = blocks[i];
      mlurtQueue_t queue = queueFor(a.device);
      if (queue == nullptr) continue;
      auto* user = reinterpret_cast<unsigned char*>(a.ptr);
      zones[i].resize(a.front + a.back);
      read[i] = (a.front == 0 || rt_.memcpy_async(zones[i].data(), user - a.front, a.front, queue,
                                                  MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS) &&
                (a.back == 0 || rt_.memcpy_async(zones[i].data() + a.front, user + a.size, a.back, queue,
                                                 MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS);
      used.insert(queue);
    }
    for (mlurtQueue_t queue : used) {
      if (rt_.queue_sync(queue) != MLURT_SUCCESS) return damage;
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      if (!read[i]) continue;
      const LiveAllocation& a = blocks[i];
      const unsigned char* zone = zones[i].data();
      std::size_t before = 0;  // bytes from the furthest one written before the start
      for (std::size_t j = 0; j < a.front; ++j) {
        if (zone[j] != kRedZoneByte) {
          before = a.front - j;
          break;
        }
      }
      std::size_t past = 0;  // one past the furthest byte written after the end
      for (std::size_t j = 0; j < a.back; ++j) {
        if (zone[a.front + j] != kRedZoneByte) past = j + 1;
      }
      if (past > 0)
        damage[i] =
            fmt::format("{} byte{} past the end of a {}-byte allocation", past, past == 1 ? "" : "s", a.size);
      if (before > 0) {
        if (!damage[i].empty()) damage[i] += " and ";
        damage[i] += fmt::format("{} byte{} before the start of a {}-byte allocation", before,
                                 before == 1 ? "" : "s", a.size);
      }
      if (damage[i].empty()) continue;
      auto* user = reinterpret_cast<unsigned char*>(a.ptr);
      mlurtQueue_t queue = queueFor(a.device);
      if (a.front > 0) rt_.memset_async(user - a.front, kRedZoneByte, a.front, queue);
      if (a.back > 0) rt_.memset_async(user + a.size, kRedZoneByte, a.back, queue);
    }
    return damage;
  }

  // Reports an error once per site: the offending call's stack, or `where` when there are no stacks.
  void error(MemoryError e, const std::string& where) {
    {
      std::lock_guard lock(mutex_);
      pending_.push_back({std::move(e), where});
    }
    reportPending();
  }

  void reportPending() {
    std::vector<MemoryError> fresh;
    {
      std::lock_guard lock(mutex_);
      for (auto& [e, where] : pending_) {
        const std::string site = e.stack != 0 ? fmt::format("{}", e.stack) : where;
        if (!reported_.insert({e.kind, site}).second) continue;
        errors_.push_back(e);
        fresh.push_back(std::move(e));
      }
      pending_.clear();
    }
    for (const MemoryError& e : fresh) report(e);
  }

  // The memory in use over the run (memcheck_timeline.csv), capped: past kTimelineSamples the rest of the
  // run is not sampled (the peaks still are).
  static constexpr std::size_t kTimelineSamples = 1 << 20;
  void sample(std::int64_t time_ns, std::uint64_t op_seq, int device, std::uint64_t bytes) {
    if (timeline_.size() < kTimelineSamples) timeline_.push_back({time_ns, op_seq, device, bytes});
  }

  void remember(std::uintptr_t ptr, const Freed& f) {
    freed_[ptr] = f;
    freed_order_.push_back(ptr);
    while (freed_order_.size() > kFreedRemembered) {
      freed_.erase(freed_order_.front());
      freed_order_.pop_front();
    }
  }

  // The live allocation that contains ptr (at_start: or starts at it).
  const LiveAllocation* containing(std::uintptr_t ptr, bool at_start) const {
    auto it = live_.upper_bound(ptr);
    if (it == live_.begin()) return nullptr;
    --it;
    const LiveAllocation& a = it->second;
    const bool inside = at_start ? ptr >= a.ptr : ptr > a.ptr;
    return inside && ptr < a.ptr + std::max<std::size_t>(a.size, 1) ? &a : nullptr;
  }

  const Quarantined* quarantined(std::uintptr_t ptr) const {
    auto it = quarantine_.upper_bound(ptr);
    if (it == quarantine_.begin()) return nullptr;
    --it;
    const LiveAllocation& a = it->second.allocation;
    return ptr >= a.ptr && ptr < a.ptr + std::max<std::size_t>(a.size, 1) ? &it->second : nullptr;
  }

  void report(const MemoryError& e) {
    Symbolizer symbolizer;
    const std::string text = formatError(e, [&](StackId id) { return symbolize(symbolizer, id); });
    std::fputs(text.c_str(), stderr);
    if (config_.mem_check_abort) {
      std::fputs("opscope memcheck: MEM_CHECK_ABORT_ON_ERROR=1: aborting\n", stderr);
      writeReports();
      std::abort();
    }
  }

  std::vector<Frame> symbolize(Symbolizer& symbolizer, StackId id) {
    std::vector<Frame> out;
    bool first = true;
    for (std::uintptr_t pc : stacks_.frames(id)) {
      for (Frame& f : symbolizer.symbolize(pc, !first)) out.push_back(std::move(f));
      first = false;
    }
    return out;
  }

  void writeReports() {
    ReportInput in;
    std::string timeline;
    in.command = run_.command_line;
    in.pid = run_.pid;
    in.backtraces = config_.mem_check_backtrace;
    {
      std::lock_guard lock(mutex_);
      if (written_.exchange(true)) return;
      std::vector<LiveAllocation> live;
      live.reserve(live_.size());
      for (const auto& [ptr, a] : live_) live.push_back(a);
      in.leaks = groupLeaks(live);
      in.errors = errors_;
      for (const auto& [device, peak] : peaks_) in.peaks.push_back(peak);
      timeline.reserve(timeline_.size() * 24 + 32);
      timeline = "time_ms,op_seq,place,bytes\n";
      for (const Sample& t : timeline_) {
        timeline += fmt::format("{:.6f},{},{},{}\n", static_cast<double>(t.time_ns) / 1e6, t.op_seq,
                                placeName(t.device), t.bytes);
      }
    }
    Symbolizer symbolizer;
    std::map<StackId, std::vector<Frame>> cache;
    const Reports r = buildReports(in, [&](StackId id) -> std::vector<Frame> {
      auto [it, inserted] = cache.try_emplace(id);
      if (inserted) it->second = symbolize(symbolizer, id);
      return it->second;
    });
    bool ok = writeFile("memcheck.txt", r.text);
    ok = writeFile("memcheck.json", r.json) && ok;
    ok = writeFile("memcheck_timeline.csv", timeline) && ok;
    std::fputs(r.summary.c_str(), stderr);
    if (ok) std::fprintf(stderr, "opscope memcheck: report in %s/memcheck.txt\n", run_.result_dir.c_str());
  }

  bool writeFile(const char* name, const std::string& text) {
    const std::string error = writePrivateFile(run_.result_dir + "/" + name, text);
    if (!error.empty()) std::fprintf(stderr, "opscope memcheck: %s\n", error.c_str());
    return error.empty();
  }

  const Config& config_;
  const RunInfo run_;
  const std::int64_t origin_ns_;
  const std::size_t front_;  // red zone bytes before each device allocation (a multiple of the alignment)
  const std::size_t back_;   // and after it
  const std::size_t quarantine_cap_;
  const Runtime rt_;
  StackTable stacks_;
  std::mutex queue_mutex_;
  std::map<int, mlurtQueue_t> queues_;      // guarded by queue_mutex_
  std::atomic<bool> paint_pending_{false};  // paint enqueued and not waited for
  std::mutex mutex_;                        // guards everything below
  std::map<std::uintptr_t, LiveAllocation> live_;
  std::unordered_map<std::uintptr_t, Freed> freed_;
  std::deque<std::uintptr_t> freed_order_;
  std::map<int, std::uint64_t> in_use_;
  std::map<int, Peak> peaks_;
  std::vector<MemoryError> errors_;
  std::vector<std::pair<MemoryError, std::string>> pending_;  // found under the lock, reported after it
  std::set<std::pair<std::string, std::string>> reported_;
  std::map<std::uintptr_t, Quarantined> quarantine_;
  std::deque<std::uintptr_t> quarantine_order_;
  std::size_t quarantine_bytes_ = 0;
  struct Sample {
    std::int64_t time_ns;
    std::uint64_t op_seq;
    int device;
    std::uint64_t bytes;
  };
  std::vector<Sample> timeline_;
  std::atomic<bool> written_{false};  // the report is written once
};

}  // namespace

std::unique_ptr<Tool> makeMemcheckTool(const Config& config, const RunInfo& run) {
  return std::make_unique<Memcheck>(config, run);
}

}  // namespace opscope::memcheck
