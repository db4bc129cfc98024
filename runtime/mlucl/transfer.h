// The transfers of libmlucl: a call's checks on the host, and the task that runs it on an MLU queue
// (the ranks' agreement checked first, then the data moved by MPI).
#pragma once

#include <mlu/mlucl.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mlucl {

enum class Kind : int { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kSend, kRecv, kBarrier };
inline constexpr std::size_t kKindCount = 7;

// "allreduce", "broadcast", ... (as in MLU_SIM_FAULT and the kernels' names without "mlucl_").
const char* kindName(Kind kind);

// A call as the program made it.
struct Request {
  Kind kind = Kind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // allreduce, broadcast, send, recv: elements; allgather: per rank sent;
                          // reduce_scatter: per rank received
  // The caller's dtype and reduction as ints (a C caller may pass any value: it is checked as an int, then
  // dtype and op are set from it).
  int dtype_raw = MLUCL_DTYPE_FLOAT;
  int op_raw = MLUCL_SUM;
  mluclDataType_t dtype = MLUCL_DTYPE_FLOAT;
  mluclReduceOp_t op = MLUCL_SUM;  // allreduce, reduce_scatter
  int root = 0;                    // broadcast: the root; send, recv: the peer
};

// Checks the call and enqueues its transfer on queue; `function` names the entry point in messages.
mluclStatus_t enqueueTransfer(const char* function, Request request, mluclComm_t comm, mlurtQueue_t queue);

}  // namespace mlucl
