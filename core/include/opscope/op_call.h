// op_call.h — what the hook layer hands to the tools: one OpCall per op call of the kernel library, one
// RuntimeCall per wrapped runtime call.
#pragma once

#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <mlu/op_args.h>
#include <opscope/framework_site.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace opscope {

struct OpCall {
  mlu::OpId op = mlu::OpId::kCount;
  std::string_view name;         // "conv2d_forward"
  std::string_view symbol;       // "mluopConvolutionForward"
  std::uint64_t seq = 0;         // process-wide op call number, from 1, in call order
  std::uint32_t thread = 0;      // small per-process thread number, 0 = the first thread that called
  int device = 0;                // the handle's device
  mlurtQueue_t queue = nullptr;  // the handle's queue
  std::uint64_t queue_id = 0;    // mlurtQueueGetId of the queue
  mluopHandle_t handle = nullptr;
  // The program's framework ops around the call, outermost first ("aten::conv2d > aten::convolution"), as
  // the program declared them with opscope.h's opscope_framework_op_push/pop (torch_mlu does, for every
  // PyTorch op and autograd node); empty when it declares none. Valid during the call.
  std::string_view framework_op;
  // The outermost of them ("aten::conv2d"), interned by the hook (valid to the end of the process).
  std::string_view framework_outer;
  // Where in the program the call was made (module, source line); null when the program declares none.
  const FrameworkSite* site = nullptr;
  // The label of the program's region the call was made in (opscope.h's opscope_region_begin: "compare#1"),
  // interned by the hook; empty outside every region.
  std::string_view region;
  void* args = nullptr;  // the op's mlu::<op>_args, filled from the C arguments
  bool args_ok = false;  // false when a descriptor could not be read: tools skip the call
  // Whether the op ran on the CPU reference instead of the device: forced (OP_FALLBACK_LIST, decided before
  // the tools' before()) or automatic (the device answered NOT_SUPPORTED; known in after()).
  enum class Fallback : std::uint8_t { kNone, kForced, kAutomatic } fallback = Fallback::kNone;
  mluopStatus_t status = MLUOP_STATUS_SUCCESS;  // after the real call
  std::int64_t hook_start_ns = 0;               // CLOCK_MONOTONIC when the hook took the call (before tools)
  std::int64_t host_start_ns = 0;               // CLOCK_MONOTONIC around the real call
  std::int64_t host_end_ns = 0;
  // Set by a tool's before() (the profiler: to seq): the real call runs with the thread's correlation id
  // set to it, so the device work it enqueues is tagged; enqueued is then the number of tasks it enqueued
  // (0 for a fallback, a refused call, or an op with nothing to do).
  std::uint64_t correlation = 0;
  std::uint64_t enqueued = 0;
  // toolBit(id) of each tool that takes this call (its wants() said yes), set by the hook before the first
  // before().
  std::uint32_t tools = 0;

  // f(mlu::<op>_args&) with the op's own argument struct.
  template <typename F>
  decltype(auto) withArgs(F&& f) const {
    return mlu::withOp(op, [&]<typename Args>() -> decltype(auto) { return f(*static_cast<Args*>(args)); });
  }
};

enum class RuntimeCallKind : std::uint8_t {
  kMalloc,
  kFree,
  kHostMalloc,
  kHostFree,
  kMemcpy,
  kMemcpyAsync,
  kMemset,
  kMemsetAsync,
  kQueueCreate,
  kQueueDestroy,
  kQueueSync,
  kQueueQuery,
  kQueueWaitNotifier,
  kLaunchHostFunc,
  kNotifierCreate,
  kNotifierDestroy,
  kPlaceNotifier,
  kNotifierQuery,
  kNotifierSync,
  kNotifierElapsedTime,
  kDeviceSynchronize,
  kCollective,   // a libmlucl transfer (RuntimeCall::collective says which)
  kCommInit,     // mluclCommInitRank / mluclCommInitFromMpi
  kCommDestroy,  // mluclCommDestroy
  // mlurtSetActivityCallback (activity_callback, and ptr: its user data): the profiler keeps the runtime's
  // one slot while it runs and passes every record on to the program's callback.
  kSetActivityCallback,
  // opscope.h's annotations of a program's own allocator (no runtime call is made): a piece of a block it
  // holds handed out (ptr, size) and taken back (ptr).
  kPoolAlloc,
  kPoolFree,
  // opscope.h's opscope_host_access (no runtime call is made): the program's host code read or wrote
  // [ptr, ptr + size) (write), on its thread or inside a host function a queue ran (host_work).
  kHostAccess,
};

