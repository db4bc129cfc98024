// mlucl_probe — a small MPI program for the collective fault tests (test_mlucl_faults.cpp): --calls N
// all-reduces (sum, float32, --count elements, each rank contributing rank + 1) on one queue, synced after
// each. Every rank prints, per call, "rank R call K: ok sum S nan N" or "rank R call K: failed <status>:
// <message>", then "rank R done" or exits 1 at the first failure. Rank 0 also prints how long each call
// took. With --p2p the ranks pair up (0 with 1, 2 with 3, ...) and each call is a send and a recv between
// the two (the even rank sends first) instead of an all-reduce; --wrong-peer R makes rank R send to the
// rank two past its partner; --stall-rank R makes rank R sleep for a minute in its own code (not in a
// collective) before its second call. A rank that failed waits for the others at a barrier before it exits
// with status 1 (mpirun ends the job as soon as one process exits with an error: the others would not have
// said theirs).
#include <mlu/mlucl.h>
#include <mlu/mlurt.h>

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

// Exits with status 1 once every rank got here (see above), its communicator destroyed first as a program
// that handles the error would.
int failed(mluclComm_t comm) {
  mluclCommDestroy(comm);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int calls = 3;
  bool p2p = false;
  int wrong_peer = -1;
  int stall_rank = -1;
  for (int i = 1; i < argc; ++i) p2p = p2p || std::string(argv[i]) == "--p2p";
  std::size_t count = 1024;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--calls") calls = std::atoi(argv[i + 1]);
    if (a == "--count") count = static_cast<std::size_t>(std::atol(argv[i + 1]));
    if (a == "--wrong-peer") wrong_peer = std::atoi(argv[i + 1]);
    if (a == "--stall-rank") stall_rank = std::atoi(argv[i + 1]);
  }
  mluclComm_t comm = nullptr;
  if (mluclCommInitFromMpi(&comm, nullptr) != MLUCL_SUCCESS) {
    std::printf("rank %d init failed: %s\n", rank, mluclGetLastErrorMessage());
    return 1;
  }
  // One more element than the call uses, as a canary: no call may write it.
  void* buf = nullptr;
  mlurtMalloc(&buf, (count + 1) * 4);
  std::vector<float> host(count + 1, 0.0f);
  for (int call = 1; call <= calls; ++call) {
    if (call == 2 && rank == stall_rank) std::this_thread::sleep_for(std::chrono::minutes(1));
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(rank + 1);
    host[count] = -7.0f;
    mlurtMemcpy(buf, host.data(), host.size() * 4, MLURT_MEMCPY_HOST_TO_DEVICE);
    const double t0 = MPI_Wtime();
    mluclStatus_t s = MLUCL_SUCCESS;
    if (p2p) {
      int size = 0;
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      const int partner = rank ^ 1;
      const int to = rank == wrong_peer ? (partner + 2) % size : partner;
      if (rank % 2 == 0) {
        s = mluclSend(buf, count, MLUCL_DTYPE_FLOAT, to, comm, nullptr);
        if (s == MLUCL_SUCCESS) s = mluclRecv(buf, count, MLUCL_DTYPE_FLOAT, partner, comm, nullptr);
      } else {
        s = mluclRecv(buf, count, MLUCL_DTYPE_FLOAT, partner, comm, nullptr);
        if (s == MLUCL_SUCCESS) s = mluclSend(buf, count, MLUCL_DTYPE_FLOAT, to, comm, nullptr);
      }
    } else {
      s = mluclAllReduce(buf, buf, count, MLUCL_DTYPE_FLOAT, MLUCL_SUM, comm, nullptr);
    }
    if (s != MLUCL_SUCCESS) {
      std::printf("rank %d call %d: failed %s: %s\n", rank, call, mluclGetErrorString(s),
                  mluclGetLastErrorMessage());
      return failed(comm);
    }
    std::printf("rank %d call %d: enqueued\n", rank, call);
    std::fflush(stdout);
    const mlurtStatus_t q = mlurtQueueSync(nullptr);
    if (q != MLURT_SUCCESS) {
      mluclStatus_t async = MLUCL_SUCCESS;
      mluclCommGetAsyncError(comm, &async, nullptr);
      std::printf("rank %d call %d: failed %s: %s\n", rank, call, mluclGetErrorString(async),
                  mlurtGetLastErrorMessage());
      mlurtMemcpy(host.data(), buf, host.size() * 4, MLURT_MEMCPY_DEVICE_TO_HOST);
      std::printf("rank %d canary %s, first element %g\n", rank,
                  host[count] == -7.0f ? "intact" : "OVERWRITTEN", static_cast<double>(host[0]));
      return failed(comm);
    }
    mlurtMemcpy(host.data(), buf, host.size() * 4, MLURT_MEMCPY_DEVICE_TO_HOST);
    std::size_t nan = 0;
    for (std::size_t i = 0; i < count; ++i) nan += std::isnan(host[i]) ? 1 : 0;
    std::printf("rank %d call %d: ok sum %g nan %zu canary %s seconds %.3f\n", rank, call,
                static_cast<double>(host[count > 1 ? 1 : 0]), nan,
                host[count] == -7.0f ? "intact" : "OVERWRITTEN", MPI_Wtime() - t0);
    std::fflush(stdout);
  }
  mlurtFree(buf);
  mluclCommDestroy(comm);
  std::printf("rank %d done\n", rank);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);  // where a rank that failed waits (with --p2p, only a pair fails)
  MPI_Finalize();
  return 0;
}
