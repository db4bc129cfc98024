// Wrappers of every entry point of the collective library (libmlucl). The transfers (all-reduce, broadcast,
// all-gather, reduce-scatter, send, recv, barrier) and the communicators' creation and destruction reach
// the tools as RuntimeCalls (kCollective, kCommInit, kCommDestroy), with the transfer's communicator,
// sequence number, count, dtype and buffers: the profiler times them and joins them to their device task,
// memcheck checks their buffers. The error and attribute getters are forwarded untouched.
#include "hook.h"

#include "../../runtime/common/no_destructor.h"
#include "../../runtime/common/raw_enum.h"

#include <mlu/dtype.h>
#include <mlu/mlucl.h>
#include <mlu/mlurt.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

using opscope::Collective;
using opscope::CollectiveCall;
using opscope::RuntimeCall;
using opscope::RuntimeCallKind;

namespace opscope::hook {
namespace {

// The sequence numbers libmlucl gives each communicator's calls (it checks them across ranks), counted
// here the same way: one per accepted collective, one per accepted send / recv per peer.
class SequenceNumbers {
 public:
  std::uint64_t next(std::uint64_t comm, Collective kind, int peer) {
    std::lock_guard lock(mutex_);
    Counters& c = comms_[comm];
    if (kind == Collective::kSend) return ++c.sends[peer];
    if (kind == Collective::kRecv) return ++c.recvs[peer];
    return ++c.collectives;
  }

