#include <opscope/profiler/profiler_tool.h>

#include "events.h"
#include "signatures.h"
#include "trace_writer.h"

#include <opscope/own_memory.h>
#include <opscope/private_file.h>
#include <opscope/results/trace_file.h>
#include <opscope/runtime_access.h>

#include <mlu/mlurt.h>

#include <dlfcn.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace opscope::profiler {
namespace {

std::uint32_t osThreadId() {
  thread_local const auto tid = static_cast<std::uint32_t>(syscall(SYS_gettid));
  return tid;
}

// The worker thread's last correlation id that got a flow arrow: only the first task of a call gets one.
thread_local std::uint64_t t_last_flow = 0;

class Profiler final : public Tool {
 public:
  Profiler(const Config& config, const RunInfo& run)
      : config_(config),
        run_(run),
        origin_ns_(monotonicNs()),
        writer_(TraceWriter::Options{origin_ns_, config.trace_max_mb << 20, config.trace_segment_mb << 20,
                                     config.trace_gzip, run, optionsJson()},
                signatures_) {
    std::uint64_t window = 0;
    if (!config.schedule) {
      writer_.open(run.result_dir + "/" + std::string(results::kTraceFile));
      recording_ = true;
    } else if (config.schedule->recorded(0, &window)) {
      openWindow(window);
    }
    startWriterThread();
  }

  ~Profiler() override { stopWriterThread(); }

  ToolId id() const override { return ToolId::kProfiler; }
  bool timesRuntimeCalls() const override { return true; }
  bool wants(const OpCall& call) const override {
    return call.args_ok && config_.time_measure_ops.matches(call);
  }

  void before(OpCall& call) override {
    connect();
    call.correlation = call.seq;
  }

  void after(OpCall& call) override {
    // Counted whether or not the step is recorded: the device counts every tagged task it finishes.
    queue_.addEnqueued(call.enqueued);
    if (!recording_.load(std::memory_order_relaxed)) return;
    const std::uint32_t tid = osThreadId();
    queue_.emplace([&](Event& e) {  // written in place in this thread's chunk
      e.kind = EventKind::kOp;
      e.sub = static_cast<std::uint8_t>(call.fallback);
      e.op = static_cast<std::uint16_t>(call.op);
      e.thread = call.thread;
      e.tid = tid;
      e.device = call.device;
      e.status = static_cast<std::int32_t>(call.status);
      e.correlation = call.seq;
      e.start_ns = call.host_start_ns;
      e.end_ns = call.host_end_ns;
      e.queue = call.queue_id;
      e.enqueued = call.enqueued;
      e.symbol = call.framework_outer.empty() ? nullptr : call.framework_outer.data();
      e.site = call.site;
      e.region = call.region.empty() ? nullptr : call.region.data();
      signatures_.record(call, e);
    });
    // opscope's own work on the op (copies, references, checks), so it is not mistaken for the op's.
    const std::uint8_t tools = toolsOn(call);
    if (tools != 0) {
      Event t;
      t.kind = EventKind::kTools;
      t.sub = tools;
      t.op = static_cast<std::uint16_t>(call.op);
      t.thread = call.thread;
      t.tid = tid;
      t.correlation = call.seq;
      if (call.host_start_ns > call.hook_start_ns) {
        t.start_ns = call.hook_start_ns;
        t.end_ns = call.host_start_ns;
        queue_.append(t);
      }
      t.start_ns = call.host_end_ns;
      t.end_ns = monotonicNs();
      queue_.append(t);
    }
  }

  // The program's modules, PyTorch ops and backward calls: spans of the host track, around the library's.
  bool wantsFrameworkFrames() const override { return true; }
  void onFrameworkFrame(const FrameworkFrame& f) override {
    if (!recording_.load(std::memory_order_relaxed)) return;
    const std::uint32_t tid = osThreadId();
    queue_.emplace([&](Event& e) {
      e.kind = EventKind::kFramework;
      e.sub = static_cast<std::uint8_t>(f.kind);
      e.op = f.fallback ? 1 : 0;
      e.thread = f.thread;
      e.tid = tid;
      e.start_ns = f.start_ns;
      e.end_ns = f.end_ns;
      e.symbol = f.name.data();
      e.site = f.site;
      e.value = f.depth;
    });
  }

