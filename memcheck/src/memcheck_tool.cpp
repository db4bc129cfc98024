#include <opscope/memcheck/memcheck_tool.h>

#include <opscope/results/memcheck_file.h>
#include <opscope/stacks.h>
#include <opscope/symbolizer.h>
#include "allocation_table.h"
#include "error_log.h"
#include "init_shadow.h"
#include "queue_race.h"
#include "red_zones.h"
#include "report.h"
#include "tick_clock.h"

#include <opscope/own_memory.h>
#include <opscope/private_file.h>
#include <opscope/runtime_access.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <type_traits>
#include <vector>

namespace opscope::memcheck {
namespace {

// " (in layer1.0.conv1 at train.py:57 in step)": where the program made the call, when its framework says.
std::string inSite(const FrameworkSite* site) {
  const std::string text = siteText(site);
  return text.empty() ? text : " (in " + text + ")";
}

// The tool: the allocation table and the quarantine (under one lock), the red zones on the device, the
// errors found, the stacks; and the reports at exit.
class Memcheck final : public Tool {
 public:
  // snapshot_only: OP_OOM_SNAPSHOT without MEM_CHECK (config then as snapshotConfig() makes it): the
  // allocation table with backtraces, no checks, no reports, nothing written but memory_snapshot.json.
  Memcheck(const Config& config, const RunInfo& run, bool snapshot_only = false)
      : config_(config),
        snapshot_only_(snapshot_only),
        run_(run),
        zones_(rt_, frontRedZone(config.mem_check_redzone), config.mem_check_redzone),
        stacks_(config.mem_check_backtrace_depth,
                moduleRangeOf(reinterpret_cast<const void*>(&makeMemcheckTool))),
        quarantine_(config.mem_check_quarantine_mb << 20) {}

  ToolId id() const override { return snapshot_only_ ? ToolId::kOomSnapshot : ToolId::kMemcheck; }
  // Every op: its tensors are checked against the allocation table before it runs, its outputs' red zones
  // after. (The snapshot alone checks nothing.)
  bool wants(const OpCall& call) const override { return call.args_ok && !snapshot_only_; }

  // A copy, memset, host function or collective may write into a red zone: the paint must be there before
  // it.
  // A free memcheck leaves to the runtime (the table only) leaves the table before it.
  void beforeRuntimeCall(const RuntimeCall& call) override {
    if (race_ && (call.kind == RuntimeCallKind::kFree || call.kind == RuntimeCallKind::kHostFree) &&
        call.ptr != nullptr) {
      // The block goes back to the runtime (a device block after the device's work): its accesses are gone.
      std::lock_guard lock(mutex_);
      if (const LiveAllocation* a = table_.containing(reinterpret_cast<std::uintptr_t>(call.ptr), true))
        race_model_.forget(a->ptr, a->size);
    }
    // The checks queued on the program's queues are looked at before a call that waits for them returns
    // (their host functions run first), and before a queue goes.
    switch (call.kind) {
      case RuntimeCallKind::kQueueSync:
      case RuntimeCallKind::kQueueDestroy:
        zones_.flushChecks(call.queue);  // (nullptr, the default queue: every queue's, to be sure)
        break;
      case RuntimeCallKind::kDeviceSynchronize:
      case RuntimeCallKind::kNotifierSync:
      case RuntimeCallKind::kMemcpy:
      case RuntimeCallKind::kFree:
        zones_.flushChecks(nullptr);
        break;
      default:
        break;
    }
    if (race_ && call.kind == RuntimeCallKind::kLaunchHostFunc) {
      // The host function is work of its queue from its launch: enqueued before the runtime may run it, so
      // that its opscope_host_access calls find it (the hook's wrapper hands them the slot's value).
      std::lock_guard lock(mutex_);
      const auto work =
          race_model_.enqueue(race_model_.thread(call.thread), race_model_.queue(queueId(call.queue)));
      if (call.host_work_slot != nullptr)
        *call.host_work_slot = (std::uint64_t{work.first} << 32) | work.second;
    }
    if (!rt_.ok()) return;
    if (call.kind == RuntimeCallKind::kFree && call.ptr != nullptr && !holdsFreed()) forget(call);
    // The paint a copy, memset, host function or transfer may need goes before it: queued ahead of it on its
    // queue when the program's work goes through that queue alone (as for an op: before()), else painted
    // and waited for. A blocking copy or memset is not work of a queue of the program's: painted and waited
    // for.
    if (call.kind == RuntimeCallKind::kMemcpy || call.kind == RuntimeCallKind::kMemset) {
      zones_.settle();
    } else if (zones_.paintPending() &&
               (call.kind == RuntimeCallKind::kMemcpyAsync || call.kind == RuntimeCallKind::kMemsetAsync ||
                call.kind == RuntimeCallKind::kLaunchHostFunc || call.kind == RuntimeCallKind::kCollective)) {
      const int device = queueDevice(call.queue);
      if (!zones_.settleOn(call.queue, device, onlyQueue(device, queueId(call.queue)))) zones_.settle();
    }
  }

  // Allocations with red zones, frees into the quarantine.
  bool replace(RuntimeCall& call) override {
    if (!rt_.ok()) return false;
    if (call.kind == RuntimeCallKind::kMalloc) return allocateDevice(call);
    if (call.kind == RuntimeCallKind::kFree) return freeDevice(call);
    return false;
  }