 private:
  struct Counters {
    std::uint64_t collectives = 0;
    std::map<int, std::uint64_t> sends, recvs;
  };
  std::mutex mutex_;
  std::map<std::uint64_t, Counters> comms_;
};

SequenceNumbers& sequenceNumbers() {
  static mlu::NoDestructor<SequenceNumbers> s;  // never destroyed: wrappers may run during exit
  return s.get();
}

// The communicator's id, this rank and the size, through the real getters (0, -1, 0 for a bad handle).
void describeComm(mluclComm_t comm, CollectiveCall& c) {
  static const auto get_id = real<decltype(&mluclCommGetId)>("mluclCommGetId");
  static const auto get_rank = real<decltype(&mluclCommUserRank)>("mluclCommUserRank");
  static const auto get_count = real<decltype(&mluclCommCount)>("mluclCommCount");
  std::uint64_t id = 0;
  int rank = -1, size = 0;
  if (comm != nullptr) {
    if (get_id(comm, &id) == MLUCL_SUCCESS) {
      get_rank(comm, &rank);
      get_count(comm, &size);
    }
    // A getter that failed (a bad handle) recorded an error: the real call that follows records its own.
  }
  c.comm = id;
  c.rank = rank;
  c.size = size;
}

std::size_t bytesOf(std::size_t count, int dtype, std::size_t ranks = 1) {
  if (dtype < MLUOP_DTYPE_FLOAT || dtype > MLUOP_DTYPE_BOOL) return 0;  // refused by the library
  const std::size_t elem = mlu::dtypeSize(static_cast<mluopDataType_t>(dtype));
  std::size_t n = 0;
  if (__builtin_mul_overflow(count, elem, &n) || __builtin_mul_overflow(n, ranks, &n)) return 0;
  return n;
}

// A device buffer of the hook's own (through the real runtime: not the program's, not seen by the tools)
// that an in-place all-reduce writes its result to, copied back to the program's buffer on its queue.
class ResultBuffer {
 public:
  ResultBuffer() = default;
  ResultBuffer(const ResultBuffer&) = delete;
  ResultBuffer& operator=(const ResultBuffer&) = delete;
  ~ResultBuffer() {
    if (data_ == nullptr) return;
    static const auto free_fn = real<decltype(&mlurtFree)>("mlurtFree");
    if (queue_ != nullptr) {  // the transfer and the copy may still be queued
      static const auto sync = real<decltype(&mlurtQueueSync)>("mlurtQueueSync");
      sync(queue_);
    }
    free_fn(data_);
  }
  // Memory for `bytes`; false when the runtime has none (the call then runs in place, as the program made
  // it).
  bool allocate(std::size_t bytes) {
    static const auto malloc_fn = real<decltype(&mlurtMalloc)>("mlurtMalloc");
    if (malloc_fn(&data_, bytes) != MLURT_SUCCESS) data_ = nullptr;
    bytes_ = bytes;
    return data_ != nullptr;
  }
  void* data() const { return data_; }
  // The result into the program's buffer, after the transfer on the same queue.
  void copyTo(void* recv, mlurtQueue_t queue) {
    static const auto copy = real<decltype(&mlurtMemcpyAsync)>("mlurtMemcpyAsync");
    queue_ = queue;
    copy(recv, data_, bytes_, queue, MLURT_MEMCPY_DEVICE_TO_DEVICE);
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  mlurtQueue_t queue_ = nullptr;
};

// Runs a transfer through the tools. forward() makes the real call and returns its status.
template <typename Forward>
mluclStatus_t runCollective(const char* symbol, CollectiveCall c, mlurtQueue_t queue, mluclComm_t comm,
                            Forward&& forward) {
  RuntimeCall rc;
  rc.kind = RuntimeCallKind::kCollective;
  rc.symbol = symbol;
  rc.queue = queue;
  describeComm(comm, c);
  c.handle = comm;
  const std::size_t ranks = c.size > 0 ? static_cast<std::size_t>(c.size) : 1;
  if (c.kind == Collective::kAllReduce) {
    c.send_bytes = c.recv_bytes = bytesOf(c.count, c.dtype);
  } else if (c.kind == Collective::kBroadcast) {
    c.recv_bytes = bytesOf(c.count, c.dtype);
    c.send_bytes = c.rank == c.peer ? c.recv_bytes : 0;
  } else if (c.kind == Collective::kAllGather) {
    c.send_bytes = bytesOf(c.count, c.dtype);
    c.recv_bytes = bytesOf(c.count, c.dtype, ranks);
  } else if (c.kind == Collective::kReduceScatter) {
    c.send_bytes = bytesOf(c.count, c.dtype, ranks);
    c.recv_bytes = bytesOf(c.count, c.dtype);
  } else if (c.kind == Collective::kSend) {
    c.send_bytes = bytesOf(c.count, c.dtype);
  } else if (c.kind == Collective::kRecv) {
    c.recv_bytes = bytesOf(c.count, c.dtype);
  }
  rc.size = std::max(c.send_bytes, c.recv_bytes);
  rc.collective = c;
  mluclStatus_t status = MLUCL_SUCCESS;
  auto call = [&] {
    status = forward();
    return status == MLUCL_SUCCESS ? MLURT_SUCCESS : MLURT_ERROR_INVALID_VALUE;
  };
  auto fill = [&] {
    rc.collective.status = status;
    if (status == MLUCL_SUCCESS) rc.collective.seq = sequenceNumbers().next(c.comm, c.kind, c.peer);
  };
  runRuntime(rc, Callback<mlurtStatus_t>::of(call), Callback<void>::of(fill));
  return status;
}

template <typename Forward>
mluclStatus_t runCommCall(RuntimeCallKind kind, const char* symbol, mluclComm_t* made, mluclComm_t destroyed,
                          Forward&& forward) {
  RuntimeCall rc;
  rc.kind = kind;
  rc.symbol = symbol;
  if (destroyed != nullptr) describeComm(destroyed, rc.collective);
  rc.collective.handle = destroyed;
  mluclStatus_t status = MLUCL_SUCCESS;
  auto call = [&] {
    status = forward();
    return status == MLUCL_SUCCESS ? MLURT_SUCCESS : MLURT_ERROR_INVALID_VALUE;
  };
  auto fill = [&] {
    rc.collective.status = status;
    if (made != nullptr && status == MLUCL_SUCCESS) {
      describeComm(*made, rc.collective);
      rc.collective.handle = *made;
    }
  };
  runRuntime(rc, Callback<mlurtStatus_t>::of(call), Callback<void>::of(fill));
  return status;
}

// A transfer as the program asked for it (dtype and op as the ints it passed; op -1: not a reduction,
// peer -1: none).
CollectiveCall transfer(Collective kind, std::size_t count, int dtype, int op, int peer, const void* send,
                        void* recv) {
  return {.kind = kind, .count = count, .dtype = dtype, .op = op, .peer = peer, .send = send, .recv = recv};
}

}  // namespace
}  // namespace opscope::hook

#define OPSCOPE_REAL(Symbol) static const auto real_fn = opscope::hook::real<decltype(&Symbol)>(#Symbol)
#define OPSCOPE_PASS_THROUGH() (!opscope::hook::g_watch_runtime || opscope::hook::t_inside)

extern "C" {

OPSCOPE_EXPORT mluclStatus_t mluclAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                                            mluclDataType_t dtype, mluclReduceOp_t op, mluclComm_t comm,
                                            mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclAllReduce);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(sendbuf, recvbuf, count, dtype, op, comm, queue);
  CollectiveCall c = opscope::hook::transfer(Collective::kAllReduce, count, mlu::rawEnum(dtype),
                                             mlu::rawEnum(op), -1, sendbuf, recvbuf);
  // OP_OVERFLOW_CHECK: an in-place call made out of place, so that the rank's part can be read after it.
  opscope::hook::ResultBuffer result;
  void* target = recvbuf;
  if (opscope::hook::g_collective_out_of_place && sendbuf == recvbuf) {
    const std::size_t bytes = opscope::hook::bytesOf(count, mlu::rawEnum(dtype));
    if (bytes > 0 && result.allocate(bytes)) {
      target = result.data();
      c.result = target;
    }
  }
  const mluclStatus_t status = opscope::hook::runCollective("mluclAllReduce", c, queue, comm, [&] {
    return real_fn(sendbuf, target, count, dtype, op, comm, queue);
  });
  if (target != recvbuf && status == MLUCL_SUCCESS) result.copyTo(recvbuf, queue);
  return status;
}

