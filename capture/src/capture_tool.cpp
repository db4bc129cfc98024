#include <opscope/call_sample.h>
#include <opscope/capture/capture_tool.h>
#include <opscope/nonfinite_scalars.h>
#include <opscope/rundb/capture_args.h>
#include <opscope/rundb/stats.h>
#include <opscope/rundb/writer.h>

#include <opscope/runtime_access.h>

#include <mlu/dtype.h>
#include <mlu/mlucl.h>
#include <mlu/mlurt.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace opscope::capture {

using rundb::CapturedOp;
using rundb::CollectiveRecord;
using rundb::compareSummaryLine;
using rundb::describeScalars;
using rundb::opRecord;
using rundb::snapshotTensors;
using rundb::Summary;
using rundb::summaryLine;
using rundb::tensorRecord;
using rundb::TensorRecord;
using rundb::TensorStats;
namespace {

// OP_CAPTURE_MODE=stats captures every op call, so nothing in it waits for the device: host functions on
// the op's own queue (mlurtLaunchHostFunc: run by the queue in order, as a statistics kernel would be) read
// its inputs just before the op runs and its outputs just after — checksum and statistics — then hand the
// call to the writer. (The tensors mode syncs the queue before and after each captured op and copies on the
// program's thread.)
//
// Which tensors are copied out whole: with OP_CAPTURE_RING > 0 or auto-compare on (whose failures are found
// after the call), every tensor whose bytes no call in the ring had, for the writer's ring ("eager"). With
// the default ring of 0 and no auto-compare, only what the op itself may overwrite before the end of the
// call (its INOUT inputs, and inputs that overlap an output), and the rest of a call only when its outputs
// hold the run's first NaN/Inf: its inputs are still intact in device memory then, right after it ran
// ("lazy"). Each buffer is taken when its copy runs, not when the op is queued, so the memory of the calls
// the writer's ring has let go serves the next copies even while the program queues far ahead.
//
// Statistics are computed once per distinct bytes over the last kStatsWindow calls (an output is most often
// the next op's input, a weight is read by several ops in a row: about 40 % of the tensors of an mnist
// training are read once, for their checksum, and not again).
constexpr std::size_t kStatsWindow = 16;

// The statistics (checksum too) of an op's output, once the host function after the op has read it: the
// next ops that read the same bytes, unchanged, take them instead of reading the tensor again (an output is
// most often the next op's input; its checksum alone, a pass over its bytes, was a third of the stats
// mode's cost).
struct KnownStats {
  std::atomic<bool> ready{false};
  TensorStats stats;  // set before ready
};

// Which device bytes hold an op's output unchanged since, as the program queues its work (not as the device
// runs it): each output's extent, until a later op writes over it. The runtime's calls that write device
// memory forget what they write (CaptureTool::forgetWritten); an op call this tool did not take (a gap in
// the op calls' numbers: a list, sampling, a region, another thread's call first) forgets everything. An
// input found here is read where it was written, on the same queue in order, after the host function that
// knows its statistics; one on another queue whose statistics are not known yet when its own host function
// runs is read as before.
class KnownBytes {
 public:
  // Before the op call `seq`: everything is forgotten when some op call came between.
  void sawCall(std::uint64_t seq) {
    std::lock_guard lock(mutex_);
    if (seq != last_seq_ + 1) extents_.clear();
    last_seq_ = seq;
  }
  void forget() {
    std::lock_guard lock(mutex_);
    extents_.clear();
  }
  // The statistics to come of exactly these bytes, read as dtype; null when not known.
  std::shared_ptr<KnownStats> find(const void* data, std::size_t bytes, mluopDataType_t dtype) {
    std::lock_guard lock(mutex_);
    const auto it = extents_.find(reinterpret_cast<std::uintptr_t>(data));
    if (it == extents_.end() || it->second.bytes != bytes || it->second.dtype != dtype) return nullptr;
    return it->second.known;
  }
  // An op writes [data, data + bytes): what was known there is not any more.
  void written(const void* data, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    forgetLocked(reinterpret_cast<std::uintptr_t>(data), bytes);
  }
  // An op's dense output: its statistics, known once its host function has read it.
  std::shared_ptr<KnownStats> output(const void* data, std::size_t bytes, mluopDataType_t dtype) {
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    std::lock_guard lock(mutex_);
    forgetLocked(begin, bytes);
    if (extents_.size() >= kMaxExtents) extents_.clear();
    auto known = std::make_shared<KnownStats>();
    extents_.emplace(begin, Extent{bytes, dtype, known});
    return known;
  }

