// fallback.h — the boxed CPU fallback: every ATen op the backend does not implement natively runs on the
// CPU on copies of its arguments (ATen's cpu_fallback), and is counted. The counts are printed at exit
// and returned by torch.mlu.fallback_ops(), so that a user sees which ops of a model left the device.
#pragma once

#include <ATen/native/CPUFallback.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_mlu {

// The boxed fallback kernel registered for PrivateUse1 (counts the op, then runs it on the CPU).
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Op name (with overload, e.g. "aten::bernoulli_.float") -> number of calls that fell back.
std::map<std::string, std::int64_t> fallbackCounts();

// Calls op Op (an at::_ops:: struct) on the CPU through the counting fallback, from a native kernel that
// cannot take the arguments it was given (e.g. a dtype the kernel library lacks).
template <class Op, class... Args>
decltype(auto) viaCpu(Args&&... args) {
  return at::native::call_fallback_fn<&cpuFallback, Op>::call(std::forward<Args>(args)...);
}

// The same for an op with SymInt arguments, passed as SymInts.
template <class Op, class... Args>
decltype(auto) viaCpuSymint(Args&&... args) {
  return at::native::call_fallback_fn_symint<&cpuFallback, Op>::call(std::forward<Args>(args)...);
}

}  // namespace torch_mlu
