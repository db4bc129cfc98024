// Wrappers of the runtime's memory, copy, memset, queue, notifier and sync calls. Each forwards straight to
// the real symbol unless some tool watches runtime calls; then the call is reported to the tools as a
// RuntimeCall, timed when a tool reads the times (Tool::timesRuntimeCalls). (Error getters, device selection
// and properties are not wrapped: wrapping must not change what mlurtGetLastError reports.)
#include "hook.h"

#include <mlu/mlurt.h>

#include <memory>

using opscope::RuntimeCall;
using opscope::RuntimeCallKind;

// MEM_CHECK_RACE: a host function runs through the hook's own, which tells the program's opscope_host_access
// calls inside it which launch they belong to (RuntimeCall::host_work_slot).
namespace {
struct WrappedHostFunction {
  mlurtHostFn_t fn;
  void* data;
  std::uint64_t work = 0;
};

void runWrappedHostFunction(void* p) {
  const std::unique_ptr<WrappedHostFunction> w(static_cast<WrappedHostFunction*>(p));
  const std::uint64_t outer = opscope::hook::t_host_work;
  opscope::hook::t_host_work = w->work;
  w->fn(w->data);
  opscope::hook::t_host_work = outer;
}

// Before the launch: the function and its data become the wrapper's (owned by the launch from here).
void wrapHostFunction(RuntimeCall& rc, mlurtHostFn_t& fn, void*& data) {
  if (fn == nullptr || !opscope::hook::g_race_check) return;
  auto w = std::make_unique<WrappedHostFunction>(WrappedHostFunction{fn, data});
  rc.host_work_slot = &w->work;
  fn = runWrappedHostFunction;
  data = w.release();
}

// After it: a launch the runtime refused never runs the wrapper, which is then freed here.
void unwrapRefused(const RuntimeCall& rc, void* data) {
  if (rc.host_work_slot != nullptr && rc.status != MLURT_SUCCESS)
    std::unique_ptr<WrappedHostFunction>(static_cast<WrappedHostFunction*>(data)).reset();
}
}  // namespace

