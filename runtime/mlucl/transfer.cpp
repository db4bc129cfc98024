#include "transfer.h"

#include "communicator.h"
#include "errors.h"
#include "faults.h"

#include "../common/raw_enum.h"

#include <mlu/dtype.h>

#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace mlucl {
namespace {

static_assert(static_cast<int>(MLUCL_DTYPE_FLOAT) == MLUOP_DTYPE_FLOAT &&
                  static_cast<int>(MLUCL_DTYPE_HALF) == MLUOP_DTYPE_HALF &&
                  static_cast<int>(MLUCL_DTYPE_BFLOAT16) == MLUOP_DTYPE_BFLOAT16 &&
                  static_cast<int>(MLUCL_DTYPE_DOUBLE) == MLUOP_DTYPE_DOUBLE &&
                  static_cast<int>(MLUCL_DTYPE_INT8) == MLUOP_DTYPE_INT8 &&
                  static_cast<int>(MLUCL_DTYPE_BOOL) == MLUOP_DTYPE_BOOL,
              "mluclDataType_t has the kernel library's values");

constexpr int kHeaderTag = 1;                            // send/recv: the pair's descriptors
constexpr int kDataTag = 2;                              // send/recv: the data
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;  // elements per MPI call (its counts are int)

mluopDataType_t asOp(mluclDataType_t t) { return static_cast<mluopDataType_t>(static_cast<int>(t)); }
std::string_view dtypeText(mluclDataType_t t) { return mlu::dtypeName(asOp(t)); }

const char* opName(mluclReduceOp_t op) {
  switch (op) {
    case MLUCL_SUM:
      return "sum";
    case MLUCL_PROD:
      return "prod";
    case MLUCL_MAX:
      return "max";
    case MLUCL_MIN:
      return "min";
    case MLUCL_AVG:
      return "avg";
  }
  return "?";
}

bool isReduction(Kind k) { return k == Kind::kAllReduce || k == Kind::kReduceScatter; }
bool isPointToPoint(Kind k) { return k == Kind::kSend || k == Kind::kRecv; }

// What one rank was asked to do, exchanged before any data moves. Fields that do not apply are 0.
struct Descriptor {
  std::int64_t seq = 0, kind = 0, dtype = 0, count = 0, op = 0, root = 0;
  bool operator==(const Descriptor&) const = default;
};

std::string describe(const Descriptor& d) {
  const auto kind = static_cast<Kind>(d.kind);
  const auto dtype = static_cast<mluclDataType_t>(d.dtype);
  const std::string what = fmt::format("{} #{}", kindName(kind), d.seq);
  switch (kind) {
    case Kind::kAllReduce:
    case Kind::kReduceScatter:
      return fmt::format("{} {} {} x {}", what, opName(static_cast<mluclReduceOp_t>(d.op)), dtypeText(dtype),
                         d.count);
    case Kind::kBroadcast:
      return fmt::format("{} from rank {} {} x {}", what, d.root, dtypeText(dtype), d.count);
    case Kind::kAllGather:
      return fmt::format("{} {} x {} per rank", what, dtypeText(dtype), d.count);
    case Kind::kSend:
      return fmt::format("{} to rank {} {} x {}", what, d.root, dtypeText(dtype), d.count);
    case Kind::kRecv:
      return fmt::format("{} from rank {} {} x {}", what, d.root, dtypeText(dtype), d.count);
    case Kind::kBarrier:
      return what;
  }
  return what;
}

// The task a transfer is on its queue. Counted in flight on its communicator from creation to
// destruction (after it ran, or when the launch failed).
struct Transfer {
  Transfer(std::shared_ptr<Communicator> c, const Request& r, const Descriptor& d, const CallFaults& f)
      : comm(std::move(c)), request(r), desc(d), faults(f) {
    comm->transferQueued();
  }
  ~Transfer() { comm->transferDone(); }
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  std::shared_ptr<Communicator> comm;
  Request request;
  Descriptor desc;
  CallFaults faults;
};

struct TransferError {
  mluclStatus_t status;
  std::string message;
};

std::string where(const Transfer& t) {
  return fmt::format("mlucl {} (communicator {}, rank {} of {})", describe(t.desc), t.comm->id(),
                     t.comm->rank(), t.comm->size());
}

std::optional<TransferError> mpiFailed(const Transfer& t, const char* call, int code) {
  if (code == MPI_SUCCESS) return std::nullopt;
  return TransferError{MLUCL_ERROR_SYSTEM,
                       fmt::format("{}: {} failed: {}", where(t), call, mpiErrorText(code))};
}

// The ranks of a collective agree on what they do, or every rank fails it with the same text.
std::optional<TransferError> agreeCollective(const Transfer& t) {
  Communicator& c = *t.comm;
  std::vector<Descriptor> all(static_cast<std::size_t>(c.size()));
  if (auto e = mpiFailed(t, "MPI_Allgather of the descriptors",
                         MPI_Allgather(&t.desc, sizeof(Descriptor), MPI_BYTE, all.data(), sizeof(Descriptor),
                                       MPI_BYTE, c.mpi())))
    return e;
  if (std::all_of(all.begin(), all.end(), [&](const Descriptor& d) { return d == all[0]; }))
    return std::nullopt;
  // Group the ranks by what they were asked to do, in rank order.
  std::vector<std::pair<Descriptor, std::vector<int>>> groups;
  for (int r = 0; r < c.size(); ++r) {
    const Descriptor& d = all[static_cast<std::size_t>(r)];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == d; });
    if (it == groups.end()) {
      groups.push_back({d, {r}});
    } else {
      it->second.push_back(r);
    }
  }
  std::string text;
  for (const auto& [d, ranks] : groups) {
    text += fmt::format("{}{} {}: {}", text.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks",
                        fmt::join(ranks, ","), describe(d));
  }
  return TransferError{
      MLUCL_ERROR_MISMATCH,
      fmt::format("mlucl: collective #{} of communicator {}: the ranks disagree: {} (this is "
                  "rank {}; no data was moved)",
                  t.desc.seq, c.id(), text, c.rank())};
}

