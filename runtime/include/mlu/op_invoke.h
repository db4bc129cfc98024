// op_invoke.h — an op's C entry point called from its argument struct: mlu::invoke(handle, args) makes the
// tensor and convolution descriptors the call needs (destroyed when it returns) and passes every argument
// in schema order. What op-replay and the conformance tests use to run an op they hold as a struct.
#pragma once

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <vector>

namespace mlu {

// Tensor and convolution descriptors made for one call, destroyed with it.
class CallDescriptors {
 public:
  CallDescriptors() = default;
  CallDescriptors(const CallDescriptors&) = delete;
  CallDescriptors& operator=(const CallDescriptors&) = delete;
  ~CallDescriptors() {
    for (auto d : tensors_) mluopDestroyTensorDescriptor(d);
    for (auto d : convs_) mluopDestroyConvolutionDescriptor(d);
  }
  mluopTensorDescriptor_t tensor(const TensorView& t) {
    if (!t.present) return nullptr;
    mluopTensorDescriptor_t d = nullptr;
    mluopCreateTensorDescriptor(&d);
    tensors_.push_back(d);
    mluopSetTensorDescriptorEx(d, t.layout, t.dtype, t.ndim, t.dims.data(), t.strides.data());
    return d;
  }
  mluopConvolutionDescriptor_t conv(const ConvParams& p) {
    mluopConvolutionDescriptor_t d = nullptr;
    mluopCreateConvolutionDescriptor(&d);
    convs_.push_back(d);
    mluopSetConvolutionDescriptor(d, p.padding.data(), p.stride.data(), p.dilation.data(), p.groups);
    return d;
  }

 private:
  std::vector<mluopTensorDescriptor_t> tensors_;
  std::vector<mluopConvolutionDescriptor_t> convs_;
};

}  // namespace mlu

// The C arguments of an op rebuilt from its argument struct a_ (descriptors from d_).
#define MLU_INVOKE_ARGS(seq) MLUOP_SEQ_END(MLU_INVOKE_ARGS_A seq)
#define MLU_INVOKE_ARGS_A(kind, ...) MLU_INVOKE_ARG_##kind(__VA_ARGS__) MLU_INVOKE_ARGS_B
#define MLU_INVOKE_ARGS_B(kind, ...) MLU_INVOKE_ARG_##kind(__VA_ARGS__) MLU_INVOKE_ARGS_A
#define MLU_INVOKE_ARGS_A_END
#define MLU_INVOKE_ARGS_B_END
#define MLU_INVOKE_ARG_IN(n) , d_.tensor(a_.n), a_.n.data
#define MLU_INVOKE_ARG_IN_OPT(n) , d_.tensor(a_.n), a_.n.data
#define MLU_INVOKE_ARG_OUT(n) , d_.tensor(a_.n), a_.n.data
#define MLU_INVOKE_ARG_INOUT(n) , d_.tensor(a_.n), a_.n.data
#define MLU_INVOKE_ARG_OUT_OPT(n) , d_.tensor(a_.n), a_.n.data
#define MLU_INVOKE_ARG_INOUT_OPT(n) , d_.tensor(a_.n), a_.n.data
#define MLU_INVOKE_ARG_SCALAR(type, n) , a_.n
#define MLU_INVOKE_ARG_INTS(n) , a_.n.empty() ? nullptr : a_.n.data(), static_cast<int>(a_.n.size())
#define MLU_INVOKE_ARG_CONV(n) , d_.conv(a_.n)
#define MLU_INVOKE_ARG_WORKSPACE(n) , a_.n.data, a_.n.size

namespace mlu {

#define MLU_DEFINE_INVOKE(op, Symbol, ARGS)                                \
  inline mluopStatus_t invoke(mluopHandle_t handle, const op##_args& a_) { \
    CallDescriptors d_;                                                    \
    return Symbol(handle MLU_INVOKE_ARGS(ARGS));                           \
  }
MLUOP_FOR_EACH_OP(MLU_DEFINE_INVOKE)
#undef MLU_DEFINE_INVOKE

}  // namespace mlu