// PARAMS: the C parameter list; NAMES: the argument names; BEFORE: statements filling `rc` before the call
// (what a tool needs to make the call itself, Tool::replace); FILL: statements completing it after.
#define OPSCOPE_RUNTIME_WRAPPER_WITH(Kind, Symbol, PARAMS, NAMES, BEFORE, FILL)               \
  extern "C" OPSCOPE_EXPORT mlurtStatus_t Symbol PARAMS {                                     \
    static const auto real_fn = opscope::hook::real<decltype(&Symbol)>(#Symbol);              \
    if (!opscope::hook::g_watch_runtime || opscope::hook::t_inside) return real_fn NAMES;     \
    RuntimeCall rc;                                                                           \
    rc.kind = RuntimeCallKind::Kind;                                                          \
    rc.symbol = #Symbol;                                                                      \
    BEFORE                                                                                    \
    auto forward = [&] { return real_fn NAMES; };                                             \
    auto fill = [&] { FILL };                                                                 \
    return opscope::hook::runRuntime(rc, opscope::hook::Callback<mlurtStatus_t>::of(forward), \
                                     opscope::hook::Callback<void>::of(fill));                \
  }
#define OPSCOPE_RUNTIME_WRAPPER(Kind, Symbol, PARAMS, NAMES, FILL) \
  OPSCOPE_RUNTIME_WRAPPER_WITH(Kind, Symbol, PARAMS, NAMES, {}, FILL)

OPSCOPE_RUNTIME_WRAPPER_WITH(
    kMalloc, mlurtMalloc, (void** ptr, size_t size), (ptr, size),
    {
      rc.out = ptr;
      rc.size = size;
    },
    { rc.ptr = (rc.status == MLURT_SUCCESS && ptr != nullptr) ? *ptr : nullptr; })
OPSCOPE_RUNTIME_WRAPPER_WITH(kFree, mlurtFree, (void* ptr), (ptr), { rc.ptr = ptr; }, {})
OPSCOPE_RUNTIME_WRAPPER_WITH(
    kHostMalloc, mlurtHostMalloc, (void** ptr, size_t size), (ptr, size),
    {
      rc.out = ptr;
      rc.size = size;
    },
    { rc.ptr = (rc.status == MLURT_SUCCESS && ptr != nullptr) ? *ptr : nullptr; })
OPSCOPE_RUNTIME_WRAPPER_WITH(kHostFree, mlurtHostFree, (void* ptr), (ptr), { rc.ptr = ptr; }, {})
// A copy's or memset's arguments are set before the call: the tools' beforeRuntimeCall needs them (memcheck
// paints the red zones a copy or memset may write into on its queue, ahead of it).
OPSCOPE_RUNTIME_WRAPPER_WITH(kMemcpy, mlurtMemcpy,
                             (void* dst, const void* src, size_t size, mlurtMemcpyKind_t kind),
                             (dst, src, size, kind),
                             {
                               rc.ptr = dst;
                               rc.src = src;
                               rc.size = size;
                               rc.memcpy_kind = static_cast<int>(kind);
                             },
                             {})
OPSCOPE_RUNTIME_WRAPPER_WITH(kMemcpyAsync, mlurtMemcpyAsync,
                             (void* dst, const void* src, size_t size, mlurtQueue_t queue,
                              mlurtMemcpyKind_t kind),
                             (dst, src, size, queue, kind),
                             {
                               rc.ptr = dst;
                               rc.src = src;
                               rc.size = size;
                               rc.queue = queue;
                               rc.memcpy_kind = static_cast<int>(kind);
                             },
                             {})
OPSCOPE_RUNTIME_WRAPPER_WITH(kMemset, mlurtMemset, (void* ptr, int value, size_t size), (ptr, value, size),
                             {
                               rc.ptr = ptr;
                               rc.size = size;
                             },
                             {})
OPSCOPE_RUNTIME_WRAPPER_WITH(kMemsetAsync, mlurtMemsetAsync,
                             (void* ptr, int value, size_t size, mlurtQueue_t queue),
                             (ptr, value, size, queue),
                             {
                               rc.ptr = ptr;
                               rc.size = size;
                               rc.queue = queue;
                             },
                             {})
OPSCOPE_RUNTIME_WRAPPER(kQueueCreate, mlurtQueueCreate, (mlurtQueue_t * queue), (queue),
                        { rc.queue = (rc.status == MLURT_SUCCESS && queue != nullptr) ? *queue : nullptr; })
OPSCOPE_RUNTIME_WRAPPER(kQueueDestroy, mlurtQueueDestroy, (mlurtQueue_t queue), (queue),
                        { rc.queue = queue; })
OPSCOPE_RUNTIME_WRAPPER(kQueueSync, mlurtQueueSync, (mlurtQueue_t queue), (queue), { rc.queue = queue; })
OPSCOPE_RUNTIME_WRAPPER(kQueueQuery, mlurtQueueQuery, (mlurtQueue_t queue), (queue), { rc.queue = queue; })
OPSCOPE_RUNTIME_WRAPPER(kQueueWaitNotifier, mlurtQueueWaitNotifier,
                        (mlurtQueue_t queue, mlurtNotifier_t notifier), (queue, notifier), {
                          rc.queue = queue;
                          rc.notifier = notifier;
                        })
OPSCOPE_RUNTIME_WRAPPER_WITH(
    kLaunchHostFunc, mlurtLaunchHostFunc, (mlurtQueue_t queue, mlurtHostFn_t fn, void* data),
    (queue, fn, data),
    {
      rc.queue = queue;
      wrapHostFunction(rc, fn, data);
    },
    { unwrapRefused(rc, data); })
OPSCOPE_RUNTIME_WRAPPER(kNotifierCreate, mlurtNotifierCreate,
                        (mlurtNotifier_t * notifier, unsigned int flags), (notifier, flags), {})
OPSCOPE_RUNTIME_WRAPPER(kNotifierDestroy, mlurtNotifierDestroy, (mlurtNotifier_t notifier), (notifier), {})
OPSCOPE_RUNTIME_WRAPPER(kPlaceNotifier, mlurtPlaceNotifier, (mlurtNotifier_t notifier, mlurtQueue_t queue),
                        (notifier, queue), {
                          rc.queue = queue;
                          rc.notifier = notifier;
                        })
OPSCOPE_RUNTIME_WRAPPER(kNotifierQuery, mlurtNotifierQuery, (mlurtNotifier_t notifier), (notifier),
                        { rc.notifier = notifier; })
OPSCOPE_RUNTIME_WRAPPER(kNotifierSync, mlurtNotifierSync, (mlurtNotifier_t notifier), (notifier),
                        { rc.notifier = notifier; })
OPSCOPE_RUNTIME_WRAPPER(kNotifierElapsedTime, mlurtNotifierElapsedTime,
                        (float* ms, mlurtNotifier_t start, mlurtNotifier_t end), (ms, start, end), {})
OPSCOPE_RUNTIME_WRAPPER(kDeviceSynchronize, mlurtDeviceSynchronize, (void), (), {})

// While the profiler runs it holds the runtime's one activity-callback slot: it makes this call itself
// (Tool::replace), chaining the program's callback behind its own (called with every record).
OPSCOPE_RUNTIME_WRAPPER_WITH(kSetActivityCallback, mlurtSetActivityCallback,
                             (mlurtActivityCallback_t callback, void* userData), (callback, userData),
                             {
                               rc.activity_callback = callback;
                               rc.ptr = userData;
                             },
                             {})
