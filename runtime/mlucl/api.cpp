// The C API of libmlucl (mlu/mlucl.h).
#include "communicator.h"
#include "errors.h"
#include "transfer.h"

#include "../common/raw_enum.h"

#include <mpi.h>

#include <cstring>
#include <exception>
#include <new>
#include <random>

namespace mlucl {
namespace {

template <typename Body>
mluclStatus_t guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(MLUCL_ERROR_INTERNAL, "{}: out of host memory", function);
  } catch (const std::exception& e) {
    return fail(MLUCL_ERROR_INTERNAL, "{}: internal error: {}", function, e.what());
  } catch (...) {
    return fail(MLUCL_ERROR_INTERNAL, "{}: internal error", function);
  }
}

// A communicator over a duplicate of `base` (collective over it), on the calling thread's current device.
mluclStatus_t makeCommunicator(const char* function, MPI_Comm base, mluclComm_t* out) {
  int device = 0;
  if (mlurtGetDevice(&device) != MLURT_SUCCESS)
    return fail(MLUCL_ERROR_RUNTIME, "{}: {}", function, mlurtGetLastErrorMessage());
  MPI_Comm dup = MPI_COMM_NULL;
  if (const int code = MPI_Comm_dup(base, &dup); code != MPI_SUCCESS)
    return fail(MLUCL_ERROR_SYSTEM, "{}: MPI_Comm_dup failed: {}", function, mpiErrorText(code));
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  *out = registerCommunicator(std::make_shared<Communicator>(nextCommunicatorId(), dup, device));
  return MLUCL_SUCCESS;
}

// A call's request; dtype and op as the ints the caller passed (checked later).
Request request(Kind kind, const void* send, void* recv, std::size_t count, int dtype, int op, int root) {
  Request r;
  r.kind = kind;
  r.send = send;
  r.recv = recv;
  r.count = count;
  r.dtype_raw = dtype;
  r.op_raw = op;
  r.root = root;
  return r;
}

}  // namespace
}  // namespace mlucl

using namespace mlucl;

extern "C" {

MLUCL_API mluclStatus_t mluclGetUniqueId(mluclUniqueId* id) {
  if (id == nullptr) return fail(MLUCL_ERROR_INVALID_VALUE, "mluclGetUniqueId: id is NULL");
  return guarded("mluclGetUniqueId", [&] {
    std::random_device rd;
    for (std::size_t i = 0; i < sizeof id->internal; i += sizeof(unsigned)) {
      const unsigned v = rd();
      std::memcpy(id->internal + i, &v, std::min(sizeof v, sizeof id->internal - i));
    }
    return MLUCL_SUCCESS;
  });
}

MLUCL_API mluclStatus_t mluclCommInitRank(mluclComm_t* comm, int nranks, mluclUniqueId id, int rank) {
  if (comm == nullptr) return fail(MLUCL_ERROR_INVALID_VALUE, "mluclCommInitRank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(MLUCL_ERROR_INVALID_VALUE, "mluclCommInitRank: rank {} of {} ranks is out of range", rank,
                nranks);
  return guarded("mluclCommInitRank", [&] {
    if (const mluclStatus_t s = ensureMpi(true); s != MLUCL_SUCCESS) return s;
    // The processes that gave the same id form one communicator, ordered by the rank they gave.
    std::uint32_t color = 2166136261u;  // FNV-1a of the id, as a non-negative MPI color
    for (char ch : id.internal) color = (color ^ static_cast<unsigned char>(ch)) * 16777619u;
    MPI_Comm group = MPI_COMM_NULL;
    if (const int code = MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color & 0x7fffffffu), rank, &group);
        code != MPI_SUCCESS)
      return fail(MLUCL_ERROR_SYSTEM, "mluclCommInitRank: MPI_Comm_split failed: {}", mpiErrorText(code));
    int size = 0, got = 0;
    MPI_Comm_size(group, &size);
    MPI_Comm_rank(group, &got);
    // Every member checks every member's (rank, nranks, id).
    struct Claim {
      int rank, nranks;
      char id[MLUCL_UNIQUE_ID_BYTES];
    } mine{rank, nranks, {}};
    std::memcpy(mine.id, id.internal, sizeof mine.id);
    std::vector<Claim> all(static_cast<std::size_t>(size));
    MPI_Allgather(&mine, sizeof(Claim), MPI_BYTE, all.data(), sizeof(Claim), MPI_BYTE, group);
    for (int r = 0; r < size; ++r) {
      const Claim& c = all[static_cast<std::size_t>(r)];
      if (c.rank != r || c.nranks != size || std::memcmp(c.id, mine.id, sizeof mine.id) != 0) {
        MPI_Comm_free(&group);
        return fail(
            MLUCL_ERROR_INVALID_VALUE,
            "mluclCommInitRank: {} process(es) gave this unique id, claiming rank {} of {} (position {}); "
            "every rank 0..nranks-1 must call it once with the same nranks and id",
            size, c.rank, c.nranks, r);
      }
    }
    const mluclStatus_t s = makeCommunicator("mluclCommInitRank", group, comm);
    MPI_Comm_free(&group);
    return s;
  });
}

MLUCL_API mluclStatus_t mluclCommInitFromMpi(mluclComm_t* comm, const void* mpiComm) {
  if (comm == nullptr) return fail(MLUCL_ERROR_INVALID_VALUE, "mluclCommInitFromMpi: comm is NULL");
  *comm = nullptr;
  return guarded("mluclCommInitFromMpi", [&] {
    if (const mluclStatus_t s = ensureMpi(false); s != MLUCL_SUCCESS) return s;
    const MPI_Comm base = mpiComm == nullptr ? MPI_COMM_WORLD : *static_cast<const MPI_Comm*>(mpiComm);
    if (base == MPI_COMM_NULL) return fail(MLUCL_ERROR_INVALID_VALUE, "mluclCommInitFromMpi: MPI_COMM_NULL");
    return makeCommunicator("mluclCommInitFromMpi", base, comm);
  });
}

