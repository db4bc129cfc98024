// The hook's process-wide state and its two paths: op calls (runOp) and runtime calls (runRuntime).
//
// Global state, and why: an LD_PRELOAD library has no caller to own its state — the configuration, the
// tools and the counters live for the whole process, are built once by the constructor before main, and
// are read-only afterwards except for the atomic counters and the tools' own internals.
#include "hook.h"

#include "framework.h"
#include "regions.h"

#include <opscope/private_file.h>
#include <opscope/results/format_version.h>
#include <opscope/results/run_file.h>
#include <opscope/runtime_access.h>

#include "../../runtime/common/no_destructor.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace opscope::hook {

thread_local bool t_inside = false;
thread_local std::uint64_t t_host_work = 0;
std::atomic<bool> g_watch_ops{false};
std::atomic<bool> g_watch_runtime{false};
bool g_auto_fallback = false;
std::atomic<bool> g_correlate{false};
bool g_collective_out_of_place = false;
bool g_race_check = false;
// Some installed tool reads runtime calls' host times (Tool::timesRuntimeCalls); set when the run starts or
// a region installs such a tool.
static std::atomic<bool> g_time_runtime{false};
std::atomic<bool> g_framework_frames{false};

std::uint32_t threadNumber() {
  static std::atomic<std::uint32_t> threads{0};
  thread_local std::uint32_t number = threads.fetch_add(1, std::memory_order_relaxed);
  return number;
}

namespace {

struct State {
  Config config;
  RunInfo run;
  std::int64_t start_ns = 0;  // monotonic, when the hook loaded
  // The tools, installed when the run starts and by the program's regions later (beginRegion): the
  // calls read the list last published, without a lock; every list published stays alive (a call may still
  // be walking an older one), as do the tools and the configurations of regional tools.
  std::mutex install_mutex;
  std::vector<ToolEntry> owned;  // each tool once (entry.tool owns nothing: see tools_)
  std::vector<std::unique_ptr<Tool>> tools_;
  std::vector<std::unique_ptr<ToolList>> lists;
  std::vector<std::unique_ptr<Config>> region_configs;
  std::map<ToolId, std::string> region_options;  // of each regional tool: its first region's options
  std::atomic<const ToolList*> tools{nullptr};
};

State& state() {
  static mlu::NoDestructor<State> s;
  return s.get();
}

// The tools installed so far, in tool.h's order.
const ToolList& tools() {
  static const ToolList kNone;
  const ToolList* list = state().tools.load(std::memory_order_acquire);
  return list != nullptr ? *list : kNone;
}

// Adds tools (regional: for the program's regions only) and publishes the new list. Under install_mutex.
void publishTools(State& s, std::vector<std::unique_ptr<Tool>> added, bool regional) {
  for (auto& tool : added) {
    s.owned.push_back({tool.get(), regional});
    s.tools_.push_back(std::move(tool));
  }
  auto list = std::make_unique<ToolList>(s.owned);
  std::stable_sort(list->begin(), list->end(),
                   [](const ToolEntry& a, const ToolEntry& b) { return a.tool->id() < b.tool->id(); });
  for (const ToolEntry& e : *list) {
    if (e.tool->timesRuntimeCalls()) g_time_runtime = true;
    if (e.tool->wantsFrameworkFrames()) g_framework_frames = true;
  }
  s.tools.store(list.get(), std::memory_order_release);
  s.lists.push_back(std::move(list));
}

// The op calls made so far and the op of the last one in one word (seq << 16 | OpId), so that a runtime
// call reads a seq and the op of that seq together (memcheck names the op at a memory peak).
std::atomic<std::uint64_t> g_last_op{static_cast<std::uint64_t>(mlu::OpId::kCount)};
static_assert(mlu::kOpCount < (1u << 16));
std::atomic<bool> g_flushed{false};
// The thread that flushes (its kernel id; 0 before), and whether it has finished: a second SIGTERM or
// SIGINT must not cut the flush short (onFatalSignal).
std::atomic<pid_t> g_flush_thread{0};
std::atomic<bool> g_flush_done{false};
std::atomic<bool> g_exit_registered{false};

// Sets the recursion guard for a scope.
class Inside {
 public:
  Inside() : previous_(t_inside) { t_inside = true; }
  ~Inside() { t_inside = previous_; }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;

 private:
  bool previous_;
};

// While a tool runs with the profiler on, the device work it enqueues is tagged as the tool's
// (kToolCorrelationBit | its ToolId), not as the program's. The profiler enqueues nothing: untouched.
class ToolWork {
 public:
  explicit ToolWork(const Tool& tool) {
    if (!g_correlate || tool.id() == ToolId::kProfiler) return;
    static const auto set_id = real<decltype(&mlurtSetCorrelationId)>("mlurtSetCorrelationId");
    set_ = set_id;
    previous_ = set_(kToolCorrelationBit | static_cast<std::uint64_t>(tool.id()));
  }
  ~ToolWork() {
    if (set_ != nullptr) set_(previous_);
  }
  ToolWork(const ToolWork&) = delete;
  ToolWork& operator=(const ToolWork&) = delete;

