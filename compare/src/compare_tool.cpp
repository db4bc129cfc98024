#include <opscope/call_sample.h>
#include <opscope/compare/compare_tool.h>
#include <opscope/compare/metrics.h>
#include <opscope/compare/op_class.h>
#include <opscope/compare/tolerance.h>
#include <opscope/host_copy.h>
#include <opscope/private_file.h>
#include <opscope/progress.h>
#include <opscope/rundb/capture_args.h>
#include <opscope/text.h>

#include <mlu/dtype.h>
#include <mlu/reference.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include <unistd.h>

namespace opscope::compare {
namespace {

using rundb::CapturedOp;
using rundb::CompareRecord;
using rundb::tensorRecord;

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
  r.max_ulp = m.max_ulp;
  r.mean_ulp = m.mean_ulp;
  return r;
}

// Nothing on the program's thread waits for the device: the op's inputs are copied out by copies queued on
// its own queue just ahead of it, its outputs (and the inputs checked unchanged) by copies queued just
// after it, and a host function behind those hands the comparison to a comparison thread. The device's
// work is copied as the op saw it, in its queue's order, while the program goes on queueing work (two
// queue syncs per compared call cost a GPT-style model about a millisecond each before).

// Lets go of `what` once `queue` has run the work queued on it so far (copies into what it holds).
void releaseAfterQueue(mlurtQueue_t queue, std::shared_ptr<void> what) {
  if (!what) return;
  auto holder = std::make_unique<std::shared_ptr<void>>(std::move(what));
  const mlurtHostFn_t drop = [](void* data) {
    std::unique_ptr<std::shared_ptr<void>>(static_cast<std::shared_ptr<void>*>(data));
  };
  if (mlurtLaunchHostFunc(queue, drop, holder.get()) == MLURT_SUCCESS) {
    static_cast<void>(holder.release());  // drop() owns it now
    return;
  }
  mlurtQueueSync(queue);
}

// The op between before() and after() on this thread: its host copies, queued before it ran.
struct Pending {
  Pending() = default;
  Pending(std::uint64_t s, mlurtQueue_t q, std::shared_ptr<void> c) : seq(s), queue(q), copy(std::move(c)) {}
  Pending(Pending&&) = default;
  Pending& operator=(Pending&&) = default;
  ~Pending() { releaseAfterQueue(queue, std::move(copy)); }  // (a copy still queued writes into it)
  std::uint64_t seq = 0;
  mlurtQueue_t queue = nullptr;
  std::shared_ptr<void> copy;  // HostCopy<Args> of the op
};

// The comparisons handed to the comparison threads, shared with the host functions that hand them over
// (one may run after the tool is gone, at exit, when the program left work queued: it then only drops its
// job).
struct WorkQueue {
  std::mutex mutex;
  std::condition_variable ready, space;
  std::deque<std::function<void()>> jobs;
  std::uint64_t in_flight = 0;  // jobs reserved: their host function not run yet, queued here or running
  std::uint64_t on_device = 0;  // of those, the ones whose host function has not run yet
  std::uint64_t bytes = 0;      // what they hold
  bool stop = false;
};

// What the comparison needs of the call, owned: the OpCall is gone once after() returns.
struct CallInfo {
  mlu::OpId op{};
  std::uint64_t seq = 0;
  std::string name;
  std::uint32_t thread = 0;
  int device = 0;
  std::uint64_t queue_id = 0;
  CapturedOp record;  // rundb::opRecord(call) with its timing and status
};

// One op's comparison, handed from after() to a comparison thread: the device's arguments (their views
// only: device memory is not read again), the host copies the reference runs on, and the device's tensors
// as after() copied them (an empty lease for a tensor that is not checked).
template <typename Args>
struct Job {
  CallInfo call;
  Args device_args;
  std::shared_ptr<HostCopy<Args>> host;
  std::vector<BufferPool::Lease> device_now;
  std::vector<bool> checked;  // per tensor: compared (an output) or checked unchanged (an input)
};

class CompareTool final : public Tool {
 public:
  CompareTool(const Config& config, const RunInfo& run, std::shared_ptr<rundb::CaptureWriter> writer)
      : config_(config),
        filter_(config.autocompare_ops),
        sampler_(config.autocompare_sample),
        writer_(std::move(writer)),
        capture_(config.capture && config.capture_collectives) {
    mlu::reference::setBlasThreads(1);  // the comparisons run on kWorkers threads of their own
    csv_path_ = run.result_dir + "/autocompare.csv";
    result_dir_ = run.result_dir;
    csv_ = createResultFile(csv_path_);
    std::fputs(
        "seq,op,thread,device,queue,tensor,dtype,shape,allclose,max_abs_diff,max_rel_diff,mae,cosine,"
        "mismatch_ratio,diff1,diff2,diff3,dev_nan,ref_nan,dev_inf,ref_inf,atol,rtol,verdict,module,source,"
        "forward_op,region,op_class,max_ulp,mean_ulp\n",
        csv_.get());
  }

