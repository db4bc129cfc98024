// process_group.cpp — the torch.distributed backend "mlucl" (process_group.h).
#include "process_group.h"

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <torch/library.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "mlu_context.h"
#include "streams.h"

namespace torch_mlu {
namespace {

void checkCl(mluclStatus_t status, std::string_view call) {
  TORCH_CHECK(status == MLUCL_SUCCESS, "torch_mlu: ", call, ": ", mluclGetLastErrorMessage());
}

// What a collective is enqueued on: the caller's current stream of the tensors' device.
struct Place {
  c10::Device device;
  c10::StreamId stream = 0;
  mlurtQueue_t queue = nullptr;
  mluclComm_t comm = nullptr;
};

// A collective's Work: a notifier placed after it on its stream.
class WorkMlu final : public c10d::Work {
 public:
  WorkMlu(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, const Place& place, bool host_waits)
      : Work(rank, type),
        outputs_(std::move(outputs)),
        device_(place.device),
        stream_(place.stream),
        comm_(place.comm),
        host_waits_(host_waits) {
    checkRuntime(mlurtNotifierCreate(&done_, MLURT_NOTIFIER_DISABLE_TIMING), "mlurtNotifierCreate");
    checkRuntime(mlurtPlaceNotifier(done_, place.queue), "mlurtPlaceNotifier");
  }
  ~WorkMlu() override {
    if (done_ != nullptr) mlurtNotifierDestroy(done_);
  }
  WorkMlu(const WorkMlu&) = delete;
  WorkMlu& operator=(const WorkMlu&) = delete;

  bool isCompleted() override { return mlurtNotifierQuery(done_) != MLURT_ERROR_NOT_READY; }
  bool isSuccess() const override { return error().empty(); }
  std::exception_ptr exception() const override {
    const std::string message = error();
    return message.empty() ? nullptr : std::make_exception_ptr(c10::Error(message, ""));
  }
  std::vector<at::Tensor> result() override { return outputs_; }

  // The caller's current stream waits for the collective (the host does not), as NCCL's; a barrier's
  // host waits. An error the collective met on the queue is raised here.
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    if (host_waits_) {
      const mlurtStatus_t status = mlurtNotifierSync(done_);
      raiseError();
      checkRuntime(status, "mlurtNotifierSync");
    } else {
      const c10::StreamId current = currentStreamId(device_.index());
      if (current != stream_) {
        checkRuntime(mlurtQueueWaitNotifier(queueOf(device_.index(), current), done_),
                     "mlurtQueueWaitNotifier");
      }
      raiseError();
    }
    return true;
  }
  void synchronize() override { wait(kNoTimeout); }

  // A future on the device (PyTorch's ivalue::Future with the MLU's events), completed in stream order:
  // what waits on it waits on the device, after the collective.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard lock(mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                         std::vector<c10::Device>{device_});
      const c10::StreamGuard guard(c10::Stream(c10::Stream::UNSAFE, device_, stream_));
      future_->markCompleted(c10::IValue(outputs_));
    }
    return future_;
  }

 private:
  std::string error() const {
    if (comm_ == nullptr) return {};
    mluclStatus_t status = MLUCL_SUCCESS;
    const char* message = nullptr;
    if (mluclCommGetAsyncError(comm_, &status, &message) != MLUCL_SUCCESS || status == MLUCL_SUCCESS)
      return {};
    return std::string("torch_mlu: a collective of the mlucl backend failed: ") + (message ? message : "");
  }
  void raiseError() const {
    const std::string message = error();
    TORCH_CHECK(message.empty(), message);
  }

  std::vector<at::Tensor> outputs_;
  c10::Device device_;
  c10::StreamId stream_;
  mluclComm_t comm_;
  bool host_waits_;
  mlurtNotifier_t done_ = nullptr;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

mluclDataType_t clDtype(const at::Tensor& t) {
  const auto dtype = toMluDtype(t.scalar_type());
  TORCH_CHECK(dtype.has_value(), "torch_mlu: the mlucl backend has no ", t.scalar_type(), " transfers");
  return static_cast<mluclDataType_t>(static_cast<int>(*dtype));
}

