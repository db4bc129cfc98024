#include <opscope/capture/capture_args.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/compare/metrics.h>
#include <opscope/compare/tolerance.h>
#include <opscope/fallback/host_copy.h>
#include <opscope/progress.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>

namespace opscope::compare {
namespace {

using capture::CapturedOp;
using capture::CompareRecord;
using capture::tensorRecord;

// Failures printed one per line before the rest go to autocompare.csv only.
constexpr std::uint64_t kMaxPrintedFailures = 200;

// The byte range [begin, end) a tensor addresses in device memory.
struct Range {
  std::uintptr_t begin = 0, end = 0;
  bool overlaps(const Range& o) const { return begin < o.end && o.begin < end; }
};
Range rangeOf(const mlu::TensorView& t) {
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data);
  return {begin, begin + t.extentBytes()};
}

CompareRecord recordOf(const std::string& arg_name, const Metrics& m) {
  CompareRecord r;
  r.arg_name = arg_name;
  r.allclose = m.allclose;
  r.max_abs_diff = m.max_abs_diff;
  r.max_rel_diff = m.max_rel_diff;
  r.mae = m.mae;
  r.cosine = m.cosine;
  r.mismatch_ratio = m.mismatch_ratio;
  r.diff1 = m.diff1;
  r.diff2 = m.diff2;
  r.diff3 = m.diff3;
  r.dev_nan = m.dev_nan;
  r.ref_nan = m.ref_nan;
  r.atol = m.tolerance.atol;
  r.rtol = m.tolerance.rtol;
  r.verdict = m.allclose ? "pass" : "fail";
  return r;
}

// The op between before() and after() on this thread: its host copies, taken before it ran.
struct Pending {
  std::uint64_t seq = 0;
  std::shared_ptr<void> copy;  // fallback::HostCopy<Args> of the op
};

class CompareTool final : public Tool {
 public:
  CompareTool(const Config& config, const RunInfo& run, std::shared_ptr<capture::CaptureWriter> writer)
      : config_(config), filter_(config.autocompare_ops), writer_(std::move(writer)) {
    csv_path_ = run.result_dir + "/autocompare.csv";
    csv_.open(csv_path_, std::ios::out | std::ios::trunc);
    if (!csv_) throw std::runtime_error(fmt::format("OP_AUTOCOMPARE: cannot create {}", csv_path_));
    csv_ << "seq,op,thread,device,queue,tensor,dtype,shape,allclose,max_abs_diff,max_rel_diff,mae,cosine,"
            "mismatch_ratio,diff1,diff2,diff3,dev_nan,ref_nan,dev_inf,ref_inf,atol,rtol,verdict\n";
  }

  std::string_view name() const override { return "autocompare"; }
  bool wants(const OpCall& call) const override { return filter_.matches(call.op); }