  void onRuntimeCall(const RuntimeCall& call) override {
    // The snapshot alone keeps the table of device allocations and the program allocator's pieces, and
    // checks nothing (its configuration has no red zones, no quarantine, no race or init model).
    if (snapshot_only_ && call.kind != RuntimeCallKind::kMalloc && call.kind != RuntimeCallKind::kPoolAlloc &&
        call.kind != RuntimeCallKind::kPoolFree)
      return;
    reportFound();
    if (zones_.enabled() && call.status == MLURT_SUCCESS &&
        (call.kind == RuntimeCallKind::kMemcpyAsync || call.kind == RuntimeCallKind::kMemsetAsync ||
         call.kind == RuntimeCallKind::kLaunchHostFunc || call.kind == RuntimeCallKind::kCollective)) {
      onlyQueue(queueDevice(call.queue), queueId(call.queue));  // (red zones: RedZones::settleOn)
    }
    if (race_) raceRuntime(call);
    switch (call.kind) {
      case RuntimeCallKind::kMalloc:
        if (!call.replaced && call.status == MLURT_SUCCESS && call.ptr != nullptr) record(call, 0, 0);
        if (call.status == MLURT_ERROR_OUT_OF_MEMORY) outOfMemory(call);
        return;
      case RuntimeCallKind::kHostMalloc:
        if (call.status == MLURT_SUCCESS && call.ptr != nullptr) record(call, 0, 0);
        return;
      case RuntimeCallKind::kFree:
        if (init_ && call.ptr != nullptr) {
          std::lock_guard lock(mutex_);
          shadow_.release(reinterpret_cast<std::uintptr_t>(call.ptr), false);
        }
        // A free memcheck did not make itself matched no live allocation (with the table only,
        // beforeRuntimeCall() has said so already).
        if (!call.replaced && call.ptr != nullptr && holdsFreed()) badFree(call, capture(call.site));
        return;
      case RuntimeCallKind::kHostFree:
        if (call.ptr != nullptr) hostFree(call);
        return;
      case RuntimeCallKind::kMemcpy:
      case RuntimeCallKind::kMemcpyAsync:
        checkRange(call, call.ptr, call.size, "writes");
        checkRange(call, call.src, call.size, "reads");
        if (init_ && call.status == MLURT_SUCCESS) {
          if (call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_HOST ||
              call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_DEVICE)
            readCopy(call);
          if (call.memcpy_kind == MLURT_MEMCPY_HOST_TO_DEVICE ||
              call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_DEVICE)
            written(call.ptr, call.size);
        }
        return;
      case RuntimeCallKind::kMemset:
      case RuntimeCallKind::kMemsetAsync:
        checkRange(call, call.ptr, call.size, "writes");
        if (init_ && call.status == MLURT_SUCCESS) written(call.ptr, call.size);
        return;
      case RuntimeCallKind::kPoolAlloc:
        poolAlloc(call);
        return;
      case RuntimeCallKind::kPoolFree:
        poolFree(call);
        return;
      case RuntimeCallKind::kCollective:
        // A transfer the collective library accepted reads its send buffer and writes its receive buffer.
        if (call.collective.status != 0) return;
        checkRange(call, call.collective.send, call.collective.send_bytes, "reads");
        checkRange(call, call.collective.recv, call.collective.recv_bytes, "writes");
        if (init_) written(call.collective.recv, call.collective.recv_bytes);
        return;
      default:
        return;
    }
  }