mluclReduceOp_t clOp(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return MLUCL_SUM;
    case c10d::ReduceOp::AVG:
      return MLUCL_AVG;
    case c10d::ReduceOp::PRODUCT:
      return MLUCL_PROD;
    case c10d::ReduceOp::MIN:
      return MLUCL_MIN;
    case c10d::ReduceOp::MAX:
      return MLUCL_MAX;
    default:
      break;
  }
  TORCH_CHECK(false, "torch_mlu: the mlucl backend reduces by SUM, AVG, PRODUCT, MIN and MAX, not by ",
              static_cast<int>(op.op_), " (bitwise and pre-multiplied sums are NCCL's and Gloo's)");
}

// An MLU tensor of one process's device, dense; contiguous when the transfer reads or writes it directly.
void checkTensor(const at::Tensor& t, const char* what, bool contiguous = true) {
  TORCH_CHECK(t.defined(), "torch_mlu: mlucl ", what, ": an undefined tensor");
  TORCH_CHECK(isMlu(t),
              "torch_mlu: the mlucl backend transfers MLU tensors (and host tensors for all_reduce, ",
              "broadcast and all_gather); ", what, " was given a tensor on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "torch_mlu: mlucl ", what, ": only dense tensors, not ",
              t.layout());
  TORCH_CHECK(!contiguous || t.is_contiguous(), "torch_mlu: mlucl ", what,
              ": the tensor must be contiguous (call .contiguous() first)");
  clDtype(t);
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "torch_mlu: mlucl ", what,
              " takes one tensor per call (one MLU per process), not ", tensors.size());
  return tensors[0];
}

std::size_t count(const at::Tensor& t) { return static_cast<std::size_t>(t.numel()); }

}  // namespace

ProcessGroupMlu::ProcessGroupMlu(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                 std::chrono::milliseconds /*timeout: the store's, for the unique ids*/)
    : c10d::ProcessGroup(rank, size), store_(std::move(store)) {
  if (size > 1) {
    const char* ompi = std::getenv("OMPI_COMM_WORLD_SIZE");
    TORCH_CHECK(ompi != nullptr, "torch_mlu: the mlucl backend moves data over Open MPI: start the ", size,
                " ranks with `mpirun -np ", size, " ...` (this process is not part of an Open MPI job)");
    TORCH_CHECK(std::atoi(ompi) == size, "torch_mlu: mpirun started ", ompi,
                " processes but the process group has ", size,
                " ranks: an mlucl process group spans the whole MPI job");
  }
  init();
}

ProcessGroupMlu::~ProcessGroupMlu() {
  for (auto& [device, comm] : comms_) mluclCommDestroy(comm);
}

mluclComm_t ProcessGroupMlu::commOf(int device) {
  std::lock_guard lock(mutex_);
  last_device_ = device;
  if (const auto it = comms_.find(device); it != comms_.end()) return it->second;
  // As NCCL's backend: rank 0 makes the unique id and gives it to the others through the store.
  const std::string key = "mlucl_unique_id_" + std::to_string(comms_made_++);
  mluclUniqueId id{};
  if (getRank() == 0) {
    checkCl(mluclGetUniqueId(&id), "mluclGetUniqueId");
    store_->set(key, std::vector<std::uint8_t>(id.internal, id.internal + sizeof id.internal));
  } else {
    const std::vector<std::uint8_t> bytes = store_->get(key);
    TORCH_CHECK(bytes.size() == sizeof id.internal, "torch_mlu: the store's ", key, " has ", bytes.size(),
                " bytes, not an mlucl unique id's ", sizeof id.internal);
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  const c10::DeviceGuard guard(c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(device)));
  mluclComm_t comm = nullptr;
  checkCl(mluclCommInitRank(&comm, getSize(), id, getRank()), "mluclCommInitRank");
  comms_.emplace(device, comm);
  return comm;
}

