/*
 * mlucl.h — collective communication for the simulated MLU (libmlucl.so), a CNCL/NCCL-shaped C API on
 * Open MPI.
 *
 * A communicator joins one device per process (a rank) of a group. Collectives and point-to-point
 * transfers work on device buffers (mlurtMalloc) and are *enqueued on an MLU queue* like a kernel: the call
 * returns at once, the transfer runs on the queue's worker in order with the queue's other work, and
 * notifiers placed after it complete after it. The data moves through MPI (Open MPI) on a communicator of
 * its own (an MPI_Comm_dup), one collective of a communicator at a time.
 *
 * Checks. The host call checks its arguments (pointers inside live device allocations of the queue's
 * device, counts, dtype, operation, root or peer) and returns MLUCL_ERROR_INVALID_VALUE with a message.
 * Before any data moves, the ranks of a collective exchange what each was asked to do (collective sequence
 * number, kind, dtype, count, operation, root; for send/recv the pair's) and every rank fails the task with
 * MLUCL_ERROR_MISMATCH, naming the ranks that differ, when they disagree: a mismatch never writes past a
 * buffer. An error inside the queued task is sticky on the queue (mlurtQueueSync returns
 * MLURT_ERROR_LAUNCH_FAILED with the message) and on the communicator (mluclCommGetAsyncError); a
 * communicator that failed fails every later call at once.
 *
 * Ordering. As with NCCL, every rank must enqueue a communicator's collectives in the same order; enqueue
 * them on one queue (or order the queues with notifiers). Send and Recv are blocking rendezvous on the
 * queue: post them in an order that matches on both sides.
 *
 * MPI. mluclCommInitFromMpi uses an MPI communicator of the program, whose MPI must be initialized with
 * MPI_THREAD_MULTIPLE (the transfers run on the queues' threads). mluclCommInitRank is for programs that do
 * not use MPI: the library initializes MPI itself (MPI_Init_thread) and finalizes it at exit; every process
 * of the MPI job (mpirun) must call it, with the unique id of its group.
 *
 * Environment: MLU_SIM_FAULT items for collectives (see docs/kernels.md, "Fault injection"):
 *   COLLECTIVE:KIND[=VALUE][@rank=R][@call=N][@FRACTION]   COLLECTIVE one of allreduce, broadcast,
 *   allgather, reduce_scatter, send, recv, barrier; KIND hang, skip, count=DELTA, dtype=NAME, nan,
 *   delay=MS.
 */
#ifndef MLU_MLUCL_H_
#define MLU_MLUCL_H_

#include <mlu/mlurt.h>

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MLUCL_API __attribute__((visibility("default")))
#else
#define MLUCL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Result of every call. */
typedef enum mluclStatus_t {
  MLUCL_SUCCESS = 0,              /* the call succeeded (the transfer is enqueued) */
  MLUCL_ERROR_INVALID_VALUE = 1,  /* an argument is invalid: see mluclGetLastErrorMessage */
  MLUCL_ERROR_INVALID_HANDLE = 2, /* NULL, unknown or destroyed communicator */
  MLUCL_ERROR_MISMATCH = 3,       /* the ranks disagree on a collective (count, dtype, order...) */
  MLUCL_ERROR_SYSTEM = 4,         /* MPI failed, or MPI is not usable (thread level, not initialized) */
  MLUCL_ERROR_RUNTIME = 5,        /* the MLU runtime refused (e.g. an unknown queue) */
  MLUCL_ERROR_COMM_FAILED = 6,    /* an earlier error left the communicator unusable */
  MLUCL_ERROR_INTERNAL = 7        /* a bug in the library */
} mluclStatus_t;

/* Element types: the kernel library's (same values as mluopDataType_t). */
typedef enum mluclDataType_t {
  MLUCL_DTYPE_FLOAT = 1,    /* float32 */
  MLUCL_DTYPE_HALF = 2,     /* IEEE float16: reduced in float32, rounded once at the end */
  MLUCL_DTYPE_BFLOAT16 = 3, /* bfloat16: likewise */
  MLUCL_DTYPE_DOUBLE = 4,   /* float64 */
  MLUCL_DTYPE_INT8 = 5,
  MLUCL_DTYPE_INT16 = 6,
  MLUCL_DTYPE_INT32 = 7,
  MLUCL_DTYPE_INT64 = 8,
  MLUCL_DTYPE_UINT8 = 9,
  MLUCL_DTYPE_BOOL = 10 /* max (or) and min (and) only */
} mluclDataType_t;

/* Reductions. AVG divides the sum by the number of ranks (integers: truncated toward zero). */
typedef enum mluclReduceOp_t {
  MLUCL_SUM = 0,
  MLUCL_PROD = 1,
  MLUCL_MAX = 2,
  MLUCL_MIN = 3,
  MLUCL_AVG = 4
} mluclReduceOp_t;