// A send and its recv agree on what they move, or both fail.
std::optional<TransferError> agreePair(const Transfer& t) {
  Communicator& c = *t.comm;
  const int peer = t.request.root;
  Descriptor theirs;
  if (auto e =
          mpiFailed(t, "MPI_Sendrecv of the descriptors",
                    MPI_Sendrecv(&t.desc, sizeof(Descriptor), MPI_BYTE, peer, kHeaderTag, &theirs,
                                 sizeof(Descriptor), MPI_BYTE, peer, kHeaderTag, c.mpi(), MPI_STATUS_IGNORE)))
    return e;
  Descriptor expected = t.desc;
  expected.kind = static_cast<std::int64_t>(t.request.kind == Kind::kSend ? Kind::kRecv : Kind::kSend);
  expected.root = c.rank();
  if (theirs == expected) return std::nullopt;
  return TransferError{MLUCL_ERROR_MISMATCH, fmt::format("{}: rank {} posted {} (no data was moved)",
                                                         where(t), peer, describe(theirs))};
}

template <typename T>
void divideBy(void* buffer, std::size_t count, int n) {
  auto* p = static_cast<T*>(buffer);
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
}

template <bool kBf16>
void divideHalf(void* buffer, std::size_t count, int n) {
  auto* p = static_cast<std::uint16_t*>(buffer);
  for (std::size_t i = 0; i < count; ++i) {
    const float v = (kBf16 ? mlu::bfloat16ToFloat(p[i]) : mlu::halfToFloat(p[i])) / static_cast<float>(n);
    p[i] = kBf16 ? mlu::floatToBfloat16(v) : mlu::floatToHalf(v);
  }
}

// AVG: the sum divided by the number of ranks.
void average(void* buffer, std::size_t count, mluclDataType_t dtype, int n) {
  switch (dtype) {
    case MLUCL_DTYPE_FLOAT:
      return divideBy<float>(buffer, count, n);
    case MLUCL_DTYPE_DOUBLE:
      return divideBy<double>(buffer, count, n);
    case MLUCL_DTYPE_HALF:
      return divideHalf<false>(buffer, count, n);
    case MLUCL_DTYPE_BFLOAT16:
      return divideHalf<true>(buffer, count, n);
    case MLUCL_DTYPE_INT8:
      return divideBy<std::int8_t>(buffer, count, n);
    case MLUCL_DTYPE_INT16:
      return divideBy<std::int16_t>(buffer, count, n);
    case MLUCL_DTYPE_INT32:
      return divideBy<std::int32_t>(buffer, count, n);
    case MLUCL_DTYPE_INT64:
      return divideBy<std::int64_t>(buffer, count, n);
    case MLUCL_DTYPE_UINT8:
      return divideBy<std::uint8_t>(buffer, count, n);
    case MLUCL_DTYPE_BOOL:
      return;  // refused when enqueued
  }
}