 private:
  static constexpr std::size_t kMaxExtents = 1 << 16;
  struct Extent {
    std::size_t bytes;
    mluopDataType_t dtype;
    std::shared_ptr<KnownStats> known;
  };
  // Requires mutex_. Extents never overlap one another (each output's replaces those it overlaps).
  void forgetLocked(std::uintptr_t begin, std::size_t bytes) {
    const std::uintptr_t end = begin + bytes;
    auto it = extents_.upper_bound(begin);
    if (it != extents_.begin()) {
      const auto before = std::prev(it);
      if (before->first + before->second.bytes > begin) it = before;
    }
    while (it != extents_.end() && it->first < end) it = extents_.erase(it);
  }
  std::mutex mutex_;
  std::uint64_t last_seq_ = 0;
  std::map<std::uintptr_t, Extent> extents_;  // by first byte
};

// The calls in flight, shared by the tool and the host functions that finish them, and the tensors the
// last calls read.
class Pipeline {
 public:
  // A tensor's bytes as the reads know them: checksum, size and dtype (the same bytes read as another
  // dtype have other statistics).
  struct Key {
    std::uint64_t checksum;
    std::size_t bytes;
    mluopDataType_t dtype;
    bool operator==(const Key&) const = default;
  };
  struct Read {
    Key key;
    TensorStats stats;
    bool copied = false;  // its bytes were copied for the writer's ring
  };
  // What a recent call read of the same bytes: their statistics, and whether the writer's ring holds a copy.
  struct Recent {
    TensorStats stats;
    bool in_ring = false;
  };

  Pipeline(std::shared_ptr<CaptureWriter> writer, std::size_t ring, bool eager)
      : writer_(std::move(writer)), ring_(ring), eager_(eager) {}
  CaptureWriter& writer() const { return *writer_; }
  bool eager() const { return eager_; }
  // Whether this is the first call whose outputs hold a NaN or an Inf (lazy mode keeps it whole).
  bool firstNan() { return !nan_claimed_.exchange(true); }
  void started() {
    std::lock_guard lock(mutex_);
    ++calls_;
  }
  // A transfer of the collective library handed to the writer (its reads are not an op call's: they stay
  // out of the recent calls, which follow the writer's ring of op calls).
  void doneCollective() {
    std::lock_guard lock(mutex_);
    if (--calls_ == 0) idle_.notify_all();
  }
  // A call handed to the writer, with the tensors it read.
  void done(std::vector<Read> reads) {
    std::lock_guard lock(mutex_);
    recent_.push_front(std::move(reads));
    if (recent_.size() > std::max(ring_, kStatsWindow)) recent_.pop_back();
    if (--calls_ == 0) idle_.notify_all();
  }
  // The same bytes as read by one of the last calls. Its copy is in the writer's ring when one of the last
  // OP_CAPTURE_RING calls copied them (the ring keeps that many calls before the newest).
  std::optional<Recent> recent(const Key& key) const {
    std::lock_guard lock(mutex_);
    std::optional<Recent> found;
    for (std::size_t i = 0; i < recent_.size(); ++i) {
      for (const Read& r : recent_[i]) {
        if (r.key != key) continue;
        if (!found) found = Recent{r.stats, false};
        if (r.copied && i < ring_) {
          found->in_ring = true;
          return found;
        }
      }
    }
    return found;
  }
  // Whether every call in flight was handed to the writer within `timeout`.
  bool waitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return idle_.wait_for(lock, timeout, [&] { return calls_ == 0; });
  }

 private:
  std::shared_ptr<CaptureWriter> writer_;
  std::size_t ring_;
  bool eager_;
  std::atomic<bool> nan_claimed_{false};
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t calls_ = 0;
  std::deque<std::vector<Read>> recent_;  // newest first
};

