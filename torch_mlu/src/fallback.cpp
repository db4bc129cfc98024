#include "fallback.h"

#include "caching_allocator.h"
#include "opscope.h"

#include <torch/library.h>

#include <cstdio>
#include <mutex>

namespace torch_mlu {
namespace {

class FallbackCounts {
 public:
  void add(const c10::OperatorName& name) {
    std::string key = name.name;
    if (!name.overload_name.empty()) key += "." + name.overload_name;
    opscope_framework_fallback(key.c_str());  // under opscope: into run.json, the report and the summary
    const std::lock_guard lock(mutex_);
    ++counts_[key];
  }
  std::map<std::string, std::int64_t> get() const {
    const std::lock_guard lock(mutex_);
    return counts_;
  }
  // Printed when the process exits (after Python has finished), like DIPU's list of fallen-back ops; not
  // by a program that never used the device.
  ~FallbackCounts() {
    if (counts_.empty() && !deviceUsed()) return;
    if (counts_.empty()) {
      std::fprintf(stderr, "torch_mlu: no op fell back to the CPU\n");
      return;
    }
    std::int64_t calls = 0;
    for (const auto& [name, count] : counts_) calls += count;
    std::fprintf(stderr, "torch_mlu: %zu ops fell back to the CPU (%lld calls):", counts_.size(),
                 static_cast<long long>(calls));
    for (const auto& [name, count] : counts_)
      std::fprintf(stderr, " %s x%lld", name.c_str(), static_cast<long long>(count));
    std::fprintf(stderr, "\n");
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::int64_t> counts_;
};

FallbackCounts& counts() {
  static FallbackCounts instance;  // process-wide: the fallback runs on any thread (autograd's too)
  return instance;
}

// Made when the library loads, so that the summary is printed at exit even when nothing fell back.
[[maybe_unused]] const FallbackCounts& made_at_load = counts();

// ATen's cpu_fallback moves Tensor and Tensor[] arguments to the CPU but leaves Tensor?[] ones (the
// indices of index.Tensor and index_put_, which Python puts on the indexed tensor's device) where they
// are, so the CPU kernel would see a device tensor and fail. They are moved here first: they are inputs.
void moveOptionalTensorListsToCpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto* list_type = arguments[i].type()->castRaw<c10::ListType>();
    const auto* element = list_type ? list_type->getElementType()->castRaw<c10::OptionalType>() : nullptr;
    c10::IValue& value = (*stack)[first + i];
    if (element == nullptr || element->getElementType()->kind() != c10::TypeKind::TensorType ||
        !value.isList()) {
      continue;
    }
    c10::List<c10::optional<at::Tensor>> list = value.to<c10::List<c10::optional<at::Tensor>>>();
    c10::List<c10::optional<at::Tensor>> moved;
    for (size_t j = 0; j < list.size(); ++j) {
      const c10::optional<at::Tensor> t = list.get(j);
      moved.push_back(
          t.has_value() && t->defined() && !t->device().is_cpu() ? c10::optional<at::Tensor>(t->cpu()) : t);
    }
    value = c10::IValue(std::move(moved));
  }
}

}  // namespace

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  counts().add(op.schema().operator_name());
  moveOptionalTensorListsToCpu(op, stack);
  at::native::cpu_fallback(op, stack);
}

std::map<std::string, std::int64_t> fallbackCounts() { return counts().get(); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>());
}

}  // namespace torch_mlu
