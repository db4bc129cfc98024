// module.cpp — the torch_mlu operator namespace the Python package calls (torch.ops.torch_mlu.*): device
// count, synchronize, and the ops that fell back to the CPU.
#include <torch/library.h>

#include <string>

#include "fallback.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

int64_t deviceCountOp() { return deviceCount(); }

void synchronizeOp() { checkRuntime(mlurtDeviceSynchronize(), "mlurtDeviceSynchronize"); }

// "name count" lines, one per op that fell back.
std::string fallbackOpsOp() {
  std::string out;
  for (const auto& [name, count] : fallbackCounts()) out += name + " " + std::to_string(count) + "\n";
  return out;
}

TORCH_LIBRARY(torch_mlu, m) {
  m.def("device_count", &deviceCountOp);
  m.def("synchronize", &synchronizeOp);
  m.def("fallback_ops", &fallbackOpsOp);
}

}  // namespace
}  // namespace torch_mlu