// One op call of the stats mode while it is in flight.
struct AsyncCall {
  // A tensor to read: its record (data and statistics filled on the worker), where it is on the device, and
  // whether the op may overwrite it before the end of the call (an input that is also written or overlaps
  // an output: copied before the op even in lazy mode).
  struct Planned {
    TensorRecord record;
    mlu::TensorView view;
    bool overwritten = false;
    // An input: its statistics as an earlier op's output (KnownBytes), when they are known by now. An
    // output: where its statistics go for the next ops.
    std::shared_ptr<KnownStats> known;
    bool publishes = false;  // an output: known is to be set
  };

  std::shared_ptr<Pipeline> pipeline;
  mlurtQueue_t queue = nullptr;
  CapturedOp op;                      // without tensors until finish()
  std::vector<Planned> inputs;        // planned by before(), read by readInputs() on the worker
  std::vector<Planned> outputs;       // planned by after(), read by finish() on the worker
  std::vector<Pipeline::Read> reads;  // what this call read (on the worker)
  std::string failed;                 // why the call is left out (set on the worker)
  bool asked_non_finite = false;      // a scalar argument is NaN or infinite (nonfinite_scalars.h)

  // The inputs (inputs == true: IN and INOUT, role "input") or outputs (OUT and INOUT, role "output") of
  // args, to be read.
  template <typename Args>
  static std::vector<Planned> plan(const Args& args, bool inputs) {
    std::vector<std::pair<const std::byte*, const std::byte*>> written;  // the outputs' extents
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        if (!value.present || !meta.writes() || value.numel() == 0) return;
        const auto* begin = static_cast<const std::byte*>(value.data);
        written.emplace_back(begin, begin + value.extentBytes());
      }
    });
    std::vector<Planned> planned;
    int index = 0;
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      const int arg_index = index++;
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        if (!value.present || (inputs ? !meta.reads() : !meta.writes())) return;
        const auto* begin = static_cast<const std::byte*>(value.data);
        const auto* end = begin + value.extentBytes();
        const bool overwritten =
            inputs && (meta.writes() || std::any_of(written.begin(), written.end(), [&](const auto& w) {
                         return begin < w.second && w.first < end;
                       }));
        planned.push_back({tensorRecord(inputs ? "input" : "output", arg_index, meta.name, value, {}), value,
                           overwritten, nullptr, false});
      }
    });
    return planned;
  }

  // On the queue's worker: each planned tensor's checksum and statistics, read where it is (the statistics
  // of the same bytes read by a recent call reused), and its bytes copied out of device memory when `keep`
  // says so, unless the writer's ring holds them already.
  template <typename Keep>
  void read(std::vector<Planned>& tensors, Keep&& keep) {
    for (Planned& t : tensors) {
      const mlu::TensorView& v = t.view;
      const std::size_t bytes = static_cast<std::size_t>(v.numel()) * v.elementSize();
      TensorRecord& r = t.record;
      const bool copy = keep(t) && bytes > 0;
      if (t.known && !t.publishes && !copy && t.known->ready.load(std::memory_order_acquire)) {
        // The bytes an earlier op wrote, unchanged: its output's statistics, without reading them again.
        r.stats = t.known->stats;
        r.data = Bytes();
        reads.push_back({{r.stats->checksum, bytes, v.dtype}, *r.stats, false});
        continue;
      }
      // A strided tensor is read packed: into its record's data when it is kept, else into this worker's
      // scratch buffer (not a fresh one per tensor, which would be mapped and faulted in every time).
      thread_local Bytes scratch;
      const std::byte* packed = static_cast<const std::byte*>(v.data);
      if (!v.contiguous() && copy) {
        r.data = packTensor(v, v.data, pipeline->writer().buffer(bytes));
        packed = r.data.data();
      } else if (!v.contiguous()) {
        scratch = packTensor(v, v.data, std::move(scratch));
        packed = scratch.data();
      }
      const Pipeline::Key key{rundb::tensorChecksum(packed, bytes), bytes, v.dtype};
      std::optional<Pipeline::Recent> seen;
      if (bytes > 0) {
        const auto mine =
            std::find_if(reads.begin(), reads.end(), [&](const auto& c) { return c.key == key; });
        seen = mine != reads.end() ? std::optional(Pipeline::Recent{mine->stats, mine->copied})
                                   : pipeline->recent(key);
      }
      if (seen && seen->in_ring && copy) {  // the ring has these bytes: this tensor shares them
        r.stats = seen->stats;
        r.same_as_earlier = true;
        r.data = Bytes();
        publish(t);
        continue;
      }
      if (copy && v.contiguous()) {
        r.data = pipeline->writer().buffer(bytes);
        r.data.resize(bytes);
        if (seen) {
          std::memcpy(r.data.data(), packed, bytes);
          r.stats = seen->stats;
        } else {
          r.stats = rundb::copyWithStats(v.dtype, packed, r.data.data(), bytes, key.checksum);
        }
      } else {
        r.stats = seen ? seen->stats : rundb::tensorStats(v.dtype, packed, bytes, key.checksum);
        if (!copy) r.data = Bytes();
      }
      if (bytes > 0) reads.push_back({key, *r.stats, !r.data.empty()});
      publish(t);
    }
  }

  // An output's statistics, for the next ops that read its bytes (KnownBytes).
  static void publish(Planned& t) {
    if (!t.publishes || !t.known || !t.record.stats) return;
    t.known->stats = *t.record.stats;
    t.known->ready.store(true, std::memory_order_release);
  }

  // Lazy mode, the call whose outputs hold the run's first NaN/Inf: the bytes not copied yet, copied now
  // (its inputs are intact: the ones it may overwrite were copied before it ran).
  void copyTheRest() {
    for (auto* list : {&inputs, &outputs}) {
      for (Planned& t : *list) {
        const std::size_t bytes = static_cast<std::size_t>(t.view.numel()) * t.view.elementSize();
        if (bytes > 0 && t.record.data.empty() && !t.record.same_as_earlier)
          t.record.data = packTensor(t.view, t.view.data, pipeline->writer().buffer(bytes));
      }
    }
  }

  static void readInputs(void* data) {
    auto* call = static_cast<AsyncCall*>(data);
    const bool eager = call->pipeline->eager();
    try {
      call->read(call->inputs, [&](const Planned& t) { return eager || t.overwritten; });
    } catch (const std::exception& e) {
      call->failed = e.what();
    }
  }

  // The host function queued behind the op: reads its outputs and hands the call to the writer. Owns the
  // call from here on.
  static void finish(void* data) {
    std::unique_ptr<AsyncCall> call(static_cast<AsyncCall*>(data));
    try {
      if (call->failed.empty()) {
        const bool eager = call->pipeline->eager();
        call->read(call->outputs, [&](const Planned&) { return eager; });
        // The run's first NaN/Inf is born where outputs hold one that neither the inputs held nor a scalar
        // argument asked for (a fill with -inf: an attention mask).
        auto nonFinite = [](const std::vector<Planned>& tensors) {
          return std::any_of(tensors.begin(), tensors.end(), [](const Planned& t) {
            return t.record.stats && (t.record.stats->nan > 0 || t.record.stats->inf > 0);
          });
        };
        const bool nan = nonFinite(call->outputs) && !nonFinite(call->inputs) && !call->asked_non_finite;
        if (!eager && nan && call->pipeline->firstNan()) call->copyTheRest();
        for (auto* list : {&call->inputs, &call->outputs}) {
          for (Planned& t : *list) call->op.tensors.push_back(std::move(t.record));
        }
        call->pipeline->writer().submit(std::move(call->op));
      }
    } catch (const std::exception& e) {
      call->failed = e.what();
    }
    if (!call->failed.empty()) {
      std::fprintf(stderr, "opscope: capture: op %s (seq %llu) left out: %s\n", call->op.name.c_str(),
                   static_cast<unsigned long long>(call->op.seq), call->failed.c_str());
    }
    call->pipeline->done(std::move(call->reads));
  }

  // Queues finish() on the call's queue (or, if the runtime refuses, waits for the queue and runs it here).
  static void queueFinish(std::unique_ptr<AsyncCall> call) {
    mlurtQueue_t queue = call->queue;
    if (mlurtLaunchHostFunc(queue, &AsyncCall::finish, call.get()) == MLURT_SUCCESS) {
      call.release();  // finish() owns it now
      return;
    }
    mlurtQueueSync(queue);
    finish(call.release());
  }
};

