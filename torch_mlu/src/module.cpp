// module.cpp — the torch_mlu operator namespace the Python package calls (torch.ops.torch_mlu.*): device
// count, synchronize, the caching allocator's figures and empty_cache, and the ops that fell back to the CPU.
#include <torch/library.h>

#include <string>
#include <vector>

#include "caching_allocator.h"
#include "fallback.h"
#include "mlu_context.h"
#include "opscope.h"

namespace torch_mlu {
namespace {

int64_t deviceCountOp() { return deviceCount(); }

void synchronizeOp() { checkRuntime(mlurtDeviceSynchronize(), "mlurtDeviceSynchronize"); }

// The Python program has ended (its atexit handlers run): under opscope, the tools write their results
// now, before the interpreter's teardown frees what the program still held (opscope.h).
void programEndOp() { opscope_program_end(); }

void emptyCacheOp() { emptyCache(); }

// The caching allocator's figures for a device: [allocated, reserved, peak allocated, segments] in bytes.
std::vector<int64_t> memoryStatsOp(int64_t device) {
  TORCH_CHECK(device >= 0 && device < deviceCount(), "torch_mlu: no MLU ", device);
  const MemoryStats s = memoryStats(static_cast<int>(device));
  return {static_cast<int64_t>(s.allocated), static_cast<int64_t>(s.reserved),
          static_cast<int64_t>(s.peak_allocated), static_cast<int64_t>(s.segments)};
}

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
  m.def("program_end", &programEndOp);
  m.def("empty_cache", &emptyCacheOp);
  m.def("memory_stats", &memoryStatsOp);
}

}  // namespace
}  // namespace torch_mlu