// The planted NaN fault: NaN into the selected elements (at least the first) of a floating buffer.
void poison(void* buffer, std::size_t count, mluclDataType_t dtype, double fraction) {
  if (buffer == nullptr || count == 0) return;
  const std::size_t step = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(1.0 / fraction)));
  for (std::size_t i = 0; i < count; i += step) {
    switch (dtype) {
      case MLUCL_DTYPE_FLOAT:
        static_cast<float*>(buffer)[i] = std::numeric_limits<float>::quiet_NaN();
        break;
      case MLUCL_DTYPE_DOUBLE:
        static_cast<double*>(buffer)[i] = std::numeric_limits<double>::quiet_NaN();
        break;
      case MLUCL_DTYPE_HALF:
        static_cast<std::uint16_t*>(buffer)[i] = 0x7e00;
        break;
      case MLUCL_DTYPE_BFLOAT16:
        static_cast<std::uint16_t*>(buffer)[i] = 0x7fc0;
        break;
      default:
        return;  // integers have no NaN
    }
  }
}

bool isHalf(mluclDataType_t t) { return t == MLUCL_DTYPE_HALF || t == MLUCL_DTYPE_BFLOAT16; }

// float16 / bfloat16 reductions run in float32 (MPI has no half types): widened into a buffer of floats,
// reduced by MPI, averaged there, and rounded once into the dtype.
std::vector<float> widen(const void* p, std::size_t count, mluclDataType_t dtype) {
  std::vector<float> out(count);
  const auto* bits = static_cast<const std::uint16_t*>(p);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = dtype == MLUCL_DTYPE_BFLOAT16 ? mlu::bfloat16ToFloat(bits[i]) : mlu::halfToFloat(bits[i]);
  return out;
}

void narrow(const std::vector<float>& values, void* p, mluclDataType_t dtype) {
  auto* bits = static_cast<std::uint16_t*>(p);
  for (std::size_t i = 0; i < values.size(); ++i)
    bits[i] = dtype == MLUCL_DTYPE_BFLOAT16 ? mlu::floatToBfloat16(values[i]) : mlu::floatToHalf(values[i]);
}