// One transfer of the collective library in flight: what it sends is read by a host function queued just
// before it, what it received by one queued just after (on its queue, in order with it: an in-place
// all-reduce's buffer is read before and after), then the call goes to the writer as a collectives row.
// Both read device memory where it is, on the queue's worker, and only ranges the runtime says are inside
// one live device allocation (the call is checked by libmlucl only once it is made).
struct CollectiveJob {
  struct Buffer {
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    TensorRecord record;
  };
  std::shared_ptr<Pipeline> pipeline;
  CapturedOp op;
  bool keep = true;  // copy the contents (tensors mode), not only the statistics
  mluopDataType_t dtype = MLUOP_DTYPE_INVALID;
  std::optional<Buffer> send, recv;
  std::string failed;
  mlurtQueue_t queue_ = nullptr;
  mlurtQueue_t queue() const { return queue_; }

  // A buffer of the call, when [data, data + bytes) is device memory of one live allocation.
  static std::optional<Buffer> plan(const char* role, int index, const void* data, std::size_t bytes,
                                    mluopDataType_t dtype) {
    if (data == nullptr || bytes == 0) return std::nullopt;
    static const auto attributes =
        realRuntimeFunction<decltype(&mlurtPointerGetAttributes)>("mlurtPointerGetAttributes");
    mlurtPointerAttributes_t a{};
    if (attributes == nullptr || attributes(&a, data) != MLURT_SUCCESS || a.type != MLURT_MEMORY_DEVICE)
      return std::nullopt;
    const auto offset =
        static_cast<std::size_t>(static_cast<const std::byte*>(data) - static_cast<const std::byte*>(a.base));
    if (offset > a.size || bytes > a.size - offset) return std::nullopt;
    Buffer b;
    b.data = static_cast<const std::byte*>(data);
    b.bytes = bytes;
    TensorRecord& r = b.record;
    r.role = role;
    r.arg_index = index;
    r.arg_name = role;
    r.dtype = dtype;
    r.shape = {static_cast<std::int64_t>(bytes / mlu::dtypeSize(dtype))};
    r.strides = {1};
    return b;
  }