 private:
  decltype(&mlurtSetCorrelationId) set_ = nullptr;
  std::uint64_t previous_ = 0;
};

// A tool that throws is reported once and the program goes on: the hook must not change what it computes.
template <typename F>
void guarded(Tool& tool, const char* step, F&& f) {
  const ToolWork work(tool);
  try {
    f();
  } catch (const std::exception& e) {
    static std::atomic<int> reported{0};
    if (reported.fetch_add(1) < 5) {
      std::fprintf(stderr, "opscope: %.*s: %s failed: %s\n", static_cast<int>(tool.name().size()),
                   tool.name().data(), step, e.what());
    }
  }
}

// run.json: the run (command line, pid, rank, start, duration, how it ended, options, version), which tools
// were on, and the findings that have no file of their own (fallback counts, the overflow check's first
// op). Written when the run starts (ended: null) and again when it ends; `opscope report` reads it.
// opscope.h's opscope_framework_fallback: the framework's ops it ran on the CPU itself (torch_mlu's CPU
// fallback), counted by name for run.json's findings, where the report and the summary show them. Bounded:
// a framework that names every call differently cannot grow run.json without end.
class FrameworkFallbacks {
 public:
  void add(const char* name) {
    std::string key(name != nullptr ? std::string_view(name).substr(0, kMaxName) : std::string_view("?"));
    const std::lock_guard lock(mutex_);
    if (auto it = calls_.find(key); it != calls_.end()) {
      ++it->second;
    } else if (calls_.size() < kMaxNames) {
      calls_.emplace(std::move(key), 1);
    } else {
      ++other_calls_;
    }
  }
  // {"ops": [{"op", "calls"}], most calls first, "other_calls": the calls of names past the limit}; null
  // when nothing fell back.
  nlohmann::json findings() const {
    const std::lock_guard lock(mutex_);
    if (calls_.empty()) return nullptr;
    std::vector<std::pair<std::string, std::uint64_t>> rows(calls_.begin(), calls_.end());
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& [op, calls] : rows) ops.push_back({{"op", op}, {"calls", calls}});
    return {{"ops", ops}, {"other_calls", other_calls_}};
  }

 private:
  static constexpr std::size_t kMaxName = results::kMaxFrameworkOpName;
  static constexpr std::size_t kMaxNames = results::kMaxFrameworkFallbacks;
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> calls_;
  std::uint64_t other_calls_ = 0;
};

FrameworkFallbacks& frameworkFallbacks() {
  static mlu::NoDestructor<FrameworkFallbacks> f;
  return f.get();
}

void writeRunJson(const State& s, const char* ended) {
  if (s.run.result_dir.empty()) return;  // nothing started (no tool writes results), or it failed
  nlohmann::json j;
  j["tool"] = "opscope";
  j[results::kFormatVersionKey] = results::kRunFormatVersion;
  j["version"] = OPSCOPE_VERSION;
  j["command"] = s.run.command_line;
  j["pid"] = s.run.pid;
  j["rank"] = s.run.rank;
  j["world_size"] = s.run.world_size;
  if (!s.run.job.empty()) j["job"] = s.run.job;  // one of several ranks: the job they share
  j["start_time"] = s.run.start_time_iso;
  j["ended"] = ended == nullptr ? nlohmann::json() : nlohmann::json(ended);
  j["duration_s"] = ended == nullptr ? nlohmann::json()
                                     : nlohmann::json(static_cast<double>(monotonicNs() - s.start_ns) / 1e9);
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [name, value] : s.config.set_options) options[name] = value;
  j["options"] = options;
  // The tools that ran (one that could not start, say for a full disk, is off).
  nlohmann::json tools = {{"fallback", s.config.fallback}};
  for (std::size_t i = 0; i < static_cast<std::size_t>(ToolId::kCount); ++i) {
    const auto id = static_cast<ToolId>(i);
    if (!toolKey(id).empty()) tools[std::string(toolKey(id))] = false;
  }
  for (const ToolEntry& e : hook::tools()) {
    if (!toolKey(e.tool->id()).empty()) tools[std::string(toolKey(e.tool->id()))] = true;
  }
  j["tools"] = tools;
  nlohmann::json findings = nlohmann::json::object();
  for (const ToolEntry& e : hook::tools()) {
    if (nlohmann::json found = e.tool->findings(); !found.is_null()) {
      findings[std::string(e.tool->name())] = std::move(found);
    }
  }
  if (nlohmann::json fallbacks = frameworkFallbacks().findings(); !fallbacks.is_null()) {
    findings["framework fallback"] = std::move(fallbacks);
  }
  if (nlohmann::json regions = regionFindings(); !regions.is_null()) findings["regions"] = std::move(regions);
  j["findings"] = findings;
  // The result writes that failed so far (a full disk): which files are missing or cut short, and why.
  j["write_errors"] = writeErrors();
  const std::string path = s.run.result_dir + "/" + std::string(results::kRunFile);
  // A command line or option that is not UTF-8 is written with U+FFFD, not refused.
  auto dump = [&] { return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"; };
  std::string text = dump();
  if (ended == nullptr) {
    // The first version holds room for the last (trailing spaces are valid JSON): when the disk is full
    // at the end, the final run.json is written over it instead of being lost.
    constexpr std::size_t kRoom = 16 * 1024;
    if (text.size() < kRoom) text.resize(kRoom, ' ');
    text.back() = '\n';
  }
  const std::string error = writePrivateFile(path, text);
  if (error.empty()) return;
  if (ended != nullptr) {
    j["write_errors"] = writeErrors();  // with this one
    if (const std::string second = overwriteInPlace(path, dump()); second.empty()) {
      std::fprintf(stderr, "opscope: %s; run.json was written over its first version instead\n",
                   error.c_str());
      return;
    }
  }
  std::fprintf(stderr, "opscope: %s\n", error.c_str());
}