  void onRuntimeCall(const RuntimeCall& call) override {
    // A program's allocator and host-access annotations (opscope.h) are no runtime call: no span, no device
    // memory change. Nor is the profiler's own chaining of the program's activity callback.
    if (call.kind == RuntimeCallKind::kPoolAlloc || call.kind == RuntimeCallKind::kPoolFree ||
        call.kind == RuntimeCallKind::kHostAccess || call.kind == RuntimeCallKind::kSetActivityCallback)
      return;
    connect();
    queue_.addEnqueued(call.enqueued);
    if (!recording_.load(std::memory_order_relaxed)) return;
    Event e;
    e.kind = EventKind::kRuntime;
    e.sub = static_cast<std::uint8_t>(call.kind);
    e.thread = call.thread;
    e.tid = osThreadId();
    e.status = static_cast<std::int32_t>(call.status);
    e.correlation = call.correlation;
    e.start_ns = call.host_start_ns;
    e.end_ns = call.host_end_ns;
    e.enqueued = call.enqueued;
    e.symbol = call.symbol.data();  // a string literal of the wrapper
    e.value = call.size;
    if (call.kind == RuntimeCallKind::kCollective || call.kind == RuntimeCallKind::kCommInit ||
        call.kind == RuntimeCallKind::kCommDestroy) {
      // The transfer, for the trace's args (and for joining the ranks' traces): see collectiveMembers.
      const CollectiveCall& c = call.collective;
      e.op = static_cast<std::uint16_t>(c.kind);
      e.scalars = kScalarSlots;
      e.scalar = {c.comm,
                  c.seq,
                  c.count,
                  static_cast<std::uint64_t>(c.dtype),
                  static_cast<std::uint64_t>(static_cast<std::int64_t>(c.op)),
                  static_cast<std::uint64_t>(static_cast<std::int64_t>(c.peer)),
                  static_cast<std::uint64_t>(static_cast<std::int64_t>(c.rank)),
                  static_cast<std::uint64_t>(c.size)};
      if (c.status != 0) e.status = c.status;
    }
    queue_.append(e);
    if ((call.kind == RuntimeCallKind::kMalloc || call.kind == RuntimeCallKind::kFree) &&
        call.status == MLURT_SUCCESS) {
      recordMemory(call.host_end_ns, e.thread, e.tid);
    }
  }

  void flush() override {
    // The program has ended, so its queues only drain.
    waitForDevice();
    finish(false);
  }

  void flushOnSignal() override { finish(true); }

  // opscope_step(): the program finished a step. With a schedule, an active window may end (its trace is
  // completed) or begin.
  void onStep() override {
    std::lock_guard lock(step_mutex_);
    const std::int64_t ended = monotonicNs();
    // The step that ends here, on the calling thread's track (steps count from 0, as the schedule's do).
    if (recording_.load() && !finished_.load()) {
      Event e;
      e.kind = EventKind::kStep;
      e.tid = osThreadId();
      e.correlation = step_;
      e.start_ns = step_start_ns_;
      e.end_ns = ended;
      queue_.append(e);
    }
    step_start_ns_ = ended;
    const std::uint64_t step = ++step_;
    if (!config_.schedule || finished_.load()) return;
    std::uint64_t window = 0;
    const bool now = config_.schedule->recorded(step, &window);
    const bool was = recording_.load();
    if (was && (!now || window != window_)) closeWindow();
    if (now && (!was || window != window_)) openWindow(window);
  }

  // mlurtSetActivityCallback from the program while the profiler runs: the profiler keeps the runtime's
  // one callback slot and passes every record on to the program's callback. Once it has finished, the call
  // is the runtime's.
  bool replace(RuntimeCall& call) override {
    if (call.kind != RuntimeCallKind::kSetActivityCallback || finished_.load()) return false;
    connect();
    std::lock_guard lock(chain_mutex_);
    chained_ = call.activity_callback;
    chained_data_ = call.ptr;
    call.status = MLURT_SUCCESS;
    return true;
  }

 private:
  // At the program's first MLU call (the runtime is loaded by then; the hook's constructor may also run in
  // processes that never load it, such as a shell): find the runtime's functions and take its activity
  // callback.
  void connect() {
    std::call_once(connected_, [this] {
      try {
        set_callback_ =
            requiredRuntimeFunction<decltype(&mlurtSetActivityCallback)>("mlurtSetActivityCallback");
        device_count_ = requiredRuntimeFunction<decltype(&mlurtGetDeviceCount)>("mlurtGetDeviceCount");
        device_counters_ =
            requiredRuntimeFunction<decltype(&mlurtDeviceGetCounters)>("mlurtDeviceGetCounters");
        set_callback_(&Profiler::onActivity, this);
      } catch (const std::exception& e) {
        set_callback_ = nullptr;
        device_count_ = nullptr;
        std::fprintf(stderr, "opscope: profiler: %s; device spans are not recorded\n", e.what());
      }
    });
  }

