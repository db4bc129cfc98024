#include <opscope/capture/capture_tool.h>
#include <opscope/rundb/capture_args.h>
#include <opscope/rundb/stats.h>
#include <opscope/rundb/writer.h>

#include <mlu/mlurt.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

namespace opscope::capture {

using rundb::CapturedOp;
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
// its inputs just before the op runs and its outputs just after — checksum, statistics, and a copy for the
// writer's ring unless a recent call copied the same bytes — then hand the call to the writer. (The tensors
// mode syncs the queue before and after each captured op and copies on the program's thread.) Each buffer is
// taken when its copy runs, not when the op is queued, so the memory of the calls the writer's ring has let
// go serves the next copies even while the program queues far ahead (an evaluation pass).

// The calls in flight, shared by the tool and the host functions that finish them, and which bytes the
// last calls copied.
class Pipeline {
 public:
  // A tensor's bytes as the copies know them: checksum, size and dtype (the same bytes read as another
  // dtype have other statistics).
  struct Key {
    std::uint64_t checksum;
    std::size_t bytes;
    mluopDataType_t dtype;
    bool operator==(const Key&) const = default;
  };
  struct Copied {
    Key key;
    TensorStats stats;
  };

  Pipeline(std::shared_ptr<CaptureWriter> writer, std::size_t ring)
      : writer_(std::move(writer)), ring_(ring) {}
  CaptureWriter& writer() const { return *writer_; }
  void started() {
    std::lock_guard lock(mutex_);
    ++calls_;
  }
  // A call handed to the writer, with the tensors it copied.
  void done(std::vector<Copied> copied) {
    std::lock_guard lock(mutex_);
    if (ring_ > 0) {
      recent_.push_back(std::move(copied));
      if (recent_.size() > ring_) recent_.pop_front();
    }
    if (--calls_ == 0) idle_.notify_all();
  }
  // The statistics of these bytes if one of the last OP_CAPTURE_RING calls copied them: the writer's ring
  // still holds them then (it keeps that many calls before the newest), so the call at hand need not copy
  // them, nor read them twice. An output is most often the next op's input, a weight is read by several
  // ops in a row: about 40 % of the tensors of an mnist training.
  std::optional<TensorStats> copiedRecently(const Key& key) const {
    std::lock_guard lock(mutex_);
    for (const auto& call : recent_) {
      for (const Copied& c : call) {
        if (c.key == key) return c.stats;
      }
    }
    return std::nullopt;
  }
  // Whether every call in flight was handed to the writer within `timeout`.
  bool waitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return idle_.wait_for(lock, timeout, [&] { return calls_ == 0; });
  }

 private:
  std::shared_ptr<CaptureWriter> writer_;
  std::size_t ring_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t calls_ = 0;
  std::deque<std::vector<Copied>> recent_;
};

// One op call of the stats mode while it is in flight.
struct AsyncCall {
  // A tensor to copy: its record (data filled by copy()) and where it is on the device.
  struct Planned {
    TensorRecord record;
    mlu::TensorView view;
  };

  std::shared_ptr<Pipeline> pipeline;
  mlurtQueue_t queue = nullptr;
  CapturedOp op;                         // without tensors until finish()
  std::vector<Planned> inputs;           // planned by before(), copied by copyInputs() on the worker
  std::vector<Planned> outputs;          // planned by after(), copied by finish() on the worker
  std::vector<Pipeline::Copied> copied;  // the tensors this call copied (on the worker)
  std::string failed;                    // why the call is left out (set on the worker)