// Every tool's flush, then run.json's end: at exit ("exit"), on a fatal signal ("signal SIGTERM"), or when a
// tool asks before the process is killed (RunInfo::end_now: the tools flush as on a signal, `ended_by` says
// why). Once: the first caller flushes, the others return.
void flushAll(bool on_signal, int sig = 0, const char* ended_by = nullptr) {
  pid_t none = 0;
  if (!g_flush_thread.compare_exchange_strong(none, gettid())) return;  // another flushes, or flushed
  struct Done {
    ~Done() { g_flush_done = true; }
  } done;
  if (g_flushed.exchange(true)) return;
  Inside inside;
  State& s = state();
  for (const ToolEntry& e : tools()) {
    guarded(*e.tool, "flush", [&] { on_signal ? e.tool->flushOnSignal() : e.tool->flush(); });
  }
  // A list that no call matched (a misspelt module path, an ATen op the program never runs) is said, with
  // the item.
  if (!on_signal) {
    for (const auto& [name, filter] : s.config.filters) {
      for (const std::string& warning : filter.unmatched())
        std::fprintf(stderr, "opscope: warning: %s\n", warning.c_str());
    }
  }
  try {
    const std::string ended = ended_by != nullptr ? std::string(ended_by)
                              : on_signal         ? fmt::format("signal SIG{}", sigabbrev_np(sig))
                                                  : std::string("exit");
    writeRunJson(s, ended.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opscope: run.json: %s\n", e.what());
  }
}

void onExit() { flushAll(false); }

constexpr std::array<int, 4> kFatalSignals = {SIGSEGV, SIGABRT, SIGTERM, SIGINT};

// The crash handlers found installed (SIGSEGV, SIGABRT), which onFatalSignal hands the signal to after the
// flush. Written once, before the handlers go in; read in them.
struct Chained {
  bool installed = false;
  struct sigaction previous {};
};
std::array<Chained, 32> g_chained;

void onFatalSignal(int sig) {
  // A second SIGTERM or SIGINT while the results are being flushed (at exit, or for a first signal) does
  // not cut the flush short: in the flushing thread it is dropped (that flush goes on, and ends the process
  // as it would have), in another thread it waits for the flush to end (at most a minute) before taking
  // its default action. A crash (SIGSEGV, SIGABRT) never waits.
  if (sig == SIGTERM || sig == SIGINT) {
    const pid_t flusher = g_flush_thread.load();
    if (flusher == gettid()) return;
    for (int ms = 0; flusher != 0 && !g_flush_done.load() && ms < 60000; ++ms) {
      const timespec one_ms{0, 1000000};
      nanosleep(&one_ms, nullptr);
    }
  }
  // Best effort: the tools write out what they have (what was recorded before a crash stays readable),
  // then the signal takes its default action so the exit status is what it would have been.
  flushAll(true, sig);
  // A crash handler that was there before (Open MPI's, which prints a backtrace and aborts; Python's
  // faulthandler) takes the signal next; else the default action.
  if (const auto at = static_cast<std::size_t>(sig); at < g_chained.size() && g_chained[at].installed) {
    sigaction(sig, &g_chained[at].previous, nullptr);
  } else {
    std::signal(sig, SIG_DFL);
  }
  raise(sig);
}

// The runtime's static state is destroyed at exit in the reverse order of construction; registering the
// flush after the first real call returned puts it before the runtime's teardown. Needed once a tool is on
// (fallback's counts are reported at exit too).
void registerExitFlush() {
  if (g_exit_registered.load(std::memory_order_relaxed)) return;
  if (tools().empty()) return;
  if (!g_exit_registered.exchange(true)) std::atexit(onExit);
}

void installSignalHandlers() {
  for (int sig : kFatalSignals) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    // A program's own SIGTERM or SIGINT handler (Python's KeyboardInterrupt) stays: the program may go on.
    // A crash handler (Open MPI installs one for SIGSEGV and SIGABRT in MPI_Init, so before the hook starts
    // in most MPI programs) is chained after the flush: a crash or the flight recorder's abort still leaves
    // the results finished.
    const bool siginfo = (old.sa_flags & SA_SIGINFO) != 0;
    if (siginfo || old.sa_handler != SIG_DFL) {
      const bool crash = sig == SIGSEGV || sig == SIGABRT;
      const bool ignored_or_ours = !siginfo && (old.sa_handler == SIG_IGN || old.sa_handler == onFatalSignal);
      if (!crash || ignored_or_ours) continue;
      g_chained[static_cast<std::size_t>(sig)] = {true, old};
    }
    struct sigaction sa {};
    sa.sa_handler = onFatalSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    sigaction(sig, &sa, nullptr);
  }
}