std::optional<TransferError> moveData(const Transfer& t) {
  Communicator& c = *t.comm;
  const Request& r = t.request;
  const MPI_Datatype type = mpiType(r.dtype);
  const std::size_t elem = mlu::dtypeSize(asOp(r.dtype));
  const auto* send = static_cast<const std::byte*>(r.send);
  auto* recv = static_cast<std::byte*>(r.recv);
  if (r.count == 0) return std::nullopt;
  switch (r.kind) {
    case Kind::kAllReduce: {
      const MPI_Op op = mpiOp(r.op);
      if (isHalf(r.dtype)) {
        std::vector<float> values = widen(send, r.count, r.dtype);
        for (std::size_t off = 0; off < r.count; off += kMaxChunk) {
          const int n = static_cast<int>(std::min(kMaxChunk, r.count - off));
          if (auto e = mpiFailed(t, "MPI_Allreduce",
                                 MPI_Allreduce(MPI_IN_PLACE, values.data() + off, n, MPI_FLOAT, op, c.mpi())))
            return e;
        }
        if (r.op == MLUCL_AVG) average(values.data(), r.count, MLUCL_DTYPE_FLOAT, c.size());
        narrow(values, recv, r.dtype);
        return std::nullopt;
      }
      for (std::size_t off = 0; off < r.count; off += kMaxChunk) {
        const int n = static_cast<int>(std::min(kMaxChunk, r.count - off));
        const void* in = send == recv ? MPI_IN_PLACE : static_cast<const void*>(send + off * elem);
        if (auto e =
                mpiFailed(t, "MPI_Allreduce", MPI_Allreduce(in, recv + off * elem, n, type, op, c.mpi())))
          return e;
      }
      if (r.op == MLUCL_AVG) average(recv, r.count, r.dtype, c.size());
      return std::nullopt;
    }
    case Kind::kBroadcast: {
      if (c.rank() == r.root && send != recv) std::memcpy(recv, send, r.count * elem);
      for (std::size_t off = 0; off < r.count; off += kMaxChunk) {
        const int n = static_cast<int>(std::min(kMaxChunk, r.count - off));
        if (auto e = mpiFailed(t, "MPI_Bcast", MPI_Bcast(recv + off * elem, n, type, r.root, c.mpi())))
          return e;
      }
      return std::nullopt;
    }
    case Kind::kAllGather: {
      const int n = static_cast<int>(r.count);
      const bool in_place = send == recv + static_cast<std::size_t>(c.rank()) * r.count * elem;
      return mpiFailed(t, "MPI_Allgather",
                       MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, type, recv, n, type, c.mpi()));
    }
    case Kind::kReduceScatter: {
      const int n = static_cast<int>(r.count);
      const std::size_t bytes = r.count * elem;
      const bool in_place = recv == send + static_cast<std::size_t>(c.rank()) * bytes;
      if (isHalf(r.dtype)) {
        const std::vector<float> values = widen(send, r.count * static_cast<std::size_t>(c.size()), r.dtype);
        std::vector<float> mine(r.count);
        if (auto e = mpiFailed(
                t, "MPI_Reduce_scatter_block",
                MPI_Reduce_scatter_block(values.data(), mine.data(), n, MPI_FLOAT, mpiOp(r.op), c.mpi())))
          return e;
        if (r.op == MLUCL_AVG) average(mine.data(), r.count, MLUCL_DTYPE_FLOAT, c.size());
        narrow(mine, recv, r.dtype);
        return std::nullopt;
      }
      std::vector<std::byte> result(in_place ? bytes : 0);
      std::byte* out = in_place ? result.data() : recv;
      if (auto e = mpiFailed(t, "MPI_Reduce_scatter_block",
                             MPI_Reduce_scatter_block(send, out, n, type, mpiOp(r.op), c.mpi())))
        return e;
      if (in_place) std::memcpy(recv, out, bytes);
      if (r.op == MLUCL_AVG) average(recv, r.count, r.dtype, c.size());
      return std::nullopt;
    }
    case Kind::kSend:
      for (std::size_t off = 0; off < r.count; off += kMaxChunk) {
        const int n = static_cast<int>(std::min(kMaxChunk, r.count - off));
        if (auto e =
                mpiFailed(t, "MPI_Send", MPI_Send(send + off * elem, n, type, r.root, kDataTag, c.mpi())))
          return e;
      }
      return std::nullopt;
    case Kind::kRecv:
      for (std::size_t off = 0; off < r.count; off += kMaxChunk) {
        const int n = static_cast<int>(std::min(kMaxChunk, r.count - off));
        if (auto e =
                mpiFailed(t, "MPI_Recv",
                          MPI_Recv(recv + off * elem, n, type, r.root, kDataTag, c.mpi(), MPI_STATUS_IGNORE)))
          return e;
      }
      return std::nullopt;
    case Kind::kBarrier:
      return std::nullopt;  // the descriptors' exchange was the barrier
  }
  return std::nullopt;
}

// The task body, on the queue's worker.
mlurtStatus_t runTransfer(void* args) {
  Transfer& t = *static_cast<Transfer*>(args);
  Communicator& c = *t.comm;
  if (t.faults.nan) {
    const std::size_t n = t.request.kind == Kind::kReduceScatter
                              ? t.request.count * static_cast<std::size_t>(c.size())
                              : t.request.count;
    poison(const_cast<void*>(t.request.send != nullptr ? t.request.send : t.request.recv), n, t.request.dtype,
           t.faults.nan_fraction);
  }
  std::optional<TransferError> error;
  {
    std::lock_guard lock(c.transferMutex());
    if (c.failed()) {
      std::string first;
      c.asyncError(&first);
      mlurtKernelSetErrorMessage(
          fmt::format("{}: not run: the communicator failed earlier: {}", where(t), first).c_str());
      return MLURT_ERROR_LAUNCH_FAILED;
    }
    error = isPointToPoint(t.request.kind) ? agreePair(t) : agreeCollective(t);
    if (!error) error = moveData(t);
  }
  if (!error) return MLURT_SUCCESS;
  c.setFailed(error->status, error->message);
  mlurtKernelSetErrorMessage(error->message.c_str());
  return MLURT_ERROR_LAUNCH_FAILED;
}

void deleteTransfer(void* args) { std::unique_ptr<Transfer> owned(static_cast<Transfer*>(args)); }

// Whether [a, a + an) and [b, b + bn) share a byte.
bool overlap(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

}  // namespace

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce:
      return "allreduce";
    case Kind::kBroadcast:
      return "broadcast";
    case Kind::kAllGather:
      return "allgather";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kSend:
      return "send";
    case Kind::kRecv:
      return "recv";
    case Kind::kBarrier:
      return "barrier";
  }
  return "?";
}