  static void onActivity(const mlurtActivityRecord_t* record, void* user_data) {
    auto* self = static_cast<Profiler*>(user_data);
    self->activity(*record);
  }

  void activity(const mlurtActivityRecord_t& r) {
    // opscope's own tasks (kToolCorrelationBit) were not counted as enqueued by a traced call.
    const bool own = (r.correlationId & kToolCorrelationBit) != 0;
    if (r.correlationId != 0 && !own) completed_.fetch_add(1, std::memory_order_relaxed);
    if (recording_.load(std::memory_order_relaxed)) {
      Event e;
      e.kind = EventKind::kDevice;
      e.sub = static_cast<std::uint8_t>(r.kind);
      e.name = mutableTaskNames().intern(r.name);
      e.device = r.device;
      e.status = static_cast<std::int32_t>(r.status);
      e.correlation = r.correlationId;
      e.start_ns = static_cast<std::int64_t>(r.startNs);
      e.end_ns = static_cast<std::int64_t>(r.endNs);
      e.queue = r.queueId;
      e.value = r.bytes;
      e.task = r.taskId;
      e.flow_end = r.correlationId != 0 && !own && r.correlationId != t_last_flow;
      if (!own) t_last_flow = r.correlationId;
      queue_.append(e);
    }
    mlurtActivityCallback_t chained = nullptr;
    void* data = nullptr;
    {
      std::lock_guard lock(chain_mutex_);
      chained = chained_;
      data = chained_data_;
    }
    if (chained != nullptr) chained(&r, data);
  }

  // The tools before the profiler in order that took the call (OpCall::tools, set by the hook).
  static std::uint8_t toolsOn(const OpCall& call) {
    std::uint8_t bits = 0;
    if ((call.tools & toolBit(ToolId::kCapture)) != 0) bits |= kToolCapture;
    if ((call.tools & toolBit(ToolId::kCompare)) != 0) bits |= kToolCompare;
    if ((call.tools & toolBit(ToolId::kOverflow)) != 0) bits |= kToolOverflow;
    return bits;
  }

  // A counter event per device whose memory in use changed since the last one (after each malloc/free the
  // program made): the program's memory (the runtime's bytes in use less what opscope's tools hold,
  // own_memory.h) and, when a tool holds some, opscope's on a counter of its own. A device's counters start
  // at 0 at the run's start; window_start (a schedule's window opens): each counter that is not 0 starts
  // with the window at its value then.
  void recordMemory(std::int64_t ns, std::uint32_t thread, std::uint32_t tid, bool window_start = false) {
    std::lock_guard lock(memory_mutex_);
    int count = 0;
    if (device_count_ == nullptr || device_counters_ == nullptr || device_count_(&count) != MLURT_SUCCESS)
      return;
    if (memory_.size() < static_cast<std::size_t>(count)) memory_.resize(static_cast<std::size_t>(count));
    for (int d = 0; d < count; ++d) {
      mlurtDeviceCounters_t counters{};
      if (device_counters_(d, &counters) != MLURT_SUCCESS) continue;
      const std::int64_t own = std::max<std::int64_t>(0, ownDeviceBytes(d));
      const std::uint64_t program =
          counters.bytesInUse > static_cast<std::uint64_t>(own) ? counters.bytesInUse - own : 0;
      Memory& memory = memory_[static_cast<std::size_t>(d)];
      const auto record = [&](std::uint8_t sub, bool& traced, std::uint64_t& last, std::uint64_t value) {
        if (window_start) traced = false;
        if (window_start ? value == 0 : last == value) {
          last = value;
          return;
        }
        Event e;
        e.kind = EventKind::kMemory;
        e.sub = sub;
        e.device = d;
        e.thread = thread;
        e.tid = tid;
        if (!traced && !window_start) {  // the track starts at 0 at the run's start
          e.start_ns = e.end_ns = origin_ns_;
          e.value = 0;
          queue_.append(e);
        }
        e.start_ns = e.end_ns = ns;
        e.value = value;
        queue_.append(e);
        traced = true;
        last = value;
      };
      record(0, memory.traced, memory.bytes, program);
      record(1, memory.own_traced, memory.own_bytes,
             static_cast<std::uint64_t>(own));  // once a tool holds some
    }
  }