  void read(Buffer& b) {
    TensorRecord& r = b.record;
    const std::uint64_t checksum = rundb::tensorChecksum(b.data, b.bytes);
    if (keep) {
      r.data = pipeline->writer().buffer(b.bytes);
      r.data.resize(b.bytes);
      r.stats = rundb::copyWithStats(dtype, b.data, r.data.data(), b.bytes, checksum);
    } else {
      r.stats = rundb::tensorStats(dtype, b.data, b.bytes, checksum);
    }
  }

  static void readSend(void* data) {
    auto* job = static_cast<CollectiveJob*>(data);
    try {
      if (job->send) job->read(*job->send);
    } catch (const std::exception& e) {
      job->failed = e.what();
    }
  }

  // Queued behind the transfer (or run here once its queue is idle): reads what it received and hands the
  // call to the writer. Owns the job from here on.
  static void finish(void* data) {
    std::unique_ptr<CollectiveJob> job(static_cast<CollectiveJob*>(data));
    try {
      if (job->failed.empty()) {
        if (job->recv) job->read(*job->recv);
        for (auto* b : {&job->send, &job->recv}) {
          if (*b) job->op.tensors.push_back(std::move((*b)->record));
        }
        job->pipeline->writer().submit(std::move(job->op));
      }
    } catch (const std::exception& e) {
      job->failed = e.what();
    }
    if (!job->failed.empty()) {
      std::fprintf(stderr, "opscope: capture: collective %s left out: %s\n", job->op.name.c_str(),
                   job->failed.c_str());
    }
    job->pipeline->doneCollective();
  }

  static void queue(mlurtQueue_t queue, void (*fn)(void*), std::unique_ptr<CollectiveJob>& job, bool owns) {
    if (mlurtLaunchHostFunc(queue, fn, job.get()) == MLURT_SUCCESS) {
      if (owns) job.release();
      return;
    }
    mlurtQueueSync(queue);
    fn(owns ? job.release() : job.get());
  }
};

