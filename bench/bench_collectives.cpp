// bench_collectives — mluclAllReduce of device buffers against MPI_Allreduce of host buffers, side by side
// in one MPI job (run under mpirun; bench/collectives.sh runs 2 and 4 ranks). For each size, rounds
// alternate the two (each round: a few calls of one, then of the other, every rank in step), and rank 0
// prints the median time per call of each and their ratio. Not Google Benchmark: its adaptive iteration
// counts would differ between ranks and make the collectives mismatch.
//
//   mpirun -np 4 --oversubscribe build/bin/bench_collectives [--rounds N] [--sizes-mib 1,64]
#include <mlu/mlucl.h>
#include <mlu/mlurt.h>

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void need(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "bench_collectives: %s failed: %s / %s\n", what, mluclGetLastErrorMessage(),
               mlurtGetLastErrorMessage());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rounds = 7;
  std::vector<double> sizes_mib = {1, 64};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--sizes-mib" && i + 1 < argc) {
      sizes_mib.clear();
      for (char* p = std::strtok(argv[++i], ","); p != nullptr; p = std::strtok(nullptr, ","))
        sizes_mib.push_back(std::atof(p));
    } else {
      if (rank == 0) std::fprintf(stderr, "usage: bench_collectives [--rounds N] [--sizes-mib 1,64]\n");
      MPI_Finalize();
      return 2;
    }
  }

  mluclComm_t comm = nullptr;
  need(mluclCommInitFromMpi(&comm, nullptr) == MLUCL_SUCCESS, "mluclCommInitFromMpi");
  mlurtQueue_t queue = nullptr;
  need(mlurtQueueCreate(&queue) == MLURT_SUCCESS, "mlurtQueueCreate");
  if (rank == 0) {
    std::printf(
        "all-reduce (sum, float32) over %d ranks, median of %d rounds; mlucl: device buffers, the call\n"
        "enqueued on a queue and synced; MPI: MPI_Allreduce of host buffers\n",
        size, rounds);
    std::printf("%10s %14s %14s %8s %12s\n", "size", "mlucl ms", "MPI ms", "ratio", "mlucl GB/s");
  }
  for (double mib : sizes_mib) {
    const std::size_t count = static_cast<std::size_t>(mib * (1 << 20)) / 4;
    const int calls = mib <= 4 ? 20 : 3;  // per round
    void *dsend = nullptr, *drecv = nullptr;
    need(mlurtMalloc(&dsend, count * 4) == MLURT_SUCCESS && mlurtMalloc(&drecv, count * 4) == MLURT_SUCCESS,
         "mlurtMalloc");
    std::vector<float> hsend(count, 1.0f + static_cast<float>(rank)), hrecv(count);
    need(mlurtMemcpy(dsend, hsend.data(), count * 4, MLURT_MEMCPY_HOST_TO_DEVICE) == MLURT_SUCCESS, "memcpy");
    std::vector<double> ours, theirs;
    for (int round = -1; round < rounds; ++round) {  // round -1 warms both up
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int c = 0; c < calls; ++c)
        need(mluclAllReduce(dsend, drecv, count, MLUCL_DTYPE_FLOAT, MLUCL_SUM, comm, queue) == MLUCL_SUCCESS,
             "mluclAllReduce");
      need(mlurtQueueSync(queue) == MLURT_SUCCESS, "mlurtQueueSync");
      double t1 = MPI_Wtime();
      MPI_Barrier(MPI_COMM_WORLD);
      double t2 = MPI_Wtime();
      for (int c = 0; c < calls; ++c)
        MPI_Allreduce(hsend.data(), hrecv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      double t3 = MPI_Wtime();
      // The slowest rank's time is the collective's.
      double local[2] = {(t1 - t0) / calls, (t3 - t2) / calls}, worst[2] = {0, 0};
      MPI_Allreduce(local, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (round >= 0) {
        ours.push_back(worst[0]);
        theirs.push_back(worst[1]);
      }
    }
    // Both got the right sum.
    need(mlurtMemcpy(hsend.data(), drecv, count * 4, MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS, "memcpy");
    const float want = static_cast<float>(size * (size + 1) / 2);
    need(hsend[0] == want && hsend[count - 1] == want && hrecv[0] == want, "checking the sums");
    const double a = median(ours), b = median(theirs);
    if (rank == 0) {
      std::printf("%7.0f MiB %14.3f %14.3f %7.2fx %12.2f\n", mib, a * 1e3, b * 1e3, a / b,
                  static_cast<double>(count) * 4 / a / 1e9);
      std::fflush(stdout);
    }
    mlurtFree(dsend);
    mlurtFree(drecv);
  }
  mlurtQueueDestroy(queue);
  mluclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
