// One wrapper per op of the schema, generated from MLUOP_FOR_EACH_OP: each has the op's exact C signature,
// forwards straight to the real symbol when nothing looks at ops, and otherwise fills the op's argument
// struct from the C arguments (through the library's public descriptor getters) and goes through runOp.
#include "hook.h"

#include <mlu/mluops.h>
#include <mlu/op_args.h>

namespace opscope::hook {
namespace {

// Reads C arguments into argument-struct fields; any unreadable descriptor makes the call opaque to the
// tools (the real library reports the problem to the program).
struct Collector {
  bool ok = true;

  mlu::TensorView tensor(const mluopTensorDescriptor_t desc, const void* data) {
    static const auto get = real<decltype(&mluopGetTensorDescriptor)>("mluopGetTensorDescriptor");
    mlu::TensorView v;
    if (desc == nullptr) {
      if (data != nullptr) ok = false;
      return v;  // absent optional tensor (a required one is refused by the library)
    }
    if (get(desc, &v.layout, &v.dtype, &v.ndim, v.dims.data(), v.strides.data()) != MLUOP_STATUS_SUCCESS ||
        v.ndim < 0 || v.ndim > MLUOP_DIM_MAX) {
      ok = false;
      return v;
    }
    v.data = const_cast<void*>(data);
    v.present = true;
    return v;
  }

  mlu::IntList ints(const int* values, int count) {
    if (count < 0 || count > MLUOP_DIM_MAX || (count > 0 && values == nullptr)) {
      ok = false;
      return {};
    }
    return mlu::IntList(values, values + count);
  }

  mlu::ConvParams conv(const mluopConvolutionDescriptor_t desc) {
    static const auto get = real<decltype(&mluopGetConvolutionDescriptor)>("mluopGetConvolutionDescriptor");
    mlu::ConvParams p;
    if (desc == nullptr ||
        get(desc, p.padding.data(), p.stride.data(), p.dilation.data(), &p.groups) != MLUOP_STATUS_SUCCESS) {
      ok = false;
    }
    return p;
  }
};

template <typename Args, typename Fill, typename Forward>
mluopStatus_t hookOp(mluopHandle_t handle, Fill&& fill, Forward&& forward) {
  Args args;
  OpCall call;
  call.op = mlu::opIdOf<Args>();
  call.name = Args::kName;
  call.symbol = Args::kSymbol;
  call.args = &args;
  {
    Collector collector;
    fill(args, collector);
    call.args_ok = collector.ok;
  }
  return runOp(call, handle, Callback<mluopStatus_t>::of(forward));
}

}  // namespace
}  // namespace opscope::hook

// The argument names of an op after the handle, each with a leading comma.
#define OPSCOPE_NAMES(seq) MLUOP_SEQ_END(OPSCOPE_NAMES_A seq)
#define OPSCOPE_NAMES_A(kind, ...) OPSCOPE_NAME_##kind(__VA_ARGS__) OPSCOPE_NAMES_B
#define OPSCOPE_NAMES_B(kind, ...) OPSCOPE_NAME_##kind(__VA_ARGS__) OPSCOPE_NAMES_A
#define OPSCOPE_NAMES_A_END
#define OPSCOPE_NAMES_B_END
#define OPSCOPE_NAME_IN(n) , n##_desc, n
#define OPSCOPE_NAME_IN_OPT(n) , n##_desc, n
#define OPSCOPE_NAME_OUT(n) , n##_desc, n
#define OPSCOPE_NAME_INOUT(n) , n##_desc, n
#define OPSCOPE_NAME_OUT_OPT(n) , n##_desc, n
#define OPSCOPE_NAME_INOUT_OPT(n) , n##_desc, n
#define OPSCOPE_NAME_SCALAR(type, n) , n
#define OPSCOPE_NAME_INTS(n) , n, n##_count
#define OPSCOPE_NAME_CONV(n) , n
#define OPSCOPE_NAME_WORKSPACE(n) , n, n##_size

// Filling the argument struct from the C arguments.
#define OPSCOPE_FILLS(seq) MLUOP_SEQ_END(OPSCOPE_FILLS_A seq)
#define OPSCOPE_FILLS_A(kind, ...) OPSCOPE_FILL_##kind(__VA_ARGS__) OPSCOPE_FILLS_B
#define OPSCOPE_FILLS_B(kind, ...) OPSCOPE_FILL_##kind(__VA_ARGS__) OPSCOPE_FILLS_A
#define OPSCOPE_FILLS_A_END
#define OPSCOPE_FILLS_B_END
#define OPSCOPE_FILL_IN(n) a_.n = c_.tensor(n##_desc, n);
#define OPSCOPE_FILL_IN_OPT(n) a_.n = c_.tensor(n##_desc, n);
#define OPSCOPE_FILL_OUT(n) a_.n = c_.tensor(n##_desc, n);
#define OPSCOPE_FILL_INOUT(n) a_.n = c_.tensor(n##_desc, n);
#define OPSCOPE_FILL_OUT_OPT(n) a_.n = c_.tensor(n##_desc, n);
#define OPSCOPE_FILL_INOUT_OPT(n) a_.n = c_.tensor(n##_desc, n);
#define OPSCOPE_FILL_SCALAR(type, n) a_.n = n;
#define OPSCOPE_FILL_INTS(n) a_.n = c_.ints(n, n##_count);
#define OPSCOPE_FILL_CONV(n) a_.n = c_.conv(n);
#define OPSCOPE_FILL_WORKSPACE(n) a_.n = mlu::Workspace{n, n##_size};

#define OPSCOPE_DEFINE_OP_WRAPPER(op, Symbol, ARGS)                                               \
  extern "C" OPSCOPE_EXPORT mluopStatus_t Symbol(mluopHandle_t handle MLUOP_PARAMS(ARGS)) {       \
    static const auto real_fn = opscope::hook::real<decltype(&Symbol)>(#Symbol);                  \
    if (opscope::hook::t_inside) return real_fn(handle OPSCOPE_NAMES(ARGS));                      \
    auto fill = [&](mlu::op##_args& a_, opscope::hook::Collector& c_) {                           \
      (void)c_;                                                                                   \
      OPSCOPE_FILLS(ARGS)                                                                         \
    };                                                                                            \
    if (!opscope::hook::g_watch_ops) {                                                            \
      const mluopStatus_t status = real_fn(handle OPSCOPE_NAMES(ARGS));                           \
      if (status != MLUOP_STATUS_NOT_SUPPORTED || !opscope::hook::g_auto_fallback) return status; \
      auto refused = [status] { return status; }; /* the device said no: fall back */             \
      return opscope::hook::hookOp<mlu::op##_args>(handle, fill, refused);                        \
    }                                                                                             \
    auto forward = [&] { return real_fn(handle OPSCOPE_NAMES(ARGS)); };                           \
    return opscope::hook::hookOp<mlu::op##_args>(handle, fill, forward);                          \
  }
MLUOP_FOR_EACH_OP(OPSCOPE_DEFINE_OP_WRAPPER)