// The transfers of the collective library (libmlucl), X(id, name): the name is the one capture.db, the
// trace, flight_recorder.json and MLU_SIM_FAULT give it (the kernel's without "mlucl_").
#define OPSCOPE_FOR_EACH_COLLECTIVE(X) \
  X(kAllReduce, "allreduce")           \
  X(kBroadcast, "broadcast")           \
  X(kAllGather, "allgather")           \
  X(kReduceScatter, "reduce_scatter")  \
  X(kSend, "send")                     \
  X(kRecv, "recv")                     \
  X(kBarrier, "barrier")

enum class Collective : std::uint8_t {
#define OPSCOPE_COLLECTIVE_ID(id, name) id,
  OPSCOPE_FOR_EACH_COLLECTIVE(OPSCOPE_COLLECTIVE_ID)
#undef OPSCOPE_COLLECTIVE_ID
      kCount
};

inline constexpr std::string_view kCollectiveNames[] = {
#define OPSCOPE_COLLECTIVE_NAME(id, name) name,
    OPSCOPE_FOR_EACH_COLLECTIVE(OPSCOPE_COLLECTIVE_NAME)
#undef OPSCOPE_COLLECTIVE_NAME
};

// "allreduce", ...; "" for kCount.
constexpr std::string_view collectiveName(Collective c) {
  return c < Collective::kCount ? kCollectiveNames[static_cast<std::size_t>(c)] : std::string_view();
}
// The collective of that name, or kCount (a name read from a file that is none of them).
constexpr Collective parseCollective(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kCollectiveNames); ++i)
    if (name == kCollectiveNames[i]) return static_cast<Collective>(i);
  return Collective::kCount;
}
// A point-to-point transfer (its seq counts the transfers to or from one peer).
constexpr bool isPointToPoint(Collective c) { return c == Collective::kSend || c == Collective::kRecv; }

// A transfer of the collective library (libmlucl), as the hook saw it.
struct CollectiveCall {
  Collective kind = Collective::kCount;
  std::string_view name() const { return collectiveName(kind); }
  std::uint64_t comm = 0;  // mluclCommGetId
  int rank = -1;           // the caller's rank in the communicator, and its size
  int size = 0;
  // The call's sequence number as libmlucl checks it across ranks (from 1): the communicator's collectives,
  // or for send / recv the transfers to / from that peer. 0 when the call was refused.
  std::uint64_t seq = 0;
  std::uint64_t count = 0;  // the call's count argument
  int dtype = 0;            // mluclDataType_t
  int op = -1;              // mluclReduceOp_t, -1 when not a reduction
  int peer = -1;            // broadcast: the root; send / recv: the peer; else -1
  const void* send = nullptr;
  void* recv = nullptr;
  void* handle = nullptr;      // the mluclComm_t (the flight recorder asks it for its asynchronous error)
  std::size_t send_bytes = 0;  // bytes the call reads from send / writes to recv
  std::size_t recv_bytes = 0;
  // Where the result was written when the hook ran an in-place call out of place (OP_OVERFLOW_CHECK: recv
  // then still holds what the rank sent until the hook copies the result back, after the tools' look);
  // nullptr when it is recv.
  const void* result = nullptr;
  int status = 0;  // mluclStatus_t
};