/* Opaque communicator handle; never reused after mluclCommDestroy. */
typedef struct mluclComm_st* mluclComm_t;

/* Names a group for mluclCommInitRank; made by one process and given to the others. */
#define MLUCL_UNIQUE_ID_BYTES 64
typedef struct mluclUniqueId {
  char internal[MLUCL_UNIQUE_ID_BYTES];
} mluclUniqueId;

/* ---- errors ---- */

/* Name and meaning of a status, e.g. "MLUCL_ERROR_MISMATCH: the ranks disagree on a collective". */
MLUCL_API const char* mluclGetErrorString(mluclStatus_t status);
/* Returns the calling thread's last error and resets it to MLUCL_SUCCESS. */
MLUCL_API mluclStatus_t mluclGetLastError(void);
/* Detailed message of the calling thread's last error ("" if none); valid until the thread's next call. */
MLUCL_API const char* mluclGetLastErrorMessage(void);

/* ---- communicators ---- */

/* A fresh unique id (random bytes). */
MLUCL_API mluclStatus_t mluclGetUniqueId(mluclUniqueId* id);
/* Joins the communicator of `id` as `rank` of `nranks` (collective over every process of the MPI job, which
 * must all call it; processes with the same id form one communicator). Initializes MPI when the program has
 * not; the communicator's device is the calling thread's current device. */
MLUCL_API mluclStatus_t mluclCommInitRank(mluclComm_t* comm, int nranks, mluclUniqueId id, int rank);
/* A communicator over the processes of an MPI communicator: mpiComm is the address of an MPI_Comm (NULL:
 * MPI_COMM_WORLD); collective over it. The ranks are its ranks; the device the calling thread's current. */
MLUCL_API mluclStatus_t mluclCommInitFromMpi(mluclComm_t* comm, const void* mpiComm);
/* Waits for the communicator's queued work, releases it and invalidates the handle (local, not collective).
 */
MLUCL_API mluclStatus_t mluclCommDestroy(mluclComm_t comm);
/* Number of ranks, this process's rank, and the device of the communicator. */
MLUCL_API mluclStatus_t mluclCommCount(mluclComm_t comm, int* count);
MLUCL_API mluclStatus_t mluclCommUserRank(mluclComm_t comm, int* rank);
MLUCL_API mluclStatus_t mluclCommDevice(mluclComm_t comm, int* device);
/* Process-wide numeric id of the communicator (stable, never reused; the kernel names' suffix). */
MLUCL_API mluclStatus_t mluclCommGetId(mluclComm_t comm, uint64_t* id);
/* The first error a queued transfer of the communicator met (MLUCL_SUCCESS if none), without resetting it;
 * with message non-NULL, its text (valid until the communicator is destroyed). */
MLUCL_API mluclStatus_t mluclCommGetAsyncError(mluclComm_t comm, mluclStatus_t* status, const char** message);

/* ---- collectives (enqueued on queue; NULL: the current device's default queue) ---- */

/* recvbuf[i] = op over the ranks of sendbuf[i], count elements; sendbuf == recvbuf is in place. */
MLUCL_API mluclStatus_t mluclAllReduce(const void* sendbuf, void* recvbuf, size_t count,
                                       mluclDataType_t dtype, mluclReduceOp_t op, mluclComm_t comm,
                                       mlurtQueue_t queue);
/* recvbuf = root's sendbuf (sendbuf is read on the root only; may equal recvbuf). */
MLUCL_API mluclStatus_t mluclBroadcast(const void* sendbuf, void* recvbuf, size_t count,
                                       mluclDataType_t dtype, int root, mluclComm_t comm, mlurtQueue_t queue);
/* recvbuf[r * sendcount + i] = rank r's sendbuf[i]; sendbuf == recvbuf + rank * sendcount is in place. */
MLUCL_API mluclStatus_t mluclAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                                       mluclDataType_t dtype, mluclComm_t comm, mlurtQueue_t queue);
/* recvbuf[i] = op over the ranks of sendbuf[rank * recvcount + i]. */
MLUCL_API mluclStatus_t mluclReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                           mluclDataType_t dtype, mluclReduceOp_t op, mluclComm_t comm,
                                           mlurtQueue_t queue);
/* Point to point: count elements to / from rank peer (a blocking rendezvous on the queue). */
MLUCL_API mluclStatus_t mluclSend(const void* sendbuf, size_t count, mluclDataType_t dtype, int peer,
                                  mluclComm_t comm, mlurtQueue_t queue);
MLUCL_API mluclStatus_t mluclRecv(void* recvbuf, size_t count, mluclDataType_t dtype, int peer,
                                  mluclComm_t comm, mlurtQueue_t queue);
/* Completes on each rank's queue once every rank's queue has reached it. */
MLUCL_API mluclStatus_t mluclBarrier(mluclComm_t comm, mlurtQueue_t queue);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLU_MLUCL_H_ */