  std::string optionsJson() const {
    std::string out = "\"options\":{";
    bool first = true;
    for (const auto& [name, value] : config_.set_options) {
      if (!first) out += ',';
      first = false;
      appendJsonString(out, name);
      out += ':';
      appendJsonString(out, value);
    }
    return out + "}";
  }

  void startWriterThread() {
    // The writer takes no signals: a SIGINT or SIGTERM goes to a thread of the program, whose handler then
    // finishes the trace while this thread is stopped cleanly.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    writer_thread_ = std::thread([this] { writerLoop(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void writerLoop() {
    struct Exited {
      std::atomic<bool>& flag;
      ~Exited() { flag.store(true, std::memory_order_release); }
    } exited{writer_exited_};
    auto last_flush = std::chrono::steady_clock::now();
    while (!stop_.load(std::memory_order_acquire)) {
      queue_.waitForFull(100);
      // Taken and written under the lock, so that a window's end (closeWindow) sees every chunk either
      // still queued or already in its file.
      std::lock_guard lock(writer_mutex_);
      // Every thread's partial chunk too (collect), so that the device's spans reach the file as soon as the
      // host's that launched them (a flow is written when both its ends are, in the file both slices are
      // in: OP_TRACE_SEGMENT_MB); and once a second the file is flushed, so that a program killed with
      // SIGKILL leaves a trace.json.tmp that holds all but its last second (trace-check --repair).
      for (auto& chunk : queue_.collect()) {
        writer_.consume(*chunk);
        queue_.recycle(std::move(chunk));
      }
      if (const auto now = std::chrono::steady_clock::now(); now - last_flush >= std::chrono::seconds(1)) {
        writer_.flushFile();
        last_flush = now;
      }
    }
  }

