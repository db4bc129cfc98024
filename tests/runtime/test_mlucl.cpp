// libmlucl under mpirun: every collective, dtype and reduction against values worked out here in float64,
// the queue ordering, the host-side checks, and ranks that disagree (no byte moved, every rank told).
// Run by CTest as `mpirun -np 2` and `-np 4` (tests/runtime/CMakeLists.txt): every rank runs every test in
// the same order, so the collectives inside them match up.
#include <mlu/dtype.h>
#include <mlu/mlucl.h>
#include <mlu/mlurt.h>

#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_rank = 0, g_size = 1;

#define EXPECT_CL(call) EXPECT_EQ((call), MLUCL_SUCCESS) << #call << ": " << mluclGetLastErrorMessage()
#define ASSERT_CL(call) ASSERT_EQ((call), MLUCL_SUCCESS) << #call << ": " << mluclGetLastErrorMessage()
#define ASSERT_RT(call) ASSERT_EQ((call), MLURT_SUCCESS) << #call << ": " << mlurtGetLastErrorMessage()

// Device memory of n bytes, freed at scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(mlurtMalloc(&ptr_, bytes), MLURT_SUCCESS) << mlurtGetLastErrorMessage();
  }
  ~DeviceBuffer() { mlurtFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  std::byte* at(std::size_t offset) const { return static_cast<std::byte*>(ptr_) + offset; }
  void upload(const std::vector<std::byte>& host, std::size_t offset = 0) const {
    EXPECT_EQ(mlurtMemcpy(at(offset), host.data(), host.size(), MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
  }
  std::vector<std::byte> download() const {
    std::vector<std::byte> host(bytes_);
    EXPECT_EQ(mlurtMemcpy(host.data(), ptr_, bytes_, MLURT_MEMCPY_DEVICE_TO_HOST), MLURT_SUCCESS);
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

mluopDataType_t asOp(mluclDataType_t t) { return static_cast<mluopDataType_t>(static_cast<int>(t)); }
std::size_t sizeOf(mluclDataType_t t) { return mlu::dtypeSize(asOp(t)); }

// One element of a dtype from a float64 value (exactly representable in the tests' choices) and back.
void encode(mluclDataType_t t, double v, std::byte* out) {
  auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
  switch (t) {
    case MLUCL_DTYPE_FLOAT:
      return put(static_cast<float>(v));
    case MLUCL_DTYPE_HALF:
      return put(mlu::floatToHalf(static_cast<float>(v)));
    case MLUCL_DTYPE_BFLOAT16:
      return put(mlu::floatToBfloat16(static_cast<float>(v)));
    case MLUCL_DTYPE_DOUBLE:
      return put(v);
    case MLUCL_DTYPE_INT8:
      return put(static_cast<std::int8_t>(v));
    case MLUCL_DTYPE_INT16:
      return put(static_cast<std::int16_t>(v));
    case MLUCL_DTYPE_INT32:
      return put(static_cast<std::int32_t>(v));
    case MLUCL_DTYPE_INT64:
      return put(static_cast<std::int64_t>(v));
    case MLUCL_DTYPE_UINT8:
    case MLUCL_DTYPE_BOOL:
      return put(static_cast<std::uint8_t>(v));
  }
}

double decode(mluclDataType_t t, const std::byte* in) {
  auto get = [&](auto x) {
    std::memcpy(&x, in, sizeof x);
    return x;
  };
  switch (t) {
    case MLUCL_DTYPE_FLOAT:
      return get(float{});
    case MLUCL_DTYPE_HALF:
      return mlu::halfToFloat(get(std::uint16_t{}));
    case MLUCL_DTYPE_BFLOAT16:
      return mlu::bfloat16ToFloat(get(std::uint16_t{}));
    case MLUCL_DTYPE_DOUBLE:
      return get(double{});
    case MLUCL_DTYPE_INT8:
      return get(std::int8_t{});
    case MLUCL_DTYPE_INT16:
      return get(std::int16_t{});
    case MLUCL_DTYPE_INT32:
      return get(std::int32_t{});
    case MLUCL_DTYPE_INT64:
      return static_cast<double>(get(std::int64_t{}));
    case MLUCL_DTYPE_UINT8:
    case MLUCL_DTYPE_BOOL:
      return get(std::uint8_t{});
  }
  return NAN;
}

bool isFloat(mluclDataType_t t) {
  return t == MLUCL_DTYPE_FLOAT || t == MLUCL_DTYPE_HALF || t == MLUCL_DTYPE_BFLOAT16 ||
         t == MLUCL_DTYPE_DOUBLE;
}

// The value rank r contributes at element i for a reduction: small, exactly representable in every dtype,
// with exact sums and products (prod: 1 or 2; bool: one bit of i).
double input(mluclDataType_t t, mluclReduceOp_t op, int r, std::size_t i) {
  if (t == MLUCL_DTYPE_BOOL) return static_cast<double>((i >> r) & 1u);
  if (op == MLUCL_PROD) return 1.0 + static_cast<double>((static_cast<std::size_t>(r) + i) % 2);
  if (isFloat(t)) return (r + 1) * 0.5 + static_cast<double>(i % 7);
  const double v = (r + 1) + static_cast<double>(i % 5);
  return t == MLUCL_DTYPE_UINT8 ? v : v - 3;
}

double reduced(mluclDataType_t t, mluclReduceOp_t op, std::size_t i) {
  double acc = input(t, op, 0, i);
  for (int r = 1; r < g_size; ++r) {
    const double v = input(t, op, r, i);
    switch (op) {
      case MLUCL_SUM:
      case MLUCL_AVG:
        acc += v;
        break;
      case MLUCL_PROD:
        acc *= v;
        break;
      case MLUCL_MAX:
        acc = std::max(acc, v);
        break;
      case MLUCL_MIN:
        acc = std::min(acc, v);
        break;
    }
  }
  if (op == MLUCL_AVG) acc = isFloat(t) ? acc / g_size : std::trunc(acc / g_size);
  // Rounded into the dtype, as the library rounds the (exact) sum.
  std::byte tmp[8];
  encode(t, acc, tmp);
  return decode(t, tmp);
}

std::vector<std::byte> hostValues(mluclDataType_t t, std::size_t n, auto&& value) {
  std::vector<std::byte> host(n * sizeOf(t));
  for (std::size_t i = 0; i < n; ++i) encode(t, value(i), host.data() + i * sizeOf(t));
  return host;
}

class Mlucl : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CL(mluclCommInitFromMpi(&comm_, nullptr));
    ASSERT_RT(mlurtQueueCreate(&queue_));
  }
  void TearDown() override {
    mlurtQueueDestroy(queue_);
    EXPECT_CL(mluclCommDestroy(comm_));
  }
  mluclComm_t comm_ = nullptr;
  mlurtQueue_t queue_ = nullptr;
};

constexpr mluclDataType_t kAllDtypes[] = {
    MLUCL_DTYPE_FLOAT, MLUCL_DTYPE_HALF,  MLUCL_DTYPE_BFLOAT16, MLUCL_DTYPE_DOUBLE, MLUCL_DTYPE_INT8,
    MLUCL_DTYPE_INT16, MLUCL_DTYPE_INT32, MLUCL_DTYPE_INT64,    MLUCL_DTYPE_UINT8,  MLUCL_DTYPE_BOOL};
constexpr mluclReduceOp_t kAllOps[] = {MLUCL_SUM, MLUCL_PROD, MLUCL_MAX, MLUCL_MIN, MLUCL_AVG};

TEST_F(Mlucl, CommunicatorKnowsItsRanks) {
  int count = 0, rank = -1, device = -1;
  EXPECT_CL(mluclCommCount(comm_, &count));
  EXPECT_CL(mluclCommUserRank(comm_, &rank));
  EXPECT_CL(mluclCommDevice(comm_, &device));
  EXPECT_EQ(count, g_size);
  EXPECT_EQ(rank, g_rank);
  EXPECT_EQ(device, 0);
}

TEST_F(Mlucl, AllReduceEveryDtypeAndReduction) {
  constexpr std::size_t n = 1000;
  for (mluclDataType_t t : kAllDtypes) {
    for (mluclReduceOp_t op : kAllOps) {
      if (t == MLUCL_DTYPE_BOOL && op != MLUCL_MAX && op != MLUCL_MIN) continue;
      SCOPED_TRACE(testing::Message() << "dtype " << mlu::dtypeName(asOp(t)) << " op " << op);
      DeviceBuffer send(n * sizeOf(t)), recv(n * sizeOf(t)), inplace(n * sizeOf(t));
      const auto mine = hostValues(t, n, [&](std::size_t i) { return input(t, op, g_rank, i); });
      send.upload(mine);
      inplace.upload(mine);
      EXPECT_CL(mluclAllReduce(send.get(), recv.get(), n, t, op, comm_, queue_));
      EXPECT_CL(mluclAllReduce(inplace.get(), inplace.get(), n, t, op, comm_, queue_));
      ASSERT_RT(mlurtQueueSync(queue_));
      const auto got = recv.download(), got_inplace = inplace.download();
      int wrong = 0;
      for (std::size_t i = 0; i < n && wrong < 5; ++i) {
        const double want = reduced(t, op, i);
        const double a = decode(t, got.data() + i * sizeOf(t)),
                     b = decode(t, got_inplace.data() + i * sizeOf(t));
        if (a != want || b != want) {
          ++wrong;
          ADD_FAILURE() << "element " << i << ": " << a << " / in place " << b << ", expected " << want;
        }
      }
      EXPECT_EQ(send.download(), mine) << "the send buffer changed";
    }
  }
}

TEST_F(Mlucl, LargeAllReduceSumsEveryElement) {
  constexpr std::size_t n = (std::size_t{16} << 20) / 4 + 3;  // 16 MiB of float32, and a ragged end
  DeviceBuffer buf(n * 4);
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(g_rank + 1) * static_cast<float>(i % 1024);
  ASSERT_RT(mlurtMemcpy(buf.get(), host.data(), n * 4, MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_CL(mluclAllReduce(buf.get(), buf.get(), n, MLUCL_DTYPE_FLOAT, MLUCL_AVG, comm_, queue_));
  ASSERT_RT(mlurtQueueSync(queue_));
  ASSERT_RT(mlurtMemcpy(host.data(), buf.get(), n * 4, MLURT_MEMCPY_DEVICE_TO_HOST));
  const double ranks_mean = (g_size + 1) / 2.0;  // mean of 1..size
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += host[i] != static_cast<float>(ranks_mean * static_cast<double>(i % 1024));
  EXPECT_EQ(wrong, 0u);
}

TEST_F(Mlucl, BroadcastFromEveryRoot) {
  constexpr std::size_t n = 333;
  for (int root = 0; root < g_size; ++root) {
    DeviceBuffer send(n * 4), recv(n * 4);
    const auto mine = hostValues(MLUCL_DTYPE_INT32, n, [&](std::size_t i) { return 1000.0 * g_rank + i; });
    send.upload(mine);
    recv.upload(hostValues(MLUCL_DTYPE_INT32, n, [](std::size_t) { return -1.0; }));
    EXPECT_CL(mluclBroadcast(send.get(), recv.get(), n, MLUCL_DTYPE_INT32, root, comm_, queue_));
    ASSERT_RT(mlurtQueueSync(queue_));
    EXPECT_EQ(recv.download(),
              hostValues(MLUCL_DTYPE_INT32, n, [&](std::size_t i) { return 1000.0 * root + i; }))
        << "root " << root;
  }
}

TEST_F(Mlucl, AllGatherOutOfPlaceAndInPlace) {
  constexpr std::size_t n = 17;
  const auto value = [](int r, std::size_t i) { return 100.0 * r + static_cast<double>(i); };
  const auto all = hostValues(MLUCL_DTYPE_HALF, n * static_cast<std::size_t>(g_size),
                              [&](std::size_t k) { return value(static_cast<int>(k / n), k % n); });
  DeviceBuffer send(n * 2), recv(all.size()), inplace(all.size());
  const auto mine = hostValues(MLUCL_DTYPE_HALF, n, [&](std::size_t i) { return value(g_rank, i); });
  send.upload(mine);
  inplace.upload(mine, static_cast<std::size_t>(g_rank) * n * 2);
  EXPECT_CL(mluclAllGather(send.get(), recv.get(), n, MLUCL_DTYPE_HALF, comm_, queue_));
  EXPECT_CL(mluclAllGather(inplace.at(static_cast<std::size_t>(g_rank) * n * 2), inplace.get(), n,
                           MLUCL_DTYPE_HALF, comm_, queue_));
  ASSERT_RT(mlurtQueueSync(queue_));
  EXPECT_EQ(recv.download(), all);
  EXPECT_EQ(inplace.download(), all);
}

TEST_F(Mlucl, ReduceScatterOutOfPlaceAndInPlace) {
  constexpr std::size_t n = 40;  // per rank
  const std::size_t total = n * static_cast<std::size_t>(g_size);
  for (mluclReduceOp_t op : {MLUCL_SUM, MLUCL_MAX, MLUCL_AVG}) {
    const mluclDataType_t t = MLUCL_DTYPE_BFLOAT16;
    const auto mine = hostValues(t, total, [&](std::size_t k) { return input(t, op, g_rank, k); });
    const auto want = hostValues(
        t, n, [&](std::size_t i) { return reduced(t, op, static_cast<std::size_t>(g_rank) * n + i); });
    DeviceBuffer send(total * 2), recv(n * 2), inplace(total * 2);
    send.upload(mine);
    inplace.upload(mine);
    EXPECT_CL(mluclReduceScatter(send.get(), recv.get(), n, t, op, comm_, queue_));
    EXPECT_CL(mluclReduceScatter(inplace.get(), inplace.at(static_cast<std::size_t>(g_rank) * n * 2), n, t,
                                 op, comm_, queue_));
    ASSERT_RT(mlurtQueueSync(queue_));
    EXPECT_EQ(recv.download(), want) << "op " << op;
    const auto got = inplace.download();
    EXPECT_EQ(std::vector<std::byte>(got.begin() + static_cast<std::ptrdiff_t>(g_rank * n * 2),
                                     got.begin() + static_cast<std::ptrdiff_t>((g_rank + 1) * n * 2)),
              want)
        << "in place, op " << op;
  }
}

TEST_F(Mlucl, SendRecvAroundTheRing) {
  if (g_size < 2) GTEST_SKIP() << "needs two ranks";
  constexpr std::size_t n = 5000;
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  DeviceBuffer out(n * 8), in(n * 8);
  out.upload(
      hostValues(MLUCL_DTYPE_INT64, n, [&](std::size_t i) { return g_rank * 1e6 + static_cast<double>(i); }));
  // Even ranks send first, odd ranks receive first: the rendezvous pairs up.
  if (g_rank % 2 == 0) {
    EXPECT_CL(mluclSend(out.get(), n, MLUCL_DTYPE_INT64, next, comm_, queue_));
    EXPECT_CL(mluclRecv(in.get(), n, MLUCL_DTYPE_INT64, prev, comm_, queue_));
  } else {
    EXPECT_CL(mluclRecv(in.get(), n, MLUCL_DTYPE_INT64, prev, comm_, queue_));
    EXPECT_CL(mluclSend(out.get(), n, MLUCL_DTYPE_INT64, next, comm_, queue_));
  }
  ASSERT_RT(mlurtQueueSync(queue_));
  EXPECT_EQ(in.download(), hostValues(MLUCL_DTYPE_INT64, n,
                                      [&](std::size_t i) { return prev * 1e6 + static_cast<double>(i); }));
}

TEST_F(Mlucl, RunsInOrderWithTheQueuesOtherWork) {
  // A memset enqueued before the all-reduce is what it reduces; a notifier after it completes after it;
  // the host call returns before the transfer ran (the queue is held by a host function until then).
  constexpr std::size_t n = 256;
  DeviceBuffer buf(n * 4);
  std::atomic<bool> release{false};
  ASSERT_RT(mlurtLaunchHostFunc(
      queue_,
      [](void* p) {
        while (!static_cast<std::atomic<bool>*>(p)->load()) std::this_thread::yield();
      },
      &release));
  ASSERT_RT(mlurtMemsetAsync(buf.get(), 0x01, n * 4, queue_));  // each int32 = 0x01010101
  EXPECT_CL(mluclAllReduce(buf.get(), buf.get(), n, MLUCL_DTYPE_INT32, MLUCL_SUM, comm_, queue_));
  mlurtNotifier_t done = nullptr;
  ASSERT_RT(mlurtNotifierCreate(&done, MLURT_NOTIFIER_DEFAULT));
  ASSERT_RT(mlurtPlaceNotifier(done, queue_));
  EXPECT_EQ(mlurtNotifierQuery(done), MLURT_ERROR_NOT_READY) << "the host call waited for the transfer";
  release = true;
  ASSERT_RT(mlurtNotifierSync(done));
  std::vector<std::int32_t> host(n);
  ASSERT_RT(mlurtMemcpy(host.data(), buf.get(), n * 4, MLURT_MEMCPY_DEVICE_TO_HOST));
  for (std::int32_t v : host) ASSERT_EQ(v, 0x01010101 * g_size);
  mlurtNotifierDestroy(done);
}

TEST_F(Mlucl, BarrierWaitsForEveryRank) {
  // Rank 0 arrives late; nobody's barrier completes before rank 0 has stamped its arrival time.
  if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double arrived = MPI_Wtime();
  EXPECT_CL(mluclBarrier(comm_, queue_));
  ASSERT_RT(mlurtQueueSync(queue_));
  const double left = MPI_Wtime();
  double late = 0;
  MPI_Allreduce(&arrived, &late, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_GE(left, late);
}

TEST_F(Mlucl, HostChecksRefuseBadArguments) {
  DeviceBuffer buf(64);
  std::vector<float> host(16);
  EXPECT_EQ(mluclAllReduce(buf.get(), buf.get(), 16, MLUCL_DTYPE_FLOAT, MLUCL_SUM, nullptr, queue_),
            MLUCL_ERROR_INVALID_HANDLE);
  EXPECT_EQ(mluclAllReduce(buf.get(), buf.get(), 17, MLUCL_DTYPE_FLOAT, MLUCL_SUM, comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(mluclGetLastErrorMessage()).find("holds 64 bytes"), std::string::npos)
      << mluclGetLastErrorMessage();
  EXPECT_EQ(mluclAllReduce(host.data(), host.data(), 16, MLUCL_DTYPE_FLOAT, MLUCL_SUM, comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(mluclGetLastErrorMessage()).find("not device memory"), std::string::npos);
  EXPECT_EQ(
      mluclAllReduce(buf.get(), buf.get(), 16, static_cast<mluclDataType_t>(42), MLUCL_SUM, comm_, queue_),
      MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclAllReduce(buf.get(), buf.get(), 16, MLUCL_DTYPE_FLOAT, static_cast<mluclReduceOp_t>(9),
                           comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclAllReduce(buf.get(), buf.get(), 16, MLUCL_DTYPE_BOOL, MLUCL_SUM, comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclAllReduce(buf.get(), buf.at(4), 8, MLUCL_DTYPE_FLOAT, MLUCL_SUM, comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(mluclGetLastErrorMessage()).find("overlap"), std::string::npos);
  EXPECT_EQ(mluclBroadcast(buf.get(), buf.get(), 4, MLUCL_DTYPE_FLOAT, g_size, comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclSend(buf.get(), 4, MLUCL_DTYPE_FLOAT, g_rank, comm_, queue_), MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclAllGather(buf.get(), buf.get(), SIZE_MAX / 2, MLUCL_DTYPE_FLOAT, comm_, queue_),
            MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclGetLastError(), MLUCL_ERROR_INVALID_VALUE);
  EXPECT_EQ(mluclGetLastError(), MLUCL_SUCCESS);
  // Nothing was enqueued: the communicator still works.
  EXPECT_CL(mluclBarrier(comm_, queue_));
  EXPECT_EQ(mlurtQueueSync(queue_), MLURT_SUCCESS);
}

TEST_F(Mlucl, RanksThatDisagreeMoveNothingAndAllFail) {
  if (g_size < 2) GTEST_SKIP() << "needs two ranks";
  // The last rank asks for more elements than the others (its buffer holds them): MPI alone would write
  // past the others' buffers. Every rank fails the collective, names the odd rank, and no byte changes.
  constexpr std::size_t n = 64;
  const bool odd = g_rank == g_size - 1;
  DeviceBuffer buf(2 * n * 4);
  const auto before =
      hostValues(MLUCL_DTYPE_FLOAT, 2 * n, [](std::size_t i) { return static_cast<double>(i); });
  buf.upload(before);
  EXPECT_CL(
      mluclAllReduce(buf.get(), buf.get(), odd ? 2 * n : n, MLUCL_DTYPE_FLOAT, MLUCL_SUM, comm_, queue_));
  EXPECT_EQ(mlurtQueueSync(queue_), MLURT_ERROR_LAUNCH_FAILED);
  const std::string message = mlurtGetLastErrorMessage();
  EXPECT_NE(message.find("the ranks disagree"), std::string::npos) << message;
  EXPECT_NE(message.find("rank " + std::to_string(g_size - 1) + ": allreduce #1 sum float32 x 128"),
            std::string::npos)
      << message;
  EXPECT_EQ(buf.download(), before);
  mluclStatus_t async = MLUCL_SUCCESS;
  const char* text = nullptr;
  EXPECT_CL(mluclCommGetAsyncError(comm_, &async, &text));
  EXPECT_EQ(async, MLUCL_ERROR_MISMATCH);
  EXPECT_NE(message.find(text), std::string::npos)
      << "the queue's error carries the communicator's: " << text;
  // The communicator is unusable from then on: later calls fail at once, without MPI.
  EXPECT_EQ(mluclBarrier(comm_, queue_), MLUCL_ERROR_COMM_FAILED);
}

TEST_F(Mlucl, SendRecvThatDisagreeFailBothSides) {
  if (g_size < 2) GTEST_SKIP() << "needs two ranks";
  if (g_rank > 1) return;  // ranks 0 and 1 only
  DeviceBuffer buf(1024);
  if (g_rank == 0) {
    EXPECT_CL(mluclSend(buf.get(), 100, MLUCL_DTYPE_FLOAT, 1, comm_, queue_));
  } else {
    EXPECT_CL(mluclRecv(buf.get(), 100, MLUCL_DTYPE_INT32, 0, comm_, queue_));
  }
  EXPECT_EQ(mlurtQueueSync(queue_), MLURT_ERROR_LAUNCH_FAILED);
  EXPECT_NE(std::string(mlurtGetLastErrorMessage())
                .find(g_rank == 0 ? "posted recv #1 from rank 0 int32 x 100"
                                  : "posted send #1 to rank 1 float32 x 100"),
            std::string::npos)
      << mlurtGetLastErrorMessage();
}

TEST(MluclInit, FromAUniqueIdSplitsTheJob) {
  // Two groups by rank parity, each with an id rank 0 of the group made (handed over through MPI here).
  const int group = g_rank % 2, group_rank = g_rank / 2, group_size = (g_size - group + 1) / 2;
  mluclUniqueId id{};
  if (g_rank < 2) {
    ASSERT_CL(mluclGetUniqueId(&id));
  }
  MPI_Comm parity;
  MPI_Comm_split(MPI_COMM_WORLD, group, g_rank, &parity);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, parity);
  MPI_Comm_free(&parity);
  mluclComm_t comm = nullptr;
  ASSERT_CL(mluclCommInitRank(&comm, group_size, id, group_rank));
  int count = 0, rank = -1;
  EXPECT_CL(mluclCommCount(comm, &count));
  EXPECT_CL(mluclCommUserRank(comm, &rank));
  EXPECT_EQ(count, group_size);
  EXPECT_EQ(rank, group_rank);
  DeviceBuffer buf(4);
  std::int32_t v = g_rank;
  ASSERT_RT(mlurtMemcpy(buf.get(), &v, 4, MLURT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_CL(mluclAllReduce(buf.get(), buf.get(), 1, MLUCL_DTYPE_INT32, MLUCL_SUM, comm, nullptr));
  ASSERT_RT(mlurtDeviceSynchronize());
  ASSERT_RT(mlurtMemcpy(&v, buf.get(), 4, MLURT_MEMCPY_DEVICE_TO_HOST));
  int want = 0;
  for (int r = group; r < g_size; r += 2) want += r;
  EXPECT_EQ(v, want);
  EXPECT_CL(mluclCommDestroy(comm));
  EXPECT_EQ(mluclCommDestroy(comm), MLUCL_ERROR_INVALID_HANDLE);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  // Every rank's verdict: the job fails when any rank failed.
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