  void before(OpCall& call) override {
    reportFound();
    // The op may write into a red zone: the paint must be there before it (queued ahead of it on its
    // queue when that orders it, else painted and waited for).
    if (zones_.enabled() && !zones_.settleOn(call.queue, call.device, onlyQueue(call.device, call.queue_id)))
      zones_.settle();
    // Each tensor (and workspace) must lie inside a live allocation: not in freed memory, not past an end.
    StackId stack = 0;
    bool captured = false;
    auto site = [&] {
      if (!captured) stack = capture(call.site);
      captured = true;
      return stack;
    };
    call.withArgs([&](const auto& args) {
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, mlu::TensorView>) {
          if (value.present && value.data != nullptr)
            checkArgument(call, meta, value.data, value.extentBytes(), site);
        } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
          if (value.data != nullptr && value.size > 0)
            checkArgument(call, meta, value.data, value.size, site);
        }
      });
    });
    if (init_) initialized(call, site);
    if (race_) raceOp(call, site);
  }

  // MEM_CHECK_RACE: the op's accesses, as work of its queue.
  template <typename Site>
  void raceOp(const OpCall& call, Site& site) {
    std::vector<QueueRace::Race> races;
    call.withArgs([&](const auto& args) {
      std::lock_guard lock(mutex_);
      const std::uint32_t thread = race_model_.thread(call.thread);
      // (Not a structured binding: the lambda below captures them, which clang before 16 refuses.)
      const std::pair<std::uint32_t, std::uint32_t> work =
          race_model_.enqueue(thread, race_model_.queue(call.queue_id));
      const std::uint32_t queue = work.first, clock = work.second;
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
          if (!value.present || value.data == nullptr) return;
          // Reads first: an in-place op reads what it then writes.
          for (const bool write : {false, true}) {
            if (write ? !meta.writes() : !meta.reads()) continue;
            auto found = race_model_.access(
                reinterpret_cast<std::uintptr_t>(value.data), value.extentBytes(), write, queue, clock,
                fmt::format("{} #{}{} {} {} on queue {}", call.name, call.seq, inSite(call.site),
                            write ? "writes" : "reads", meta.name, call.queue_id));
            races.insert(races.end(), found.begin(), found.end());
          }
        }
      });
    });
    reportRaces(races, site());
  }

  // A runtime call's part in the order, and its accesses (MEM_CHECK_RACE).
  void raceRuntime(const RuntimeCall& call) {
    if (call.status != MLURT_SUCCESS) return;
    std::vector<QueueRace::Race> races;
    {
      std::lock_guard lock(mutex_);
      QueueRace& m = race_model_;
      const std::uint32_t thread = m.thread(call.thread);
      auto queueOf = [&](mlurtQueue_t q) { return m.queue(queueId(q)); };
      auto touch = [&](std::uint32_t queue, std::uint32_t clock, const void* p, std::size_t bytes, bool write,
                       const char* what) {
        auto found = m.access(reinterpret_cast<std::uintptr_t>(p), bytes, write, queue, clock,
                              fmt::format("{} {} on {}", call.symbol, what, m.entityName(queue)));
        races.insert(races.end(), found.begin(), found.end());
      };
      switch (call.kind) {
        case RuntimeCallKind::kMemcpy:
        case RuntimeCallKind::kMemcpyAsync:
        case RuntimeCallKind::kMemset:
        case RuntimeCallKind::kMemsetAsync: {
          const bool blocking =
              call.kind == RuntimeCallKind::kMemcpy || call.kind == RuntimeCallKind::kMemset;
          const std::uint32_t queue = queueOf(blocking ? nullptr : call.queue);
          const auto [q, clock] = m.enqueue(thread, queue);
          const bool copy =
              call.kind == RuntimeCallKind::kMemcpy || call.kind == RuntimeCallKind::kMemcpyAsync;
          if (copy && (call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_HOST ||
                       call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_DEVICE))
            touch(q, clock, call.src, call.size, false, "reads its source");
          if (!copy || call.memcpy_kind == MLURT_MEMCPY_HOST_TO_DEVICE ||
              call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_DEVICE)
            touch(q, clock, call.ptr, call.size, true, copy ? "writes its destination" : "writes");
          // Its host side, when it is pinned host memory (whose accesses end at mlurtHostFree): what the
          // program's host code touches there (opscope_host_access) races with an asynchronous copy too.
          if (copy && call.memcpy_kind == MLURT_MEMCPY_HOST_TO_DEVICE && pinned(call.src, call.size))
            touch(q, clock, call.src, call.size, false, "reads its source (pinned host memory)");
          if (copy && call.memcpy_kind == MLURT_MEMCPY_DEVICE_TO_HOST && pinned(call.ptr, call.size))
            touch(q, clock, call.ptr, call.size, true, "writes its destination (pinned host memory)");
          if (blocking) m.threadWaitsQueue(thread, q);
          break;
        }
        case RuntimeCallKind::kHostAccess: {
          // Inside a host function: that queue's work (beforeRuntimeCall gave it its place); else the
          // thread's own, at its clock now.
          const std::pair<std::uint32_t, std::uint32_t> work =
              call.host_work != 0
                  ? std::pair<std::uint32_t, std::uint32_t>{static_cast<std::uint32_t>(call.host_work >> 32),
                                                            static_cast<std::uint32_t>(call.host_work)}
                  : m.threadNow(thread);
          auto found = m.access(
              reinterpret_cast<std::uintptr_t>(call.ptr), call.size, call.write, work.first, work.second,
              fmt::format("{} {} {} bytes (opscope_host_access)",
                          call.host_work != 0 ? "a host function on " + m.entityName(work.first)
                                              : m.entityName(work.first),
                          call.write ? "writes" : "reads", call.size));
          races.insert(races.end(), found.begin(), found.end());
          break;
        }
        case RuntimeCallKind::kQueueSync:
        case RuntimeCallKind::kQueueQuery:  // success: the queue is idle
          m.threadWaitsQueue(thread, queueOf(call.queue));
          break;
        case RuntimeCallKind::kDeviceSynchronize:
        case RuntimeCallKind::kFree:  // waits for the device's work first
          m.threadWaitsAll(thread);
          break;
        case RuntimeCallKind::kPlaceNotifier:
          m.placeNotifier(call.notifier, thread, queueOf(call.queue));
          break;
        case RuntimeCallKind::kQueueWaitNotifier:
          m.queueWaitsNotifier(thread, queueOf(call.queue), call.notifier);
          break;
        case RuntimeCallKind::kNotifierSync:
        case RuntimeCallKind::kNotifierQuery:  // success: complete
          m.threadWaitsNotifier(thread, call.notifier);
          break;
        case RuntimeCallKind::kCollective: {
          const auto [q, clock] = m.enqueue(thread, queueOf(call.queue));
          touch(q, clock, call.collective.send, call.collective.send_bytes, false, "reads its send buffer");
          touch(q, clock, call.collective.recv, call.collective.recv_bytes, true,
                "writes its receive buffer");
          break;
        }
        default:
          break;
      }
    }
    if (!races.empty()) reportRaces(races, capture(call.site));
  }

  // Whether [p, p + bytes) starts in pinned host memory the program allocated (mlurtHostMalloc). Under the
  // lock.
  bool pinned(const void* p, std::size_t bytes) const {
    const LiveAllocation* a = table_.containing(reinterpret_cast<std::uintptr_t>(p), true);
    return bytes > 0 && a != nullptr && a->device == kPinnedHost;
  }

  // The device of a queue (nullptr: the current device's default queue).
  int queueDevice(mlurtQueue_t q) {
    static const auto get = realRuntimeFunction<decltype(&mlurtQueueGetDevice)>("mlurtQueueGetDevice");
    int device = 0;
    if (q == nullptr || get == nullptr || get(q, &device) != MLURT_SUCCESS) return rt_.currentDevice();
    return device;
  }

  // The runtime's id of a queue (nullptr: the current device's default queue), by which the race model
  // knows it (an op's handle may name the default queue by its own handle).
  std::uint64_t queueId(mlurtQueue_t q) {
    static const auto get = realRuntimeFunction<decltype(&mlurtQueueGetId)>("mlurtQueueGetId");
    std::uint64_t id = 0;
    if (get == nullptr || get(q, &id) != MLURT_SUCCESS) return reinterpret_cast<std::uintptr_t>(q);
    return id;
  }

  void reportRaces(const std::vector<QueueRace::Race>& races, StackId stack) {
    for (const QueueRace::Race& r : races) {
      std::string first, second;
      StackId alloc_stack = 0;
      std::uintptr_t base = 0;
      std::size_t size = 0;
      int device = 0;
      {
        std::lock_guard lock(mutex_);
        first = race_model_.description(r.first);
        second = race_model_.description(r.second);
        const LiveAllocation* a = pieces_.containing(r.begin, true);
        if (a == nullptr) a = table_.containing(r.begin, true);
        if (a != nullptr) {
          alloc_stack = a->stack;
          base = a->ptr;
          size = a->size;
          device = a->device;
        }
      }
      MemoryError e;
      e.kind = "race";
      // What would order them: for a thread's host code, waiting for the queue's work; else a notifier.
      const bool host_thread = first.starts_with("host thread") || second.starts_with("host thread");
      e.message = fmt::format(
          "{}, and {} (called before it): bytes {}..{} of a {}-byte allocation on {}; nothing orders the two "
          "{}",
          second, first, r.begin - base, r.end - base, size, placeName(device),
          host_thread ? "(the thread waiting for the queue's work first would: mlurtQueueSync, or "
                        "mlurtNotifierSync of a notifier placed after it)"
                      : "on the device (a notifier placed after the first on its queue, waited on by the "
                        "second's queue, would)");
      e.stack = stack;
      e.alloc_stack = alloc_stack;
      // One report per pair of accesses (their ops and arguments, whatever the call numbers).
      error(e, racePair(first) + " | " + racePair(second));
    }
  }

  // An access's description without its call number ("relu #12 reads x" -> "relu reads x").
  static std::string racePair(std::string text) {
    if (const auto hash = text.find(" #"); hash != std::string::npos) {
      const auto space = text.find(' ', hash + 2);
      text.erase(hash, space == std::string::npos ? std::string::npos : space - hash);
    }
    return text;
  }

  // MEM_CHECK_INIT: what the op reads must have been written since its allocation (checked first: an
  // in-place op reads before it writes); then what it writes is.
  template <typename Site>
  void initialized(const OpCall& call, Site& site) {
    struct Read {
      std::string_view argument;  // the schema's name (a literal: it outlives the visit's ArgMeta)
      InitShadow::Unwritten found;
    };
    std::vector<Read> unwritten;
    call.withArgs([&](const auto& args) {
      std::lock_guard lock(mutex_);
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
          if (!meta.reads() || !value.present || value.data == nullptr) return;
          if (const auto u = shadow_.read(reinterpret_cast<std::uintptr_t>(value.data), value.extentBytes()))
            unwritten.push_back({meta.name, *u});
        }
      });
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
          if (meta.writes() && value.present && value.data != nullptr)
            shadow_.write(reinterpret_cast<std::uintptr_t>(value.data), value.extentBytes());
        }
      });
    });
    for (const Read& r : unwritten) {
      uninitializedRead(
          fmt::format("{} #{}{} reads input {}", call.name, call.seq, inSite(call.site), r.argument), r.found,
          site(), call.seq, fmt::format("{} {}", call.name, r.argument));
    }
  }

  // A device-to-host or device-to-device copy reads its source: it must have been written.
  void readCopy(const RuntimeCall& call) {
    std::optional<InitShadow::Unwritten> found;
    {
      std::lock_guard lock(mutex_);
      found = shadow_.read(reinterpret_cast<std::uintptr_t>(call.src), call.size);
    }
    if (found) {
      uninitializedRead(fmt::format("{} reads {} bytes from {:#x}", call.symbol, call.size,
                                    reinterpret_cast<std::uintptr_t>(call.src)),
                        *found, capture(call.site), call.op_seq, std::string(call.symbol));
    }
  }

  void written(const void* p, std::size_t bytes) {
    if (p == nullptr || bytes == 0) return;
    std::lock_guard lock(mutex_);
    shadow_.write(reinterpret_cast<std::uintptr_t>(p), bytes);
  }

  void uninitializedRead(const std::string& what, const InitShadow::Unwritten& u, StackId stack,
                         std::uint64_t op_seq, const std::string& where) {
    MemoryError e;
    e.kind = "uninitialized-read";
    StackId alloc_stack = 0;
    int device = 0;
    {
      std::lock_guard lock(mutex_);
      const LiveAllocation* a = pieces_.containing(u.allocation.begin, true);
      if (a == nullptr || a->ptr != u.allocation.begin) a = table_.containing(u.allocation.begin, true);
      if (a != nullptr) {
        alloc_stack = a->stack;
        device = a->device;
      }
    }
    e.message = fmt::format(
        "{}: bytes {}..{} of a {}-byte allocation on {} were never written since it was allocated", what,
        u.unwritten.begin - u.allocation.begin, u.unwritten.end - u.allocation.begin,
        u.allocation.end - u.allocation.begin, placeName(device));
    e.stack = stack;
    e.alloc_stack = alloc_stack;
    e.op_seq = op_seq;
    error(e, where);
  }

  void after(OpCall& call) override {
    if (!zones_.enabled()) return;
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
    std::vector<LiveAllocation> blocks;
    {
      std::lock_guard lock(mutex_);
      for (std::uintptr_t p : written) {
        const LiveAllocation* a = pieces_.containing(p, true);
        if (a == nullptr) a = table_.containing(p, true);
        if (a != nullptr && (a->front || a->back)) {
          if (std::find_if(blocks.begin(), blocks.end(), [&](const auto& b) { return b.ptr == a->ptr; }) ==
              blocks.end()) {
            blocks.push_back(*a);
          }
        }
      }
    }
    if (blocks.empty()) return;
    // Checked on the op's queue after it (in one kernel with the paint the next op needs), with no wait: a
    // damaged block is reported once the queue has run the check and its batch has been looked at (at a
    // later call of the program, or at the end), with this call's backtrace.
    // The call's backtrace is unwound now, for the report (the check's result comes later) — but not for a
    // call whose framework names its site (module, Python line: in the message), where it would cost an
    // unwind and a walk of the Python stack per op.
    Found op{std::string(call.name), call.seq, inSite(call.site),
             call.site != nullptr ? 0 : capture(call.site)};
    if (call.queue != nullptr && zones_.checkOn(call.queue, call.device, blocks,
                                                [this, op](const std::vector<LiveAllocation>& checked,
                                                           const std::vector<std::string>& damage) {
                                                  std::lock_guard lock(found_mutex_);
                                                  for (std::size_t i = 0; i < checked.size(); ++i)
                                                    if (!damage[i].empty())
                                                      found_.push_back({op, checked[i], damage[i]});
                                                  found_any_.store(true, std::memory_order_release);
                                                })) {
      return;
    }
    if (call.queue != nullptr && rt_.queue_sync(call.queue) != MLURT_SUCCESS) return;
    const std::vector<std::string> damages = zones_.check(blocks);
    for (std::size_t i = 0; i < blocks.size(); ++i)
      if (!damages[i].empty()) overflow(op, blocks[i], damages[i]);
  }

  // An op that wrote into a block's red zone, and the damage: what checkOn()'s host functions leave for the
  // program's next call to report (found_).
  struct Found {
    std::string name;
    std::uint64_t seq = 0;
    std::string site;  // inSite()
    StackId stack = 0;
  };
  struct FoundOverflow {
    Found op;
    LiveAllocation block;
    std::string damage;
  };

  void overflow(const Found& op, const LiveAllocation& a, const std::string& damage) {
    MemoryError e;
    e.kind = "heap-buffer-overflow";
    e.message =
        fmt::format("on {}: {}, written by {} #{}{}", placeName(a.device), damage, op.name, op.seq, op.site);
    e.stack = op.stack;
    e.site_only = op.stack == 0 && !op.site.empty() && config_.mem_check_backtrace;  // after()
    e.alloc_stack = a.stack;
    e.op_seq = op.seq;
    error(e, op.name);
  }

  // The overflows the checks in flight have found so far.
  void reportFound() {
    if (!found_any_.load(std::memory_order_acquire)) return;
    std::vector<FoundOverflow> found;
    {
      std::lock_guard lock(found_mutex_);
      found.swap(found_);
      found_any_.store(false, std::memory_order_release);
    }
    for (const FoundOverflow& f : found) overflow(f.op, f.block, f.damage);
  }

  // Whether the program's asynchronous work on the device has gone through this queue alone so far (the ops,
  // and the copies, memsets, host functions and collectives it queued): a program allocator's piece handed
  // out again is then painted in order on it (RedZones::settleOn).
  bool onlyQueue(int device, std::uint64_t queue_id) {
    std::lock_guard lock(queues_mutex_);
    const auto [it, added] = device_queue_.emplace(device, queue_id);
    if (!added && it->second != queue_id) several_queues_.insert(device);
    return several_queues_.count(device) == 0;
  }

  void flush() override {
    if (snapshot_only_) return;  // (memory_snapshot.json was written when an allocation failed)
    // The checks in flight (once the devices have run them), and the blocks still in the quarantine: their
    // red zones too (the program has ended; its queues drain).
    zones_.waitAll();
    reportFound();
    std::vector<Quarantined> waiting;
    {
      std::lock_guard lock(mutex_);
      waiting = quarantine_.all();
    }
    checkFreed(waiting);
    writeReports();
  }

  // The program's step ends: each place's peak during it and what it ends with (memcheck.json's steps).
  void onStep() override {
    const std::uint32_t step = steps_.fetch_add(1, std::memory_order_relaxed) + 1;
    std::lock_guard lock(mutex_);
    table_.markStep(step);
    pieces_.markStep(step);
  }
  void onProgramEnd() override { program_ended_ = true; }

  void flushOnSignal() override {
    if (snapshot_only_) return;
    // A program killed by a signal still holds its memory: there is nothing to call a leak, and
    // symbolizing is not safe in a signal handler. The errors were printed when found.
    if (written_.load()) return;  // MEM_CHECK_ABORT_ON_ERROR wrote it before aborting
    std::fputs("opscope memcheck: the program was ended by a signal; no leak report\n", stderr);
  }

 private:
  StackId capture(const FrameworkSite* site) {
    return config_.mem_check_backtrace ? stacks_.capture(site) : 0;
  }
  // Freed device blocks are held (red zones to check, or a quarantine): memcheck makes every free itself.
  bool holdsFreed() const { return zones_.enabled() || config_.mem_check_quarantine_mb > 0; }

  // mlurtMalloc: the real block holds a red zone on each side of the program's bytes.
  bool allocateDevice(RuntimeCall& call) {
    if (call.out == nullptr || call.size == 0 || !zones_.enabled()) return false;
    call.status = zones_.allocate(call.size, call.out);
    if (call.status == MLURT_ERROR_OUT_OF_MEMORY && emptyQuarantine())
      call.status = zones_.allocate(call.size, call.out);
    if (call.status != MLURT_SUCCESS) return true;
    call.ptr = *call.out;
    record(call, zones_.front(), zones_.back());
    return true;
  }

  // mlurtFree of a live device allocation: its red zones are checked, then the block waits in the
  // quarantine. A pointer still in the quarantine is a double free, refused as the runtime would.
  // The table only (no red zones, no quarantine): the runtime frees the block; memcheck only takes it out
  // of the table first (so that an address handed out again at once is not taken out with it), and says
  // now when it was not there. A good free is not unwound (as heaptrack does not): its backtrace would only
  // ever serve a later double free's "freed before at", and it was half of the cost of backtraces. A bad
  // free is.
  void forget(const RuntimeCall& call) {
    bool released = false;
    {
      std::lock_guard lock(mutex_);
      const std::optional<LiveAllocation> a =
          table_.release(reinterpret_cast<std::uintptr_t>(call.ptr), false, 0, clock_.now(), call.op_seq);
      if (a) forgetFreedPiecesLocked(*a);
      released = a.has_value();
    }
    if (!released && !snapshot_only_) badFree(call, capture(call.site));
  }

  bool freeDevice(RuntimeCall& call) {
    if (call.ptr == nullptr || !holdsFreed()) return false;
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    const std::int64_t now = clock_.now();
    const StackId stack = capture(call.site);
    std::vector<Quarantined> evicted;
    {
      std::unique_lock lock(mutex_);
      const std::optional<LiveAllocation> a = table_.release(ptr, false, stack, now, call.op_seq);
      if (!a) {
        if (!quarantine_.holds(ptr)) return false;  // the runtime decides; onRuntimeCall reports it
        call.status = MLURT_ERROR_INVALID_POINTER;
        const MemoryError e = table_.badFree(ptr, false, stack, call.op_seq);
        lock.unlock();
        error(e, fmt::format("{:#x}", ptr));
        return true;
      }
      forgetFreedPiecesLocked(*a);
      // Into the quarantine (freed blocks are held back from the runtime until MEM_CHECK_QUARANTINE_MB wait
      // behind them, so that an op that still uses one is seen, and the address is not handed out again at
      // once). Its red zones are checked when it leaves, a batch at a time, or at exit: the writes they would
      // show were all made before the free.
      evicted = quarantine_.hold(Quarantined{*a, stack});
      addOwnDeviceBytes(a->device, counted(a->size));  // the program's no more: memcheck's
    }
    call.status = MLURT_SUCCESS;
    if (!evicted.empty()) {
      checkFreed(evicted);
      for (const Quarantined& q : evicted) zones_.release(q.allocation);
    }
    return true;
  }

  // The device has no room for an allocation: memcheck's own holdings must not be what the program runs out
  // for, so every block in the quarantine is checked and given back (false: it held none).
  bool emptyQuarantine() {
    std::vector<Quarantined> held;
    {
      std::lock_guard lock(mutex_);
      held = quarantine_.releaseAll();
    }
    if (held.empty()) return false;
    checkFreed(held);
    for (const Quarantined& q : held) zones_.release(q.allocation);
    return true;
  }

  // Freed blocks' red zones, once the devices they are on have run everything queued (as mlurtFree waits):
  // damage is reported with the free's backtrace and the allocation's.
  void checkFreed(const std::vector<Quarantined>& freed) {
    std::vector<const Quarantined*> guarded;
    std::vector<LiveAllocation> blocks;
    std::set<int> devices;
    for (const Quarantined& q : freed) {
      if (q.allocation.front || q.allocation.back) {
        guarded.push_back(&q);
        blocks.push_back(q.allocation);
        devices.insert(q.allocation.device);
      }
    }
    if (blocks.empty()) return;
    if (!zones_.waitForDevices(devices)) return;  // freed from a queue's own thread: cannot wait there
    const std::vector<std::string> damages = zones_.check(blocks);
    for (std::size_t i = 0; i < guarded.size(); ++i) {
      if (damages[i].empty()) continue;
      const Quarantined& q = *guarded[i];
      MemoryError e;
      e.kind = "heap-buffer-overflow";
      e.message =
          fmt::format("on {}: {}, found after it was freed at:", placeName(q.allocation.device), damages[i]);
      e.stack = q.free_stack;
      e.alloc_stack = q.allocation.stack;
      e.op_seq = q.allocation.op_seq;
      error(e, fmt::format("{:#x}", q.allocation.ptr));
    }
  }

  void record(const RuntimeCall& call, std::size_t front, std::size_t back) {
    LiveAllocation a;
    a.ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    a.size = call.size;
    a.device = call.kind == RuntimeCallKind::kHostMalloc ? kPinnedHost : rt_.currentDevice();
    a.thread = call.thread;
    a.op_seq = call.op_seq;
    a.last_op = call.last_op;
    // Now, not call.host_end_ns: when memcheck made the allocation itself (replace) the hook has not set
    // that yet.
    a.time = clock_.now();
    a.stack = capture(call.site);
    a.step = steps_.load(std::memory_order_relaxed);
    a.site = call.site;
    a.front = front;
    a.back = back;
    std::lock_guard lock(mutex_);
    table_.add(a);
    if (init_ && a.device != kPinnedHost) shadow_.allocate(a.ptr, a.size, false);
  }

  // opscope_pool_alloc: a piece of a device block the program holds, handed out by its own allocator. The
  // block becomes a pool (not itself a leak); the piece is an allocation of its own, its red zone in the
  // padding the allocator left after it (opscope_pool_padding), when that lies inside the block.
  void poolAlloc(const RuntimeCall& call) {
    LiveAllocation a;
    a.ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    a.size = call.size;
    a.thread = call.thread;
    a.op_seq = call.op_seq;
    a.last_op = call.last_op;
    a.time = clock_.now();
    a.stack = capture(call.site);
    a.step = steps_.load(std::memory_order_relaxed);
    a.site = call.site;
    {
      std::lock_guard lock(mutex_);
      const LiveAllocation* block = table_.containing(a.ptr, true);
      a.device = block != nullptr ? block->device : rt_.currentDevice();
      if (block != nullptr && zones_.enabled() &&
          a.ptr + a.size + zones_.back() <= block->ptr + block->size) {
        a.back = zones_.back();
      }
      table_.markPool(a.ptr);
      // The freed pieces this one overlaps are memory in use again.
      auto it = freed_pieces_.lower_bound(a.ptr);
      if (it != freed_pieces_.begin()) {
        const auto before = std::prev(it);
        if (before->second.ptr + std::max<std::size_t>(before->second.size, 1) > a.ptr) it = before;
      }
      const std::uintptr_t end = a.ptr + std::max<std::size_t>(a.size + a.back, 1);
      while (it != freed_pieces_.end() && it->first < end) it = freed_pieces_.erase(it);
      pieces_.add(a);
      if (init_) shadow_.allocate(a.ptr, a.size, true);
    }
    if (a.back > 0) zones_.paint(a);
  }

  // opscope_pool_free: the piece goes back to the program's pool. Remembered as freed memory until a piece
  // handed out again covers it (an op using it before is a use after free); a piece that is not live is a
  // double or invalid free. (A good free is not unwound, as for mlurtFree.)
  void poolFree(const RuntimeCall& call) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    {
      std::lock_guard lock(mutex_);
      if (const std::optional<LiveAllocation> a = pieces_.release(ptr, false, 0, clock_.now(), call.op_seq)) {
        if (init_) shadow_.release(ptr, true);
        freed_pieces_[a->ptr] = *a;
        return;
      }
    }
    if (snapshot_only_) return;  // (no checks: memcheck's to report)
    const StackId stack = capture(call.site);
    MemoryError e;
    {
      std::lock_guard lock(mutex_);
      e = pieces_.badFree(ptr, false, stack, call.op_seq);
    }
    error(e, fmt::format("{:#x}", ptr));
  }

  // A device block given back to the runtime: the freed pieces in it are gone with it. Requires mutex_.
  void forgetFreedPiecesLocked(const LiveAllocation& block) {
    if (freed_pieces_.empty()) return;
    freed_pieces_.erase(freed_pieces_.lower_bound(block.ptr),
                        freed_pieces_.lower_bound(block.ptr + block.size));
  }

  void hostFree(const RuntimeCall& call) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    const StackId stack = capture(call.site);
    const std::int64_t now = clock_.now();
    {
      std::lock_guard lock(mutex_);
      if (table_.release(ptr, true, stack, now, call.op_seq)) return;
    }
    badFree(call, stack);
  }

  // A free that matches no live allocation: which mistake it is, reported once per site.
  void badFree(const RuntimeCall& call, StackId stack) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    MemoryError e;
    {
      std::lock_guard lock(mutex_);
      e = table_.badFree(ptr, call.kind == RuntimeCallKind::kHostFree, stack, call.op_seq);
    }
    error(e, fmt::format("{:#x}", ptr));
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
    // A piece of a program's pool first: it, not the block it is in, is what the range must fit.
    if (const LiveAllocation* a = pieces_.containing(p, true)) {
      if (p + bytes <= a->ptr + a->size) return std::nullopt;
      return Touch{false, *a, 0, p + bytes - (a->ptr + a->size)};
    }
    if (auto it = freed_pieces_.upper_bound(p); it != freed_pieces_.begin()) {
      const LiveAllocation& f = std::prev(it)->second;
      if (p < f.ptr + std::max<std::size_t>(f.size, 1)) return Touch{true, f, 0, 0};
    }
    if (const LiveAllocation* a = table_.containing(p, true)) {
      if (p + bytes <= a->ptr + a->size) return std::nullopt;
      return Touch{false, *a, 0, p + bytes - (a->ptr + a->size)};
    }
    if (const Quarantined* q = quarantine_.containing(p)) return Touch{true, q->allocation, q->free_stack, 0};
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
          "{} #{}{} argument {} at {:#x} is {} bytes inside a {}-byte allocation on {} that was freed",
          call.name, call.seq, inSite(call.site), meta.name, p, p - t->block.ptr, t->block.size,
          placeName(t->block.device));
      e.free_stack = t->free_stack;
    } else {
      e.kind = "out-of-bounds-argument";
      e.message = fmt::format(
          "{} #{}{} argument {} spans {} bytes from {:#x}, {} bytes past the end of a {}-byte allocation on "
          "{}",
          call.name, call.seq, inSite(call.site), meta.name, bytes, p, t->past, t->block.size,
          placeName(t->block.device));
    }
    e.alloc_stack = t->block.stack;
    e.stack = site();
    e.op_seq = call.seq;
    error(e, fmt::format("{} {}", call.name, meta.name));
  }

  // A copy's or memset's range: inside freed memory, or past an allocation's end.
  void checkRange(const RuntimeCall& call, const void* data, std::size_t bytes, const char* does) {
    if (data == nullptr || bytes == 0) return;
    const auto p = reinterpret_cast<std::uintptr_t>(data);
    const std::optional<Touch> t = touches(p, bytes);
    if (!t) return;
    MemoryError e;
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
      if (sync && std::string_view(does) == "writes") zones_.repaintBack(t->block);
    }
    e.alloc_stack = t->block.stack;
    e.stack = capture(call.site);
    e.op_seq = call.op_seq;
    error(e, std::string(call.symbol));
  }

  // An error, printed when it is the first of its kind at its site.
  void error(const MemoryError& e, const std::string& where) {
    if (!errors_.add(e, where)) return;
    Symbolizer symbolizer;
    const std::string text = formatError(e, [&](StackId id) { return symbolize(symbolizer, id); });
    std::fputs(text.c_str(), stderr);
    if (config_.mem_check_abort) {
      std::fputs("opscope memcheck: MEM_CHECK_ABORT_ON_ERROR=1: aborting\n", stderr);
      writeReports();
      std::abort();
    }
  }

  // Every frame kept is a return address, the innermost too (opscope's own frames above it are trimmed):
  // each is looked up at the call before it, so that the call's line is shown and not that of the code the
  // compiler placed after the call (an inlined unlock, say).
  std::vector<Frame> symbolize(Symbolizer& symbolizer, StackId id) {
    std::vector<Frame> out;
    for (std::uintptr_t pc : stacks_.frames(id)) {
      if (const auto program = stacks_.programFrame(pc)) {
        Frame f;
        f.function = program->function;
        f.file = program->file;
        f.line = program->line;
        f.program = true;
        out.push_back(std::move(f));
        continue;
      }
      for (Frame& f : symbolizer.symbolize(pc, true)) out.push_back(std::move(f));
    }
    return out;
  }

  // The run as memcheck's reports open with it.
  ReportInput reportInput() const {
    ReportInput in;
    in.command = run_.command_line;
    in.pid = run_.pid;
    in.backtraces = config_.mem_check_backtrace;
    in.ns_per_tick = clock_.nsPerTick();
    return in;
  }

  // What the program holds (under mutex_): its allocations, the pieces its own allocator handed out among
  // them, but not that allocator's blocks (a pool is not a leak; the pieces still handed out are).
  std::vector<LiveAllocation> programsLiveLocked() const {
    std::vector<LiveAllocation> live = pieces_.live();
    for (const LiveAllocation& a : table_.live()) {
      if (!a.pool) live.push_back(a);
    }
    return live;
  }

  // The peaks of each place and of the program allocator's pieces (under mutex_).
  void addPeaksLocked(ReportInput& in) const {
    for (const Peak& peak : table_.peaks()) in.peaks.push_back(peak);
    in.piece_peaks = pieces_.peaks();
  }

  // Each stack of a report symbolized once.
  class StackNames {
   public:
    explicit StackNames(Memcheck& tool) : tool_(tool) {}
    std::vector<Frame> operator()(StackId id) {
      auto [it, inserted] = cache_.try_emplace(id);
      if (inserted) it->second = tool_.symbolize(symbolizer_, id);
      return it->second;
    }

   private:
    Memcheck& tool_;
    Symbolizer symbolizer_;
    std::map<StackId, std::vector<Frame>> cache_;
  };

  void writeReports() {
    ReportInput in = reportInput();
    std::string timeline;
    {
      std::lock_guard lock(mutex_);
      if (written_.exchange(true)) return;
      const std::vector<LiveAllocation> live = programsLiveLocked();
      if (program_ended_) {
        in.program_ended = true;
        in.steps = steps_.load();
        Held split = splitGrowth(live, in.steps);
        in.leaks = std::move(split.growth);
        in.held = std::move(split.held);
      } else {
        in.leaks = groupLeaks(live);
      }
      addPeaksLocked(in);
      in.step_marks = table_.stepMarks();
      in.piece_step_marks = pieces_.stepMarks();
      in.steps_dropped = table_.stepsDropped() + pieces_.stepsDropped();
      timeline = table_.timelineCsv(in.ns_per_tick);
    }
    in.errors = errors_.all();
    StackNames names(*this);
    const Reports r = buildReports(in, [&](StackId id) { return names(id); });
    bool ok = writeFile("memcheck.txt", r.text);
    ok = writeFile(results::kMemcheckFile.data(), r.json) && ok;
    ok = writeFile("memcheck_timeline.csv", timeline) && ok;
    std::fputs(r.summary.c_str(), stderr);
    if (ok) std::fprintf(stderr, "opscope memcheck: report in %s/memcheck.txt\n", run_.result_dir.c_str());
  }

  // mlurtMalloc found no room on the device: memory_snapshot.json, what was live then (grouped by allocation
  // site as the leak report groups leaks, each site with its backtrace: the program's lines and modules where
  // its framework gives them), the peaks, the program allocator's segments and the pieces it had handed out,
  // and the failed request with its backtrace. Written again at each failure, at most kMaxOomSnapshots times
  // (a framework's allocator empties its cache and tries again: the last snapshot is of the failure the
  // program saw).
  void outOfMemory(const RuntimeCall& call) {
    const std::uint64_t failures = oom_failures_.fetch_add(1) + 1;
    if (failures > kMaxOomSnapshots) return;
    const StackId failed = capture(call.site);
    ReportInput in = reportInput();
    std::uint64_t segments = 0, segment_bytes = 0, pieces = 0, piece_bytes = 0;
    {
      std::lock_guard lock(mutex_);
      const std::vector<LiveAllocation> live = programsLiveLocked();
      in.leaks = groupLeaks(live);
      addPeaksLocked(in);
      for (const LiveAllocation& a : table_.live()) {
        if (!a.pool) continue;
        ++segments;
        segment_bytes += a.size;
      }
      for (const LiveAllocation& a : pieces_.live()) {
        ++pieces;
        piece_bytes += a.size;
      }
    }
    StackNames names(*this);
    auto symbolized = [&](StackId id) { return names(id); };
    const nlohmann::json report = nlohmann::json::parse(buildReports(in, symbolized).json);
    std::uint64_t live_bytes = 0, live_allocations = 0;
    for (const LeakGroup& g : in.leaks) {
      live_bytes += g.bytes;
      live_allocations += g.allocations;
    }
    const int device = rt_.currentDevice();
    nlohmann::json snapshot = {
        {"format_version", results::kMemorySnapshotFormatVersion},
        {"tool", snapshot_only_ ? "opscope out-of-memory snapshot" : "opscope memcheck"},
        {"command", run_.command_line},
        {"pid", run_.pid},
        {"failures", failures},
        {"failed_request",
         {{"bytes", call.size},
          {"place", placeName(device)},
          {"device", device},
          {"op_seq", call.op_seq},
          {"stack", framesJson(failed != 0 ? symbolized(failed) : std::vector<Frame>())}}},
        {"live_summary",
         {{"bytes", live_bytes}, {"allocations", live_allocations}, {"sites", in.leaks.size()}}},
        {"live", report.value("leaks", nlohmann::json::array())},
        {"peaks", report.value("peaks", nlohmann::json::array())},
        {"program_allocator",
         {{"segments", segments},
          {"segment_bytes", segment_bytes},
          {"pieces", pieces},
          {"piece_bytes", piece_bytes},
          {"free_bytes", segment_bytes > piece_bytes ? segment_bytes - piece_bytes : 0}}}};
    const bool ok = writeFile(results::kMemorySnapshotFile.data(), snapshot.dump(1) + "\n");
    std::fprintf(stderr,
                 "opscope%s: out of memory on %s: a request of %zu bytes failed with %llu bytes in use in "
                 "%llu allocations from %zu sites%s%s\n",
                 snapshot_only_ ? "" : " memcheck", placeName(device).c_str(), call.size,
                 static_cast<unsigned long long>(live_bytes),
                 static_cast<unsigned long long>(live_allocations), in.leaks.size(),
                 ok ? "; what was live: " : "",
                 ok ? (run_.result_dir + "/memory_snapshot.json").c_str() : "");
  }

  bool writeFile(const char* name, const std::string& text) {
    const std::string error = writePrivateFile(run_.result_dir + "/" + name, text);
    if (!error.empty()) std::fprintf(stderr, "opscope memcheck: %s\n", error.c_str());
    return error.empty();
  }

  const Config config_;  // (a copy: the snapshot alone runs with a configuration of its own)
  const bool snapshot_only_;
  const RunInfo run_;
  const TickClock clock_;  // allocation and free times
  const Runtime rt_;
  RedZones zones_;
  StackTable stacks_;
  ErrorLog errors_;
  const bool init_ = config_.mem_check_init;  // MEM_CHECK_INIT
  const bool race_ = config_.mem_check_race;  // MEM_CHECK_RACE
  std::mutex mutex_;                          // guards the table, the quarantine and the shadow
  InitShadow shadow_;  // MEM_CHECK_INIT: the bytes written of each live device allocation
  QueueRace race_model_;
  // The overflows checkOn()'s host functions found, for the program's next call (or the end) to report.
  std::mutex found_mutex_;
  std::vector<FoundOverflow> found_;
  std::atomic<bool> found_any_{false};
  // Per device, the queue the program's asynchronous work went through first, and the devices where it has
  // used more than one (onlyQueue()).
  std::mutex queues_mutex_;
  std::map<int, std::uint64_t> device_queue_;
  std::set<int>
      several_queues_;  // MEM_CHECK_RACE: the order of the queues and threads, and each byte's accesses
  AllocationTable table_;
  // The pieces a program's own allocator handed out of its blocks (opscope.h), and those it took back since,
  // by address, until a new piece covers them or their block is freed.
  AllocationTable pieces_{std::size_t{1} << 16, 0, "opscope_pool_free"};
  std::map<std::uintptr_t, LiveAllocation> freed_pieces_;
  Quarantine quarantine_;
  std::atomic<bool> written_{false};  // the report is written once
  static constexpr std::uint64_t kMaxOomSnapshots = 16;
  std::atomic<std::uint64_t> oom_failures_{0};  // mlurtMalloc calls that found no room
  std::atomic<std::uint32_t> steps_{0};         // the program's steps (onStep)
  std::atomic<bool> program_ended_{false};
};

}  // namespace

std::unique_ptr<Tool> makeMemcheckTool(const Config& config, const RunInfo& run) {
  return std::make_unique<Memcheck>(config, run);
}

ToolRegistration registration() {
  return {ToolId::kMemcheck, [](const Config& c) { return c.mem_check; }, true, makeMemcheckTool};
}

namespace {

// The snapshot alone: the allocation table with a backtrace per allocation; no red zones, no quarantine,
// no other check.
Config snapshotConfig(const Config& config) {
  Config c = config;
  c.mem_check_backtrace = true;
  c.mem_check_redzone = 0;
  c.mem_check_quarantine_mb = 0;
  c.mem_check_init = false;
  c.mem_check_race = false;
  c.mem_check_abort = false;
  return c;
}

}  // namespace

std::unique_ptr<Tool> makeOomSnapshotTool(const Config& config, const RunInfo& run) {
  return std::make_unique<Memcheck>(snapshotConfig(config), run, true);
}

ToolRegistration oomSnapshotRegistration() {
  return {ToolId::kOomSnapshot, [](const Config& c) { return c.oom_snapshot && !c.mem_check; }, true,
          makeOomSnapshotTool};
}

}  // namespace opscope::memcheck
