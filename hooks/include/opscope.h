/* opscope.h — the optional C API a program may call to help opscope's tools. Every function works whether
 * or not the program runs under libopscope.so: the hook's entry points are declared weak, so without the
 * hook they are NULL and these inline functions do nothing. No library to link.
 *
 *   opscope_step()   marks the end of a training step: OP_TIME_MEASURE_SCHEDULE counts these steps, and
 *                    memcheck's growth leaks are memory allocated in one step and held steps later.
 *   opscope_framework_step()
 *                    the framework's own step (torch_mlu: each optimizer step), counted as opscope_step()
 *                    is in a program that never calls opscope_step().
 *   opscope_framework_op_push(name) / opscope_framework_op_pop()
 *                    bracket a framework's op on the calling thread ("aten::conv2d"; they nest): each
 *                    kernel-library op called inside is recorded with the names around it, outermost
 *                    first ("aten::conv2d > aten::convolution": capture.db's ops.framework_op,
 *                    auto-compare's first failing op, the summary and the report; at most 32 deep), so
 *                    that a finding maps back to the program's model. The name is copied. torch_mlu
 *                    calls these for every PyTorch op and autograd node.
 *   opscope_framework_op_begin(name, node, where)
 *                    opscope_framework_op_push with more: node is the id of the graph node the op makes for
 *                    its backward (-1: none; torch_mlu: autograd's sequence number and thread), and where
 *                    the program's source line that called it ("train.py:57 in train_step"; NULL: the
 *                    enclosing frame's). Ended by opscope_framework_op_pop.
 *   opscope_framework_backward_begin(name, node)
 *                    the backward call of graph node `node` ("ConvolutionBackward0"), ended by
 *                    opscope_framework_op_pop: the calls inside are attributed to the module and line of
 *                    the forward op that made the node, and name that op ("backward of aten::convolution").
 *                    name NULL: the framework's engine around backward calls (not shown among the ops),
 *                    whose other calls take the site of the first backward call inside it.
 *   opscope_framework_module_push(path) / opscope_framework_module_pop()
 *                    bracket a module of the program's model ("layer1.0.conv1"; they nest, with the ops):
 *                    each call inside is attributed to the innermost module (capture.db's sites, the
 *                    findings of every tool). torch_mlu calls these around every nn.Module's forward.
 *                    A module left open (its forward raised) is closed by the end of a frame around it.
 *   opscope_framework_region_push(name) / opscope_framework_module_pop()
 *                    the same for a region of the program's own naming ("Optimizer.step#SGD.step": torch_mlu
 *                    declares PyTorch's user scopes, record_function's): a span of its own in the trace.
 *   opscope_framework_stack_source(source)
 *                    source(frames, max) fills up to max frames of the calling thread's stack in the
 *                    program's own language (Python's), innermost first, and returns how many (0: none on
 *                    this thread); its strings must stay valid to the end of the process. Backtraces
 *                    (memcheck's, the flight recorder's) show those frames above the native ones. NULL
 *                    removes it. torch_mlu installs one under opscope.
 *   opscope_framework_fallback(name)
 *                    the framework ran one call of its op `name` on the CPU instead of the device (it has
 *                    no device kernel for it: torch_mlu's CPU fallback, "aten::cumsum.out"): counted per
 *                    name into run.json's findings ("framework fallback"), shown by the report and the
 *                    summary. The name is copied.
 *   opscope_program_end()
 *                    the program's own work is done: the tools write their results now, and what the
 *                    process does afterwards is not watched. For a runtime whose teardown frees what the
 *                    program left (Python's): memcheck's leaks are then what the program still held when
 *                    it ended. torch_mlu calls it from a Python atexit handler.
 *   opscope_region_begin(tool, label, list, options, this_thread, error, error_size) / opscope_region_end(id)
 *                    switch a tool on for a region of the program: "capture", "compare", "fallback",
 *                    "profile", "dump_args" or "overflow_check" takes the calls made from begin to end (on
 *                    every thread, or only the calling one when this_thread is non-zero) that list selects,
 *                    in the syntax of the OP_*_LIST variables (NULL or "": every call). The result directory
 *                    is the run's (made now if the run had none). A tool off in the environment is installed
 *                    by its first region, with options, "NAME=value" lines of `opscope env`'s variables
 *                    (OP_CAPTURE_MODE=stats; NULL: none), and is on only inside its regions; one the
 *                    environment turned on stays on for the whole run. The calls of a region carry its
 *                    label (NULL: "compare#1", counted per tool): capture.db's ops.region, the trace and the
 *                    report. begin returns the region's id, or 0 with the reason in error (an unknown tool,
 *                    a bad list or option, no hook loaded); regions nest and may overlap.
 *   opscope_pool_alloc(ptr, size) / opscope_pool_free(ptr)
 *                    for a program's own allocator that hands out pieces of the device memory it holds
 *                    from mlurtMalloc (a caching allocator, as PyTorch's): each piece as it is handed out
 *                    and as it is taken back. memcheck then finds leaks, double frees, out-of-bounds
 *                    arguments and overflows per piece, with the piece's backtrace, and a block the
 *                    pieces come from is not itself a leak. torch_mlu's allocator calls these.
 *   opscope_pool_padding()
 *                    the bytes the allocator should leave unused after each piece: memcheck's red zone,
 *                    which it paints when the piece is handed out and checks after every op that writes
 *                    to the piece. 0 when the hook is not loaded or memcheck's red zones are off.
 *   opscope_host_access(ptr, bytes, write)
 *                    the program's host code reads (write 0) or writes (non-zero) [ptr, ptr + bytes) of
 *                    memory a queue's work touches too: pinned host memory (mlurtHostMalloc) that an
 *                    asynchronous copy fills or drains. Called on a program's thread it is that thread's
 *                    access; called inside a host function a queue runs (mlurtLaunchHostFunc) it is the
 *                    host function's, ordered as that queue's work. The race check (MEM_CHECK_RACE) then
 *                    reports such an access that nothing orders against a copy or an op touching the same
 *                    bytes (a host function reading what a queue writes), as it does for two ops. Host
 *                    code's accesses are not seen otherwise. Does nothing without MEM_CHECK_RACE.
 */