// A reduction's name as capture.db and the trace give it ("sum", "prod", "max", "min", "avg"; mluclReduceOp_t
// order), or "" for another value.
constexpr std::string_view reduceOpName(std::int64_t op) {
  constexpr std::string_view kNames[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < static_cast<std::int64_t>(std::size(kNames)) ? kNames[op] : std::string_view();
}

// A runtime call seen by the hook, after it returned. Fields a call does not have stay zero.
struct RuntimeCall {
  RuntimeCallKind kind = RuntimeCallKind::kMalloc;
  std::string_view symbol;
  std::uint32_t thread = 0;
  void* ptr = nullptr;        // allocation result / freed pointer / copy or memset destination
  void** out = nullptr;       // mlurtMalloc / mlurtHostMalloc: where the caller wants the pointer
  const void* src = nullptr;  // copy source
  // kPlaceNotifier, kQueueWaitNotifier, kNotifierSync, kNotifierQuery: the notifier.
  mlurtNotifier_t notifier = nullptr;
  std::size_t size = 0;
  int memcpy_kind = 0;
  mlurtQueue_t queue = nullptr;
  mlurtStatus_t status = MLURT_SUCCESS;
  // Set only when a tool times runtime calls (Tool::timesRuntimeCalls: the profiler); 0 otherwise.
  std::int64_t host_start_ns = 0;
  std::int64_t host_end_ns = 0;
  // With the profiler on: the correlation id the call's device work is tagged with, and the tasks it
  // enqueued.
  std::uint64_t correlation = 0;
  std::uint64_t enqueued = 0;
  // Op calls made in the process before this call (the seq of the last one), and that op (kCount: none yet).
  std::uint64_t op_seq = 0;
  mlu::OpId last_op = mlu::OpId::kCount;
  mlurtActivityCallback_t activity_callback = nullptr;  // kSetActivityCallback
  // A tool made the call in place of the real library (Tool::replace).
  bool replaced = false;
  // Where in the program the call was made (OpCall::site); null when the program declares none.
  const FrameworkSite* site = nullptr;
  // kCollective: the program's framework ops around the call (OpCall::framework_op: "c10d::allreduce_"),
  // valid during the call, and whether it was made inside a backward call of the framework (DDP all-reduces
  // its gradient buckets there); empty and false for the other kinds.
  std::string_view framework_op;
  bool in_backward = false;
  // kLaunchHostFunc: non-null when the hook runs the function through its own wrapper; a tool may store
  // here, before the call (Tool::beforeRuntimeCall), what the host function is to it (memcheck's race model:
  // its queue and clock). kHostAccess: that value when the access is made inside the host function, 0 on a
  // program's thread. kHostAccess's write: the access writes.
  std::uint64_t* host_work_slot = nullptr;
  std::uint64_t host_work = 0;
  bool write = false;
  // kCollective (and kCommInit: comm, rank, size): the transfer.
  CollectiveCall collective;
};

// A frame of the program's framework (opscope.h: a module, an op, a backward call) that ended on a thread,
// as the hook hands it to the tools that want frames (Tool::wantsFrameworkFrames).
struct FrameworkFrame {
  // kRegion: a region of the program's own naming (a user scope: "Optimizer.step#SGD.step").
  enum class Kind : std::uint8_t { kModule, kOp, kBackward, kRegion } kind = Kind::kOp;
  std::string_view name;  // "layer1.0.conv1", "aten::conv2d": interned, valid to the end of the process
  const FrameworkSite* site = nullptr;
  std::int64_t start_ns = 0;  // CLOCK_MONOTONIC
  std::int64_t end_ns = 0;
  std::uint32_t thread = 0;  // OpCall::thread's numbering
  std::uint32_t depth = 0;   // frames around it on its thread
  bool fallback = false;     // the framework ran it on the CPU (opscope_framework_fallback inside it)
};

// Correlation ids of runtime calls have this bit set; an op's correlation id is its seq.
inline constexpr std::uint64_t kRuntimeCorrelationBit = std::uint64_t{1} << 62;
// Device work an opscope tool enqueued itself (its copies, memsets, kernels) is tagged with this bit and the
// tool's ToolId in the low bits, so that the profiler shows it apart from the program's.
inline constexpr std::uint64_t kToolCorrelationBit = std::uint64_t{1} << 61;

}  // namespace opscope