  // Waits (up to 10 s, without syncing any queue) until the device finished the work the traced calls
  // enqueued so far; another thread may go on enqueueing meanwhile.
  void waitForDevice() {
    const std::uint64_t target = queue_.enqueued();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (completed_.load() < target && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  void openWindow(std::uint64_t first_step) {
    std::lock_guard lock(writer_mutex_);
    writer_.open(run_.result_dir + "/" + results::traceStepFile(first_step));
    window_ = first_step;
    recording_ = true;
    recordMemory(monotonicNs(), 0, osThreadId(), true);  // the window's counters start with it
  }

  // The end of an active window: the device's spans of the window's calls come in, then everything
  // recorded goes into the window's file, which is completed.
  void closeWindow() {
    waitForDevice();
    recording_ = false;
    std::lock_guard lock(writer_mutex_);
    for (auto& chunk : queue_.collect()) writer_.consume(*chunk);
    writer_.close();
  }

  // On a fatal signal the thread it interrupted may hold a lock the writer waits for: then the writer is
  // given half a second and left behind, and the flush takes only the locks it can get.
  void stopWriterThread(bool on_signal = false) {
    if (!writer_thread_.joinable()) return;
    stop_.store(true, std::memory_order_release);
    if (writer_thread_.get_id() == std::this_thread::get_id()) {
      writer_thread_.detach();
      return;
    }
    if (!on_signal) {
      queue_.wake();
      writer_thread_.join();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (!writer_exited_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (writer_exited_.load(std::memory_order_acquire)) {
      writer_thread_.join();
    } else {
      writer_thread_.detach();
    }
  }

  void finish(bool on_signal) {
    if (finished_.exchange(true)) return;
    stopWriterThread(on_signal);
    auto rest = queue_.close(on_signal);
    std::unique_lock lock(writer_mutex_, std::defer_lock);
    if (on_signal ? !lock.try_lock() : (lock.lock(), false)) return;
    for (auto& chunk : rest) writer_.consume(*chunk);
    writer_.close();
    std::string summary = writer_.summary();
    // Under its first line: whether the times were taken alongside tools that slow the ops down.
    if (const std::string others = otherTools(); !others.empty()) {
      summary.insert(
          summary.find('\n') + 1,
          fmt::format("caveat: timed while {} ran (their work around each op is left out of the op "
                      "spans, but slows the device and the host): profile alone for the ops' own "
                      "speed\n",
                      others));
    }
    const std::string summary_error = writePrivateFile(run_.result_dir + "/summary.txt", summary);
    const std::string csv_error = writer_.writeCsv(run_.result_dir + "/time_measure.csv");
    if (!on_signal) {
      if (set_callback_ != nullptr) {
        // The runtime's slot goes back to the program's own callback, if it set one. (Not under
        // chain_mutex_: a worker in activity() holds the runtime's callback lock while it takes that.)
        mlurtActivityCallback_t chained = nullptr;
        void* data = nullptr;
        {
          std::lock_guard chain_lock(chain_mutex_);
          chained = chained_;
          data = chained_data_;
        }
        set_callback_(chained, data);
      }
    }
    printSummary(summary, summary_error, csv_error);
  }

  // The tools on beside the profiler that slow the ops it times ("capture, compare"), or "".
  std::string otherTools() const {
    std::string out;
    for (const auto& [on, name] : {std::pair{config_.capture, "capture"},
                                   {config_.autocompare, "compare"},
                                   {config_.mem_check, "memcheck"},
                                   {config_.fallback, "fallback"},
                                   {config_.overflow_check, "overflow check"}}) {
      if (on) out += (out.empty() ? "" : ", ") + std::string(name);
    }
    return out;
  }

  // The table's head, then what was written where, and what could not be (each failed file, and why):
  // counts printed are counts in files.
  void printSummary(const std::string& summary, const std::string& summary_error,
                    const std::string& csv_error) const {
    // The table's head and its 15 heaviest ops; the files hold everything.
    std::size_t pos = 0;
    for (int line = 0; line < 17 && pos != std::string::npos; ++line) {
      pos = summary.find('\n', pos);
      if (pos != std::string::npos) ++pos;
    }
    std::fprintf(stderr, "%.*s", static_cast<int>(pos == std::string::npos ? summary.size() : pos),
                 summary.c_str());
    std::vector<std::string> written;
    if (!writer_.files().empty()) {
      const std::string gz = config_.trace_gzip ? ".gz" : "";
      const std::size_t files = writer_.files().size();
      written.push_back(fmt::format(
          "{} events in {}", writer_.eventsWritten(),
          config_.schedule ? fmt::format("{} trace_step<N>.json{} files", files, gz)
          : files == 1
              ? "trace.json" + gz
              : fmt::format("trace.json{} and {} more files (OP_TRACE_SEGMENT_MB: trace.1.json{} ...)", gz,
                            files - 1, gz)));
    }
    if (summary_error.empty()) written.emplace_back("table in summary.txt");
    if (csv_error.empty()) written.emplace_back("calls in time_measure.csv");
    if (!written.empty()) {
      std::string list;
      for (const auto& w : written) list += (list.empty() ? "" : ", ") + w;
      std::fprintf(stderr, "opscope: profiler: %s (%s)\n", list.c_str(), run_.result_dir.c_str());
    }
    std::vector<std::string> failed = writer_.errors();
    for (const std::string* error : {&summary_error, &csv_error}) {
      if (!error->empty()) failed.push_back(*error);
    }
    for (const auto& error : failed)
      std::fprintf(stderr, "opscope: profiler: not written: %s\n", error.c_str());
  }

  const Config& config_;
  const RunInfo run_;
  const std::int64_t origin_ns_;
  std::once_flag connected_;
  decltype(&mlurtSetActivityCallback) set_callback_ = nullptr;
  decltype(&mlurtGetDeviceCount) device_count_ = nullptr;
  decltype(&mlurtDeviceGetCounters) device_counters_ = nullptr;

  Signatures signatures_;
  EventQueue queue_;
  std::mutex writer_mutex_;  // guards writer_
  TraceWriter writer_;
  std::thread writer_thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> writer_exited_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> recording_{false};  // events are recorded (always without a schedule)

  std::mutex step_mutex_;  // guards the three below
  std::uint64_t step_ = 0;
  std::int64_t step_start_ns_ =
      origin_ns_;             // when the current step began: the last opscope_step(), or the start
  std::uint64_t window_ = 0;  // the first step of the open window

  std::atomic<std::uint64_t> completed_{0};  // tagged tasks the device finished

  std::mutex memory_mutex_;
  struct Memory {
    bool traced = false;          // the device's counter track has begun (in the open file)
    bool own_traced = false;      // and opscope's
    std::uint64_t bytes = 0;      // the last value traced: the program's memory
    std::uint64_t own_bytes = 0;  // opscope's
  };
  std::vector<Memory> memory_;  // per device

  std::mutex chain_mutex_;
  mlurtActivityCallback_t chained_ = nullptr;
  void* chained_data_ = nullptr;
};

}  // namespace

std::unique_ptr<Tool> makeProfilerTool(const Config& config, const RunInfo& run) {
  return std::make_unique<Profiler>(config, run);
}

ToolRegistration registration() {
  return {ToolId::kProfiler, [](const Config& c) { return c.time_measure; }, true, makeProfilerTool};
}

}  // namespace opscope::profiler
