#include <opscope/capture/capture_tool.h>
#include <opscope/rundb/capture_args.h>
#include <opscope/rundb/writer.h>

#include <cstdio>
#include <functional>
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
namespace {

class CaptureTool final : public Tool {
 public:
  CaptureTool(const Config& config, std::shared_ptr<CaptureWriter> writer)
      : filter_(config.capture_ops), stats_(config.capture_stats), writer_(std::move(writer)) {}

  ToolId id() const override { return ToolId::kCapture; }

  bool wants(const OpCall& call) const override {
    return call.args_ok && filter_.matches(call.op) && !writer_->capped();
  }

  void before(OpCall& call) override {
    // The op's inputs are final once the work queued before it on its queue is done.
    mlurtQueueSync(call.queue);
    CapturedOp op = opRecord(call);
    op.stats = stats_;  // OP_CAPTURE_MODE=stats: the writer keeps statistics (and the ring's tensors)
    call.withArgs([&](const auto& args) {
      describeScalars(args, op);
      snapshotTensors(args, true, op, buffer_);
    });
    pending() = std::move(op);
  }

  void after(OpCall& call) override {
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

 private:
  // The op between before() and after() on this thread (one at a time: the hook does not nest).
  static std::optional<CapturedOp>& pending() {
    thread_local std::optional<CapturedOp> op;
    return op;
  }

  OpFilter filter_;
  bool stats_;
  std::shared_ptr<CaptureWriter> writer_;
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