  ToolId id() const override { return ToolId::kCompare; }
  // The listed calls, those OP_AUTOCOMPARE_SAMPLE picks of them.
  bool wants(const OpCall& call) const override {
    return call.args_ok && filter_.matches(call) && sampler_.take(call);
  }
  void onStep() override { sampler_.step(); }

  void before(OpCall& call) override {
    pending().reset();
    if (call.fallback != OpCall::Fallback::kNone) {  // forced to the CPU: nothing to compare
      skipped_fallback_.fetch_add(1);
      return;
    }
    call.withArgs([&]<typename Args>(const Args& args) {
      pending().emplace(call.seq, call.queue,
                        std::make_shared<HostCopy<Args>>(args, *pool_, CopyMode::queued(call.queue)));
    });
  }

  void after(OpCall& call) override {
    auto& slot = pending();
    if (!slot || slot->seq != call.seq) return;
    Pending p = std::move(*slot);
    slot.reset();
    if (call.status != MLUOP_STATUS_SUCCESS || call.fallback != OpCall::Fallback::kNone) {
      if (call.fallback != OpCall::Fallback::kNone) skipped_fallback_.fetch_add(1);
      return;  // (p lets go of the copies once the queue is past them)
    }
    CallInfo info{call.op,     call.seq,      std::string(call.name), call.thread,
                  call.device, call.queue_id, rundb::opRecord(call)};
    info.record.host_start_ns = call.host_start_ns;
    info.record.host_dur_ns = call.host_end_ns - call.host_start_ns;
    info.record.status = static_cast<int>(call.status);
    call.withArgs([&]<typename Args>(const Args& device_args) {
      auto job = std::make_shared<Job<Args>>();
      job->call = std::move(info);
      job->device_args = device_args;
      job->host = std::static_pointer_cast<HostCopy<Args>>(std::exchange(p.copy, nullptr));
      const std::vector<mlu::TensorArg> tensors = mlu::tensorArgs(device_args);
      snapshotDevice(tensors, *job, call.queue);
      // What the job holds until it is done: the host copies (extents) and the device snapshots.
      std::uint64_t bytes = 0;
      for (const mlu::TensorArg& t : tensors) bytes += t.view->present ? t.view->extentBytes() : 0;
      for (const auto& lease : job->device_now) bytes += lease.size();
      // The reference and the comparison run on a comparison thread while the program goes on: the
      // device's results are in job->device_now, the inputs in the host copies, once the queue is past
      // the copies.
      enqueue(
          call.queue, [this, job] { compareOp(*job); }, bytes);
    });
  }

  // Copies (as extents, from the pool) the device tensors the comparison reads: every output, and every
  // input the op must not change (one that shares no memory with an output).
  template <typename Args>
  void snapshotDevice(const std::vector<mlu::TensorArg>& device, Job<Args>& job, mlurtQueue_t queue) {
    std::vector<Range> written;  // the memory the op writes
    for (const mlu::TensorArg& t : device) {
      if (t.view->present && t.meta.writes()) written.push_back(rangeOf(*t.view));
    }
    job.device_now.resize(device.size());
    job.checked.assign(device.size(), false);
    for (std::size_t ti = 0; ti < device.size(); ++ti) {
      const mlu::TensorView& value = *device[ti].view;
      const mlu::Role role = device[ti].meta.role;
      if (!value.present) continue;
      bool check = mlu::writes(role);
      if (role == mlu::Role::kInput) {
        const Range r = rangeOf(value);
        bool shared = false;
        for (const Range& w : written) shared = shared || w.overlaps(r);
        check = !shared;  // memory shared with an output may change
      }
      if (!check) continue;
      job.checked[ti] = true;
      job.device_now[ti] = copyFromDevice(value, queue);
    }
  }