class CaptureTool final : public Tool {
 public:
  CaptureTool(const Config& config, std::shared_ptr<CaptureWriter> writer)
      : filter_(config.capture_ops),
        sampler_(config.capture_sample),
        stats_(config.capture_stats),
        collectives_(config.capture_collectives),
        writer_(writer),
        pipeline_(std::make_shared<Pipeline>(std::move(writer), static_cast<std::size_t>(config.capture_ring),
                                             config.capture_ring > 0 || config.autocompare)) {
    // (Not beside the tools that run ops again on inputs of their making.)
    if (stats_ && !config.perturb && config.dtype_cast.empty()) known_ = std::make_unique<KnownBytes>();
  }

  ToolId id() const override { return ToolId::kCapture; }

  bool wants(const OpCall& call) const override {
    return call.args_ok && filter_.matches(call) && !writer_->capped() && sampler_.take(call);
  }
  void onStep() override { sampler_.step(); }
  nlohmann::json findings() const override {
    if (!sampler_.spec().samples()) return nullptr;
    return {{"sampled", samplingFindings(sampler_)}};
  }

  void before(OpCall& call) override {
    if (stats_) return beforeAsync(call);
    // The op's inputs are final once the work queued before it on its queue is done.
    mlurtQueueSync(call.queue);
    CapturedOp op = opRecord(call);
    call.withArgs([&](const auto& args) {
      describeScalars(args, op);
      snapshotTensors(args, true, op, buffer_);
    });
    pending() = std::move(op);
  }

  void after(OpCall& call) override {
    if (stats_) return afterAsync(call);
    auto& slot = pending();
    if (!slot || slot->seq != call.seq) return;
    CapturedOp op = std::move(*slot);
    slot.reset();
    op.status = static_cast<int>(call.status);
    op.host_start_ns = call.host_start_ns;
    op.host_dur_ns = call.host_end_ns - call.host_start_ns;
    op.fallback = static_cast<int>(call.fallback);
    if (call.status == MLUOP_STATUS_SUCCESS) {
      mlurtQueueSync(call.queue);
      call.withArgs([&](const auto& args) { snapshotTensors(args, false, op, buffer_); });
    }
    writer_->submit(std::move(op));
  }

  // A transfer of the collective library: what it will send (the others are not captured).
  void beforeRuntimeCall(const RuntimeCall& call) override {
    if (call.kind != RuntimeCallKind::kCollective) return;
    auto& slot = pendingCollective();
    if (slot) CollectiveJob::queue(slot->queue(), &CollectiveJob::finish, slot, true);  // no after came
    if (!collectives_ || writer_->capped()) return;
    const CollectiveCall& c = call.collective;
    auto job = std::make_unique<CollectiveJob>();
    job->pipeline = pipeline_;
    job->keep = !stats_;
    job->op.name = c.name();
    job->op.symbol = call.symbol;
    job->op.thread = call.thread;
    job->op.stats = stats_;
    job->op.collective.emplace();
    job->queue_ = call.queue;
    const bool known = c.dtype >= MLUOP_DTYPE_FLOAT && c.dtype <= MLUOP_DTYPE_BOOL;
    if (known) {
      job->dtype = static_cast<mluopDataType_t>(c.dtype);
      job->send = CollectiveJob::plan("send", 0, c.send, c.send_bytes, job->dtype);
    }
    pipeline_->started();
    CollectiveJob::queue(call.queue, &CollectiveJob::readSend, job, false);
    slot = std::move(job);
  }