mluclStatus_t enqueueTransfer(const char* function, Request r, mluclComm_t handle, mlurtQueue_t queue) {
  if (handle == nullptr) return fail(MLUCL_ERROR_INVALID_HANDLE, "{}: comm is NULL", function);
  std::shared_ptr<Communicator> comm = lookup(handle);
  if (!comm) return fail(MLUCL_ERROR_INVALID_HANDLE, "{}: unknown or destroyed communicator", function);
  if (comm->failed()) {
    std::string first;
    comm->asyncError(&first);
    return fail(MLUCL_ERROR_COMM_FAILED, "{}: communicator {} failed earlier: {}", function, comm->id(),
                first);
  }
  int raw_dtype = r.dtype_raw;
  const int raw_op = r.op_raw;
  const CallFaults faults = faultsForCall(r.kind, comm->rank(), &r.count, &raw_dtype);

  if (r.kind != Kind::kBarrier && (raw_dtype < MLUCL_DTYPE_FLOAT || raw_dtype > MLUCL_DTYPE_BOOL))
    return fail(MLUCL_ERROR_INVALID_VALUE, "{}: unknown dtype {}", function, raw_dtype);
  if (isReduction(r.kind)) {
    if (raw_op < MLUCL_SUM || raw_op > MLUCL_AVG)
      return fail(MLUCL_ERROR_INVALID_VALUE, "{}: unknown reduction {}", function, raw_op);
    if (raw_dtype == MLUCL_DTYPE_BOOL && raw_op != MLUCL_MAX && raw_op != MLUCL_MIN)
      return fail(MLUCL_ERROR_INVALID_VALUE, "{}: bool reduces only by max (or) and min (and), not {}",
                  function, opName(static_cast<mluclReduceOp_t>(raw_op)));
  }
  // Both known values from here on.
  r.dtype = r.kind == Kind::kBarrier ? MLUCL_DTYPE_FLOAT : static_cast<mluclDataType_t>(raw_dtype);
  r.op = isReduction(r.kind) ? static_cast<mluclReduceOp_t>(raw_op) : MLUCL_SUM;
  const int size = comm->size(), rank = comm->rank();
  if (r.kind == Kind::kBroadcast && (r.root < 0 || r.root >= size))
    return fail(MLUCL_ERROR_INVALID_VALUE, "{}: root {} is not a rank of the {}-rank communicator", function,
                r.root, size);
  if (isPointToPoint(r.kind) && (r.root < 0 || r.root >= size || r.root == rank))
    return fail(MLUCL_ERROR_INVALID_VALUE,
                "{}: peer {} is not another rank of the {}-rank communicator (this is {})", function, r.root,
                size, rank);

  // The queue's device is the communicator's, and so are the buffers.
  int queue_device = -1;
  if (queue == nullptr) {
    if (mlurtGetDevice(&queue_device) != MLURT_SUCCESS)
      return fail(MLUCL_ERROR_RUNTIME, "{}: {}", function, mlurtGetLastErrorMessage());
  } else if (mlurtQueueGetDevice(queue, &queue_device) != MLURT_SUCCESS) {
    return fail(MLUCL_ERROR_RUNTIME, "{}: {}", function, mlurtGetLastErrorMessage());
  }
  if (queue_device != comm->device())
    return fail(MLUCL_ERROR_INVALID_VALUE, "{}: the queue is on device {}, the communicator on device {}",
                function, queue_device, comm->device());

  const std::size_t elem = r.kind == Kind::kBarrier ? 0 : mlu::dtypeSize(asOp(r.dtype));
  std::size_t bytes = 0, all_bytes = 0;  // one rank's share, and all ranks' (allgather, reduce_scatter)
  if (__builtin_mul_overflow(r.count, elem, &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<std::size_t>(size), &all_bytes))
    return fail(MLUCL_ERROR_INVALID_VALUE, "{}: count {} is too large", function, r.count);
  if ((r.kind == Kind::kAllGather || r.kind == Kind::kReduceScatter) &&
      r.count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return fail(MLUCL_ERROR_INVALID_VALUE, "{}: more than 2^31-1 elements per rank is not supported",
                function);
  std::size_t send_bytes = 0, recv_bytes = 0;
  switch (r.kind) {
    case Kind::kAllReduce:
      send_bytes = recv_bytes = bytes;
      break;
    case Kind::kBroadcast:
      send_bytes = rank == r.root ? bytes : 0;
      recv_bytes = bytes;
      break;
    case Kind::kAllGather:
      send_bytes = bytes;
      recv_bytes = all_bytes;
      break;
    case Kind::kReduceScatter:
      send_bytes = all_bytes;
      recv_bytes = bytes;
      break;
    case Kind::kSend:
      send_bytes = bytes;
      break;
    case Kind::kRecv:
      recv_bytes = bytes;
      break;
    case Kind::kBarrier:
      break;
  }
  auto checkBuffer = [&](const char* name, const void* p, std::size_t n) -> mluclStatus_t {
    if (n == 0) return MLUCL_SUCCESS;
    if (p == nullptr) return fail(MLUCL_ERROR_INVALID_VALUE, "{}: {} is NULL", function, name);
    mlurtPointerAttributes_t a{};
    if (mlurtPointerGetAttributes(&a, p) != MLURT_SUCCESS || a.type != MLURT_MEMORY_DEVICE)
      return fail(MLUCL_ERROR_INVALID_VALUE, "{}: {} {} is not device memory", function, name, p);
    if (a.device != comm->device())
      return fail(MLUCL_ERROR_INVALID_VALUE, "{}: {} {} is on device {}, the communicator on device {}",
                  function, name, p, a.device, comm->device());
    const std::size_t offset =
        static_cast<std::size_t>(static_cast<const std::byte*>(p) - static_cast<const std::byte*>(a.base));
    if (offset > a.size || n > a.size - offset)
      return fail(MLUCL_ERROR_INVALID_VALUE,
                  "{}: {} {} holds {} bytes from there (allocation of {} bytes at {}), the call needs {}",
                  function, name, p, a.size - std::min(offset, a.size), a.size, a.base, n);
    return MLUCL_SUCCESS;
  };
  if (mluclStatus_t s = checkBuffer("sendbuf", r.send, send_bytes); s != MLUCL_SUCCESS) return s;
  if (mluclStatus_t s = checkBuffer("recvbuf", r.recv, recv_bytes); s != MLUCL_SUCCESS) return s;
  const auto* send = static_cast<const std::byte*>(r.send);
  const auto* recv = static_cast<const std::byte*>(r.recv);
  const bool in_place =
      (r.kind == Kind::kAllReduce && send == recv) || (r.kind == Kind::kBroadcast && send == recv) ||
      (r.kind == Kind::kAllGather && send == recv + static_cast<std::size_t>(rank) * bytes) ||
      (r.kind == Kind::kReduceScatter && recv == send + static_cast<std::size_t>(rank) * bytes);
  if (!in_place && overlap(r.send, send_bytes, r.recv, recv_bytes))
    return fail(MLUCL_ERROR_INVALID_VALUE,
                "{}: sendbuf and recvbuf overlap (only the in-place form is allowed)", function);

  Descriptor d;
  d.kind = static_cast<std::int64_t>(r.kind);
  if (r.kind != Kind::kBarrier) {
    d.dtype = r.dtype;
    d.count = static_cast<std::int64_t>(r.count);
  }
  if (isReduction(r.kind)) d.op = r.op;
  if (r.kind == Kind::kBroadcast || isPointToPoint(r.kind)) d.root = r.root;
  d.seq = static_cast<std::int64_t>(r.kind == Kind::kSend   ? comm->nextSend(r.root)
                                    : r.kind == Kind::kRecv ? comm->nextRecv(r.root)
                                                            : comm->nextCollective());
  if (faults.skip) return MLUCL_SUCCESS;  // the planted skip: the sequence number is gone, nothing runs
  if (faults.delay_ms > 0) {
    // The planted slow rank: it reaches the collective late (its host call returns late; the other ranks
    // wait for it in the descriptors' exchange).
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(faults.delay_ms));
  }
  if (faults.hang) {
    // The planted hang: the rank never reaches the collective (its host call never returns, as if its own
    // code were stuck before it); the other ranks wait for it in the descriptors' exchange.
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }

  auto transfer = std::make_unique<Transfer>(comm, r, d, faults);
  const std::string name = fmt::format("mlucl_{}", kindName(r.kind));
  if (mlurtLaunchKernel(queue, name.c_str(), runTransfer, transfer.release(), deleteTransfer, nullptr) !=
      MLURT_SUCCESS)
    return fail(MLUCL_ERROR_RUNTIME, "{}: {}", function, mlurtGetLastErrorMessage());
  return MLUCL_SUCCESS;
}

}  // namespace mlucl
