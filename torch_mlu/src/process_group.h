// process_group.h — the torch.distributed backend "mlucl": a c10d ProcessGroup whose collectives are
// libmlucl's, on MLU tensors (process_group.cpp). torch_mlu registers it when imported
// (torch.distributed.Backend.register_backend), so that init_process_group("mlucl") and
// DistributedDataParallel of an MLU model work unchanged.
//
// As NCCL's backend does:
//   - a collective is enqueued on the caller's current stream of the tensors' device, in order with the ops
//     queued before it, and returns at once;
//   - its Work's wait() orders the caller's current stream after it (the host does not wait), but for
//     barrier(), whose wait() blocks the host until every rank has reached it; getFuture() is a future on the
//     device, completed in stream order (DDP's gradient buckets ride on it);
//   - an error met on the queue (another rank's mismatching call) is raised by wait() and every later call;
//   - host tensors (all_reduce, broadcast, all_gather: torch.distributed's object collectives send CPU
//     tensors) are staged through the current MLU, done when the call returns.
// The communicator of each device is made on its first collective, collectively (mluclCommInitRank with a
// unique id rank 0 puts into the store): the ranks must be the processes of one Open MPI job (mpirun), over
// which the transfers run.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mlu/mlucl.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace torch_mlu {

class __attribute__((visibility("default"))) ProcessGroupMlu final : public c10d::ProcessGroup {
 public:
  ProcessGroupMlu(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                  std::chrono::milliseconds timeout);
  ~ProcessGroupMlu() override;

  const std::string getBackendName() const override { return "mlucl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  // reduce, gather and scatter: libmlucl has no rooted collectives; they are its all-reduce (into a copy on
  // the other ranks), all-gather and broadcast, the root taking the result.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // The communicator of an MLU, made on its first use (collective over the ranks).
  mluclComm_t commOf(int device);
  // A list of one tensor per rank (all_gather's outputs, reduce_scatter's inputs, a root's gather or scatter
  // list) checked, each with like's size, dtype and device.
  void checkPerRank(const std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& like,
                    const char* what, const char* list) const;
  // A root rank's number checked.
  void checkRoot(std::int64_t root, const char* what) const;

  c10::intrusive_ptr<c10d::Store> store_;
  std::mutex mutex_;
  std::map<int, mluclComm_t> comms_;  // by device
  std::uint64_t comms_made_ = 0;      // the store keys of the unique ids
  int last_device_ = -1;              // the device of the last collective: barrier()'s
};

}  // namespace torch_mlu