// A child forked from a traced process does not inherit the tracing: the tools' threads (the capture
// writer) do not exist in it, and their files belong to the parent. The child's calls are forwarded.
void onForkChild() {
  g_flushed = true;
  g_watch_ops = false;
  g_watch_runtime = false;
}

// The run's RunInfo, with the hook's way for a tool to finish the results early (RunInfo::end_now).
RunInfo runInfo(const std::string& result_root) {
  RunInfo run = makeRunInfo(result_root);
  run.end_now = [](const std::string& ended) {
    // As on a fatal signal (the process is about to be killed): the tools wait for no queue (one may be
    // stuck in the collective that timed out), memcheck calls nothing a leak.
    flushAll(true, 0, ended.c_str());
    g_watch_ops = false;
    g_watch_runtime = false;
  };
  return run;
}

// The result directory was made: run.json's first version, and the flush at exit or on a fatal signal.
void runDirectoryMade(State& s) {
  try {
    writeRunJson(s, nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opscope: run.json: %s\n", e.what());
  }
  // A program that ends before its first real call returns still gets its results finished; a later
  // registration (registerExitFlush) runs before this one and makes it a no-op.
  std::atexit(onExit);
  installSignalHandlers();
  pthread_atfork(nullptr, nullptr, onForkChild);
}

// What a run leaves behind begins at its first use of the device (the first watched op or runtime call):
// a process that never uses the MLU (`/bin/true`, or `timeout` itself with LD_PRELOAD set before it) leaves
// nothing and prints nothing. Here the set options and warnings are printed, the result directory is made,
// the tools are installed and run.json is first written. Called with the recursion guard set: a tool's own
// runtime calls while it starts reach the real library.
void start() {
  State& s = state();
  for (const auto& [name, value] : s.config.set_options) {
    std::fprintf(stderr, "opscope: option %s=%s\n", name.c_str(), value.c_str());
  }
  for (const auto& warning : s.config.warnings)
    std::fprintf(stderr, "opscope: warning: %s\n", warning.c_str());
  const RunInfo* run = nullptr;
  if (writesResults(s.config)) {
    try {
      s.run = runInfo(s.config.result_root);
      createResultDir(s.run);
      run = &s.run;
    } catch (const std::exception& e) {
      // The root was checked before main (checkResultRoot); what fails now (the root removed since)
      // turns the tools that write results off: the program goes on and computes what it would.
      std::fprintf(stderr, "opscope: %s; the tools are off for this run, nothing of it is written\n",
                   e.what());
      s.run.result_dir.clear();
      g_watch_runtime = false;
    }
  }
  {
    std::vector<std::unique_ptr<Tool>> installed;
    installTools(s.config, run, installed);
    const std::lock_guard lock(s.install_mutex);
    publishTools(s, std::move(installed), false);
  }
  if (run != nullptr) runDirectoryMade(s);
}

// A region of the program needs the result directory in a run that made none when it started (no tool of
// the environment writes results): it is made now. Under install_mutex, after start(). False when it
// cannot be made (said).
bool ensureRunDirectory(State& s) {
  if (!s.run.result_dir.empty()) return true;
  try {
    checkResultRoot(s.config.result_root);
    s.run = runInfo(s.config.result_root);
    createResultDir(s.run);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opscope: %s; the region's tool is off, nothing of it is written\n", e.what());
    s.run.result_dir.clear();
    return false;
  }
  runDirectoryMade(s);
  return true;
}

std::once_flag g_start_once;
std::atomic<bool> g_started{false};

void ensureStarted() {
  if (g_started.load(std::memory_order_acquire)) return;
  std::call_once(g_start_once, [] {
    start();
    g_started.store(true, std::memory_order_release);
  });
}

// Before main: the configuration is read and checked (a bad value ends the process with status 2 before
// the program runs), and so is the result root; nothing is printed or written yet (start()).
__attribute__((constructor)) void initialize() {
  State& s = state();
  try {
    s.config = configFromEnvironment();
    if (writesResults(s.config)) checkResultRoot(s.config.result_root);
    s.start_ns = monotonicNs();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "opscope: %s\n", e.what());
    std::fflush(stderr);
    _exit(2);
  }
  g_watch_ops = watchesOps(s.config);
  g_watch_runtime = installsTools(s.config);
  if (!g_watch_ops && !g_watch_runtime) {
    // Nothing will start a run to print them with (OP_CAPTUER=1 alone turns nothing on): said now.
    for (const auto& warning : s.config.warnings)
      std::fprintf(stderr, "opscope: warning: %s\n", warning.c_str());
    s.config.warnings.clear();
  }
  g_auto_fallback = s.config.auto_fallback;
  g_correlate = s.config.time_measure;
  g_collective_out_of_place = s.config.overflow_check;
  g_race_check = s.config.mem_check_race;
}