namespace {

Place placeOf(const at::Tensor& t, mluclComm_t comm) {
  const int device = t.device().index();
  const c10::StreamId stream = currentStreamId(device);
  return {t.device(), stream, queueOf(device, stream), comm};
}

c10::intrusive_ptr<c10d::Work> workOf(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                                      const Place& place, bool host_waits = false) {
  return c10::make_intrusive<WorkMlu>(rank, type, std::move(outputs), place, host_waits);
}

// Host tensors are staged through the calling thread's current MLU: copied there, transferred, waited for
// and copied back before the call returns. torch.distributed's object collectives (all_gather_object,
// broadcast_object_list) send their pickled bytes in CPU tensors to every backend but NCCL, and a program
// may all-reduce a host value, as it can with Gloo.
bool onHost(const at::Tensor& t) { return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided; }

at::Tensor stagedOnMlu(const at::Tensor& t) {
  return t.to(c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(currentDevice()))).contiguous();
}

// The staged transfer waited for (its error raised) and its results copied into the host tensors.
void unstage(const c10::intrusive_ptr<c10d::Work>& work, const std::vector<at::Tensor>& staged,
             std::vector<at::Tensor>& host) {
  work->wait();
  if (staged.empty()) return;
  const int device = staged[0].device().index();
  synchronizeStream(device, currentStreamId(device));
  work->wait();  // an error the transfer met while running
  for (std::size_t i = 0; i < host.size(); ++i) host[i].copy_(staged[i]);
}

// The rank's input gathered from every rank into one buffer, then (when outputs is given) copied to the
// outputs, one per rank, in stream order.
void allGatherInto(const at::Tensor& in, const Place& place, int ranks, std::vector<at::Tensor>* outputs) {
  at::Tensor flat = at::empty({ranks * in.numel()}, in.options());
  checkCl(mluclAllGather(in.data_ptr(), flat.data_ptr(), count(in), clDtype(in), place.comm, place.queue),
          "mluclAllGather");
  if (outputs == nullptr) return;
  for (int r = 0; r < ranks; ++r) {
    at::Tensor& out = (*outputs)[static_cast<std::size_t>(r)];
    out.copy_(flat.narrow(0, r * in.numel(), in.numel()).view(out.sizes()));
  }
}

// One tensor per rank joined into one contiguous buffer (reduce_scatter's and scatter's inputs).
at::Tensor joined(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  if (onHost(t)) {
    std::vector<at::Tensor> staged{stagedOnMlu(t)};
    c10::intrusive_ptr<c10d::Work> work = broadcast(staged, opts);
    unstage(work, staged, tensors);
    return work;
  }
  checkTensor(t, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "torch_mlu: mlucl broadcast: root ",
              opts.rootRank, " is not a rank of ", getSize());
  const Place place = placeOf(t, commOf(t.device().index()));
  checkCl(mluclBroadcast(t.data_ptr(), t.data_ptr(), count(t), clDtype(t), static_cast<int>(opts.rootRank),
                         place.comm, place.queue),
          "mluclBroadcast");
  return workOf(getRank(), c10d::OpType::BROADCAST, tensors, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "all_reduce");
  if (onHost(t)) {
    std::vector<at::Tensor> staged{stagedOnMlu(t)};
    c10::intrusive_ptr<c10d::Work> work = allreduce(staged, opts);
    unstage(work, staged, tensors);
    return work;
  }
  checkTensor(t, "all_reduce");
  const mluclReduceOp_t op = clOp(opts.reduceOp);
  const Place place = placeOf(t, commOf(t.device().index()));
  checkCl(mluclAllReduce(t.data_ptr(), t.data_ptr(), count(t), clDtype(t), op, place.comm, place.queue),
          "mluclAllReduce");
  return workOf(getRank(), c10d::OpType::ALLREDUCE, tensors, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "torch_mlu: mlucl all_reduce_coalesced: no tensors");
  const mluclReduceOp_t op = clOp(opts.reduceOp);
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "all_reduce_coalesced");
    TORCH_CHECK(t.device() == tensors[0].device(), "torch_mlu: mlucl all_reduce_coalesced: tensors on ",
                tensors[0].device(), " and ", t.device());
  }
  const Place place = placeOf(tensors[0], commOf(tensors[0].device().index()));
  for (const at::Tensor& t : tensors) {
    checkCl(mluclAllReduce(t.data_ptr(), t.data_ptr(), count(t), clDtype(t), op, place.comm, place.queue),
            "mluclAllReduce");
  }
  return workOf(getRank(), c10d::OpType::ALLREDUCE_COALESCED, tensors, place);
}

