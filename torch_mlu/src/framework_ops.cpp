// framework_ops.cpp — under opscope (libopscope.so preloaded), every PyTorch op and autograd node is
// bracketed with opscope_framework_op_push/pop, through a global RecordFunction callback (PyTorch's own
// observer of op dispatch, the one its profiler uses): each kernel-library op the hook sees is then
// recorded with the PyTorch ops it ran in ("aten::conv2d > aten::convolution"). Without the hook nothing
// is registered, and PyTorch pays nothing.
#include <ATen/record_function.h>

#include <memory>
#include <string_view>

#include "opscope.h"

namespace torch_mlu {
namespace {

// The autograd engine records each node twice: "autograd::engine::evaluate_function: MulBackward0" around
// "MulBackward0". The first adds nothing.
bool recorded(const at::RecordFunction& fn) {
  return std::string_view(fn.name()).rfind("autograd::engine::evaluate_function: ", 0) != 0;
}

std::unique_ptr<at::ObserverContext> onEnter(const at::RecordFunction& fn) {
  if (recorded(fn)) opscope_framework_op_push(fn.name());
  return nullptr;
}

void onExit(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  if (recorded(fn)) opscope_framework_op_pop();
}

struct RegisterFrameworkOps {
  RegisterFrameworkOps() {
    if (!opscope_loaded()) return;
    at::addGlobalCallback(at::RecordFunctionCallback(&onEnter, &onExit)
                              .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }
} register_framework_ops;

}  // namespace
}  // namespace torch_mlu