// Runs a real call with the thread's correlation id set to id (the profiler asked for it: id != 0); returns
// how many tasks it enqueued.
template <typename F>
std::uint64_t correlated(std::uint64_t id, F&& call) {
  if (id == 0) {
    call();
    return 0;
  }
  static const auto set_id = real<decltype(&mlurtSetCorrelationId)>("mlurtSetCorrelationId");
  static const auto enqueued = real<decltype(&mlurtGetEnqueuedCount)>("mlurtGetEnqueuedCount");
  const std::uint64_t previous = set_id(id);
  const std::uint64_t before = enqueued();
  call();
  const std::uint64_t count = enqueued() - before;
  set_id(previous);
  return count;
}

std::atomic<std::uint64_t> g_runtime_seq{0};

// The lock of a queue's calls that tools read the tensors of (runOp): one of 64, by the queue's address (two
// queues that share one only wait for each other; no allocation, no table to grow).
std::mutex& queueLock(const void* queue) {
  static std::array<std::mutex, 64> locks;
  return locks[(reinterpret_cast<std::uintptr_t>(queue) >> 4) % locks.size()];
}

}  // namespace

void startRun() {
  Inside inside;
  ensureStarted();
}

void* findReal(const char* symbol) {
  void* fn = nextFunction<void*>(symbol);
  if (fn == nullptr) {
    std::fprintf(stderr, "opscope: cannot find the real %s (is the program linked to the MLU libraries?)\n",
                 symbol);
    std::abort();
  }
  return fn;
}

mluopStatus_t runOp(OpCall& call, mluopHandle_t handle, Callback<mluopStatus_t> forward) {
  Inside inside;
  ensureStarted();
  call.hook_start_ns = monotonicNs();
  std::uint64_t last = g_last_op.load(std::memory_order_relaxed), next = 0;
  do {
    next = (((last >> 16) + 1) << 16) | static_cast<std::uint64_t>(call.op);
  } while (!g_last_op.compare_exchange_weak(last, next, std::memory_order_relaxed));
  call.seq = next >> 16;
  call.framework_op = frameworkOps();
  call.framework_outer = frameworkOuterOp();
  call.site = frameworkSite();
  call.thread = threadNumber();
  call.region = regionLabel();
  call.handle = handle;
  static const auto get_queue = real<decltype(&mluopGetQueue)>("mluopGetQueue");
  static const auto queue_device = real<decltype(&mlurtQueueGetDevice)>("mlurtQueueGetDevice");
  static const auto queue_id = real<decltype(&mlurtQueueGetId)>("mlurtQueueGetId");
  if (handle != nullptr && get_queue(handle, &call.queue) == MLUOP_STATUS_SUCCESS) {
    queue_device(call.queue, &call.device);
    queue_id(call.queue, &call.queue_id);
  } else {
    call.args_ok = false;
  }

  // One pipeline: the tools that take the call (tool.h's order), phase by phase.
  std::array<Tool*, static_cast<std::size_t>(ToolId::kCount) + 1> active{};  // + a regional fallback
  std::size_t n = 0;
  for (const ToolEntry& e : tools()) {
    // A regional tool (installed by a region of the program) takes only the calls its open regions cover.
    if (n < active.size() && (!e.regional || regionTakes(e.tool->id(), call)) && e.tool->wants(call)) {
      active[n++] = e.tool;
      call.tools |= toolBit(e.tool->id());
    }
  }
  // A tool that reads the call's tensors around it (copies of the inputs before, of the outputs after, the
  // CPU reference, red-zone checks) sees them as the op does only if no other thread enqueues on the same
  // queue between those copies and the op (two threads adding in place to one tensor on the default queue:
  // auto-compare's input copy missed the other's add). Such calls run their whole pipeline one at a time per
  // queue; a profiler-only or dump-only run takes no lock.
  std::unique_lock<std::mutex> ordered;
  constexpr std::uint32_t kReadsTensors = toolBit(ToolId::kCapture) | toolBit(ToolId::kCompare) |
                                          toolBit(ToolId::kOverflow) | toolBit(ToolId::kDtypeCast) |
                                          toolBit(ToolId::kPerturb) | toolBit(ToolId::kMemcheck) |
                                          toolBit(ToolId::kFallback);
  if ((call.tools & kReadsTensors) != 0 && call.queue != nullptr)
    ordered = std::unique_lock(queueLock(call.queue));
  for (std::size_t i = 0; i < n; ++i) guarded(*active[i], "mark", [&] { active[i]->mark(call); });
  for (std::size_t i = 0; i < n; ++i) guarded(*active[i], "before", [&] { active[i]->before(call); });

  call.host_start_ns = monotonicNs();
  bool replaced = false;
  for (std::size_t i = 0; i < n && !replaced; ++i) {
    guarded(*active[i], "call", [&] { replaced = active[i]->replaceOp(call); });
  }
  if (!replaced) {
    call.enqueued = correlated(call.correlation, [&] { call.status = forward(); });
    for (std::size_t i = 0; i < n && !replaced && call.status == MLUOP_STATUS_NOT_SUPPORTED; ++i) {
      guarded(*active[i], "call", [&] { replaced = active[i]->replaceRefusedOp(call); });
    }
  }
  call.host_end_ns = monotonicNs();
  registerExitFlush();

  for (std::size_t i = 0; i < n; ++i) guarded(*active[i], "after", [&] { active[i]->after(call); });
  return call.status;
}

void frameworkFrameEnded(const FrameworkFrame& frame) {
  if (!g_watch_ops.load(std::memory_order_relaxed) || t_inside) return;
  Inside inside;
  for (const ToolEntry& e : tools()) {
    if (e.tool->wantsFrameworkFrames() && (!e.regional || regionCovers(e.tool->id())))
      guarded(*e.tool, "framework frame", [&] { e.tool->onFrameworkFrame(frame); });
  }
}

void programEnd() {
  Inside inside;
  for (const ToolEntry& e : tools()) guarded(*e.tool, "program end", [&] { e.tool->onProgramEnd(); });
}

void stepTools() {
  Inside inside;
  // A regional tool's steps are those its regions cover (a profile region's trace holds no step outside it).
  for (const ToolEntry& e : tools()) {
    if (!e.regional || regionCovers(e.tool->id())) guarded(*e.tool, "step", [&] { e.tool->onStep(); });
  }
}

mlurtStatus_t runRuntime(RuntimeCall& call, Callback<mlurtStatus_t> forward, Callback<void> fill) {
  Inside inside;
  ensureStarted();
  call.thread = threadNumber();
  call.site = frameworkSite();
  if (call.kind == RuntimeCallKind::kCollective) {
    call.framework_op = frameworkOps();
    call.in_backward = frameworkInBackward();
  }
  const std::uint64_t last_op = g_last_op.load(std::memory_order_relaxed);
  call.op_seq = last_op >> 16;
  call.last_op = static_cast<mlu::OpId>(last_op & 0xffff);
  if (g_correlate) call.correlation = kRuntimeCorrelationBit | (g_runtime_seq.fetch_add(1) + 1);
  if (g_time_runtime) call.host_start_ns = monotonicNs();
  // A regional tool sees the runtime calls made while one of its regions covers the thread (but the
  // activity-callback slot is the process's: a regional profiler holds it from its start, covered or not).
  const ToolList& list = tools();
  std::array<bool, static_cast<std::size_t>(ToolId::kCount) + 1> off{};
  const bool process_wide = call.kind == RuntimeCallKind::kSetActivityCallback;
  for (std::size_t i = 0; i < list.size() && i < off.size(); ++i)
    off[i] = !process_wide && list[i].regional && !regionCovers(list[i].tool->id());
  auto each = [&](auto&& f) {
    for (std::size_t i = 0; i < list.size() && i < off.size(); ++i) {
      if (!off[i]) f(*list[i].tool);
    }
  };
  each([&](Tool& tool) { guarded(tool, "runtime call", [&] { tool.beforeRuntimeCall(call); }); });
  each([&](Tool& tool) {
    if (!call.replaced) guarded(tool, "runtime call", [&] { call.replaced = tool.replace(call); });
  });
  if (!call.replaced) call.enqueued = correlated(call.correlation, [&] { call.status = forward(); });
  if (g_time_runtime) call.host_end_ns = monotonicNs();
  registerExitFlush();
  fill();
  each([&](Tool& tool) { guarded(tool, "runtime call", [&] { tool.onRuntimeCall(call); }); });
  return call.status;
}

}  // namespace opscope::hook

