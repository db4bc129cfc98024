// reuse_probe — an MPI program for the flight recorder's consistency test (test_flight_recorder.cpp): one
// all-reduce, then an SGD step on a parameter on queue A (the same on every rank), the parameter freed, a
// block of its size allocated again and filled on queue B with the rank's number. Every rank prints
// "rank R reuse: same address yes|no" (whether the new block is the freed one). A tool that hashes the
// parameter after the step (OP_RANK_CONSISTENCY) must do it before the free: after it, the ranks' hashes
// would differ.
#include <mlu/mlucl.h>
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <mpi.h>

#include <cstdint>
#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  mluclComm_t comm = nullptr;
  if (mluclCommInitFromMpi(&comm, nullptr) != MLUCL_SUCCESS) {
    std::printf("rank %d init failed: %s\n", rank, mluclGetLastErrorMessage());
    return 1;
  }
  constexpr std::size_t kCount = 1024;
  constexpr std::size_t kBytes = kCount * 4;
  mlurtQueue_t a = nullptr, b = nullptr;
  mlurtQueueCreate(&a);
  mlurtQueueCreate(&b);
  mluopHandle_t on_a = nullptr, on_b = nullptr;
  mluopCreate(&on_a);
  mluopSetQueue(on_a, a);
  mluopCreate(&on_b);
  mluopSetQueue(on_b, b);
  mluopTensorDescriptor_t desc = nullptr;
  mluopCreateTensorDescriptor(&desc);
  const std::int64_t dims[] = {static_cast<std::int64_t>(kCount)};
  mluopSetTensorDescriptor(desc, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, dims);
  void *param = nullptr, *grad = nullptr, *fence = nullptr;
  mlurtMalloc(&param, kBytes);
  mlurtMalloc(&grad, kBytes);
  mlurtMalloc(&fence, kBytes);  // the freed block stays one of its own size
  mluopFill(on_a, 1.0, desc, param);
  mluopFill(on_a, 0.5, desc, grad);
  mluclAllReduce(grad, grad, kCount, MLUCL_DTYPE_FLOAT, MLUCL_AVG, comm, a);
  mluopSgdStep(on_a, 0.1f, 0.0f, 0.0f, 0.0f, false, true, desc, param, desc, grad, nullptr, nullptr);
  mlurtFree(param);
  void* again = nullptr;
  mlurtMalloc(&again, kBytes);
  mluopFill(on_b, static_cast<double>(rank), desc, again);
  mlurtQueueSync(b);
  std::printf("rank %d reuse: same address %s\n", rank, again == param ? "yes" : "no");
  std::fflush(stdout);
  mlurtQueueSync(a);
  mlurtFree(again);
  mlurtFree(grad);
  mlurtFree(fence);
  mluopDestroyTensorDescriptor(desc);
  mluopDestroy(on_a);
  mluopDestroy(on_b);
  mlurtQueueDestroy(a);
  mlurtQueueDestroy(b);
  mluclCommDestroy(comm);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
