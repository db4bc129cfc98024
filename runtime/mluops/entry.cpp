// The exported op entry points, one per schema row: gather the C arguments into the op's argument struct,
// check them (validate, then the device's own rules), apply planted faults, and enqueue the kernel.
#include "context.h"
#include "device.h"
#include "fault.h"
#include "launch.h"

#include "../ops/validate.h"

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <fmt/format.h>

#include <algorithm>
#include <new>
#include <type_traits>

namespace mlu {
namespace {

// Turns C arguments into argument-struct fields, keeping the first problem found.
struct ArgCollector {
  Status status;

  TensorView tensor(const mluopTensorDescriptor_t desc, const void* data, const char* name, bool optional) {
    TensorView v;
    if (!status.ok()) return v;
    if (desc == nullptr) {
      if (optional && data == nullptr) return v;  // absent
      status = badParam("{}_desc is NULL", name);
      return v;
    }
    if (!desc->set) {
      status = badParam("{}_desc was never set (mluopSetTensorDescriptor)", name);
      return v;
    }
    v = desc->view;
    v.data = const_cast<void*>(data);
    v.present = true;
    if (data == nullptr && v.numel() > 0)
      status = badParam("{} is NULL but {}_desc has {} elements", name, name, v.numel());
    return v;
  }

  IntList ints(const int* values, int count, const char* name) {
    if (!status.ok()) return {};
    if (count < 0 || count > MLUOP_DIM_MAX) {
      status = badParam("{}_count = {}; expected 0 to {}", name, count, MLUOP_DIM_MAX);
      return {};
    }
    if (count > 0 && values == nullptr) {
      status = badParam("{} is NULL but {}_count is {}", name, name, count);
      return {};
    }
    return IntList(values, values + count);
  }

  ConvParams conv(const mluopConvolutionDescriptor_t desc, const char* name) {
    if (!status.ok()) return {};
    if (desc == nullptr) {
      status = badParam("{} is NULL", name);
      return {};
    }
    return desc->params;
  }
};

mluopStatus_t fail(std::string_view op, const Status& s) {
  return recordError(s.code, fmt::format("{}: {}", op, s.message));
}

// [data, data + bytes) must be device memory of the handle's device, inside one allocation.
Status checkDeviceRange(const mluopContext& ctx, std::string_view name, const void* data, std::size_t bytes) {
  mlurtPointerAttributes_t a;
  if (mlurtPointerGetAttributes(&a, data) != MLURT_SUCCESS) {
    return {MLUOP_STATUS_EXECUTION_FAILED,
            fmt::format("{}: the runtime failed: {}", name, mlurtGetLastErrorMessage())};
  }
  if (a.type != MLURT_MEMORY_DEVICE) {
    const char* kind = a.type == MLURT_MEMORY_HOST     ? "host memory"
                       : a.type == MLURT_MEMORY_PINNED ? "pinned host memory"
                                                       : "not a live device allocation (freed?)";
    return badParam("{} = {} is {}, not device memory", name, data, kind);
  }
  if (a.device != ctx.device) {
    return badParam("{} = {} is on device {} but the handle is on device {}", name, data, a.device,
                    ctx.device);
  }
  const auto offset =
      static_cast<std::size_t>(static_cast<const char*>(data) - static_cast<const char*>(a.base));
  if (bytes > a.size - offset) {
    return badParam("{} needs {} bytes from offset {} of its {}-byte allocation at {}", name, bytes, offset,
                    a.size, a.base);
  }
  return Status::success();
}

// What the device itself refuses: float64, and pointers that are not its memory.
template <typename Args>
Status checkDeviceRules(const mluopContext& ctx, const Args& args) {
  Status result;
  args.visit([&](const ArgMeta& meta, const auto& value) {
    if (!result.ok()) return;
    using V = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<V, TensorView>) {
      if (!value.present) return;
      if (value.dtype == MLUOP_DTYPE_DOUBLE) {
        result = notSupported("{} is float64, which the device does not support", meta.name);
      } else if (value.extentBytes() > 0) {
        result = checkDeviceRange(ctx, meta.name, value.data, value.extentBytes());
      }
    } else if constexpr (std::is_same_v<V, Workspace>) {
      if (value.size > 0) result = checkDeviceRange(ctx, meta.name, value.data, value.size);
    }
  });
  return result;
}

bool hasFault(const std::vector<Fault>* faults, FaultKind kind) {
  return faults != nullptr &&
         std::any_of(faults->begin(), faults->end(), [&](const Fault& f) { return f.kind == kind; });
}

template <typename Args, typename Fill>
mluopStatus_t enter(mluopHandle_t handle, Fill&& fill) noexcept {
  const std::string_view op = Args::kName;
  try {
    if (handle == nullptr) return fail(op, {MLUOP_STATUS_NOT_INITIALIZED, "handle is NULL"});
    Args args;
    ArgCollector collector;
    fill(args, collector);
    if (!collector.status.ok()) return fail(op, collector.status);

    const auto& table = faults();
    const auto it = table.find(op);
    const std::vector<Fault>* op_faults = it == table.end() ? nullptr : &it->second;
    std::vector<Fault> dtype_faults;  // those of the op's faults that apply to this call's dtype
    if (op_faults != nullptr) {
      int dtype = -1;
      args.visit([&](const ArgMeta& meta, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, TensorView>) {
          if (dtype < 0 && meta.writes() && value.present) dtype = static_cast<int>(value.dtype);
        }
      });
      dtype_faults = faultsFor(op_faults, dtype);
      op_faults = dtype_faults.empty() ? nullptr : &dtype_faults;
    }
    if (hasFault(op_faults, FaultKind::kNotSupported)) {
      return fail(op, notSupported("refused by MLU_SIM_FAULT (notsupported)"));
    }
    if (Status s = validate(args); !s.ok()) return fail(op, s);
    if (Status s = checkDeviceRules(*handle, args); !s.ok()) return fail(op, s);

    TensorView first_output;
    args.visit([&](const ArgMeta& meta, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, TensorView>) {
        const bool output = meta.writes();
        if (output && value.present && !first_output.present) first_output = value;
        // The planted bug: read every input as if it were contiguous — where its memory holds that many
        // elements (a broadcast or sliced view may not; the simulation must not read outside the allocation).
        if (meta.role == Role::kInput && value.present && hasFault(op_faults, FaultKind::kNonContig)) {
          TensorView dense = value;
          dense.setContiguousStrides();
          if (checkDeviceRange(*handle, meta.name, dense.data, dense.extentBytes()).ok()) value = dense;
        }
      }
    });
    const Launch launch(*handle, op, op_faults, first_output);
    if (Status s = device(launch, args); !s.ok()) return fail(op, s);
    return MLUOP_STATUS_SUCCESS;
  } catch (const std::bad_alloc&) {
    return fail(op, {MLUOP_STATUS_ALLOC_FAILED, "out of host memory"});
  } catch (const std::exception& e) {
    return fail(op, {MLUOP_STATUS_INTERNAL_ERROR, e.what()});
  }
}

}  // namespace
}  // namespace mlu