// opscope.h: the framework ran one of its ops on the CPU.
extern "C" OPSCOPE_EXPORT void opscope_hook_framework_fallback(const char* name) {
  opscope::hook::frameworkFallbacks().add(name);
  opscope::hook::frameworkMarkFallback();
}

// opscope.h: the program's work is done. The tools write their results now (memcheck's leaks are what is
// allocated at this point); the calls a runtime's teardown makes afterwards (Python's, freeing what the
// program left) are forwarded unwatched, as in a forked child.
extern "C" OPSCOPE_EXPORT void opscope_hook_program_end(void) {
  opscope::hook::programEnd();
  opscope::hook::flushAll(false);
  opscope::hook::g_watch_ops = false;
  opscope::hook::g_watch_runtime = false;
}

// opscope.h: a program's own allocator hands out a piece of a device block it holds, or takes one back. The
// tools see it as a runtime call (memcheck keeps the pieces); there is no real call to make.
namespace {
void poolCall(opscope::RuntimeCallKind kind, const char* symbol, void* ptr, std::size_t size) {
  if (!opscope::hook::g_watch_runtime || opscope::hook::t_inside || ptr == nullptr) return;
  opscope::RuntimeCall rc;
  rc.kind = kind;
  rc.symbol = symbol;
  rc.ptr = ptr;
  rc.size = size;
  auto no_real_call = [] { return MLURT_SUCCESS; };
  auto nothing_to_fill = [] {};
  opscope::hook::runRuntime(rc, opscope::hook::Callback<mlurtStatus_t>::of(no_real_call),
                            opscope::hook::Callback<void>::of(nothing_to_fill));
}
}  // namespace

extern "C" OPSCOPE_EXPORT void opscope_hook_pool_alloc(void* ptr, size_t size) {
  poolCall(opscope::RuntimeCallKind::kPoolAlloc, "opscope_pool_alloc", ptr, size);
}

extern "C" OPSCOPE_EXPORT void opscope_hook_pool_free(void* ptr) {
  poolCall(opscope::RuntimeCallKind::kPoolFree, "opscope_pool_free", ptr, 0);
}

// opscope.h: the program's host code touched memory a queue's work may touch too (memcheck's race check).
extern "C" OPSCOPE_EXPORT void opscope_hook_host_access(const void* ptr, size_t bytes, int write) {
  using namespace opscope::hook;
  if (!g_watch_runtime || t_inside || ptr == nullptr || bytes == 0 || !g_race_check) return;
  opscope::RuntimeCall rc;
  rc.kind = opscope::RuntimeCallKind::kHostAccess;
  rc.symbol = "opscope_host_access";
  rc.ptr = const_cast<void*>(ptr);
  rc.size = bytes;
  rc.write = write != 0;
  rc.host_work = t_host_work;
  auto no_real_call = [] { return MLURT_SUCCESS; };
  auto nothing_to_fill = [] {};
  runRuntime(rc, Callback<mlurtStatus_t>::of(no_real_call), Callback<void>::of(nothing_to_fill));
}

// memcheck's red zone after each piece (its back zone, as after each mlurtMalloc block); 0 without memcheck.
extern "C" OPSCOPE_EXPORT size_t opscope_hook_pool_padding(void) {
  const opscope::Config& config = opscope::hook::state().config;
  return config.mem_check && opscope::hook::g_watch_runtime ? config.mem_check_redzone : 0;
}

