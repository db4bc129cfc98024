#include "ddp.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace examples {
namespace {

void check(mluclStatus_t status, const char* what) {
  if (status == MLUCL_SUCCESS) return;
  std::fprintf(stderr, "error: %s: %s\n", what, mluclGetLastErrorMessage());
  std::exit(1);
}

mluclDataType_t clType(mluopDataType_t t) { return static_cast<mluclDataType_t>(static_cast<int>(t)); }

}  // namespace

DataParallel::DataParallel(bool enabled, int* argc, char*** argv) {
  if (!enabled) return;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "error: --ddp: MPI_Init_thread failed\n");
    std::exit(1);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  check(mluclCommInitFromMpi(&comm_, nullptr), "--ddp");
}

DataParallel::~DataParallel() {
  if (comm_ == nullptr) return;
  check(mluclCommDestroy(comm_), "--ddp");
  MPI_Finalize();
}

void DataParallel::useQueueOf(mluopHandle_t handle) {
  if (mluopGetQueue(handle, &queue_) != MLUOP_STATUS_SUCCESS) {
    std::fprintf(stderr, "error: mluopGetQueue: %s\n", mluopGetLastErrorMessage());
    std::exit(1);
  }
}

void DataParallel::broadcastParameters(const ParameterSet& params) const {
  if (comm_ == nullptr) return;
  for (const auto& p : params.all()) {
    check(mluclBroadcast(p->master.data(), p->master.data(), static_cast<std::size_t>(p->master.numel()),
                         clType(p->master.dtype()), 0, comm_, queue_),
          "--ddp");
    if (p->model.data() != p->master.data()) {
      check(mluclBroadcast(p->model.data(), p->model.data(), static_cast<std::size_t>(p->model.numel()),
                           clType(p->model.dtype()), 0, comm_, queue_),
            "--ddp");
    }
  }
}

void DataParallel::averageGradients(const ParameterSet& params) const {
  if (comm_ == nullptr) return;
  for (const auto& p : params.all()) average(p->grad);
}

void DataParallel::average(const DeviceTensor& t) const {
  if (comm_ == nullptr) return;
  check(mluclAllReduce(t.data(), t.data(), static_cast<std::size_t>(t.numel()), clType(t.dtype()), MLUCL_AVG,
                       comm_, queue_),
        "--ddp");
}

double DataParallel::sum(double value) const {
  if (comm_ == nullptr) return value;
  double total = 0;
  MPI_Allreduce(&value, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

}  // namespace examples