OPSCOPE_EXPORT mluclStatus_t mluclBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                            mluclDataType_t dtype, int root, mluclComm_t comm,
                                            mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclBroadcast);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(sendbuf, recvbuf, count, dtype, root, comm, queue);
  const CollectiveCall c =
      opscope::hook::transfer(Collective::kBroadcast, count, mlu::rawEnum(dtype), -1, root, sendbuf, recvbuf);
  return opscope::hook::runCollective("mluclBroadcast", c, queue, comm, [&] {
    return real_fn(sendbuf, recvbuf, count, dtype, root, comm, queue);
  });
}

OPSCOPE_EXPORT mluclStatus_t mluclAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                            mluclDataType_t dtype, mluclComm_t comm, mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclAllGather);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(sendbuf, recvbuf, sendcount, dtype, comm, queue);
  const CollectiveCall c = opscope::hook::transfer(Collective::kAllGather, sendcount, mlu::rawEnum(dtype), -1,
                                                   -1, sendbuf, recvbuf);
  return opscope::hook::runCollective("mluclAllGather", c, queue, comm, [&] {
    return real_fn(sendbuf, recvbuf, sendcount, dtype, comm, queue);
  });
}

OPSCOPE_EXPORT mluclStatus_t mluclReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                                mluclDataType_t dtype, mluclReduceOp_t op, mluclComm_t comm,
                                                mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclReduceScatter);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(sendbuf, recvbuf, recvcount, dtype, op, comm, queue);
  const CollectiveCall c = opscope::hook::transfer(Collective::kReduceScatter, recvcount, mlu::rawEnum(dtype),
                                                   mlu::rawEnum(op), -1, sendbuf, recvbuf);
  return opscope::hook::runCollective("mluclReduceScatter", c, queue, comm, [&] {
    return real_fn(sendbuf, recvbuf, recvcount, dtype, op, comm, queue);
  });
}

OPSCOPE_EXPORT mluclStatus_t mluclSend(const void* sendbuf, size_t count, mluclDataType_t dtype, int peer,
                                       mluclComm_t comm, mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclSend);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(sendbuf, count, dtype, peer, comm, queue);
  const CollectiveCall c =
      opscope::hook::transfer(Collective::kSend, count, mlu::rawEnum(dtype), -1, peer, sendbuf, nullptr);
  return opscope::hook::runCollective("mluclSend", c, queue, comm,
                                      [&] { return real_fn(sendbuf, count, dtype, peer, comm, queue); });
}

