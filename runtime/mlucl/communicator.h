// A communicator of libmlucl: an MPI communicator of its own (MPI_Comm_dup), the device it serves, its
// sequence numbers, its transfers in flight and its first asynchronous error. Handles are process-wide
// ids, never reused.
#pragma once

#include <mlu/mlucl.h>

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mlucl {

class Communicator {
 public:
  Communicator(std::uint64_t id, MPI_Comm comm, int device);
  // Frees the MPI communicator: by mluclCommDestroy, on the caller's thread, once no transfer runs (not in a
  // destructor: the last reference may be a finished transfer's, on a queue's worker, while the program
  // already finalizes MPI). One left alive at exit is freed by MPI_Finalize.
  void freeMpi();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  std::uint64_t id() const { return id_; }
  MPI_Comm mpi() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  // Sequence numbers, taken when a call is enqueued (1-based): collectives of the communicator, and the
  // transfers to / from each peer.
  std::uint64_t nextCollective() { return ++collectives_; }
  std::uint64_t nextSend(int peer) { return ++sends_[static_cast<std::size_t>(peer)]; }
  std::uint64_t nextRecv(int peer) { return ++recvs_[static_cast<std::size_t>(peer)]; }

  // One transfer of the communicator uses MPI at a time (held by the queue's worker around it).
  std::mutex& transferMutex() { return transfer_mutex_; }

  // Transfers enqueued and not yet run or dropped.
  void transferQueued();
  void transferDone();
  void waitIdle();

  // The first asynchronous error (kept), which makes every later call fail.
  void setFailed(mluclStatus_t status, const std::string& message);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  mluclStatus_t asyncError(std::string* message) const;
  // The stable text of the first error, for mluclCommGetAsyncError.
  const char* asyncMessage() const;

 private:
  const std::uint64_t id_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  const int device_;
  std::atomic<std::uint64_t> collectives_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> sends_, recvs_;
  std::mutex transfer_mutex_;

  mutable std::mutex state_mutex_;
  std::condition_variable idle_;
  int in_flight_ = 0;
  std::atomic<bool> failed_{false};
  mluclStatus_t error_ = MLUCL_SUCCESS;
  std::string error_message_;
};

// The registry of live communicators.
std::shared_ptr<Communicator> lookup(mluclComm_t handle);
mluclComm_t registerCommunicator(std::shared_ptr<Communicator> comm);
std::shared_ptr<Communicator> unregisterCommunicator(mluclComm_t handle);
std::uint64_t nextCommunicatorId();

// MPI for the library: checks that MPI is initialized with MPI_THREAD_MULTIPLE (initializing it, and
// finalizing it at exit, when init is true and the program has not); on failure, the status with the
// message recorded.
mluclStatus_t ensureMpi(bool init);

// The MPI datatype of an element type (float16 / bfloat16 as 16-bit words: their reductions run in float32)
// and the MPI reduction of an operation (AVG: the sum, divided afterwards).
MPI_Datatype mpiType(mluclDataType_t dtype);
MPI_Op mpiOp(mluclReduceOp_t op);

// An MPI error code's text.
std::string mpiErrorText(int code);

}  // namespace mlucl
