#include <opscope/recorder/flight_recorder.h>

#include "rank_consistency.h"
#include "ticker.h"

#include <opscope/private_file.h>
#include <opscope/results/flight_recorder_file.h>
#include <opscope/results/format_version.h>
#include <opscope/runtime_access.h>
#include <opscope/stacks.h>
#include <opscope/symbolizer.h>
#include <opscope/text.h>

#include <mlu/dtype.h>
#include <mlu/mlucl.h>
#include <mlu/mlurt.h>
#include <mlu/op_args.h>

#include <dlfcn.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace opscope::recorder {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Where a transfer is. The host call may never return (a rank stuck before it): "calling" until it does.
enum class State : int { kCalling, kEnqueued, kRefused };
constexpr const char* kStateNames[] = {"calling", "enqueued", "refused"};

constexpr int kBacktraceDepth = 16;
// How often the watchdog looks at the rings, the communicators' errors, SIGUSR1 and the run folder.
constexpr auto kTick = std::chrono::milliseconds(200);
// How long a rank that timed out waits for the other ranks' dumps before it aborts.
constexpr auto kWaitForOtherDumps = std::chrono::seconds(20);

// "; issued by c10d::allreduce_ during backward" ("" when the program declared no framework op).
std::string issuedBy(std::string_view framework_op, bool in_backward, const std::string& site) {
  if (framework_op.empty()) return {};
  return "; issued by " + results::issuedByText(std::string(framework_op), in_backward, site);
}

// An optimizer op, whose parameters OP_RANK_CONSISTENCY hashes after it: a fused one of the kernel library,
// or any op of a framework's optimizer step (torch.optim's step() is a region "Optimizer.step#SGD.step",
// which torch_mlu declares: its ops write the parameters and the optimizer's state).
bool optimizer(const OpCall& call) {
  if (!call.args_ok) return false;
  if (call.op == mlu::OpId::adamw_step || call.op == mlu::OpId::sgd_step) return true;
  return call.site != nullptr && call.site->module.starts_with(kFrameworkOptimizerStep);
}

std::int64_t unixNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One transfer. Written under the recorder's mutex by the calling thread; started_ns and completed_ns by
// host functions on the transfer's queue, which find it by its id.
struct Entry {
  std::atomic<std::uint64_t> id{0};  // the recorder's running number, from 1; 0: an empty slot
  Collective kind = Collective::kCount;
  std::uint64_t seq = 0;  // libmlucl's; until the call returns, the one it will get
  std::uint64_t count = 0;
  int dtype = 0, op = -1, peer = -1;
  int status = 0;
  State state = State::kCalling;
  std::uint64_t queue = 0;
  std::uint64_t op_seq = 0;
  mlu::OpId last_op = mlu::OpId::kCount;
  // The program's framework ops around the call ("c10d::allreduce_") and where it made it.
  std::string framework_op;
  const FrameworkSite* site = nullptr;
  bool in_backward = false;
  std::uint32_t thread = 0;
  std::int64_t calling_ns = 0;                // CLOCK_MONOTONIC: the host call made
  std::int64_t enqueued_ns = 0;               // the host call returned
  std::atomic<std::int64_t> started_ns{0};    // the queue reached it
  std::atomic<std::int64_t> completed_ns{0};  // the queue went past it
  std::atomic<bool> failed{false};            // and the communicator had failed by then
  StackId stack = 0;
};

// A communicator's ring.
struct Ring {
  std::uint64_t comm = 0;
  void* handle = nullptr;  // its mluclComm_t, nullptr once destroyed
  int rank = -1, size = 0;
  std::unique_ptr<Entry[]> slots;
  std::size_t capacity = 0;
  std::uint64_t recorded = 0;  // entries ever recorded (the next goes to slots[recorded % capacity])
  // The last accepted collective's seq (the last enqueued), and per peer the last send's / recv's.
  std::uint64_t collectives = 0;
  std::map<int, std::uint64_t> sends, recvs;
  std::string error;  // the communicator's asynchronous error, once seen
};

// What the rings and the host functions share (kept alive by the host functions still queued).
struct Shared {
  std::mutex mutex;  // guards the rings' entries but their atomics
  std::map<std::uint64_t, std::unique_ptr<Ring>> rings;
  std::uint64_t next_id = 0;
};

