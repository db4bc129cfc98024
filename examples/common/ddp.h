// ddp.h — data parallelism for the demo programs (--ddp), as PyTorch's DistributedDataParallel does it:
// every rank (one process per device, started by mpirun) holds the whole model, takes its shard of every
// global batch, and the gradients are averaged across the ranks (an all-reduce through libmlucl, enqueued on
// the device queue like the ops) before the optimizer; the parameters are broadcast from rank 0 at start.
// Without --ddp it is one rank and touches no MPI.
#pragma once

#include "device_tensor.h"
#include "nn.h"

#include <mlu/mlucl.h>

#include <cstdint>

namespace examples {

class DataParallel {
 public:
  // enabled: MPI (MPI_THREAD_MULTIPLE) and a communicator over every process of the job.
  DataParallel(bool enabled, int* argc, char*** argv);
  ~DataParallel();  // destroys the communicator and finalizes MPI
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  bool enabled() const { return comm_ != nullptr; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool leader() const { return rank_ == 0; }

  // The transfers go on the queue of the handle the model's ops use (in order with them).
  void useQueueOf(mluopHandle_t handle);

  // Rank r's share [first, first + count) of a global batch of `global` items (global % size() == 0).
  std::int64_t shardFirst(std::int64_t global) const { return global / size_ * rank_; }
  std::int64_t shardSize(std::int64_t global) const { return global / size_; }

  // Every parameter's master and model copies from rank 0.
  void broadcastParameters(const ParameterSet& params) const;
  // Every gradient replaced by its mean over the ranks.
  void averageGradients(const ParameterSet& params) const;
  // A contiguous device tensor replaced by its mean over the ranks (in place).
  void average(const DeviceTensor& t) const;
  // The sum over the ranks of a host value.
  double sum(double value) const;

 private:
  mluclComm_t comm_ = nullptr;
  mlurtQueue_t queue_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace examples