  // Runs job, which holds `bytes` of host memory, on one of the kWorkers comparison threads (started on
  // first use) once `queue` has run what is queued on it now (the job's copies); waits while kMaxInFlight
  // jobs or kMaxInFlightBytes are in flight (one job is always let through), so host memory stays bounded
  // and a fast program cannot run far ahead of its comparisons. With two threads, ops may finish out of
  // order: their CSV rows and failure lines do too (each carries its seq), and the first failing op is the
  // lowest seq, whatever finished first.
  void enqueue(mlurtQueue_t queue, std::function<void()> job, std::uint64_t bytes) {
    {
      std::unique_lock lock(work_->mutex);
      work_->space.wait(lock, [&] {
        return work_->in_flight == 0 ||
               (work_->in_flight < kMaxInFlight && work_->bytes + bytes <= kMaxInFlightBytes);
      });
      ++work_->in_flight;
      ++work_->on_device;
      work_->bytes += bytes;
      if (workers_.empty()) {
        worker_pid_ = getpid();
        for (int i = 0; i < kWorkers; ++i)
          workers_.push_back(std::make_unique<std::thread>([work = work_] { workerLoop(*work); }));
      }
    }
    // What the host function hands over: the job, with the bytes given back when it ends (also when it
    // throws, or is dropped unrun).
    struct Handover {
      std::shared_ptr<WorkQueue> work;
      std::function<void()> job;
      std::uint64_t bytes = 0;
      static void run(void* data) {
        std::unique_ptr<Handover> h(static_cast<Handover*>(data));
        WorkQueue& w = *h->work;
        std::lock_guard lock(w.mutex);
        --w.on_device;
        if (w.stop) {  // the tool is gone (the program's exit): nothing runs it
          --w.in_flight;
          w.bytes -= h->bytes;
          return;
        }
        w.jobs.push_back([h = std::shared_ptr<Handover>(std::move(h))] {
          struct Release {
            Handover& h;
            ~Release() {
              std::lock_guard guard(h.work->mutex);
              h.work->bytes -= h.bytes;
            }
          } release{*h};
          h->job();
        });
        w.ready.notify_one();
        w.space.notify_all();  // drain() waits for the host functions too
      }
    };
    auto handover = std::make_unique<Handover>(Handover{work_, std::move(job), bytes});
    if (mlurtLaunchHostFunc(queue, &Handover::run, handover.get()) == MLURT_SUCCESS) {
      static_cast<void>(handover.release());  // run() owns it now
      return;
    }
    mlurtQueueSync(queue);
    Handover::run(handover.release());
  }