OPSCOPE_EXPORT mluclStatus_t mluclRecv(void* recvbuf, size_t count, mluclDataType_t dtype, int peer,
                                       mluclComm_t comm, mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclRecv);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(recvbuf, count, dtype, peer, comm, queue);
  const CollectiveCall c =
      opscope::hook::transfer(Collective::kRecv, count, mlu::rawEnum(dtype), -1, peer, nullptr, recvbuf);
  return opscope::hook::runCollective("mluclRecv", c, queue, comm,
                                      [&] { return real_fn(recvbuf, count, dtype, peer, comm, queue); });
}

OPSCOPE_EXPORT mluclStatus_t mluclBarrier(mluclComm_t comm, mlurtQueue_t queue) {
  OPSCOPE_REAL(mluclBarrier);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(comm, queue);
  const CollectiveCall c = opscope::hook::transfer(Collective::kBarrier, 0, 0, -1, -1, nullptr, nullptr);
  return opscope::hook::runCollective("mluclBarrier", c, queue, comm, [&] { return real_fn(comm, queue); });
}

OPSCOPE_EXPORT mluclStatus_t mluclCommInitRank(mluclComm_t* comm, int nranks, mluclUniqueId id, int rank) {
  OPSCOPE_REAL(mluclCommInitRank);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(comm, nranks, id, rank);
  return opscope::hook::runCommCall(RuntimeCallKind::kCommInit, "mluclCommInitRank", comm, nullptr,
                                    [&] { return real_fn(comm, nranks, id, rank); });
}

OPSCOPE_EXPORT mluclStatus_t mluclCommInitFromMpi(mluclComm_t* comm, const void* mpiComm) {
  OPSCOPE_REAL(mluclCommInitFromMpi);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(comm, mpiComm);
  return opscope::hook::runCommCall(RuntimeCallKind::kCommInit, "mluclCommInitFromMpi", comm, nullptr,
                                    [&] { return real_fn(comm, mpiComm); });
}

OPSCOPE_EXPORT mluclStatus_t mluclCommDestroy(mluclComm_t comm) {
  OPSCOPE_REAL(mluclCommDestroy);
  if (OPSCOPE_PASS_THROUGH()) return real_fn(comm);
  return opscope::hook::runCommCall(RuntimeCallKind::kCommDestroy, "mluclCommDestroy", nullptr, comm,
                                    [&] { return real_fn(comm); });
}

// Forwarded untouched: wrapping must not change what the getters report.
OPSCOPE_EXPORT const char* mluclGetErrorString(mluclStatus_t status) {
  OPSCOPE_REAL(mluclGetErrorString);
  return real_fn(status);
}
OPSCOPE_EXPORT mluclStatus_t mluclGetLastError(void) {
  OPSCOPE_REAL(mluclGetLastError);
  return real_fn();
}
OPSCOPE_EXPORT const char* mluclGetLastErrorMessage(void) {
  OPSCOPE_REAL(mluclGetLastErrorMessage);
  return real_fn();
}
OPSCOPE_EXPORT mluclStatus_t mluclGetUniqueId(mluclUniqueId* id) {
  OPSCOPE_REAL(mluclGetUniqueId);
  return real_fn(id);
}
OPSCOPE_EXPORT mluclStatus_t mluclCommCount(mluclComm_t comm, int* count) {
  OPSCOPE_REAL(mluclCommCount);
  return real_fn(comm, count);
}
OPSCOPE_EXPORT mluclStatus_t mluclCommUserRank(mluclComm_t comm, int* rank) {
  OPSCOPE_REAL(mluclCommUserRank);
  return real_fn(comm, rank);
}
OPSCOPE_EXPORT mluclStatus_t mluclCommDevice(mluclComm_t comm, int* device) {
  OPSCOPE_REAL(mluclCommDevice);
  return real_fn(comm, device);
}
OPSCOPE_EXPORT mluclStatus_t mluclCommGetId(mluclComm_t comm, uint64_t* id) {
  OPSCOPE_REAL(mluclCommGetId);
  return real_fn(comm, id);
}
OPSCOPE_EXPORT mluclStatus_t mluclCommGetAsyncError(mluclComm_t comm, mluclStatus_t* status,
                                                    const char** message) {
  OPSCOPE_REAL(mluclCommGetAsyncError);
  return real_fn(comm, status, message);
}

}  // extern "C"