// A host function's pointer to its entry.
struct Token {
  std::shared_ptr<Shared> shared;
  Ring* ring = nullptr;
  Entry* entry = nullptr;
  std::uint64_t id = 0;
  void* comm = nullptr;  // the mluclComm_t
  // OP_RANK_CONSISTENCY's work left for the queue, riding along (see RankConsistency::take).
  std::unique_ptr<RankConsistency::Work> work;
};

// Puts the mark on queue; what it carries for the consistency check runs anyway when the runtime refuses.
void launchMark(mlurtQueue_t queue, void (*mark)(void*), std::unique_ptr<Token> token) {
  if (mlurtLaunchHostFunc(queue, mark, token.get()) == MLURT_SUCCESS) {
    token.release();
  } else if (token->work) {
    mlurtQueueSync(queue);
    token->work->run();
  }
}

void markStarted(void* data) {
  const std::unique_ptr<Token> t(static_cast<Token*>(data));
  if (t->work) t->work->run();
  if (t->entry->id.load(std::memory_order_acquire) == t->id)
    t->entry->started_ns.store(monotonicNs(), std::memory_order_release);
}

// After the transfer: a transfer that failed (the ranks disagreed) leaves its communicator failed, which
// libmlucl says by then (a handle destroyed since is refused: not a failure).
void markCompleted(void* data) {
  const std::unique_ptr<Token> t(static_cast<Token*>(data));
  if (t->work) t->work->run();
  if (t->entry->id.load(std::memory_order_acquire) != t->id) return;
  static const auto async_error =
      realRuntimeFunction<decltype(&mluclCommGetAsyncError)>("mluclCommGetAsyncError");
  mluclStatus_t status = MLUCL_SUCCESS;
  const char* message = nullptr;
  if (async_error != nullptr && t->comm != nullptr &&
      async_error(static_cast<mluclComm_t>(t->comm), &status, &message) == MLUCL_SUCCESS &&
      status != MLUCL_SUCCESS) {
    t->entry->failed.store(true, std::memory_order_relaxed);
    std::lock_guard lock(t->shared->mutex);
    if (t->ring->error.empty())
      t->ring->error =
          message != nullptr ? std::string(message) : fmt::format("status {}", static_cast<int>(status));
  }
  t->entry->completed_ns.store(monotonicNs(), std::memory_order_release);
}

// SIGUSR1 asks for a dump; the watchdog writes it (the handler only sets the flag).
std::atomic<bool> g_dump_requested{false};
void onSigusr1(int) { g_dump_requested.store(true, std::memory_order_relaxed); }