  void onRuntimeCall(const RuntimeCall& call) override {
    if (known_) forgetWritten(call);
    if (call.kind != RuntimeCallKind::kCollective) return;
    auto& slot = pendingCollective();
    if (!slot) return;
    std::unique_ptr<CollectiveJob> job = std::move(slot);
    const CollectiveCall& c = call.collective;
    CapturedOp& op = job->op;
    op.status = c.status;
    op.host_start_ns = call.host_start_ns;
    op.host_dur_ns = call.host_end_ns - call.host_start_ns;
    CollectiveRecord& r = *op.collective;
    r.comm = c.comm;
    r.seq = c.seq;
    r.rank = c.rank;
    r.world_size = c.size;
    r.count = c.count;
    r.dtype = c.dtype;
    r.op = c.op;
    r.peer = c.peer;
    r.op_seq = call.op_seq;
    static const auto queue_id = realRuntimeFunction<decltype(&mlurtQueueGetId)>("mlurtQueueGetId");
    if (queue_id != nullptr) queue_id(call.queue, &op.queue);
    if (c.status == MLUCL_SUCCESS && job->dtype != MLUOP_DTYPE_INVALID)
      // (Where the result is: the hook may have run an in-place call out of place.)
      job->recv =
          CollectiveJob::plan("recv", 1, c.result != nullptr ? c.result : c.recv, c.recv_bytes, job->dtype);
    CollectiveJob::queue(call.queue, &CollectiveJob::finish, job, true);
  }

  // Every call in flight reaches the writer before the database tool closes it.
  void flush() override {
    drain(std::chrono::minutes(1));
    if (sampler_.spec().samples())
      std::fprintf(stderr, "opscope: capture: %s\n", samplingLine(sampler_, "captured").c_str());
  }
  // After a fatal signal a queue's worker may never run again: wait briefly.
  void flushOnSignal() override { drain(std::chrono::seconds(2)); }

 private:
  void beforeAsync(OpCall& call) {
    auto& slot = pendingAsync();
    if (slot) AsyncCall::queueFinish(std::move(slot));  // a call whose after() never came
    auto job = std::make_unique<AsyncCall>();
    job->pipeline = pipeline_;
    job->queue = call.queue;
    job->op = opRecord(call);
    job->op.stats = true;
    call.withArgs([&](const auto& args) {
      describeScalars(args, job->op);
      job->asked_non_finite = hasNonFiniteScalar(args);
      job->inputs = AsyncCall::plan(args, true);
    });
    if (known_) {
      known_->sawCall(call.seq);
      for (AsyncCall::Planned& t : job->inputs) {
        const mlu::TensorView& v = t.view;
        if (!t.overwritten && v.contiguous() && v.numel() > 0)
          t.known = known_->find(v.data, static_cast<std::size_t>(v.numel()) * v.elementSize(), v.dtype);
      }
    }
    pipeline_->started();
    if (mlurtLaunchHostFunc(call.queue, &AsyncCall::readInputs, job.get()) != MLURT_SUCCESS) {
      mlurtQueueSync(call.queue);
      AsyncCall::readInputs(job.get());
    }
    slot = std::move(job);
  }