MLUCL_API mluclStatus_t mluclCommDestroy(mluclComm_t comm) {
  return guarded("mluclCommDestroy", [&] {
    std::shared_ptr<Communicator> c = unregisterCommunicator(comm);
    if (!c) return fail(MLUCL_ERROR_INVALID_HANDLE, "mluclCommDestroy: unknown or destroyed communicator");
    c->waitIdle();
    c->freeMpi();
    return MLUCL_SUCCESS;
  });
}

#define MLUCL_GET(function, field, expr)                                                              \
  MLUCL_API mluclStatus_t function(mluclComm_t comm, field* out) {                                    \
    if (out == nullptr) return fail(MLUCL_ERROR_INVALID_VALUE, #function ": output pointer is NULL"); \
    std::shared_ptr<Communicator> c = lookup(comm);                                                   \
    if (!c) return fail(MLUCL_ERROR_INVALID_HANDLE, #function ": unknown or destroyed communicator"); \
    *out = (expr);                                                                                    \
    return MLUCL_SUCCESS;                                                                             \
  }

MLUCL_GET(mluclCommCount, int, c->size())
MLUCL_GET(mluclCommUserRank, int, c->rank())
MLUCL_GET(mluclCommDevice, int, c->device())
MLUCL_GET(mluclCommGetId, uint64_t, c->id())
#undef MLUCL_GET

MLUCL_API mluclStatus_t mluclCommGetAsyncError(mluclComm_t comm, mluclStatus_t* status,
                                               const char** message) {
  if (status == nullptr) return fail(MLUCL_ERROR_INVALID_VALUE, "mluclCommGetAsyncError: status is NULL");
  std::shared_ptr<Communicator> c = lookup(comm);
  if (!c)
    return fail(MLUCL_ERROR_INVALID_HANDLE, "mluclCommGetAsyncError: unknown or destroyed communicator");
  *status = c->asyncError(nullptr);
  if (message != nullptr) *message = c->asyncMessage();
  return MLUCL_SUCCESS;
}

MLUCL_API mluclStatus_t mluclAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                                       mluclDataType_t dtype, mluclReduceOp_t op, mluclComm_t comm,
                                       mlurtQueue_t queue) {
  return guarded("mluclAllReduce", [&] {
    return enqueueTransfer(
        "mluclAllReduce",
        request(Kind::kAllReduce, sendbuf, recvbuf, count, mlu::rawEnum(dtype), mlu::rawEnum(op), 0), comm,
        queue);
  });
}

MLUCL_API mluclStatus_t mluclBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                       mluclDataType_t dtype, int root, mluclComm_t comm,
                                       mlurtQueue_t queue) {
  return guarded("mluclBroadcast", [&] {
    return enqueueTransfer(
        "mluclBroadcast",
        request(Kind::kBroadcast, sendbuf, recvbuf, count, mlu::rawEnum(dtype), MLUCL_SUM, root), comm,
        queue);
  });
}

MLUCL_API mluclStatus_t mluclAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                       mluclDataType_t dtype, mluclComm_t comm, mlurtQueue_t queue) {
  return guarded("mluclAllGather", [&] {
    return enqueueTransfer(
        "mluclAllGather",
        request(Kind::kAllGather, sendbuf, recvbuf, sendcount, mlu::rawEnum(dtype), MLUCL_SUM, 0), comm,
        queue);
  });
}

MLUCL_API mluclStatus_t mluclReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                           mluclDataType_t dtype, mluclReduceOp_t op, mluclComm_t comm,
                                           mlurtQueue_t queue) {
  return guarded("mluclReduceScatter", [&] {
    return enqueueTransfer(
        "mluclReduceScatter",
        request(Kind::kReduceScatter, sendbuf, recvbuf, recvcount, mlu::rawEnum(dtype), mlu::rawEnum(op), 0),
        comm, queue);
  });
}

MLUCL_API mluclStatus_t mluclSend(const void* sendbuf, size_t count, mluclDataType_t dtype, int peer,
                                  mluclComm_t comm, mlurtQueue_t queue) {
  return guarded("mluclSend", [&] {
    return enqueueTransfer(
        "mluclSend", request(Kind::kSend, sendbuf, nullptr, count, mlu::rawEnum(dtype), MLUCL_SUM, peer),
        comm, queue);
  });
}

MLUCL_API mluclStatus_t mluclRecv(void* recvbuf, size_t count, mluclDataType_t dtype, int peer,
                                  mluclComm_t comm, mlurtQueue_t queue) {
  return guarded("mluclRecv", [&] {
    return enqueueTransfer(
        "mluclRecv", request(Kind::kRecv, nullptr, recvbuf, count, mlu::rawEnum(dtype), MLUCL_SUM, peer),
        comm, queue);
  });
}

MLUCL_API mluclStatus_t mluclBarrier(mluclComm_t comm, mlurtQueue_t queue) {
  return guarded("mluclBarrier", [&] {
    return enqueueTransfer("mluclBarrier",
                           request(Kind::kBarrier, nullptr, nullptr, 0, MLUCL_DTYPE_FLOAT, MLUCL_SUM, 0),
                           comm, queue);
  });
}

}  // extern "C"