// opscope.h: the program's regions (the Python package's opscope.capture(), .compare(), ...).
namespace opscope::hook {
namespace {

struct RegionTool {
  std::string_view name;  // opscope.h's
  ToolId id;
  const char* enable;        // the variable that turns it on, set so in the region's configuration
  const char* enable_value;  // (fallback: its list, every op: the region's list selects)
  bool writes_results;
};
constexpr RegionTool kRegionTools[] = {
    {"capture", ToolId::kCapture, "OP_CAPTURE", "1", true},
    {"compare", ToolId::kCompare, "OP_AUTOCOMPARE", "1", true},
    {"fallback", ToolId::kFallback, "OP_FALLBACK_LIST", ".*", false},
    {"profile", ToolId::kProfiler, "OP_TIME_MEASURE", "1", true},
    {"dump_args", ToolId::kDumpArgs, "OP_DUMP_ARGS", "1", false},
    {"overflow_check", ToolId::kOverflow, "OP_OVERFLOW_CHECK", "1", true},
};

// "NAME=value" lines: each a variable of the option table.
std::map<std::string, std::string> regionOptions(const char* text) {
  std::map<std::string, std::string> out;
  std::string_view rest = text != nullptr ? text : "";
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    const std::string name(line.substr(0, eq));
    if (eq == std::string_view::npos || findOption(name) == nullptr)
      throw ConfigError(
          fmt::format("'{}' is not a variable of `opscope env` (NAME=value)", line.substr(0, 80)));
    out[name] = std::string(line.substr(eq + 1));
  }
  return out;
}

int beginRegion(const RegionTool& t, const char* label, const char* list, const char* options_text,
                bool this_thread) {
  State& s = state();
  Inside inside;
  if (g_flushed.load()) throw ConfigError("the run has ended (its results are written): no region now");
  ensureStarted();
  // The region's configuration: the environment's, its tool on, with the region's options.
  std::map<std::string, std::string> options = regionOptions(options_text);
  const std::string options_key = [&] {
    std::string key;
    for (const auto& [name, value] : options) key += name + "=" + value + "\n";
    return key;
  }();
  if (t.id == ToolId::kFallback) options["OP_AUTO_FALLBACK"] = "0";  // the environment's instance does it
  if (!options.contains(t.enable)) options[t.enable] = t.enable_value;
  std::vector<std::string> entries = environEntries();
  for (const auto& [name, value] : options) entries.push_back(name + "=" + value);
  auto config = std::make_unique<Config>(parseConfig(
      [&](const char* name) -> const char* {
        if (auto it = options.find(name); it != options.end()) return it->second.c_str();
        return std::getenv(name);
      },
      entries));
  std::optional<OpFilter> filter;
  if (list != nullptr && *list != '\0') {
    // Its messages name the region's list ("opscope.compare: list: invalid regular expression ...").
    std::vector<std::string> warnings;
    filter = OpFilter::parse("list", std::string(list), "list", std::nullopt, &warnings);
    for (const std::string& w : warnings)
      std::fprintf(stderr, "opscope: warning: opscope.%.*s: %s\n", static_cast<int>(t.name.size()),
                   t.name.data(), w.c_str());
  }
  const std::lock_guard lock(s.install_mutex);
  bool regional = false, whole_run = false;
  for (const ToolEntry& e : s.owned) {
    if (e.tool->id() != t.id) continue;
    if (e.regional) regional = true;
    // The environment's fallback tool forces no op unless its list was set: the region needs its own.
    else if (t.id != ToolId::kFallback || s.config.fallback)
      whole_run = true;
  }
  if (whole_run) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      std::fprintf(stderr,
                   "opscope: %.*s is on for the whole run (set by the environment): its regions only label "
                   "what they cover\n",
                   static_cast<int>(t.name.size()), t.name.data());
    }
  } else if (regional) {
    if (s.region_options[t.id] != options_key) {
      std::fprintf(stderr, "opscope: warning: opscope.%.*s: the tool keeps the options of its first region\n",
                   static_cast<int>(t.name.size()), t.name.data());
    }
  } else {
    if (t.writes_results && !ensureRunDirectory(s)) return -1;
    std::vector<std::unique_ptr<Tool>> made;
    try {
      made = makeRegionTools(t.id, *config, s.run);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "opscope: %.*s: %s; it is off for this run\n", static_cast<int>(t.name.size()),
                   t.name.data(), e.what());
      return -1;
    }
    if (made.empty()) return -1;
    s.region_options[t.id] = options_key;
    s.region_configs.push_back(std::move(config));
    if (t.id == ToolId::kProfiler) g_correlate = true;
    publishTools(s, std::move(made), true);
    g_watch_runtime = true;
    g_watch_ops = true;
  }
  std::string name = label != nullptr && *label != '\0'
                         ? std::string(std::string_view(label).substr(0, 256))
                         : fmt::format("{}#{}", t.name, regionsOpened(t.id) + 1);
  return openRegion(t.id, std::move(name), std::move(filter),
                    this_thread ? std::optional<std::uint32_t>(threadNumber()) : std::nullopt);
}

void setError(char* error, std::size_t size, const std::string& text) {
  if (error == nullptr || size == 0) return;
  const std::size_t n = std::min(size - 1, text.size());
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

}  // namespace
}  // namespace opscope::hook

extern "C" OPSCOPE_EXPORT int opscope_hook_region_begin(const char* tool, const char* label, const char* list,
                                                        const char* options, int this_thread, char* error,
                                                        size_t error_size) {
  using namespace opscope::hook;
  const std::string_view name = tool != nullptr ? tool : "";
  for (const RegionTool& t : kRegionTools) {
    if (t.name != name) continue;
    try {
      const int id = beginRegion(t, label, list, options, this_thread != 0);
      if (id <= 0) setError(error, error_size, fmt::format("{} could not start (see the lines above)", name));
      return id > 0 ? id : 0;
    } catch (const std::exception& e) {
      setError(error, error_size, e.what());
      return 0;
    }
  }
  setError(error, error_size,
           fmt::format("no tool '{:.40}' for a region (capture, compare, fallback, profile, dump_args, "
                       "overflow_check)",
                       name));
  return 0;
}

extern "C" OPSCOPE_EXPORT int opscope_hook_region_end(int id) {
  return opscope::hook::closeRegion(id) ? 1 : 0;
}