  void afterAsync(OpCall& call) {
    auto& slot = pendingAsync();
    if (!slot) return;
    std::unique_ptr<AsyncCall> job = std::move(slot);
    // (readInputs() may be running on the queue's worker: only what it does not touch is set here.)
    if (job->op.seq == call.seq) {
      job->op.status = static_cast<int>(call.status);
      job->op.host_start_ns = call.host_start_ns;
      job->op.host_dur_ns = call.host_end_ns - call.host_start_ns;
      job->op.fallback = static_cast<int>(call.fallback);
      if (call.status == MLUOP_STATUS_SUCCESS)
        call.withArgs([&](const auto& args) { job->outputs = AsyncCall::plan(args, false); });
    }
    if (known_) {
      // What the op may have written is not known any more; its dense outputs are, once read.
      call.withArgs([&](const auto& args) {
        args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
          using V = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<V, mlu::TensorView>) {
            if (meta.writes() && value.present && value.numel() > 0)
              known_->written(value.data, value.extentBytes());
          } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
            if (value.data != nullptr && value.size > 0) known_->written(value.data, value.size);
          }
        });
      });
      for (AsyncCall::Planned& t : job->outputs) {
        const mlu::TensorView& v = t.view;
        if (!v.contiguous() || v.numel() == 0) continue;
        t.known = known_->output(v.data, static_cast<std::size_t>(v.numel()) * v.elementSize(), v.dtype);
        t.publishes = true;
      }
    }
    AsyncCall::queueFinish(std::move(job));
  }

  // What a runtime call may change in device memory behind the ops' backs is not known any more: a copy's or
  // memset's destination, a piece the program's allocator hands out, everything after a transfer or a free.
  // (A host function cannot write device memory but through the runtime's calls, which come here too.)
  void forgetWritten(const RuntimeCall& call) {
    switch (call.kind) {
      case RuntimeCallKind::kMemcpy:
      case RuntimeCallKind::kMemcpyAsync:
        if (call.memcpy_kind != MLURT_MEMCPY_DEVICE_TO_HOST) known_->written(call.ptr, call.size);
        return;
      case RuntimeCallKind::kMemset:
      case RuntimeCallKind::kMemsetAsync:
      case RuntimeCallKind::kPoolAlloc:
        known_->written(call.ptr, call.size);
        return;
      case RuntimeCallKind::kHostAccess:
        if (call.write) known_->written(call.ptr, call.size);
        return;
      case RuntimeCallKind::kCollective:
      case RuntimeCallKind::kFree:
        known_->forget();
        return;
      default:
        return;
    }
  }

  void drain(std::chrono::milliseconds timeout) {
    if (!stats_ || pipeline_->waitIdle(timeout)) return;
    std::fprintf(stderr,
                 "opscope: capture: the device did not finish the copies of some op calls within %lld s; "
                 "capture.db leaves them out\n",
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
  }

  // The op between before() and after() on this thread (one at a time: the hook does not nest).
  static std::optional<CapturedOp>& pending() {
    thread_local std::optional<CapturedOp> op;
    return op;
  }
  // The transfer between beforeRuntimeCall() and onRuntimeCall() on this thread.
  static std::unique_ptr<CollectiveJob>& pendingCollective() {
    // A job left here when the thread ends has a read queued on its memory: finish it behind that read.
    struct Slot {
      std::unique_ptr<CollectiveJob> job;
      ~Slot() {
        if (job) CollectiveJob::queue(job->queue(), &CollectiveJob::finish, job, true);
      }
    };
    thread_local Slot slot;
    return slot.job;
  }
  static std::unique_ptr<AsyncCall>& pendingAsync() {
    // A call left here when the thread ends still has copies in flight into its buffers: finish it.
    struct Slot {
      std::unique_ptr<AsyncCall> call;
      ~Slot() {
        if (call) AsyncCall::queueFinish(std::move(call));
      }
    };
    thread_local Slot slot;
    return slot.call;
  }

  OpFilter filter_;
  mutable CallSampler sampler_;  // OP_CAPTURE_SAMPLE (wants() counts what it takes and skips)
  bool stats_;
  bool collectives_;
  std::shared_ptr<CaptureWriter> writer_;
  std::shared_ptr<Pipeline> pipeline_;
  std::unique_ptr<KnownBytes> known_;  // the stats mode's outputs known unchanged (null: not used)
  // Snapshot memory: buffers of ops the writer has stored, so that a long capture does not map and fault
  // in fresh pages for every tensor.
  std::function<Bytes(std::size_t)> buffer_ = [this](std::size_t bytes) { return writer_->buffer(bytes); };
};

class DatabaseTool final : public Tool {
 public:
  DatabaseTool(const Config& config, std::shared_ptr<CaptureWriter> writer)
      : capture_(config.capture), compare_(config.autocompare), writer_(std::move(writer)) {}
  ToolId id() const override { return ToolId::kDatabase; }
  bool wants(const OpCall&) const override { return false; }
  void flush() override {
    const Summary s = writer_->close();
    if (capture_) std::fprintf(stderr, "%s\n", summaryLine(s).c_str());
    if (compare_) std::fprintf(stderr, "%s\n", compareSummaryLine(s).c_str());
  }

 private:
  bool capture_;
  bool compare_;
  std::shared_ptr<CaptureWriter> writer_;
};

}  // namespace

std::unique_ptr<Tool> makeCaptureTool(const Config& config, std::shared_ptr<CaptureWriter> writer) {
  return std::make_unique<CaptureTool>(config, std::move(writer));
}

std::unique_ptr<Tool> makeDatabaseTool(const Config& config, std::shared_ptr<CaptureWriter> writer) {
  return std::make_unique<DatabaseTool>(config, std::move(writer));
}

}  // namespace opscope::capture