#define MLUOP_FILLS(seq) MLUOP_SEQ_END(MLUOP_FILLS_A seq)
#define MLUOP_FILLS_A(kind, ...) MLUOP_FILL_##kind(__VA_ARGS__) MLUOP_FILLS_B
#define MLUOP_FILLS_B(kind, ...) MLUOP_FILL_##kind(__VA_ARGS__) MLUOP_FILLS_A
#define MLUOP_FILLS_A_END
#define MLUOP_FILLS_B_END
#define MLUOP_FILL_IN(n) mlu_args_.n = mlu_collect_.tensor(n##_desc, n, #n, false);
#define MLUOP_FILL_IN_OPT(n) mlu_args_.n = mlu_collect_.tensor(n##_desc, n, #n, true);
#define MLUOP_FILL_OUT(n) mlu_args_.n = mlu_collect_.tensor(n##_desc, n, #n, false);
#define MLUOP_FILL_INOUT(n) mlu_args_.n = mlu_collect_.tensor(n##_desc, n, #n, false);
#define MLUOP_FILL_OUT_OPT(n) mlu_args_.n = mlu_collect_.tensor(n##_desc, n, #n, true);
#define MLUOP_FILL_INOUT_OPT(n) mlu_args_.n = mlu_collect_.tensor(n##_desc, n, #n, true);
#define MLUOP_FILL_SCALAR(type, n) mlu_args_.n = n;
#define MLUOP_FILL_INTS(n) mlu_args_.n = mlu_collect_.ints(n, n##_count, #n);
#define MLUOP_FILL_CONV(n) mlu_args_.n = mlu_collect_.conv(n, #n);
#define MLUOP_FILL_WORKSPACE(n) mlu_args_.n = mlu::Workspace{n, n##_size};

#define MLUOP_DEFINE_ENTRY(op, Symbol, ARGS)                                                            \
  extern "C" MLUOP_API mluopStatus_t Symbol(mluopHandle_t handle MLUOP_PARAMS(ARGS)) {                  \
    return mlu::enter<mlu::op##_args>(                                                                  \
        handle, [&](mlu::op##_args& mlu_args_, mlu::ArgCollector& mlu_collect_) { MLUOP_FILLS(ARGS) }); \
  }
MLUOP_FOR_EACH_OP(MLUOP_DEFINE_ENTRY)