class FlightRecorder final : public Tool {
 public:
  FlightRecorder(const Config& config, const RunInfo& run)
      : flight_recorder_(config.flight_recorder),
        capacity_(static_cast<std::size_t>(config.collective_ring)),
        timeout_ns_(static_cast<std::int64_t>(config.collective_timeout_s) * 1'000'000'000),
        abort_on_timeout_(config.collective_timeout_abort),
        rank_(run.rank),
        world_(run.world_size),
        path_(run.result_dir + "/" + std::string(results::kFlightRecorderFile)),
        end_now_(run.end_now),
        stacks_(kBacktraceDepth, moduleRangeOf(reinterpret_cast<const void*>(&markStarted))),
        shared_(std::make_shared<Shared>()),
        start_unix_ns_(unixNs()) {
    if (!run.run_folder.empty()) folder_ = fs::path(run.result_dir).parent_path();
    request_seen_ = requestStamp();
    if (config.rank_consistency) consistency_ = std::make_unique<RankConsistency>(run);
    if (!flight_recorder_) return;  // OP_RANK_CONSISTENCY alone
    struct sigaction old {};
    if (sigaction(SIGUSR1, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      struct sigaction sa {};
      sa.sa_handler = onSigusr1;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      sigaction(SIGUSR1, &sa, nullptr);
    }
    watchdog_.start("flight recorder", kTick, [this] { tick(); });
  }

  ~FlightRecorder() override { watchdog_.stop(true); }

  ToolId id() const override { return ToolId::kRecorder; }
  // OP_RANK_CONSISTENCY: the optimizer ops, whose parameters the ranks must agree on after each, and every
  // other op on a queue (the consistency check's work left for that queue is queued before it).
  bool wants(const OpCall& call) const override {
    return consistency_ && (optimizer(call) || call.queue != nullptr);
  }

  void before(OpCall& call) override {
    if (optimizer(call))
      consistency_->beforeOptimizer(call);
    else
      consistency_->beforeOther(call.queue);
  }
  void after(OpCall& call) override {
    if (optimizer(call)) consistency_->afterOptimizer(call);
  }

  void onStep() override {
    if (consistency_) consistency_->onStep();
  }

  // A runtime call other than a collective: the consistency check's work left for its queue is queued
  // before it (every one, also a call another tool makes itself: memcheck's allocations and frees). A
  // collective carries that work in its mark.
  void beforeRuntimeCall(const RuntimeCall& call) override {
    if (call.kind != RuntimeCallKind::kCollective) {
      if (consistency_) consistency_->beforeOther(call.queue);
      return;
    }
    const CollectiveCall& c = call.collective;
    // The consistency check's work left for the queue goes before the transfer (with the mark, or alone).
    std::unique_ptr<RankConsistency::Work> work = consistency_ ? consistency_->take(call.queue) : nullptr;
    if (!flight_recorder_ || c.comm == 0) {  // not a communicator: the library refuses the call
      if (work) consistency_->launch(call.queue, std::move(work));
      return;
    }
    const StackId stack = stacks_.capture(call.site);
    auto token = std::make_unique<Token>();
    {
      std::lock_guard lock(shared_->mutex);
      Ring& ring = ringOf(c);
      Entry& e = ring.slots[ring.recorded++ % ring.capacity];
      const std::uint64_t id = ++shared_->next_id;
      e.id.store(0, std::memory_order_relaxed);
      e.kind = c.kind;
      e.seq = c.kind == Collective::kSend   ? ring.sends[c.peer] + 1
              : c.kind == Collective::kRecv ? ring.recvs[c.peer] + 1
                                            : ring.collectives + 1;
      e.count = c.count;
      e.dtype = c.dtype;
      e.op = c.op;
      e.peer = c.peer;
      e.status = 0;
      e.state = State::kCalling;
      e.queue = 0;
      e.op_seq = call.op_seq;
      e.last_op = call.last_op;
      e.framework_op.assign(call.framework_op);
      e.site = call.site;
      e.in_backward = call.in_backward;
      e.thread = call.thread;
      e.calling_ns = monotonicNs();
      e.enqueued_ns = 0;
      e.started_ns.store(0, std::memory_order_relaxed);
      e.completed_ns.store(0, std::memory_order_relaxed);
      e.failed.store(false, std::memory_order_relaxed);
      e.stack = stack;
      e.id.store(id, std::memory_order_release);
      *token = Token{shared_, &ring, &e, id, c.handle, std::move(work)};
      pending() = Pending{&ring, &e, id};
    }
    // The queue reaches the transfer once this has run (queued before it).
    launchMark(call.queue, &markStarted, std::move(token));
  }

  void onRuntimeCall(const RuntimeCall& call) override {
    if (call.kind == RuntimeCallKind::kCommDestroy) {
      bool live = false;
      {
        std::lock_guard lock(shared_->mutex);
        if (const auto it = shared_->rings.find(call.collective.comm); it != shared_->rings.end())
          it->second->handle = nullptr;
        for (const auto& [id, ring] : shared_->rings) live = live || ring->handle != nullptr;
      }
      // The program is done with its collectives: a dump now, in case the exit's is cut short (a launcher
      // kills the ranks still running once one has exited with an error).
      if (flight_recorder_ && !live) dump("communicators destroyed", Symbols::kModules);
      return;
    }
    if (call.kind != RuntimeCallKind::kCollective) return;
    const CollectiveCall& c = call.collective;
    // The gradients (or whatever the ranks all-reduced): identical on every rank once it ran. Hashed by the
    // mark after the transfer, or on its own when there is none.
    if (consistency_ && c.status == MLUCL_SUCCESS && c.kind == Collective::kAllReduce && c.recv != nullptr &&
        c.recv_bytes > 0)
      consistency_->afterAllReduce(call.queue, c.seq, c.result != nullptr ? c.result : c.recv, c.recv_bytes);
    struct FlushOnReturn {
      RankConsistency* c;
      mlurtQueue_t queue;
      ~FlushOnReturn() {
        if (c != nullptr) c->flush(queue);
      }
    } flush_on_return{consistency_.get(), call.queue};
    Pending p = std::exchange(pending(), Pending{});
    if (p.entry == nullptr) return;
    auto token = std::make_unique<Token>();
    {
      std::lock_guard lock(shared_->mutex);
      if (p.entry->id.load(std::memory_order_relaxed) != p.id) return;
      Entry& e = *p.entry;
      Ring& ring = *p.ring;
      e.status = c.status;
      e.enqueued_ns = monotonicNs();
      static const auto queue_id = realRuntimeFunction<decltype(&mlurtQueueGetId)>("mlurtQueueGetId");
      if (queue_id != nullptr) queue_id(call.queue, &e.queue);
      if (c.status != MLUCL_SUCCESS) {
        e.state = State::kRefused;
        return;
      }
      e.state = State::kEnqueued;
      e.seq = c.seq;
      if (c.kind == Collective::kSend) {
        ring.sends[c.peer] = c.seq;
      } else if (c.kind == Collective::kRecv) {
        ring.recvs[c.peer] = c.seq;
      } else {
        ring.collectives = c.seq;
      }
      *token = Token{shared_, p.ring,   p.entry,
                     p.id,    c.handle, consistency_ ? consistency_->take(call.queue) : nullptr};
    }
    launchMark(call.queue, &markCompleted, std::move(token));
  }

  void flush() override {
    watchdog_.stop(true);
    if (flight_recorder_ && anyRecorded()) dump("exit", Symbols::kIfFound, true);
    if (consistency_) consistency_->finish();
  }

  // On a fatal signal: no wait for the watchdog (the signal may have come from it: an abort after a
  // timeout), no symbols (not safe to look up here), the lock only if it is free soon.
  void flushOnSignal() override {
    watchdog_.stop(false);
    // (Not when this rank ends its results before the job's abort: it has just dumped, symbolized.)
    if (flight_recorder_ && !ending_now_.load()) dump("fatal signal", Symbols::kAddresses);
    if (consistency_) consistency_->finishOnSignal();
  }

  json findings() const override {
    json out = json::object();
    if (consistency_) {
      if (json c = consistency_->findings(); !c.is_null()) out["consistency"] = std::move(c);
    }
    std::lock_guard lock(dump_mutex_);
    if (dumps_ > 0) {
      out["file"] = results::kFlightRecorderFile;
      out["reasons"] = reasons_;
    }
    return out.empty() ? json(nullptr) : out;
  }

 private:
  struct Pending {
    Ring* ring = nullptr;
    Entry* entry = nullptr;
    std::uint64_t id = 0;
  };
  static Pending& pending() {
    thread_local Pending p;
    return p;
  }

  Ring& ringOf(const CollectiveCall& c) {
    auto& ring = shared_->rings[c.comm];
    if (!ring) {
      ring = std::make_unique<Ring>();
      ring->comm = c.comm;
      ring->handle = c.handle;
      ring->rank = c.rank;
      ring->size = c.size;
      ring->capacity = capacity_;
      ring->slots = std::make_unique<Entry[]>(capacity_);
    }
    return *ring;
  }

  bool anyRecorded() {
    std::lock_guard lock(shared_->mutex);
    return !shared_->rings.empty();
  }

  // The run folder's dump request: its modification time in ns (0: none).
  std::int64_t requestStamp() const {
    if (folder_.empty()) return 0;
    struct stat st {};
    if (::stat((folder_ / kDumpRequestFile).c_str(), &st) != 0) return 0;
    return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  }

  void tick() {
    if (g_dump_requested.exchange(false)) dump("SIGUSR1", Symbols::kFull);
    // A communicator's asynchronous error (a transfer failed on the device: a mismatch between ranks).
    static const auto async_error =
        realRuntimeFunction<decltype(&mluclCommGetAsyncError)>("mluclCommGetAsyncError");
    std::string error_reason;
    std::string timed_out;
    {
      std::lock_guard lock(shared_->mutex);
      const std::int64_t now = monotonicNs();
      for (auto& [id, ring] : shared_->rings) {
        if (async_error != nullptr && ring->handle != nullptr && ring->error.empty()) {
          mluclStatus_t status = MLUCL_SUCCESS;
          const char* message = nullptr;
          if (async_error(static_cast<mluclComm_t>(ring->handle), &status, &message) == MLUCL_SUCCESS &&
              status != MLUCL_SUCCESS) {
            ring->error = message != nullptr ? std::string(message)
                                             : fmt::format("status {}", static_cast<int>(status));
            error_reason = fmt::format("error on communicator {}: {}", ring->comm, ring->error);
          }
        }
        if (timeout_ns_ <= 0 || !timed_out.empty()) continue;
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(ring->recorded, ring->capacity));
        for (std::size_t i = 0; i < n; ++i) {
          const Entry& e = ring->slots[(ring->recorded - n + i) % ring->capacity];
          const std::uint64_t id_now = e.id.load(std::memory_order_relaxed);
          if (id_now == 0 || id_now <= timed_out_id_ || e.state == State::kRefused ||
              e.completed_ns.load(std::memory_order_acquire) != 0 || now - e.calling_ns < timeout_ns_)
            continue;
          timed_out_id_ = id_now;
          timed_out = fmt::format(
              "{} #{} on communicator {} (rank {} of {}; {} x {}{}) {} for {:.1f} s "
              "(OP_COLLECTIVE_TIMEOUT_S={})",
              collectiveName(e.kind), e.seq, ring->comm, ring->rank, ring->size, e.count, dtypeName(e.dtype),
              issuedBy(e.framework_op, e.in_backward, siteText(e.site)),
              e.state == State::kCalling ? "was called and has not returned"
              : e.started_ns.load() == 0 ? "was enqueued and has not started"
                                         : "started and has not completed",
              static_cast<double>(now - e.calling_ns) / 1e9, timeout_ns_ / 1'000'000'000);
          break;
        }
      }
    }
    if (!error_reason.empty()) dump(error_reason, Symbols::kFull);
    if (!timed_out.empty()) onTimeout(timed_out);
    // Another rank timed out and asks every rank to dump.
    if (const std::int64_t stamp = requestStamp(); stamp > request_seen_) {
      request_seen_ = stamp;
      std::string who = "another rank";
      if (std::FILE* f = std::fopen((folder_ / kDumpRequestFile).c_str(), "r")) {
        char line[512] = {};
        if (std::fgets(line, sizeof line, f) != nullptr) who = std::string(line);
        std::fclose(f);
        while (!who.empty() && (who.back() == '\n' || who.back() == '\r')) who.pop_back();
      }
      dump(fmt::format("requested: {}", who), Symbols::kFull);
      // The rank that timed out aborts the job once every rank has dumped and finished (waitForOtherDumps),
      // and Open MPI then kills the others within a second or two: too soon for their own flush at the
      // signal (under ThreadSanitizer it was). So this rank finishes its results now; its program's later
      // calls are forwarded unwatched.
      if (abort_on_timeout_ && end_now_ && !ending_now_.load()) {
        std::fprintf(stderr,
                     "opscope: flight recorder: rank %d: finishing this rank's results now (%s; the job is "
                     "being aborted)\n",
                     rank_, printable(who).substr(0, 300).c_str());
        endNow(fmt::format("the flight recorder's abort ({})", printable(who.substr(0, who.find(':')))));
      }
    }
  }

  void onTimeout(const std::string& what) {
    std::fprintf(stderr, "opscope: flight recorder: rank %d: %s\n", rank_, what.c_str());
    dump("timeout: " + what, Symbols::kFull);
    if (!folder_.empty()) {
      // Every rank is asked to dump (through the shared run folder, not the stuck collective).
      const std::string request = fmt::format("rank {} timed out: {}\n", rank_, what);
      if (writePrivateFile((folder_ / kDumpRequestFile).string(), request).empty())
        request_seen_ = requestStamp();  // not this rank's own request again
    }
    // Before the abort, this rank's results are finished (the trace, the summary, run.json's end) and
    // every other rank's too (tick): not left to the abort's signal, after which Open MPI kills the others.
    if (abort_on_timeout_) endNow(fmt::format("the flight recorder's abort (rank {} timed out)", rank_));
    if (!folder_.empty()) waitForOtherDumps();
    if (!abort_on_timeout_) return;
    std::fprintf(stderr,
                 "opscope: flight recorder: rank %d: aborting (every rank's flight_recorder.json is in its "
                 "result directory; `opscope analyze %s`; OP_COLLECTIVE_TIMEOUT_ACTION=dump only dumps)\n",
                 rank_, folder_.empty() ? "RUNFOLDER" : folder_.c_str());
    std::abort();
  }

  // The hook finishes this rank's results (RunInfo::end_now, as on a fatal signal: no wait for a queue that
  // is stuck) before the job's abort. Once.
  void endNow(const std::string& ended) {
    if (!end_now_ || ending_now_.exchange(true)) return;
    end_now_(ended);
  }

  // Until every other rank of the folder has a dump newer than the request (and, before an abort, its
  // results finished), or kWaitForOtherDumps.
  void waitForOtherDumps() {
    const auto deadline = std::chrono::steady_clock::now() + kWaitForOtherDumps;
    const auto since = fs::file_time_type::clock::now() - std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < deadline) {
      int dumped = 0;
      std::error_code ec;
      for (const auto& d : fs::directory_iterator(folder_, ec)) {
        const fs::path file = d.path() / results::kFlightRecorderFile;
        if (d.path() == fs::path(path_).parent_path()) continue;
        const auto newer = [&](const fs::path& f) {
          std::error_code e2;
          return fs::last_write_time(f, e2) >= since && !e2;
        };
        // Before an abort: the rank's results finished too (its run.json written again at the end: tick).
        if (newer(file) && (!abort_on_timeout_ || newer(d.path() / "run.json"))) ++dumped;
      }
      if (world_ > 1 && dumped >= world_ - 1) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  static std::string dtypeName(int dtype) {
    return dtype >= MLUOP_DTYPE_FLOAT && dtype <= MLUOP_DTYPE_BOOL
               ? std::string(mlu::dtypeName(static_cast<mluopDataType_t>(dtype)))
               : std::to_string(dtype);
  }

  // How a dump gives its backtraces: function, file and line (libdwfl: ~50 ms a process to load the
  // modules' debug information), module and offset (dladdr: for the exit of a run where nothing went wrong,
  // whose backtraces are seldom read; the offsets can be looked up afterwards with addr2line), or
  // addresses only (on a fatal signal, where neither is safe). A stack symbolized by an earlier dump keeps
  // its symbols.
  enum class Symbols { kFull, kIfFound, kModules, kAddresses };

  // Writes flight_recorder.json: every ring, oldest entry first. kIfFound: kFull when an earlier dump was
  // symbolized (a timeout, an error, a request), else kModules.
  // only_if_changed: not when the last dump already holds every entry as it is now (at exit, after the dump
  // made when the communicators were destroyed), unless this one would be symbolized and that was not.
  void dump(const std::string& reason, Symbols symbols, bool only_if_changed = false) {
    std::unique_lock dump_lock(dump_mutex_, std::defer_lock);
    if (symbols != Symbols::kAddresses) {
      dump_lock.lock();
    } else if (!dump_lock.try_lock()) {
      return;  // a dump is being written on another thread
    }
    if (symbols == Symbols::kIfFound) symbols = symbolize_at_exit_ ? Symbols::kFull : Symbols::kModules;
    if (only_if_changed && dumps_ > 0 && signature() == dumped_signature_ &&
        (symbols != Symbols::kFull || dumped_symbolized_))
      return;
    symbolize_at_exit_ = symbolize_at_exit_ || symbols == Symbols::kFull;
    reasons_.push_back(reason);
    // Symbolizing can take seconds (longer under a sanitizer), and a launcher that saw another rank fail
    // may kill this one meanwhile: a dump with modules and offsets is written first, then replaced.
    // The state before the dump is written (a change while it is written makes the exit's dump happen).
    // Not on a signal: no lock that the signal may have interrupted.
    if (symbols != Symbols::kAddresses) {
      dumped_signature_ = signature();
      dumped_symbolized_ = symbols == Symbols::kFull;
    }
    if (symbols == Symbols::kFull) writeDump(Symbols::kModules);
    writeDump(symbols);
  }

  // What the rings hold, in a few numbers: entries recorded, and those started, completed and failed.
  std::array<std::uint64_t, 4> signature() {
    std::array<std::uint64_t, 4> s{};
    std::lock_guard lock(shared_->mutex);
    s[0] = shared_->next_id;
    for (const auto& [id, ring] : shared_->rings) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(ring->recorded, ring->capacity));
      for (std::size_t i = 0; i < n; ++i) {
        const Entry& e = ring->slots[i];
        s[1] += e.started_ns.load(std::memory_order_acquire) != 0;
        s[2] += e.completed_ns.load(std::memory_order_acquire) != 0;
        s[3] += e.failed.load(std::memory_order_relaxed);
      }
    }
    return s;
  }

  // An entry as the dump writes it (its state and times as read once by the caller).
  static results::FlightRecorderEntry record(const Entry& e, const char* state, std::int64_t started,
                                             std::int64_t completed) {
    const bool collective = !isPointToPoint(e.kind);
    results::FlightRecorderEntry r;
    r.id = static_cast<std::int64_t>(e.id.load());
    r.seq = static_cast<std::int64_t>(e.seq);
    r.collective = collectiveName(e.kind);
    r.count = static_cast<std::int64_t>(e.count);
    r.dtype = dtypeName(e.dtype);
    r.op = reduceOpName(e.op);
    r.state = state;
    r.status = e.status;
    r.queue = static_cast<std::int64_t>(e.queue);
    r.thread = e.thread;
    r.op_seq = static_cast<std::int64_t>(e.op_seq);
    if (e.last_op < mlu::OpId::kCount) r.last_op = mlu::opName(e.last_op);
    r.framework_op = e.framework_op;
    r.site = siteText(e.site);
    r.in_backward = e.in_backward;
    r.calling_ns = e.calling_ns;
    if (e.enqueued_ns != 0) r.enqueued_ns = e.enqueued_ns;
    if (started != 0) r.started_ns = started;
    if (completed != 0) r.completed_ns = completed;
    if (e.kind == Collective::kBroadcast) r.root = e.peer;
    if (!collective) r.peer = e.peer;
    r.stack = static_cast<std::int64_t>(e.stack);
    return r;
  }

  // dump()'s file, with dump_mutex_ held.
  void writeDump(Symbols symbols) {
    json comms = json::array();
    std::vector<StackId> stacks;
    {
      std::unique_lock lock(shared_->mutex, std::defer_lock);
      if (symbols != Symbols::kAddresses) {
        lock.lock();
      } else {
        for (int i = 0; i < 50 && !lock.try_lock(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      for (const auto& [id, ring] : shared_->rings) {
        json entries = json::array();
        std::uint64_t last_started = 0, last_completed = 0;
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(ring->recorded, ring->capacity));
        for (std::size_t i = 0; i < n; ++i) {
          const Entry& e = ring->slots[(ring->recorded - n + i) % ring->capacity];
          if (e.id.load(std::memory_order_acquire) == 0) continue;
          const std::int64_t started = e.started_ns.load(std::memory_order_acquire);
          const std::int64_t completed = e.completed_ns.load(std::memory_order_acquire);
          const bool collective = !isPointToPoint(e.kind);
          const bool failed = e.failed.load(std::memory_order_relaxed);
          const char* state = e.state != State::kEnqueued ? kStateNames[static_cast<int>(e.state)]
                              : completed != 0 && failed  ? "failed"
                              : completed != 0            ? "completed"
                              : started != 0              ? "started"
                                                          : "enqueued";
          if (collective && e.state == State::kEnqueued && started != 0)
            last_started = std::max(last_started, e.seq);
          if (collective && e.state == State::kEnqueued && completed != 0 && !failed)
            last_completed = std::max(last_completed, e.seq);
          if (e.stack != 0) stacks.push_back(e.stack);
          entries.push_back(results::toJson(record(e, state, started, completed)));
        }
        results::FlightRecorderComm c;
        c.comm = std::to_string(ring->comm);
        c.rank = ring->rank;
        c.size = ring->size;
        c.destroyed = ring->handle == nullptr;
        c.recorded = static_cast<std::int64_t>(ring->recorded);
        c.ring = static_cast<std::int64_t>(ring->capacity);
        c.last_enqueued = static_cast<std::int64_t>(ring->collectives);
        c.last_started = static_cast<std::int64_t>(last_started);
        c.last_completed = static_cast<std::int64_t>(last_completed);
        c.error = ring->error;
        json comm = results::toJson(c);
        comm["entries"] = std::move(entries);
        comms.push_back(std::move(comm));
      }
    }
    // Each distinct backtrace once, by id: symbolized (or addresses only).
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    json backtraces = json::object();
    std::unique_ptr<Symbolizer> symbolizer;
    if (symbols == Symbols::kFull && !stacks.empty()) symbolizer = std::make_unique<Symbolizer>();
    for (StackId id : stacks) {
      // A stack symbolized by an earlier dump keeps its symbols in a dump without (on a fatal signal).
      if (const auto known = symbolized_.find(id); known != symbolized_.end()) {
        backtraces[std::to_string(id)] = known->second;
        continue;
      }
      json frames = json::array();
      for (std::uintptr_t pc : stacks_.frames(id)) {
        if (const auto program = stacks_.programFrame(pc)) {  // the program's own frame (Python's)
          frames.push_back(program->file.empty()
                               ? fmt::format("#{} in {}", frames.size(), program->function)
                               : fmt::format("#{} in {} {}:{}", frames.size(), program->function,
                                             program->file, program->line));
          continue;
        }
        if (symbols == Symbols::kModules) {
          Dl_info info{};
          if (dladdr(reinterpret_cast<const void*>(pc - 1), &info) != 0 && info.dli_fname != nullptr) {
            frames.push_back(fmt::format("#{} 0x{:x} ({}+0x{:x})", frames.size(), pc,
                                         fs::path(info.dli_fname).filename().string(),
                                         pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase)));
            continue;
          }
        }
        if (!symbolizer) {
          frames.push_back(fmt::format("#{} 0x{:x}", frames.size(), pc));
          continue;
        }
        std::string text;
        formatFrames(text, symbolizer->symbolize(pc), "");
        // One line per frame (an address may stand for inlined frames too), numbered over the whole stack.
        std::size_t begin = 0;
        while (begin < text.size()) {
          std::size_t end = text.find('\n', begin);
          if (end == std::string::npos) end = text.size();
          std::string line = text.substr(begin, end - begin);
          if (const std::size_t space = line.find(' '); line.starts_with('#') && space != std::string::npos)
            line = line.substr(space + 1);
          if (!line.empty()) frames.push_back(fmt::format("#{} {}", frames.size(), line));
          begin = end + 1;
        }
      }
      if (symbolizer) symbolized_[id] = frames;
      backtraces[std::to_string(id)] = std::move(frames);
    }
    const json out = {{"format", results::kFlightRecorderFormat},
                      {results::kFormatVersionKey, results::kFlightRecorderFormatVersion},
                      {"rank", rank_},
                      {"world_size", world_},
                      {"pid", static_cast<long>(getpid())},
                      {"reasons", reasons_},
                      {"dumped_unix_ns", unixNs()},
                      {"dumped_monotonic_ns", monotonicNs()},
                      {"start_unix_ns", start_unix_ns_},
                      {"comms", std::move(comms)},
                      {"backtraces", std::move(backtraces)}};
    const std::string error = writePrivateFile(path_, out.dump(1) + "\n");
    ++dumps_;
    if (!error.empty()) std::fprintf(stderr, "opscope: flight recorder: %s\n", error.c_str());
  }

  const bool flight_recorder_;
  std::unique_ptr<RankConsistency> consistency_;  // OP_RANK_CONSISTENCY
  const std::size_t capacity_;
  const std::int64_t timeout_ns_;
  const bool abort_on_timeout_;
  const int rank_;
  const int world_;
  const std::string path_;
  const std::function<void(const std::string&)> end_now_;  // RunInfo::end_now
  std::atomic<bool> ending_now_{false};                    // endNow() called it
  fs::path folder_;
  StackTable stacks_;
  std::shared_ptr<Shared> shared_;
  const std::int64_t start_unix_ns_;
  std::int64_t request_seen_ = 0;   // watchdog thread only
  std::uint64_t timed_out_id_ = 0;  // watchdog thread only (under shared_->mutex)

  mutable std::mutex dump_mutex_;  // one dump at a time; guards reasons_ and dumps_
  std::vector<std::string> reasons_;
  bool symbolize_at_exit_ = false;  // a dump had a reason worth symbols (a timeout, an error, a request)
  std::array<std::uint64_t, 4> dumped_signature_{};  // signature() when the last dump was written
  bool dumped_symbolized_ = false;
  std::uint64_t dumps_ = 0;
  std::map<StackId, json> symbolized_;  // the stacks earlier dumps symbolized

  Ticker watchdog_;  // the last member: stopped (joined) before the others go
};

}  // namespace

std::unique_ptr<Tool> makeFlightRecorder(const Config& config, const RunInfo& run) {
  return std::make_unique<FlightRecorder>(config, run);
}

ToolRegistration registration() {
  return {ToolId::kRecorder, [](const Config& c) { return c.flight_recorder || c.rank_consistency; }, true,
          makeFlightRecorder};
}

}  // namespace opscope::recorder