  // The inputs (inputs == true: IN and INOUT, role "input") or outputs (OUT and INOUT, role "output") of
  // args, to be copied.
  template <typename Args>
  static std::vector<Planned> plan(const Args& args, bool inputs) {
    std::vector<Planned> planned;
    int index = 0;
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      const int arg_index = index++;
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        if (!value.present || (inputs ? !meta.reads() : !meta.writes())) return;
        planned.push_back(
            {tensorRecord(inputs ? "input" : "output", arg_index, meta.name, value, {}), value});
      }
    });
    return planned;
  }

  // On the queue's worker: the statistics of the planned tensors, read where they are, and their bytes
  // packed out of device memory unless this call or one of the last few copied the same bytes already.
  void copy(std::vector<Planned>& tensors) {
    for (Planned& t : tensors) {
      const mlu::TensorView& v = t.view;
      const std::size_t bytes = static_cast<std::size_t>(v.numel()) * v.elementSize();
      TensorRecord& r = t.record;
      if (!v.contiguous()) r.data = packTensor(v, v.data, pipeline->writer().buffer(bytes));
      const std::byte* packed = v.contiguous() ? static_cast<const std::byte*>(v.data) : r.data.data();
      const Pipeline::Key key{rundb::tensorChecksum(packed, bytes), bytes, v.dtype};
      if (bytes > 0) {
        const auto mine =
            std::find_if(copied.begin(), copied.end(), [&](const auto& c) { return c.key == key; });
        r.stats = mine != copied.end() ? std::optional(mine->stats) : pipeline->copiedRecently(key);
        if (r.stats) {
          r.same_as_earlier = true;
          r.data = Bytes();
          continue;
        }
      }
      if (v.contiguous()) {
        r.data = pipeline->writer().buffer(bytes);
        r.data.resize(bytes);
        r.stats = rundb::copyWithStats(v.dtype, packed, r.data.data(), bytes, key.checksum);
      } else {
        r.stats = rundb::tensorStats(v.dtype, packed, bytes, key.checksum);
      }
      if (bytes > 0) copied.push_back({key, *r.stats});
    }
  }

  static void copyInputs(void* data) {
    auto* call = static_cast<AsyncCall*>(data);
    try {
      call->copy(call->inputs);
    } catch (const std::exception& e) {
      call->failed = e.what();
    }
  }

  // The host function queued behind the op: copies its outputs and hands the call to the writer. Owns the
  // call from here on.
  static void finish(void* data) {
    std::unique_ptr<AsyncCall> call(static_cast<AsyncCall*>(data));
    try {
      if (call->failed.empty()) {
        call->copy(call->outputs);
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
    call->pipeline->done(std::move(call->copied));
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

class CaptureTool final : public Tool {
 public:
  CaptureTool(const Config& config, std::shared_ptr<CaptureWriter> writer)
      : filter_(config.capture_ops),
        stats_(config.capture_stats),
        writer_(writer),
        pipeline_(
            std::make_shared<Pipeline>(std::move(writer), static_cast<std::size_t>(config.capture_ring))) {}

  ToolId id() const override { return ToolId::kCapture; }

  bool wants(const OpCall& call) const override {
    return call.args_ok && filter_.matches(call.op) && !writer_->capped();
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

  // Every call in flight reaches the writer before the database tool closes it.
  void flush() override { drain(std::chrono::minutes(1)); }
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
      job->inputs = AsyncCall::plan(args, true);
    });
    pipeline_->started();
    if (mlurtLaunchHostFunc(call.queue, &AsyncCall::copyInputs, job.get()) != MLURT_SUCCESS) {
      mlurtQueueSync(call.queue);
      AsyncCall::copyInputs(job.get());
    }
    slot = std::move(job);
  }

  void afterAsync(OpCall& call) {
    auto& slot = pendingAsync();
    if (!slot) return;
    std::unique_ptr<AsyncCall> job = std::move(slot);
    // (copyInputs() may be running on the queue's worker: only what it does not touch is set here.)
    if (job->op.seq == call.seq) {
      job->op.status = static_cast<int>(call.status);
      job->op.host_start_ns = call.host_start_ns;
      job->op.host_dur_ns = call.host_end_ns - call.host_start_ns;
      job->op.fallback = static_cast<int>(call.fallback);
      if (call.status == MLUOP_STATUS_SUCCESS)
        call.withArgs([&](const auto& args) { job->outputs = AsyncCall::plan(args, false); });
    }
    AsyncCall::queueFinish(std::move(job));
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
  bool stats_;
  std::shared_ptr<CaptureWriter> writer_;
  std::shared_ptr<Pipeline> pipeline_;
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
