#include "communicator.h"

#include "errors.h"

#include "../common/no_destructor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace mlucl {

Communicator::Communicator(std::uint64_t id, MPI_Comm comm, int device)
    : id_(id), comm_(comm), device_(device) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  sends_ = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(size_));
  recvs_ = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(size_));
}

void Communicator::freeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Communicator::transferQueued() {
  std::lock_guard lock(state_mutex_);
  ++in_flight_;
}

void Communicator::transferDone() {
  std::lock_guard lock(state_mutex_);
  if (--in_flight_ == 0) idle_.notify_all();
}

void Communicator::waitIdle() {
  std::unique_lock lock(state_mutex_);
  idle_.wait(lock, [&] { return in_flight_ == 0; });
}

void Communicator::setFailed(mluclStatus_t status, const std::string& message) {
  std::lock_guard lock(state_mutex_);
  if (error_ == MLUCL_SUCCESS) {
    error_ = status;
    error_message_ = message;
  }
  failed_.store(true, std::memory_order_release);
}

mluclStatus_t Communicator::asyncError(std::string* message) const {
  std::lock_guard lock(state_mutex_);
  if (message != nullptr) *message = error_message_;
  return error_;
}

const char* Communicator::asyncMessage() const {
  std::lock_guard lock(state_mutex_);
  return error_message_.c_str();  // set once, never changed after: the pointer stays valid
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::uint64_t, std::shared_ptr<Communicator>> live;
  std::atomic<std::uint64_t> next_id{0};
};

// Process-lifetime (never destroyed): the exit handler below and late calls still reach it.
Registry& registry() {
  static mlu::NoDestructor<Registry> r;
  return r.get();
}

std::uint64_t idOf(mluclComm_t handle) { return reinterpret_cast<std::uintptr_t>(handle); }

std::mutex& mpiInitMutex() {
  static mlu::NoDestructor<std::mutex> m;
  return m.get();
}

// At exit, when the library initialized MPI: the transfers still queued run first, then MPI is finalized
// (Open MPI's mpirun reports a process that exits without it as failed).
void finalizeOwnedMpi() {
  std::vector<std::shared_ptr<Communicator>> comms;
  {
    std::lock_guard lock(registry().mutex);
    for (auto& [id, c] : registry().live) comms.push_back(c);
  }
  for (auto& c : comms) c->waitIdle();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

std::shared_ptr<Communicator> lookup(mluclComm_t handle) {
  std::lock_guard lock(registry().mutex);
  const auto it = registry().live.find(idOf(handle));
  return it == registry().live.end() ? nullptr : it->second;
}

mluclComm_t registerCommunicator(std::shared_ptr<Communicator> comm) {
  const std::uint64_t id = comm->id();
  std::lock_guard lock(registry().mutex);
  registry().live.emplace(id, std::move(comm));
  return reinterpret_cast<mluclComm_t>(static_cast<std::uintptr_t>(id));
}

std::shared_ptr<Communicator> unregisterCommunicator(mluclComm_t handle) {
  std::lock_guard lock(registry().mutex);
  const auto it = registry().live.find(idOf(handle));
  if (it == registry().live.end()) return nullptr;
  auto comm = std::move(it->second);
  registry().live.erase(it);
  return comm;
}

std::uint64_t nextCommunicatorId() { return ++registry().next_id; }

mluclStatus_t ensureMpi(bool init) {
  std::lock_guard lock(mpiInitMutex());
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return fail(MLUCL_ERROR_SYSTEM, "MPI has been finalized");
  if (!initialized) {
    if (!init) {
      return fail(MLUCL_ERROR_SYSTEM,
                  "MPI is not initialized: call MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) first, or "
                  "use mluclCommInitRank");
    }
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return fail(MLUCL_ERROR_SYSTEM, "MPI_Init_thread failed");
    std::atexit(finalizeOwnedMpi);
  }
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    return fail(MLUCL_ERROR_SYSTEM,
                "MPI provides thread level {} but mlucl needs MPI_THREAD_MULTIPLE ({}): its transfers run on "
                "the device queues' threads; initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, "
                "...)",
                provided, MPI_THREAD_MULTIPLE);
  }
  return MLUCL_SUCCESS;
}

MPI_Datatype mpiType(mluclDataType_t dtype) {
  switch (dtype) {
    case MLUCL_DTYPE_FLOAT:
      return MPI_FLOAT;
    case MLUCL_DTYPE_HALF:
    case MLUCL_DTYPE_BFLOAT16:
      return MPI_UINT16_T;
    case MLUCL_DTYPE_DOUBLE:
      return MPI_DOUBLE;
    case MLUCL_DTYPE_INT8:
      return MPI_INT8_T;
    case MLUCL_DTYPE_INT16:
      return MPI_INT16_T;
    case MLUCL_DTYPE_INT32:
      return MPI_INT32_T;
    case MLUCL_DTYPE_INT64:
      return MPI_INT64_T;
    case MLUCL_DTYPE_UINT8:
    case MLUCL_DTYPE_BOOL:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(mluclReduceOp_t op) {
  const int index = op == MLUCL_AVG ? 0 : static_cast<int>(op);
  switch (index) {
    case MLUCL_PROD:
      return MPI_PROD;
    case MLUCL_MAX:
      return MPI_MAX;
    case MLUCL_MIN:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(std::max(0, length)));
}

}  // namespace mlucl