  static void workerLoop(WorkQueue& work) {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(work.mutex);
        work.ready.wait(lock, [&] { return work.stop || !work.jobs.empty(); });
        if (work.jobs.empty()) return;  // stopping, and nothing left
        job = std::move(work.jobs.front());
        work.jobs.pop_front();
      }
      try {
        job();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "opscope: autocompare: %s\n", e.what());
      }
      job = nullptr;  // (its bytes given back first)
      {
        std::lock_guard lock(work.mutex);
        --work.in_flight;
      }
      work.space.notify_all();
    }
  }

  // Waits until every comparison in flight has finished; for those whose copies the device has not run
  // yet, at most a minute (a program that exits with work queued and its device gone never runs them:
  // summarize() counts them as not finished).
  void drain() {
    std::unique_lock lock(work_->mutex);
    work_->space.wait_for(lock, std::chrono::minutes(1), [&] { return work_->on_device == 0; });
    work_->space.wait(lock, [&] { return work_->in_flight == work_->on_device; });
  }

  ~CompareTool() override {
    {
      std::lock_guard lock(work_->mutex);
      work_->stop = true;
    }
    work_->ready.notify_all();
    for (auto& worker : workers_) {
      if (getpid() == worker_pid_) {
        worker->join();
      } else {
        // A forked child: the threads do not exist here (only the forking thread is copied), so there is
        // nothing to join; their std::thread objects are left alone rather than destroyed while joinable.
        static_cast<void>(worker.release());
      }
    }
  }

  // A transfer of the collective library has no CPU reference in this process (the reduction needs every
  // rank's input): it is counted as not compared. Captured, it is checked across the ranks by `opscope
  // report RUNFOLDER` (viewer/src/collective_check.cpp).
  void onRuntimeCall(const RuntimeCall& call) override {
    if (call.kind == RuntimeCallKind::kCollective && call.collective.status == 0 &&
        call.collective.kind != Collective::kBarrier)
      not_compared_collectives_.fetch_add(1, std::memory_order_relaxed);
  }

  nlohmann::json findings() const override {
    nlohmann::json found = nlohmann::json::object();
    if (const std::uint64_t n = not_compared_collectives_.load()) found["collectives_not_compared"] = n;
    if (sampler_.spec().samples()) found["sampled"] = samplingFindings(sampler_);
    return found.empty() ? nlohmann::json() : found;
  }

  void flush() override {
    drain();
    summarize();
  }

  // On a fatal signal the comparisons in flight are not waited for (the thread running them may be the
  // one that crashed): the summary says how many there were.
  void flushOnSignal() override { summarize(); }

  void summarize() {
    std::lock_guard lock(mutex_);
    progress_.clear();
    const bool csv_failed = std::fflush(csv_.get()) != 0 || std::ferror(csv_.get()) != 0;
    if (csv_failed) {
      const std::string error =
          fmt::format("cannot write {}: {}", csv_path_, std::strerror(errno != 0 ? errno : EIO));
      noteWriteError(error);
      std::fprintf(stderr, "opscope: autocompare: %s\n", error.c_str());
    }
    std::string text = fmt::format(
        "opscope: autocompare: {} ops compared ({} tensors), {} passed, {} failed; details in {}{}\n",
        compared_, tensors_, compared_ - failed_, failed_, csv_path_,
        csv_failed ? " (cut short by the write error)" : "");
    if (first_failure_) text += fmt::format("opscope: autocompare: first failing op: {}\n", *first_failure_);
    if (sampler_.spec().samples()) {
      text += fmt::format("opscope: autocompare: {}\n", samplingLine(sampler_, "compared"));
    }
    if (const auto n = skipped_fallback_.load())
      text += fmt::format("opscope: autocompare: {} calls not compared: they ran on the CPU (fallback)\n", n);
    if (const auto n = not_compared_collectives_.load()) {
      text += fmt::format(
          "opscope: autocompare: {} collective transfers not compared here (no CPU reference in one rank); "
          "{}\n",
          n,
          capture_ ? "capture.db keeps them: `opscope report RUNFOLDER` checks them across the ranks"
                   : "with --capture, `opscope report RUNFOLDER` checks them across the ranks");
    }
    if (refused_ > 0)
      text += fmt::format("opscope: autocompare: {} calls not compared: the CPU reference refused them\n",
                          refused_);
    std::uint64_t unfinished = 0;
    {
      std::lock_guard work_lock(work_->mutex);
      unfinished = work_->in_flight;
    }
    if (unfinished > 0)
      text += fmt::format("opscope: autocompare: {} comparisons were still running and are not counted\n",
                          unfinished);
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
  void compareOp(Job<Args>& job) {
    HostCopy<Args>& host = *job.host;
    const CallInfo& call = job.call;
    const std::vector<mlu::TensorArg> host_tensors = mlu::tensorArgs(host.args());
    std::vector<Bytes> before(host_tensors.size());
    for (std::size_t ti = 0; ti < host_tensors.size(); ++ti) {
      const mlu::TensorView& v = *host_tensors[ti].view;
      if (v.present && host_tensors[ti].meta.role == mlu::Role::kInOut) before[ti] = packTensor(v, v.data);
    }
    const mlu::Status ref_status = host.runReference();
    if (!ref_status.ok()) {
      std::lock_guard lock(mutex_);
      if (refused_++ < 5) {
        std::fprintf(stderr, "opscope: autocompare: %s #%llu: the CPU reference refused it: %s\n",
                     call.name.c_str(), static_cast<unsigned long long>(call.seq),
                     ref_status.message.c_str());
      }
      return;
    }
    checkTensors(call, mlu::tensorArgs(std::as_const(job.device_args)), host_tensors, std::move(before),
                 job.device_now, job.checked,
                 [&](CapturedOp& rec) { rundb::describeScalars(job.device_args, rec); });
  }

  // The tensor's device extent, copied by a copy queued on `queue` to host memory from the pool (same layout:
  // strides kept); the copy has run once the queue is past it.
  BufferPool::Lease copyFromDevice(const mlu::TensorView& t, mlurtQueue_t queue) {
    BufferPool::Lease lease = pool_->acquire(t.numel() > 0 ? t.extentBytes() : 0);
    if (lease.empty()) return lease;
    if (const mlurtStatus_t s =
            mlurtMemcpyAsync(lease.data(), t.data, lease.size(), queue, MLURT_MEMCPY_DEVICE_TO_HOST);
        s != MLURT_SUCCESS) {
      mlurtQueueSync(queue);  // the copies queued before it end first
      throw std::runtime_error(fmt::format("cannot copy {} bytes from device address {} (runtime status {})",
                                           lease.size(), t.data, static_cast<int>(s)));
    }
    return lease;
  }

  // Metrics of two extents of the same layout as t: compared in place when t is contiguous, else packed.
  static Metrics compareExtents(const mlu::TensorView& t, const std::byte* device, const void* reference,
                                Tolerance tol) {
    if (t.contiguous()) return compare::compareTensors(t.dtype, device, reference, t.numel(), tol);
    const Bytes dev = packTensor(t, device), ref = packTensor(t, reference);
    return compare::compareTensors(t.dtype, dev.data(), ref.data(), t.numel(), tol);
  }

  // identicalTensors of two extents of the same layout as t. A strided tensor (a view such as a transpose
  // or a head of a projection) is first tried as its whole extent: identical bytes with no NaN or infinity
  // anywhere mean an identical tensor with none either, without packing; otherwise it is packed.
  static std::optional<Metrics> identicalExtents(const mlu::TensorView& t, const std::byte* now,
                                                 const void* before) {
    const std::int64_t n = t.numel();
    if (t.contiguous()) return compare::identicalTensors(t.dtype, now, before, n, Tolerance{0, 0});
    const auto extent = static_cast<std::int64_t>(t.extentBytes() / t.elementSize());
    if (extent <= 4 * n) {  // gaps cost at most three reads per element: cheaper than packing
      if (std::optional<Metrics> whole =
              compare::identicalTensors(t.dtype, now, before, extent, Tolerance{0, 0});
          whole && whole->dev_nan == 0 && whole->dev_inf == 0) {
        whole->count = n;
        return whole;
      }
    }
    const Bytes a = packTensor(t, now), b = packTensor(t, before);
    return compare::identicalTensors(t.dtype, a.data(), b.data(), n, Tolerance{0, 0});
  }

  // Compares the device's outputs with the reference's (device and host list the same tensors in the same
  // order), checks that inputs the op does not write stayed unchanged, and records the verdict. The
  // device's tensors are copied once each, as extents; tensors are packed only for a failing op's record.
  void checkTensors(const CallInfo& call, const std::vector<mlu::TensorArg>& device,
                    const std::vector<mlu::TensorArg>& host, std::vector<Bytes> before,
                    const std::vector<BufferPool::Lease>& device_now, const std::vector<bool>& to_check,
                    const std::function<void(CapturedOp&)>& describe_scalars) {
    struct Checked {
      std::string label;  // "output y" / "input x"
      Metrics metrics;
      const mlu::TensorView* view;
    };
    std::vector<Checked> checked;
    for (std::size_t ti = 0; ti < device.size(); ++ti) {
      const mlu::ArgMeta& meta = device[ti].meta;
      const mlu::TensorView& value = *device[ti].view;
      const mlu::TensorView& hv = *host[ti].view;
      if (!value.present || !to_check[ti]) continue;
      if (meta.writes()) {
        const Tolerance tol = toleranceFor(config_, call.op, value.dtype);
        checked.push_back({fmt::format("output {}", meta.name),
                           compareExtents(value, device_now[ti].data(), hv.data, tol), &value});
      } else if (meta.role == mlu::Role::kInput) {
        // The host copy still holds the input as it was before the op (the reference does not write it).
        const std::byte* now = device_now[ti].data();
        Metrics m;
        const std::optional<Metrics> same = identicalExtents(value, now, hv.data);
        if (same) {
          m = *same;
        } else {
          m = compareExtents(value, now, hv.data, Tolerance{0, 0});
          m.allclose = false;  // bit-exact: NaN payloads and -0 too
        }
        checked.push_back({fmt::format("input {}", meta.name), m, &value});
      }
    }

    bool failed = false;
    for (const auto& c : checked) failed = failed || !c.metrics.allclose;
    CapturedOp rec = call.record;
    rec.attach = true;
    rec.captured = failed;
    const std::string_view op_class = opClassName(opClass(call.op));
    for (const auto& c : checked) {
      CompareRecord r = recordOf(c.label.substr(c.label.find(' ') + 1), c.metrics);
      r.op_class = op_class;
      if (c.label.starts_with("input ")) r.arg_name = c.label;  // "input x": the unchanged-input check
      rec.compare.push_back(std::move(r));
    }
    if (failed) {  // the record keeps what the op read, what the device wrote and what the reference wrote
      describe_scalars(rec);
      std::vector<rundb::TensorRecord> outputs, cpu_outputs;
      for (std::size_t ti = 0; ti < device.size(); ++ti) {
        const mlu::ArgMeta& meta = device[ti].meta;
        const mlu::TensorView& value = *device[ti].view;
        const mlu::TensorView& hv = *host[ti].view;
        const int ai = device[ti].arg_index;
        if (!value.present) continue;
        if (meta.reads()) {
          Bytes data = meta.role == mlu::Role::kInOut ? std::move(before[ti]) : packTensor(hv, hv.data);
          rec.tensors.push_back(tensorRecord("input", ai, meta.name, value, std::move(data)));
        }
        if (meta.writes()) {
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
        fmt::print(
            csv_.get(),
            "{},{},{},{},{},{},{},\"{}\",{},{:.6g},{:.6g},{:.6g},{:.9g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{},"
            "{},{:g},{:g},{},\"{}\",\"{}\",\"{}\",\"{}\",{},{:.6g},{:.6g}\n",
            call.seq, call.name, call.thread, call.device, call.queue_id, c.label,
            mlu::dtypeName(c.view->dtype), c.view->shapeString(), m.allclose ? "True" : "False",
            m.max_abs_diff, m.max_rel_diff, m.mae, m.cosine, m.mismatch_ratio, m.diff1, m.diff2, m.diff3,
            m.dev_nan, m.ref_nan, m.dev_inf, m.ref_inf, m.tolerance.atol, m.tolerance.rtol,
            m.allclose ? "pass" : "fail", csvQuoted(call.record.module), csvQuoted(call.record.source),
            csvQuoted(call.record.forward_op), csvQuoted(call.record.region), op_class, m.max_ulp,
            m.mean_ulp);
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
          // The op, then where the program called it, its framework ops, and how to run it again.
          first_failure_ = fmt::format("{} #{} ({})", call.name, call.seq, what);
          const std::string site = siteText(call.record.module, call.record.source, call.record.forward_op);
          if (!site.empty()) *first_failure_ += "\nopscope: autocompare:   in " + site;
          if (!call.record.framework_op.empty())
            *first_failure_ += "\nopscope: autocompare:   framework ops: " + call.record.framework_op;
          if (!call.record.region.empty())
            *first_failure_ += "\nopscope: autocompare:   in the program's region " + call.record.region;
          *first_failure_ +=
              fmt::format("\nopscope: autocompare:   run it again: op-replay {} --seq {} --acc_check",
                          shellQuote(result_dir_), call.seq);
        }
      }
    }
    if (!lines.empty()) std::fputs(lines.c_str(), stderr);
    writer_->submit(std::move(rec));
  }

  const Config config_;
  OpFilter filter_;
  mutable CallSampler sampler_;  // OP_AUTOCOMPARE_SAMPLE (wants() counts what it takes and skips)
  std::shared_ptr<rundb::CaptureWriter> writer_;
  std::string csv_path_;
  std::string result_dir_;
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();  // host copies

  // The comparison thread and its queue.
  static constexpr int kWorkers = 2;
  // Up to 8 ops ahead (llama_train: 4.8x its plain time under auto-compare against 5.3x with 3), and at
  // most 512 MiB held for them.
  static constexpr std::uint64_t kMaxInFlight = 8;
  static constexpr std::uint64_t kMaxInFlightBytes = std::uint64_t{512} << 20;
  std::shared_ptr<WorkQueue> work_ = std::make_shared<WorkQueue>();  // its mutex guards workers_' start
  std::vector<std::unique_ptr<std::thread>> workers_;
  pid_t worker_pid_ = 0;

  std::mutex mutex_;  // guards what follows
  UniqueFile csv_;
  ProgressLine progress_{stderr};  // ops compared so far, on a terminal
  std::uint64_t compared_ = 0, tensors_ = 0, failed_ = 0, refused_ = 0, printed_failures_ = 0;
  std::uint64_t first_seq_ = 0;
  std::optional<std::string> first_failure_;
  std::atomic<std::uint64_t> skipped_fallback_{0};
  std::atomic<std::uint64_t> not_compared_collectives_{0};
  bool capture_;  // the collectives are captured (for the cross-rank check)
};

}  // namespace

std::unique_ptr<Tool> makeCompareTool(const Config& config, const RunInfo& run,
                                      std::shared_ptr<rundb::CaptureWriter> writer) {
  return std::make_unique<CompareTool>(config, run, std::move(writer));
}

}  // namespace opscope::compare