#ifndef OPSCOPE_H_
#define OPSCOPE_H_

#include <stddef.h>

/* One frame of a program's own stack (opscope_framework_stack_source). */
typedef struct opscope_program_frame {
  const char* file;
  const char* function;
  int line;
} opscope_program_frame;

#ifdef __cplusplus
extern "C" {
#endif

/* Defined by libopscope.so (exported, default visibility); NULL when the hook is not loaded. */
__attribute__((weak)) void opscope_hook_step(void);
__attribute__((weak)) void opscope_hook_framework_step(void);
__attribute__((weak)) void opscope_hook_framework_op_push(const char* name);
__attribute__((weak)) void opscope_hook_framework_op_pop(void);
__attribute__((weak)) void opscope_hook_framework_op_begin(const char* name, long long node,
                                                           const char* where);
__attribute__((weak)) void opscope_hook_framework_backward_begin(const char* name, long long node);
__attribute__((weak)) void opscope_hook_framework_module_push(const char* path);
__attribute__((weak)) void opscope_hook_framework_module_pop(void);
__attribute__((weak)) void opscope_hook_framework_region_push(const char* name);
__attribute__((weak)) void opscope_hook_framework_stack_source(int (*source)(opscope_program_frame*, int));
__attribute__((weak)) void opscope_hook_program_end(void);
__attribute__((weak)) void opscope_hook_framework_fallback(const char* name);
__attribute__((weak)) void opscope_hook_pool_alloc(void* ptr, size_t size);
__attribute__((weak)) void opscope_hook_pool_free(void* ptr);
__attribute__((weak)) size_t opscope_hook_pool_padding(void);
__attribute__((weak)) void opscope_hook_host_access(const void* ptr, size_t bytes, int write);
__attribute__((weak)) int opscope_hook_region_begin(const char* tool, const char* label, const char* list,
                                                    const char* options, int this_thread, char* error,
                                                    size_t error_size);
__attribute__((weak)) int opscope_hook_region_end(int id);

static inline void opscope_step(void) {
  if (opscope_hook_step) opscope_hook_step();
}

static inline void opscope_framework_step(void) {
  if (opscope_hook_framework_step) opscope_hook_framework_step();
}

/* Whether the hook is loaded (a program may skip preparing the names when it is not). */
static inline int opscope_loaded(void) { return opscope_hook_step != 0; }

static inline void opscope_framework_op_push(const char* name) {
  if (opscope_hook_framework_op_push) opscope_hook_framework_op_push(name);
}

static inline void opscope_framework_op_pop(void) {
  if (opscope_hook_framework_op_pop) opscope_hook_framework_op_pop();
}

static inline void opscope_framework_op_begin(const char* name, long long node, const char* where) {
  if (opscope_hook_framework_op_begin) opscope_hook_framework_op_begin(name, node, where);
}

static inline void opscope_framework_backward_begin(const char* name, long long node) {
  if (opscope_hook_framework_backward_begin) opscope_hook_framework_backward_begin(name, node);
}

static inline void opscope_framework_module_push(const char* path) {
  if (opscope_hook_framework_module_push) opscope_hook_framework_module_push(path);
}

static inline void opscope_framework_region_push(const char* name) {
  if (opscope_hook_framework_region_push) opscope_hook_framework_region_push(name);
}

static inline void opscope_framework_module_pop(void) {
  if (opscope_hook_framework_module_pop) opscope_hook_framework_module_pop();
}

static inline void opscope_framework_stack_source(int (*source)(opscope_program_frame*, int)) {
  if (opscope_hook_framework_stack_source) opscope_hook_framework_stack_source(source);
}

static inline void opscope_framework_fallback(const char* name) {
  if (opscope_hook_framework_fallback) opscope_hook_framework_fallback(name);
}

static inline void opscope_program_end(void) {
  if (opscope_hook_program_end) opscope_hook_program_end();
}

static inline void opscope_pool_alloc(void* ptr, size_t size) {
  if (opscope_hook_pool_alloc) opscope_hook_pool_alloc(ptr, size);
}

static inline void opscope_pool_free(void* ptr) {
  if (opscope_hook_pool_free) opscope_hook_pool_free(ptr);
}

static inline size_t opscope_pool_padding(void) {
  return opscope_hook_pool_padding ? opscope_hook_pool_padding() : 0;
}

static inline void opscope_host_access(const void* ptr, size_t bytes, int write) {
  if (opscope_hook_host_access) opscope_hook_host_access(ptr, bytes, write);
}

static inline int opscope_region_begin(const char* tool, const char* label, const char* list,
                                       const char* options, int this_thread, char* error, size_t error_size) {
  if (opscope_hook_region_begin)
    return opscope_hook_region_begin(tool, label, list, options, this_thread, error, error_size);
  if (error != NULL && error_size > 0) {
    const char* text = "the opscope hook is not loaded (run the program under `opscope run`)";
    size_t n = 0;
    for (; text[n] != '\0' && n + 1 < error_size; ++n) error[n] = text[n];
    error[n] = '\0';
  }
  return 0;
}

static inline void opscope_region_end(int id) {
  if (opscope_hook_region_end) opscope_hook_region_end(id);
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPSCOPE_H_ */
