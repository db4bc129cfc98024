#include <opscope/memcheck/memcheck_tool.h>

#include "report.h"
#include "stacks.h"
#include "symbolizer.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

namespace opscope::memcheck {
namespace {

std::int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Frees remembered after they happened, to tell a double free from a free of a pointer never allocated.
constexpr std::size_t kFreedRemembered = 1 << 16;

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
        stacks_(config.mem_check_backtrace_depth,
                moduleRangeOf(reinterpret_cast<const void*>(&makeMemcheckTool))) {}

  std::string_view name() const override { return "memcheck"; }
  bool wants(const OpCall&) const override { return false; }

  void onRuntimeCall(const RuntimeCall& call) override {
    switch (call.kind) {
      case RuntimeCallKind::kMalloc:
      case RuntimeCallKind::kHostMalloc:
        if (call.status == MLURT_SUCCESS && call.ptr != nullptr) allocated(call);
        return;
      case RuntimeCallKind::kFree:
      case RuntimeCallKind::kHostFree:
        if (call.ptr != nullptr) freed(call);
        return;
      default:
        return;
    }
  }

  void flush() override { writeReports(); }

  void flushOnSignal() override {
    // A program killed by a signal still holds its memory: there is nothing to call a leak, and
    // symbolizing is not safe in a signal handler. The errors were printed when found.
    std::fputs("opscope memcheck: the program was ended by a signal; no leak report\n", stderr);
  }

 private:
  StackId capture() { return config_.mem_check_backtrace ? stacks_.capture() : 0; }

  // mlurtMalloc allocates on the calling thread's current device.
  static int currentDevice() {
    static const auto get_device =
        reinterpret_cast<decltype(&mlurtGetDevice)>(dlsym(RTLD_DEFAULT, "mlurtGetDevice"));
    int device = 0;
    if (get_device == nullptr || get_device(&device) != MLURT_SUCCESS) return 0;
    return device;
  }

  void allocated(const RuntimeCall& call) {
    LiveAllocation a;
    a.ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    a.size = call.size;
    a.device = call.kind == RuntimeCallKind::kHostMalloc ? kPinnedHost : currentDevice();
    a.thread = call.thread;
    a.op_seq = call.op_seq;
    a.time_ns = call.host_end_ns - origin_ns_;
    a.stack = capture();
    std::lock_guard lock(mutex_);
    live_[a.ptr] = a;
    freed_.erase(a.ptr);  // the address is in use again
    std::uint64_t& in_use = in_use_[a.device];
    in_use += a.size;
    Peak& peak = peaks_[a.device];
    peak.device = a.device;
    if (in_use > peak.bytes) {
      peak.bytes = in_use;
      peak.op_seq = a.op_seq;
    }
  }

  void freed(const RuntimeCall& call) {
    const auto ptr = reinterpret_cast<std::uintptr_t>(call.ptr);
    const StackId stack = capture();
    std::unique_lock lock(mutex_);
    if (const auto it = live_.find(ptr); it != live_.end()) {
      const LiveAllocation& a = it->second;
      in_use_[a.device] -= a.size;
      remember(ptr, Freed{a.size, a.device, a.stack, stack});
      live_.erase(it);
      return;
    }
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
    } else if (const LiveAllocation* owner = containing(ptr)) {
      e.kind = "interior-free";
      e.message = fmt::format("{} of {:#x}, {} bytes inside a {}-byte allocation on {} at {:#x}", what, ptr,
                              ptr - owner->ptr, owner->size, placeName(owner->device), owner->ptr);
      e.alloc_stack = owner->stack;
    } else {
      e.kind = "invalid-free";
      e.message = fmt::format("{} of {:#x}, which was never allocated", what, ptr);
    }
    // Once per site: the offending call's stack, or the pointer when there are no stacks.
    const auto site = std::make_pair(e.kind, e.stack != 0 ? std::uint64_t{e.stack} : std::uint64_t{ptr});
    if (!reported_.insert(site).second) return;
    errors_.push_back(e);
    lock.unlock();
    report(e);
  }

  void remember(std::uintptr_t ptr, const Freed& f) {
    freed_[ptr] = f;
    freed_order_.push_back(ptr);
    while (freed_order_.size() > kFreedRemembered) {
      freed_.erase(freed_order_.front());
      freed_order_.pop_front();
    }
  }

  // The live allocation that contains ptr without starting at it.
  const LiveAllocation* containing(std::uintptr_t ptr) const {
    auto it = live_.upper_bound(ptr);
    if (it == live_.begin()) return nullptr;
    --it;
    const LiveAllocation& a = it->second;
    return ptr > a.ptr && ptr < a.ptr + a.size ? &a : nullptr;
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
    in.command = run_.command_line;
    in.pid = run_.pid;
    in.backtraces = config_.mem_check_backtrace;
    {
      std::lock_guard lock(mutex_);
      if (written_) return;
      written_ = true;
      std::vector<LiveAllocation> live;
      live.reserve(live_.size());
      for (const auto& [ptr, a] : live_) live.push_back(a);
      in.leaks = groupLeaks(live);
      in.errors = errors_;
      for (const auto& [device, peak] : peaks_) in.peaks.push_back(peak);
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
    std::fputs(r.summary.c_str(), stderr);
    if (ok) std::fprintf(stderr, "opscope memcheck: report in %s/memcheck.txt\n", run_.result_dir.c_str());
  }

  bool writeFile(const char* name, const std::string& text) {
    const std::string path = run_.result_dir + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "opscope memcheck: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
      return false;
    }
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    return std::fclose(f) == 0 && ok;
  }

  const Config& config_;
  const RunInfo run_;
  const std::int64_t origin_ns_;
  StackTable stacks_;
  std::mutex mutex_;  // guards everything below
  std::map<std::uintptr_t, LiveAllocation> live_;
  std::unordered_map<std::uintptr_t, Freed> freed_;
  std::deque<std::uintptr_t> freed_order_;
  std::map<int, std::uint64_t> in_use_;
  std::map<int, Peak> peaks_;
  std::vector<MemoryError> errors_;
  std::set<std::pair<std::string, std::uint64_t>> reported_;
  bool written_ = false;
};

}  // namespace

std::unique_ptr<Tool> makeMemcheckTool(const Config& config, const RunInfo& run) {
  return std::make_unique<Memcheck>(config, run);
}

}  // namespace opscope::memcheck