  void before(OpCall& call) override {
    pending().reset();
    if (call.fallback != OpCall::Fallback::kNone) {  // forced to the CPU: nothing to compare
      skipped_fallback_.fetch_add(1);
      return;
    }
    if (mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;  // the program hears of it from its own sync
    call.withArgs([&]<typename Args>(const Args& args) {
      pending() = Pending{call.seq, std::make_shared<fallback::HostCopy<Args>>(args, *pool_)};
    });
  }

  void after(OpCall& call) override {
    auto& slot = pending();
    if (!slot || slot->seq != call.seq) return;
    const Pending p = std::move(*slot);
    slot.reset();
    if (call.status != MLUOP_STATUS_SUCCESS || call.fallback != OpCall::Fallback::kNone) {
      if (call.fallback != OpCall::Fallback::kNone) skipped_fallback_.fetch_add(1);
      return;
    }
    if (mlurtQueueSync(call.queue) != MLURT_SUCCESS) return;
    call.withArgs([&]<typename Args>(const Args& device_args) {
      compareOp(call, device_args, *static_cast<fallback::HostCopy<Args>*>(p.copy.get()));
    });
  }

  void flush() override {
    std::lock_guard lock(mutex_);
    progress_.clear();
    csv_.flush();
    std::string text = fmt::format(
        "opscope: autocompare: {} ops compared ({} tensors), {} passed, {} failed; details in {}\n",
        compared_, tensors_, compared_ - failed_, failed_, csv_path_);
    if (first_failure_) text += fmt::format("opscope: autocompare: first failing op: {}\n", *first_failure_);
    if (const auto n = skipped_fallback_.load())
      text += fmt::format("opscope: autocompare: {} calls not compared: they ran on the CPU (fallback)\n", n);
    if (refused_ > 0)
      text += fmt::format("opscope: autocompare: {} calls not compared: the CPU reference refused them\n",
                          refused_);
    std::fputs(text.c_str(), stderr);
  }

 private:
  static std::optional<Pending>& pending() {
    thread_local std::optional<Pending> p;
    return p;
  }

  // The per-op part: the tensors of both argument structs, what the in-place tensors held before the op
  // (packed from the host copies before the reference overwrites them), and the reference's run. The rest
  // is checkTensors.
  template <typename Args>
  void compareOp(const OpCall& call, const Args& device_args, fallback::HostCopy<Args>& host) {
    const std::vector<mlu::TensorArg> host_tensors = mlu::tensorArgs(host.args());
    std::vector<std::vector<std::byte>> before(host_tensors.size());
    for (std::size_t ti = 0; ti < host_tensors.size(); ++ti) {
      const mlu::TensorView& v = *host_tensors[ti].view;
      if (v.present && host_tensors[ti].meta.role == mlu::Role::kInOut) before[ti] = packTensor(v, v.data);
    }
    const mlu::Status ref_status = host.runReference();
    if (!ref_status.ok()) {
      std::lock_guard lock(mutex_);
      if (refused_++ < 5) {
        std::fprintf(stderr, "opscope: autocompare: %.*s #%llu: the CPU reference refused it: %s\n",
                     static_cast<int>(call.name.size()), call.name.data(),
                     static_cast<unsigned long long>(call.seq), ref_status.message.c_str());
      }
      return;
    }
    checkTensors(call, mlu::tensorArgs(device_args), host_tensors, std::move(before),
                 [&](CapturedOp& rec) { capture::describeScalars(device_args, rec); });
  }

  // The tensor's device extent copied to host memory from the pool (same layout: strides kept).
  fallback::BufferPool::Lease copyFromDevice(const mlu::TensorView& t) {
    fallback::BufferPool::Lease lease = pool_->acquire(t.numel() > 0 ? t.extentBytes() : 0);
    if (lease.empty()) return lease;
    if (const mlurtStatus_t s = mlurtMemcpy(lease.data(), t.data, lease.size(), MLURT_MEMCPY_DEVICE_TO_HOST);
        s != MLURT_SUCCESS) {
      throw std::runtime_error(fmt::format("cannot copy {} bytes from device address {} (runtime status {})",
                                           lease.size(), t.data, static_cast<int>(s)));
    }
    return lease;
  }

  // Metrics of two extents of the same layout as t: compared in place when t is contiguous, else packed.
  static Metrics compareExtents(const mlu::TensorView& t, const std::byte* device, const void* reference,
                                Tolerance tol) {
    if (t.contiguous()) return compare::compareTensors(t.dtype, device, reference, t.numel(), tol);
    const std::vector<std::byte> dev = packTensor(t, device), ref = packTensor(t, reference);
    return compare::compareTensors(t.dtype, dev.data(), ref.data(), t.numel(), tol);
  }

  // Whether every element of t holds the same bytes in two extents of its layout (NaN payloads and -0 too).
  static bool sameBytes(const mlu::TensorView& t, const std::byte* a, const void* b) {
    const auto* bp = static_cast<const std::byte*>(b);
    const std::size_t elem = t.elementSize();
    if (t.numel() == 0) return true;
    if (t.contiguous()) return std::memcmp(a, bp, static_cast<std::size_t>(t.numel()) * elem) == 0;
    bool same = true;
    const auto e = static_cast<std::int64_t>(elem);
    forEachElement(t, [&](std::int64_t, std::int64_t offset) {
      same = same && std::memcmp(a + offset * e, bp + offset * e, elem) == 0;
    });
    return same;
  }

  // Compares the device's outputs with the reference's (device and host list the same tensors in the same
  // order), checks that inputs the op does not write stayed unchanged, and records the verdict. The
  // device's tensors are copied once each, as extents; tensors are packed only for a failing op's record.
  void checkTensors(const OpCall& call, const std::vector<mlu::TensorArg>& device,
                    const std::vector<mlu::TensorArg>& host, std::vector<std::vector<std::byte>> before,
                    const std::function<void(CapturedOp&)>& describe_scalars) {
    // The memory the op writes, so inputs sharing it are not expected to stay unchanged.
    std::vector<Range> written;
    for (const mlu::TensorArg& t : device) {
      if (t.view->present && fallback::isOutput(t.meta.role)) written.push_back(rangeOf(*t.view));
    }

    struct Checked {
      std::string label;  // "output y" / "input x"
      Metrics metrics;
      const mlu::TensorView* view;
    };
    std::vector<Checked> checked;
    std::vector<fallback::BufferPool::Lease> device_now(device.size());  // extents copied after the op
    for (std::size_t ti = 0; ti < device.size(); ++ti) {
      const mlu::ArgMeta& meta = device[ti].meta;
      const mlu::TensorView& value = *device[ti].view;
      const mlu::TensorView& hv = *host[ti].view;
      if (!value.present) continue;
      if (fallback::isOutput(meta.role)) {
        device_now[ti] = copyFromDevice(value);
        const Tolerance tol = toleranceFor(config_, call.op, value.dtype);
        checked.push_back({fmt::format("output {}", meta.name),
                           compareExtents(value, device_now[ti].data(), hv.data, tol), &value});
      } else if (meta.role == mlu::Role::kInput) {
        const Range r = rangeOf(value);
        bool shared = false;
        for (const Range& w : written) shared = shared || w.overlaps(r);
        if (shared) continue;  // shares memory with an output: it may change
        // The host copy still holds the input as it was before the op (the reference does not write it).
        device_now[ti] = copyFromDevice(value);
        const std::byte* now = device_now[ti].data();
        Metrics m;
        if (sameBytes(value, now, hv.data)) {
          m = value.contiguous() ? compare::identicalTensors(value.dtype, now, value.numel(), Tolerance{0, 0})
                                 : compare::identicalTensors(value.dtype, packTensor(value, now).data(),
                                                             value.numel(), Tolerance{0, 0});
        } else {
          m = compareExtents(value, now, hv.data, Tolerance{0, 0});
          m.allclose = false;  // bit-exact: NaN payloads and -0 too
        }
        checked.push_back({fmt::format("input {}", meta.name), m, &value});
      }
    }

    bool failed = false;
    for (const auto& c : checked) failed = failed || !c.metrics.allclose;
    CapturedOp rec = capture::opRecord(call);
    rec.host_start_ns = call.host_start_ns;
    rec.host_dur_ns = call.host_end_ns - call.host_start_ns;
    rec.status = static_cast<int>(call.status);
    rec.attach = true;
    rec.captured = failed;
    for (const auto& c : checked) {
      CompareRecord r = recordOf(c.label.substr(c.label.find(' ') + 1), c.metrics);
      if (c.label.starts_with("input ")) r.arg_name = c.label;  // "input x": the unchanged-input check
      rec.compare.push_back(std::move(r));
    }
    if (failed) {  // the record keeps what the op read, what the device wrote and what the reference wrote
      describe_scalars(rec);
      std::vector<capture::TensorRecord> outputs, cpu_outputs;
      for (std::size_t ti = 0; ti < device.size(); ++ti) {
        const mlu::ArgMeta& meta = device[ti].meta;
        const mlu::TensorView& value = *device[ti].view;
        const mlu::TensorView& hv = *host[ti].view;
        const int ai = device[ti].arg_index;
        if (!value.present) continue;
        if (meta.role == mlu::Role::kInput || meta.role == mlu::Role::kInOut) {
          std::vector<std::byte> data =
              meta.role == mlu::Role::kInOut ? std::move(before[ti]) : packTensor(hv, hv.data);
          rec.tensors.push_back(tensorRecord("input", ai, meta.name, value, std::move(data)));
        }
        if (fallback::isOutput(meta.role)) {
          outputs.push_back(
              tensorRecord("output", ai, meta.name, value, packTensor(value, device_now[ti].data())));
          cpu_outputs.push_back(tensorRecord("cpu_output", ai, meta.name, value, packTensor(hv, hv.data)));
        }
      }
      for (auto* list : {&outputs, &cpu_outputs}) {
        for (auto& tr : *list) rec.tensors.push_back(std::move(tr));
      }
    }

    std::string lines;
    {
      std::lock_guard lock(mutex_);
      ++compared_;
      for (const auto& c : checked) {
        ++tensors_;
        const Metrics& m = c.metrics;
        csv_ << fmt::format(
            "{},{},{},{},{},{},{},\"{}\",{},{:.6g},{:.6g},{:.6g},{:.9g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},"
            "{},{:g},{:g},{}\n",
            call.seq, call.name, call.thread, call.device, call.queue_id, c.label,
            mlu::dtypeName(c.view->dtype), c.view->shapeString(), m.allclose ? "True" : "False",
            m.max_abs_diff, m.max_rel_diff, m.mae, m.cosine, m.mismatch_ratio, m.diff1, m.diff2, m.diff3,
            m.dev_nan, m.ref_nan, m.dev_inf, m.ref_inf, m.tolerance.atol, m.tolerance.rtol,
            m.allclose ? "pass" : "fail");
        const bool print = !m.allclose ? printed_failures_ < kMaxPrintedFailures : config_.dump_args >= 1;
        if (print) {
          lines += fmt::format("OpAutoCompare: {} #{} {} {}  {}\n", call.name, call.seq, c.label,
                               mlu::dtypeName(c.view->dtype), formatMetrics(m));
          if (!m.allclose && ++printed_failures_ == kMaxPrintedFailures) {
            lines += fmt::format("OpAutoCompare: further failures are only in {}\n", csv_path_);
          }
        }
      }
      if (!lines.empty()) {
        progress_.clear();  // the failure lines below start on a clean line; the status comes back later
      } else {
        progress_.update([&] {
          return fmt::format("opscope: autocompare: {} ops compared, {} failed, {:.1f} s", compared_,
                             failed_ + (failed ? 1 : 0), progress_.elapsedSeconds());
        });
      }
      if (failed) {
        ++failed_;
        if (!first_failure_ || call.seq < first_seq_) {
          first_seq_ = call.seq;
          std::string what;
          for (const auto& c : checked) {
            if (!c.metrics.allclose) what += fmt::format("{}{}", what.empty() ? "" : ", ", c.label);
          }
          first_failure_ = fmt::format("{} #{} ({})", call.name, call.seq, what);
        }
      }
    }
    if (!lines.empty()) std::fputs(lines.c_str(), stderr);
    writer_->submit(std::move(rec));
  }

  const Config config_;
  OpFilter filter_;
  std::shared_ptr<capture::CaptureWriter> writer_;
  std::string csv_path_;
  std::shared_ptr<fallback::BufferPool> pool_ = std::make_shared<fallback::BufferPool>();  // host copies

  std::mutex mutex_;  // guards what follows
  std::ofstream csv_;
  ProgressLine progress_{stderr};  // ops compared so far, on a terminal
  std::uint64_t compared_ = 0, tensors_ = 0, failed_ = 0, refused_ = 0, printed_failures_ = 0;
  std::uint64_t first_seq_ = 0;
  std::optional<std::string> first_failure_;
  std::atomic<std::uint64_t> skipped_fallback_{0};
};

}  // namespace

std::unique_ptr<Tool> makeCompareTool(const Config& config, const RunInfo& run,
                                      std::shared_ptr<capture::CaptureWriter> writer) {
  return std::make_unique<CompareTool>(config, run, std::move(writer));
}

}  // namespace opscope::compare
