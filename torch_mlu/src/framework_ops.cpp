// framework_ops.cpp — under opscope (libopscope.so preloaded), every PyTorch op and autograd node is
// declared to the hook through a global RecordFunction callback (PyTorch's own observer of op dispatch, the
// one its profiler uses), so that each kernel-library op the hook sees is recorded with:
//   - the PyTorch ops it ran in ("aten::conv2d > aten::convolution");
//   - the program's source line of the outermost op (python_lines.cpp: the innermost Python frame outside
//     the libraries);
//   - for an autograd node, the forward op that made it (autograd's sequence number and thread id, which
//     RecordFunction gives both), and so its module and line.
// The modules come from the Python package (nn.Module hooks, __init__.py). Without the hook nothing is
// registered, and PyTorch pays nothing.
#include "framework_ops.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include "opscope.h"

namespace torch_mlu {
namespace {

// The program's line of the op being entered, when the Python package has installed its source
// (python_lines.cpp); null otherwise.
std::atomic<ProgramLine> g_program_line{nullptr};

const char* programLine() {
  const ProgramLine line = g_program_line.load(std::memory_order_acquire);
  return line != nullptr ? line() : nullptr;
}

// The autograd engine records each node twice: "autograd::engine::evaluate_function: MulBackward0" around
// "MulBackward0". The first is the engine's frame: not among the ops, but its own calls (the gradients'
// checks, a sum to a bias's shape) belong to the node inside.
bool engineFrame(const at::RecordFunction& fn) {
  return std::string_view(fn.name()).rfind("autograd::engine::evaluate_function: ", 0) == 0;
}

// A graph node's id for the hook: autograd's sequence numbers count per thread.
long long nodeId(std::uint64_t thread, std::int64_t seq) {
  return static_cast<long long>((thread << 40) |
                                (static_cast<std::uint64_t>(seq) & ((std::uint64_t{1} << 40) - 1)));
}

thread_local int t_depth = 0;

std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
  if (engineFrame(fn)) {
    opscope_framework_backward_begin(nullptr, -1);
  } else if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    opscope_framework_backward_begin(fn.name(),
                                     fn.seqNr() >= 0 ? nodeId(fn.forwardThreadId(), fn.seqNr()) : -1);
  } else {
    opscope_framework_op_begin(fn.name(), fn.seqNr() >= 0 ? nodeId(fn.threadId(), fn.seqNr()) : -1,
                               t_depth == 0 ? programLine() : nullptr);
  }
  ++t_depth;
  return nullptr;
}

void onExit(const at::RecordFunction& /*fn*/, at::ObserverContext* /*context*/) {
  --t_depth;
  opscope_framework_op_pop();
}

// PyTorch's user scopes (record_function; torch.optim's optimizers record each step() as one named
// "Optimizer.step#SGD.step") are regions: spans of their own, and the module of the calls inside. The end of
// an optimizer step is the framework's step (opscope_framework_step; a program that calls opscope_step()
// itself overrides it).
std::unique_ptr<at::ObserverContext> onUserEnter(const at::RecordFunction& fn) {
  opscope_framework_region_push(fn.name());
  return nullptr;
}

void onUserExit(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  opscope_framework_module_pop();
  if (std::string_view(fn.name()).rfind("Optimizer.step#", 0) == 0) opscope_framework_step();
}

struct RegisterFrameworkOps {
  RegisterFrameworkOps() {
    if (!opscope_loaded()) return;
    at::addGlobalCallback(at::RecordFunctionCallback(&onEnter, &onExit)
                              .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    at::addGlobalCallback(
        at::RecordFunctionCallback(&onUserEnter, &onUserExit).scopes({at::RecordScope::USER_SCOPE}));
  }
} register_framework_ops;

}  // namespace

void setProgramLine(ProgramLine line) { g_program_line.store(line, std::memory_order_release); }

void stopAttribution() {
  setProgramLine(nullptr);
  opscope_framework_stack_source(nullptr);
}

}  // namespace torch_mlu