void ProcessGroupMlu::checkRoot(std::int64_t root, const char* what) const {
  TORCH_CHECK(root >= 0 && root < getSize(), "torch_mlu: mlucl ", what, ": rank ", root, " is not a rank of ",
              getSize());
}

// like: what each tensor of the list must match (all_gather's and gather's input, reduce_scatter's and
// scatter's output).
void ProcessGroupMlu::checkPerRank(const std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& like,
                                   const char* what, const char* list) const {
  TORCH_CHECK(lists.size() == 1 && lists[0].size() == static_cast<std::size_t>(getSize()),
              "torch_mlu: mlucl ", what, ": the ", list, " list must hold one tensor per rank (", getSize(),
              ")");
  for (const at::Tensor& t : lists[0]) {
    checkTensor(t, what, /*contiguous=*/false);
    TORCH_CHECK(
        t.numel() == like.numel() && t.scalar_type() == like.scalar_type() && t.device() == like.device(),
        "torch_mlu: mlucl ", what, ": every tensor of the ", list,
        " list must have the size, dtype and device of the rank's own tensor");
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  checkRoot(opts.rootRank, "reduce");
  if (onHost(t)) {
    std::vector<at::Tensor> staged{stagedOnMlu(t)};
    c10::intrusive_ptr<c10d::Work> work = reduce(staged, opts);
    unstage(work, staged, tensors);
    return work;
  }
  checkTensor(t, "reduce");
  const mluclReduceOp_t op = clOp(opts.reduceOp);
  const Place place = placeOf(t, commOf(t.device().index()));
  // The root reduces in place; the others into a copy, their tensor left as it was.
  const at::Tensor target = getRank() == opts.rootRank ? t : t.clone();
  checkCl(
      mluclAllReduce(target.data_ptr(), target.data_ptr(), count(t), clDtype(t), op, place.comm, place.queue),
      "mluclAllReduce");
  return workOf(getRank(), c10d::OpType::REDUCE, tensors, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  checkRoot(opts.rootRank, "gather");
  checkTensor(in, "gather");
  const bool root = getRank() == opts.rootRank;
  if (root) checkPerRank(outputs, in, "gather", "root's output");
  const Place place = placeOf(in, commOf(in.device().index()));
  allGatherInto(in, place, getSize(), root ? &outputs[0] : nullptr);
  std::vector<at::Tensor> results;
  if (root) results = outputs[0];
  return workOf(getRank(), c10d::OpType::GATHER, results, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::scatter(std::vector<at::Tensor>& outputs,
                                                        std::vector<std::vector<at::Tensor>>& inputs,
                                                        const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  checkRoot(opts.rootRank, "scatter");
  checkTensor(out, "scatter", /*contiguous=*/false);
  const bool root = getRank() == opts.rootRank;
  // The root's list joined and broadcast; each rank takes its part.
  at::Tensor flat;
  if (root) {
    checkPerRank(inputs, out, "scatter", "root's input");
    flat = joined(inputs[0]);
  } else {
    flat = at::empty({getSize() * out.numel()}, out.options());
  }
  const Place place = placeOf(out, commOf(out.device().index()));
  checkCl(mluclBroadcast(flat.data_ptr(), flat.data_ptr(), count(flat), clDtype(flat),
                         static_cast<int>(opts.rootRank), place.comm, place.queue),
          "mluclBroadcast");
  at::Tensor(out).copy_(flat.narrow(0, getRank() * out.numel(), out.numel()).view(out.sizes()));
  return workOf(getRank(), c10d::OpType::SCATTER, outputs, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "all_gather");
  if (onHost(in) && outputs.size() == 1) {
    std::vector<at::Tensor> staged_in{stagedOnMlu(in)};
    std::vector<std::vector<at::Tensor>> staged_out(1);
    for (const at::Tensor& out : outputs[0])
      staged_out[0].push_back(at::empty(out.sizes(), out.options().device(staged_in[0].device())));
    c10::intrusive_ptr<c10d::Work> work = allgather(staged_out, staged_in, opts);
    unstage(work, staged_out[0], outputs[0]);
    return work;
  }
  checkTensor(in, "all_gather");
  checkPerRank(outputs, in, "all_gather", "output");
  const Place place = placeOf(in, commOf(in.device().index()));
  allGatherInto(in, place, getSize(), &outputs[0]);
  return workOf(getRank(), c10d::OpType::ALLGATHER, outputs[0], place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                const c10d::AllgatherOptions& /*opts*/) {
  checkTensor(input, "all_gather_into_tensor");
  checkTensor(output, "all_gather_into_tensor");
  TORCH_CHECK(output.numel() == getSize() * input.numel() && output.scalar_type() == input.scalar_type(),
              "torch_mlu: mlucl all_gather_into_tensor: the output must hold world size (", getSize(),
              ") times the input's elements of its dtype");
  const Place place = placeOf(input, commOf(input.device().index()));
  checkCl(mluclAllGather(input.data_ptr(), output.data_ptr(), count(input), clDtype(input), place.comm,
                         place.queue),
          "mluclAllGather");
  return workOf(getRank(), c10d::OpType::_ALLGATHER_BASE, {output}, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                               std::vector<std::vector<at::Tensor>>& inputs,
                                                               const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  checkTensor(out, "reduce_scatter");
  checkPerRank(inputs, out, "reduce_scatter", "input");
  const mluclReduceOp_t op = clOp(opts.reduceOp);
  const Place place = placeOf(out, commOf(out.device().index()));
  const at::Tensor flat = joined(inputs[0]);
  checkCl(mluclReduceScatter(flat.data_ptr(), out.data_ptr(), count(out), clDtype(out), op, place.comm,
                             place.queue),
          "mluclReduceScatter");
  return workOf(getRank(), c10d::OpType::REDUCE_SCATTER, outputs, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "reduce_scatter_tensor");
  checkTensor(output, "reduce_scatter_tensor");
  TORCH_CHECK(input.numel() == getSize() * output.numel() && output.scalar_type() == input.scalar_type(),
              "torch_mlu: mlucl reduce_scatter_tensor: the input must hold world size (", getSize(),
              ") times the output's elements of its dtype");
  const mluclReduceOp_t op = clOp(opts.reduceOp);
  const Place place = placeOf(output, commOf(output.device().index()));
  checkCl(mluclReduceScatter(input.data_ptr(), output.data_ptr(), count(output), clDtype(output), op,
                             place.comm, place.queue),
          "mluclReduceScatter");
  return workOf(getRank(), c10d::OpType::_REDUCE_SCATTER_BASE, {output}, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  const at::Tensor& t = single(tensors, "send");
  checkTensor(t, "send");
  const Place place = placeOf(t, commOf(t.device().index()));
  checkCl(mluclSend(t.data_ptr(), count(t), clDtype(t), dst, place.comm, place.queue), "mluclSend");
  return workOf(getRank(), c10d::OpType::SEND, tensors, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  checkTensor(t, "recv");
  const Place place = placeOf(t, commOf(t.device().index()));
  checkCl(mluclRecv(t.data_ptr(), count(t), clDtype(t), src, place.comm, place.queue), "mluclRecv");
  return workOf(getRank(), c10d::OpType::RECV, tensors, place);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlu::barrier(const c10d::BarrierOptions& opts) {
  int device = opts.device_ids.empty() ? -1 : static_cast<int>(opts.device_ids[0]);
  if (device < 0) {
    std::lock_guard lock(mutex_);
    device = last_device_;
  }
  if (device < 0) device = currentDevice();
  const mluclComm_t comm = commOf(device);
  const c10::StreamId stream = currentStreamId(device);
  const Place place{c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(device)), stream,
                    queueOf(device, stream), comm};
  checkCl(mluclBarrier(comm, place.queue), "mluclBarrier");
  return workOf(getRank(), c10d::OpType::BARRIER, {}, place, /*host_waits=*/true);
}

}  // namespace torch_mlu

// PyTorch 1.13 falls through the autograd keys of CPU, CUDA and the other built-in devices for ops that have
// no autograd kernel (torch.distributed's c10d::allreduce_ and the rest), but not PrivateUse1's: without
// this, dist.all_reduce of an MLU tensor stops at AutogradPrivateUse1 ("Could not run 'c10d::allreduce_'").
// Later PyTorch versions register the same fallthrough themselves.
TORCH_LIBRARY_IMPL(_, AutogradPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }
