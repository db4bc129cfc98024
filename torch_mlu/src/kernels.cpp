// kernels.cpp — the ATen ops that run natively on the MLU, each as calls of the kernel library (so that
// opscope's hook sees every one of them). An op whose arguments the kernel library cannot take (a dtype
// it lacks, mixed dtypes, a layout it has no kernel for) runs on the CPU through the counting fallback
// (viaCpu), so it is listed among the ops that fell back.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "fallback.h"
#include "kernel_util.h"
#include "mlu_context.h"

namespace torch_mlu {
namespace {

using at::Tensor;
using namespace kernels;  // NOLINT(google-build-using-namespace): the shared kernel helpers

// ---- elementwise binary ops ----

enum class Binary { kAdd, kSub, kMul, kDiv };

// c = a (op) b on the device, or false when the kernel library cannot take these operands (the caller
// then falls back). b may be a host scalar; c has the broadcast shape and a's dtype.
bool binary(Binary op, const Tensor& a, const Tensor& b, double alpha, const Tensor& c) {
  if (!isMlu(a) || !toMluDtype(a.scalar_type())) return false;
  checkSameDevice(a, b, "binary op");
  const c10::DeviceGuard guard(a.device());
  const Descriptor ad(a);
  const Descriptor cd(c);
  if (isHostScalar(b)) {
    if (at::result_type(a, b) != a.scalar_type() || c.scalar_type() != a.scalar_type()) return false;
    const double s = b.item<double>();
    switch (op) {
      case Binary::kAdd:
      case Binary::kSub: {
        const double value = (op == Binary::kAdd ? alpha : -alpha) * s;
        checkOps(mluopAddScalar(handle(), ad.get(), a.data_ptr(), value, cd.get(), c.data_ptr()),
                 "add_scalar");
        return true;
      }
      case Binary::kMul:
        checkOps(mluopMulScalar(handle(), ad.get(), a.data_ptr(), s, cd.get(), c.data_ptr()), "mul_scalar");
        return true;
      case Binary::kDiv:
        if (!isFloating(a)) return false;  // int / int is true division into a float
        checkOps(mluopMulScalar(handle(), ad.get(), a.data_ptr(), 1.0 / s, cd.get(), c.data_ptr()),
                 "mul_scalar");
        return true;
    }
    return false;
  }
  if (!isMlu(b) || b.scalar_type() != a.scalar_type() || c.scalar_type() != a.scalar_type()) return false;
  const Descriptor bd(b);
  switch (op) {
    case Binary::kAdd:
      checkOps(mluopAdd(handle(), static_cast<float>(alpha), ad.get(), a.data_ptr(), bd.get(), b.data_ptr(),
                        cd.get(), c.data_ptr()),
               "add");
      return true;
    case Binary::kSub:
      if (alpha == 1.0) {
        checkOps(mluopSub(handle(), ad.get(), a.data_ptr(), bd.get(), b.data_ptr(), cd.get(), c.data_ptr()),
                 "sub");
      } else {
        checkOps(mluopAdd(handle(), static_cast<float>(-alpha), ad.get(), a.data_ptr(), bd.get(),
                          b.data_ptr(), cd.get(), c.data_ptr()),
                 "add");
      }
      return true;
    case Binary::kMul:
      checkOps(mluopMul(handle(), ad.get(), a.data_ptr(), bd.get(), b.data_ptr(), cd.get(), c.data_ptr()),
               "mul");
      return true;
    case Binary::kDiv:
      if (!isFloating(a)) return false;
      checkOps(mluopDiv(handle(), ad.get(), a.data_ptr(), bd.get(), b.data_ptr(), cd.get(), c.data_ptr()),
               "div");
      return true;
  }
  return false;
}

// The functional form: a new output of the broadcast shape in PyTorch's result type (operands of other
// dtypes cast to it on the device first; true division of integers gives the default float dtype), or
// nothing (the caller falls back).
c10::optional<Tensor> binaryNew(Binary op, const Tensor& a, const Tensor& b, double alpha) {
  if (!isMlu(a)) return c10::nullopt;
  checkSameDevice(a, b, "binary op");
  at::ScalarType type = at::result_type(a, b);
  if (op == Binary::kDiv && at::isIntegralType(type, true))
    type = c10::typeMetaToScalarType(at::get_default_dtype());
  if (!toMluDtype(type)) return c10::nullopt;
  const c10::DeviceGuard guard(a.device());
  const Tensor a_cast = castTo(a, type);
  const Tensor b_cast = isHostScalar(b) ? b : castTo(b, type);
  const auto sizes = isHostScalar(b) ? a.sizes().vec() : at::infer_size(a.sizes(), b.sizes());
  Tensor c = newTensor(a, sizes, type);
  if (!binary(op, a_cast, b_cast, alpha, c)) return c10::nullopt;
  return c;
}

// The in-place form (a op= b): b must broadcast to a's shape; a device b of another dtype is cast to a's
// when that is PyTorch's result type.
bool binaryInPlace(Binary op, const Tensor& a, const Tensor& b, double alpha) {
  if (!isHostScalar(b) && at::infer_size(a.sizes(), b.sizes()) != a.sizes()) return false;
  if (isMlu(a) && isMlu(b) && b.scalar_type() != a.scalar_type()) {
    if (at::result_type(a, b) != a.scalar_type() || !toMluDtype(b.scalar_type())) return false;
    const c10::DeviceGuard guard(a.device());
    return binary(op, a, b.to(a.scalar_type()), alpha, a);
  }
  return binary(op, a, b, alpha, a);
}

Tensor add(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  if (auto c = binaryNew(Binary::kAdd, a, b, alpha.toDouble())) return *c;
  return viaCpu<at::_ops::add_Tensor>(a, b, alpha);
}
Tensor& addInPlace(Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  if (binaryInPlace(Binary::kAdd, a, b, alpha.toDouble())) return a;
  return viaCpu<at::_ops::add__Tensor>(a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  if (auto c = binaryNew(Binary::kSub, a, b, alpha.toDouble())) return *c;
  return viaCpu<at::_ops::sub_Tensor>(a, b, alpha);
}
Tensor& subInPlace(Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  if (binaryInPlace(Binary::kSub, a, b, alpha.toDouble())) return a;
  return viaCpu<at::_ops::sub__Tensor>(a, b, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  if (isHostScalar(a) && isMlu(b)) return torch_mlu::mul(b, a);
  if (auto c = binaryNew(Binary::kMul, a, b, 1.0)) return *c;
  return viaCpu<at::_ops::mul_Tensor>(a, b);
}
// out = a * b into a given output (DDP's reducer copies each gradient into its bucket this way, divided by
// the world size: a host scalar b).
Tensor& mulOut(const Tensor& a, const Tensor& b, Tensor& out) {
  if (isMlu(out) && isMlu(a) && out.scalar_type() == at::result_type(a, b)) {
    const auto sizes = isHostScalar(b) ? a.sizes().vec() : at::infer_size(a.sizes(), b.sizes());
    if (out.sizes() == sizes && binary(Binary::kMul, castTo(a, out.scalar_type()),
                                       isHostScalar(b) ? b : castTo(b, out.scalar_type()), 1.0, out))
      return out;
  }
  return viaCpu<at::_ops::mul_out>(a, b, out);
}
Tensor& mulInPlace(Tensor& a, const Tensor& b) {
  if (binaryInPlace(Binary::kMul, a, b, 1.0)) return a;
  return viaCpu<at::_ops::mul__Tensor>(a, b);
}
Tensor& mulScalarInPlace(Tensor& a, const at::Scalar& s) {
  if (binaryInPlace(Binary::kMul, a, at::scalar_tensor(s, at::device(at::kCPU).dtype(at::kDouble)), 1.0))
    return a;
  return viaCpu<at::_ops::mul__Scalar>(a, s);
}
Tensor div(const Tensor& a, const Tensor& b) {
  if (auto c = binaryNew(Binary::kDiv, a, b, 1.0)) return *c;
  return viaCpu<at::_ops::div_Tensor>(a, b);
}
Tensor& divInPlace(Tensor& a, const Tensor& b) {
  if (binaryInPlace(Binary::kDiv, a, b, 1.0)) return a;
  return viaCpu<at::_ops::div__Tensor>(a, b);
}
Tensor& divScalarInPlace(Tensor& a, const at::Scalar& s) {
  if (binaryInPlace(Binary::kDiv, a, at::scalar_tensor(s, at::device(at::kCPU).dtype(at::kDouble)), 1.0))
    return a;
  return viaCpu<at::_ops::div__Scalar>(a, s);
}

// self += value * t1 (op) t2, the optimizers' step (Adadelta, Adam).
bool addcOp(Binary op, const Tensor& self, const Tensor& t1, const Tensor& t2, double value) {
  if (!isMlu(self) || !isMlu(t1) || !isMlu(t2) || !isFloating(self) ||
      t1.scalar_type() != self.scalar_type() || t2.scalar_type() != self.scalar_type()) {
    return false;
  }
  const auto sizes = at::infer_size(t1.sizes(), t2.sizes());
  if (at::infer_size(self.sizes(), sizes) != self.sizes()) return false;
  Tensor product = newTensor(self, sizes, self.scalar_type());
  if (!binary(op, t1, t2, 1.0, product)) return false;
  return binary(Binary::kAdd, self, product, value, self);
}
Tensor& addcmulInPlace(Tensor& self, const Tensor& t1, const Tensor& t2, const at::Scalar& value) {
  if (addcOp(Binary::kMul, self, t1, t2, value.toDouble())) return self;
  return viaCpu<at::_ops::addcmul_>(self, t1, t2, value);
}
Tensor& addcdivInPlace(Tensor& self, const Tensor& t1, const Tensor& t2, const at::Scalar& value) {
  if (addcOp(Binary::kDiv, self, t1, t2, value.toDouble())) return self;
  return viaCpu<at::_ops::addcdiv_>(self, t1, t2, value);
}

// ---- elementwise unary ops ----

// A unary op over floating tensors: functional and in-place forms; others fall back.
#define TORCH_MLU_UNARY(fname, Fn, aten_op)                     \
  Tensor fname(const Tensor& x) {                               \
    if (!isFloating(x)) return viaCpu<at::_ops::aten_op>(x);    \
    Tensor y = newTensor(x);                                    \
    unaryInto(Fn, #aten_op, x, y);                              \
    return y;                                                   \
  }                                                             \
  Tensor& fname##InPlace(Tensor& x) {                           \
    if (!isFloating(x)) return viaCpu<at::_ops::aten_op##_>(x); \
    unaryInto(Fn, #aten_op, x, x);                              \
    return x;                                                   \
  }
TORCH_MLU_UNARY(relu, mluopRelu, relu)
TORCH_MLU_UNARY(sqrt, mluopSqrt, sqrt)
TORCH_MLU_UNARY(rsqrt, mluopRsqrt, rsqrt)
TORCH_MLU_UNARY(exp, mluopExp, exp)
TORCH_MLU_UNARY(log, mluopLog, log)
TORCH_MLU_UNARY(neg, mluopNeg, neg)
TORCH_MLU_UNARY(silu, mluopSilu, silu)
TORCH_MLU_UNARY(sigmoid, mluopSigmoid, sigmoid)
TORCH_MLU_UNARY(tanh, mluopTanh, tanh)
TORCH_MLU_UNARY(sin, mluopSin, sin)
TORCH_MLU_UNARY(cos, mluopCos, cos)
TORCH_MLU_UNARY(abs, mluopAbs, abs)
TORCH_MLU_UNARY(sign, mluopSign, sign)
TORCH_MLU_UNARY(sgn, mluopSign, sgn)
#undef TORCH_MLU_UNARY

Tensor thresholdBackward(const Tensor& grad_output, const Tensor& self, const at::Scalar& threshold) {
  if (threshold.toDouble() != 0.0 || !isFloating(self) || grad_output.scalar_type() != self.scalar_type() ||
      grad_output.sizes() != self.sizes()) {
    return viaCpu<at::_ops::threshold_backward>(grad_output, self, threshold);
  }
  return unaryBackward(mluopReluBackward, "relu_backward", grad_output, self);
}

Tensor sigmoidBackward(const Tensor& grad_output, const Tensor& output) {
  if (!isFloating(output) || grad_output.scalar_type() != output.scalar_type() ||
      grad_output.sizes() != output.sizes())
    return viaCpu<at::_ops::sigmoid_backward>(grad_output, output);
  return unaryBackward(mluopSigmoidBackward, "sigmoid_backward", grad_output, output);
}

Tensor tanhBackward(const Tensor& grad_output, const Tensor& output) {
  if (!isFloating(output) || grad_output.scalar_type() != output.scalar_type() ||
      grad_output.sizes() != output.sizes())
    return viaCpu<at::_ops::tanh_backward>(grad_output, output);
  return unaryBackward(mluopTanhBackward, "tanh_backward", grad_output, output);
}

Tensor siluBackward(const Tensor& grad_output, const Tensor& self) {
  return unaryBackward(mluopSiluBackward, "silu_backward", grad_output, self);
}

Tensor powScalar(const Tensor& x, const at::Scalar& exponent) {
  if (!isFloating(x) || exponent.isComplex()) return viaCpu<at::_ops::pow_Tensor_Scalar>(x, exponent);
  const c10::DeviceGuard guard(x.device());
  Tensor y = newTensor(x);
  const Descriptor xd(x), yd(y);
  checkOps(mluopPowScalar(handle(), xd.get(), x.data_ptr(), exponent.toDouble(), yd.get(), y.data_ptr()),
           "pow_scalar");
  return y;
}

Tensor& powScalarOut(const Tensor& x, const at::Scalar& exponent, Tensor& out) {
  if (!isFloating(x) || exponent.isComplex() || !isMlu(out))
    return viaCpu<at::_ops::pow_Tensor_Scalar_out>(x, exponent, out);
  return intoOut(powScalar(x, exponent), out);
}

// Random bits come from PyTorch's CPU generator, drawn on the host exactly as the CPU backend draws them
// and copied to the device: a model on the MLU then sees the dropout masks the same script sees on the CPU
// with the same seed, which is what makes a device run comparable with a CPU run step by step.
Tensor& bernoulliInPlace(Tensor& self, double p, c10::optional<at::Generator> generator) {
  Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  host.bernoulli_(p, generator);
  queueCopyFromHost(self, std::move(host));
  return self;
}

// normal_ and uniform_ (torch.randn/rand on the device, nn.init) the same way.
Tensor& normalInPlace(Tensor& self, double mean, double std, c10::optional<at::Generator> generator) {
  Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  host.normal_(mean, std, generator);
  queueCopyFromHost(self, std::move(host));
  return self;
}

Tensor& uniformInPlace(Tensor& self, double from, double to, c10::optional<at::Generator> generator) {
  Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  host.uniform_(from, to, generator);
  queueCopyFromHost(self, std::move(host));
  return self;
}

// ---- reductions ----

Tensor sumDims(const Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
               c10::optional<at::ScalarType> dtype) {
  const at::ScalarType out_type =
      dtype.value_or(at::isIntegralType(x.scalar_type(), true) ? at::kLong : x.scalar_type());
  const bool same_kind = out_type == x.scalar_type() || (out_type == at::kLong && !isFloating(x));
  if (!isMlu(x) || !toMluDtype(x.scalar_type()) || !same_kind || x.dim() == 0) {
    return viaCpu<at::_ops::sum_dim_IntList>(x, dims, keepdim, dtype);
  }
  const c10::DeviceGuard guard(x.device());
  const auto d = reductionDims(dims, x.dim());
  Tensor y = newTensor(x, reducedSizes(x, d, keepdim), out_type);
  const Descriptor xd(x), yd(y);
  checkOps(mluopReduceSum(handle(), d.data(), static_cast<int>(d.size()), keepdim, xd.get(), x.data_ptr(),
                          yd.get(), y.data_ptr()),
           "sum");
  return y;
}

Tensor sumAll(const Tensor& x, c10::optional<at::ScalarType> dtype) {
  if (x.dim() == 0) return viaCpu<at::_ops::sum>(x, dtype);
  return sumDims(x, c10::nullopt, false, dtype);
}

Tensor meanDims(const Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                c10::optional<at::ScalarType> dtype) {
  if (!isFloating(x) || (dtype.has_value() && *dtype != x.scalar_type()) || x.dim() == 0) {
    return viaCpu<at::_ops::mean_dim>(x, dims, keepdim, dtype);
  }
  const c10::DeviceGuard guard(x.device());
  const auto d = reductionDims(dims, x.dim());
  Tensor y = newTensor(x, reducedSizes(x, d, keepdim), x.scalar_type());
  const Descriptor xd(x), yd(y);
  checkOps(mluopReduceMean(handle(), d.data(), static_cast<int>(d.size()), keepdim, xd.get(), x.data_ptr(),
                           yd.get(), y.data_ptr()),
           "mean");
  return y;
}

Tensor argmax(const Tensor& x, c10::optional<int64_t> dim, bool keepdim) {
  if (!toMluDtype(x.scalar_type()) || x.scalar_type() == at::kBool || x.dim() == 0) {
    return viaCpu<at::_ops::argmax>(x, dim, keepdim);
  }
  const c10::DeviceGuard guard(x.device());
  const Tensor input = dim.has_value() ? x : x.reshape({-1});
  const int d = dim.has_value() ? static_cast<int>(c10::maybe_wrap_dim(*dim, x.dim())) : 0;
  const bool keep = dim.has_value() && keepdim;
  Tensor y = newTensor(input, reducedSizes(input, {d}, keep), at::kLong);
  const Descriptor xd(input), yd(y);
  checkOps(mluopArgmax(handle(), d, keep, xd.get(), input.data_ptr(), yd.get(), y.data_ptr()), "argmax");
  return y;
}

// ---- matrix products ----

Tensor mm(const Tensor& a, const Tensor& b) {
  if (!isFloating(a) || b.scalar_type() != a.scalar_type()) return viaCpu<at::_ops::mm>(a, b);
  checkSameDevice(a, b, "mm");
  const c10::DeviceGuard guard(a.device());
  Tensor c = newTensor(a, {a.size(0), b.size(1)}, a.scalar_type());
  const Descriptor ad(a), bd(b), cd(c);
  checkOps(mluopMatmul(handle(), false, false, ad.get(), a.data_ptr(), bd.get(), b.data_ptr(), cd.get(),
                       c.data_ptr()),
           "matmul");
  return c;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (!isFloating(a) || b.scalar_type() != a.scalar_type()) return viaCpu<at::_ops::bmm>(a, b);
  checkSameDevice(a, b, "bmm");
  const c10::DeviceGuard guard(a.device());
  Tensor c = newTensor(a, {a.size(0), a.size(1), b.size(2)}, a.scalar_type());
  const Descriptor ad(a), bd(b), cd(c);
  checkOps(mluopMatmul(handle(), false, false, ad.get(), a.data_ptr(), bd.get(), b.data_ptr(), cd.get(),
                       c.data_ptr()),
           "matmul");
  return c;
}

// addmm(bias, x, w.t()) is how nn.Linear reaches a backend: one linear op. Other forms: a product, then
// the scaled sum.
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, const at::Scalar& beta,
             const at::Scalar& alpha) {
  if (!isFloating(m1) || m2.scalar_type() != m1.scalar_type() || self.scalar_type() != m1.scalar_type()) {
    return viaCpu<at::_ops::addmm>(self, m1, m2, beta, alpha);
  }
  checkSameDevice(m1, m2, "addmm");
  checkSameDevice(m1, self, "addmm");
  const c10::DeviceGuard guard(m1.device());
  if (beta.toDouble() == 1.0 && alpha.toDouble() == 1.0 && self.dim() == 1 && self.size(0) == m2.size(1)) {
    const Tensor weight = m2.t();  // [out, in], often the parameter itself
    Tensor y = newTensor(m1, {m1.size(0), m2.size(1)}, m1.scalar_type());
    const Descriptor xd(m1), wd(weight), bd(self), yd(y);
    checkOps(mluopLinear(handle(), xd.get(), m1.data_ptr(), wd.get(), weight.data_ptr(), bd.get(),
                         self.data_ptr(), yd.get(), y.data_ptr()),
             "linear");
    return y;
  }
  Tensor c = torch_mlu::mm(m1, m2);
  if (alpha.toDouble() != 1.0) mulScalarInPlace(c, alpha);
  if (beta.toDouble() != 0.0) {
    Tensor out = newTensor(c);
    const Descriptor cd(c), sd(self), od(out);
    checkOps(mluopAdd(handle(), static_cast<float>(beta.toDouble()), cd.get(), c.data_ptr(), sd.get(),
                      self.data_ptr(), od.get(), out.data_ptr()),
             "add");
    return out;
  }
  return c;
}

// ---- convolution ----

class ConvDescriptor {
 public:
  ConvDescriptor(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
    checkOps(mluopCreateConvolutionDescriptor(&desc_), "mluopCreateConvolutionDescriptor");
    const int pad[2] = {static_cast<int>(padding[0]), static_cast<int>(padding[1])};
    const int str[2] = {static_cast<int>(stride[0]), static_cast<int>(stride[1])};
    const int dil[2] = {static_cast<int>(dilation[0]), static_cast<int>(dilation[1])};
    const mluopStatus_t s = mluopSetConvolutionDescriptor(desc_, pad, str, dil, static_cast<int>(groups));
    if (s != MLUOP_STATUS_SUCCESS) {
      mluopDestroyConvolutionDescriptor(desc_);
      checkOps(s, "mluopSetConvolutionDescriptor");
    }
  }
  ~ConvDescriptor() { mluopDestroyConvolutionDescriptor(desc_); }
  ConvDescriptor(const ConvDescriptor&) = delete;
  ConvDescriptor& operator=(const ConvDescriptor&) = delete;
  mluopConvolutionDescriptor_t get() const { return desc_; }

 private:
  mluopConvolutionDescriptor_t desc_ = nullptr;
};

// Whether the kernel library has this convolution: 2-d, not transposed, float.
bool conv2dSupported(const Tensor& input, const Tensor& weight, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed) {
  return !transposed && input.dim() == 4 && weight.dim() == 4 && stride.size() == 2 && padding.size() == 2 &&
         dilation.size() == 2 && isFloating(input) && weight.scalar_type() == input.scalar_type();
}

// PyTorch's int[2] convolution arguments as two values: a C++ caller may give one for both dims.
std::vector<int64_t> twoOf(at::IntArrayRef v) {
  if (v.size() == 1) return {v[0], v[0]};
  return v.vec();
}

Tensor workspace(const Tensor& like, size_t bytes) {
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}

Tensor convolution(const Tensor& input, const Tensor& weight, const c10::optional<Tensor>& bias,
                   at::IntArrayRef stride_arg, at::IntArrayRef padding_arg, at::IntArrayRef dilation_arg,
                   bool transposed, at::IntArrayRef output_padding, int64_t groups) {
  const std::vector<int64_t> stride_v = twoOf(stride_arg), padding_v = twoOf(padding_arg),
                             dilation_v = twoOf(dilation_arg);
  const at::IntArrayRef stride(stride_v), padding(padding_v), dilation(dilation_v);
  if (!conv2dSupported(input, weight, stride, padding, dilation, transposed)) {
    return viaCpu<at::_ops::convolution>(input, weight, bias, stride, padding, dilation, transposed,
                                         output_padding, groups);
  }
  checkSameDevice(input, weight, "convolution");
  const c10::DeviceGuard guard(input.device());
  std::vector<int64_t> out_sizes = {input.size(0), weight.size(0), 0, 0};
  for (int i = 0; i < 2; ++i) {
    out_sizes[2 + i] =
        (input.size(2 + i) + 2 * padding[i] - dilation[i] * (weight.size(2 + i) - 1) - 1) / stride[i] + 1;
  }
  Tensor y = newTensor(input, out_sizes, input.scalar_type());
  const ConvDescriptor conv(stride, padding, dilation, groups);
  const Descriptor xd(input), wd(weight), yd(y);
  size_t bytes = 0;
  checkOps(
      mluopGetConvolutionForwardWorkspaceSize(handle(), conv.get(), xd.get(), wd.get(), yd.get(), &bytes),
      "mluopGetConvolutionForwardWorkspaceSize");
  const Tensor ws = workspace(input, bytes);
  const bool has_bias = bias.has_value() && bias->defined();
  const std::optional<Descriptor> bd =
      has_bias ? std::optional<Descriptor>(std::in_place, *bias) : std::nullopt;
  checkOps(
      mluopConvolutionForward(handle(), conv.get(), xd.get(), input.data_ptr(), wd.get(), weight.data_ptr(),
                              has_bias ? bd->get() : nullptr, has_bias ? bias->data_ptr() : nullptr,
                              bytes ? ws.data_ptr() : nullptr, bytes, yd.get(), y.data_ptr()),
      "conv2d_forward");
  return y;
}

std::tuple<Tensor, Tensor, Tensor> convolutionBackward(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    at::OptionalSymIntArrayRef bias_sizes, at::IntArrayRef stride_arg, at::IntArrayRef padding_arg,
    at::IntArrayRef dilation_arg, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  const std::vector<int64_t> stride_v = twoOf(stride_arg), padding_v = twoOf(padding_arg),
                             dilation_v = twoOf(dilation_arg);
  const at::IntArrayRef stride(stride_v), padding(padding_v), dilation(dilation_v);
  if (!conv2dSupported(input, weight, stride, padding, dilation, transposed) ||
      grad_output.scalar_type() != input.scalar_type()) {
    return viaCpuSymint<at::_ops::convolution_backward>(grad_output, input, weight, bias_sizes, stride,
                                                        padding, dilation, transposed, output_padding, groups,
                                                        output_mask);
  }
  const c10::DeviceGuard guard(input.device());
  const ConvDescriptor conv(stride, padding, dilation, groups);
  const Descriptor god(grad_output);
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = newTensor(input);
    const Descriptor wd(weight), gid(grad_input);
    size_t bytes = 0;
    checkOps(mluopGetConvolutionBackwardDataWorkspaceSize(handle(), conv.get(), god.get(), wd.get(),
                                                          gid.get(), &bytes),
             "mluopGetConvolutionBackwardDataWorkspaceSize");
    const Tensor ws = workspace(input, bytes);
    checkOps(mluopConvolutionBackwardData(handle(), conv.get(), god.get(), grad_output.data_ptr(), wd.get(),
                                          weight.data_ptr(), bytes ? ws.data_ptr() : nullptr, bytes,
                                          gid.get(), grad_input.data_ptr()),
             "conv2d_backward_data");
  }
  if (output_mask[1]) {
    grad_weight = newTensor(weight);
    const Descriptor xd(input), gwd(grad_weight);
    size_t bytes = 0;
    checkOps(mluopGetConvolutionBackwardFilterWorkspaceSize(handle(), conv.get(), xd.get(), god.get(),
                                                            gwd.get(), &bytes),
             "mluopGetConvolutionBackwardFilterWorkspaceSize");
    const Tensor ws = workspace(input, bytes);
    checkOps(mluopConvolutionBackwardFilter(handle(), conv.get(), xd.get(), input.data_ptr(), god.get(),
                                            grad_output.data_ptr(), bytes ? ws.data_ptr() : nullptr, bytes,
                                            gwd.get(), grad_weight.data_ptr()),
             "conv2d_backward_filter");
  }
  if (output_mask[2]) {
    grad_bias = newTensor(weight, {weight.size(0)}, weight.scalar_type());
    const Descriptor gbd(grad_bias);
    checkOps(mluopConvolutionBackwardBias(handle(), god.get(), grad_output.data_ptr(), gbd.get(),
                                          grad_bias.data_ptr()),
             "conv2d_backward_bias");
  }
  return {grad_input, grad_weight, grad_bias};
}

// ---- pooling ----

int64_t poolOutputSize(int64_t in, int k, int s, int p, int d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = span / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

std::tuple<Tensor, Tensor> maxPool2dWithIndices(const Tensor& x, at::IntArrayRef kernel_size,
                                                at::IntArrayRef stride, at::IntArrayRef padding,
                                                at::IntArrayRef dilation, bool ceil_mode) {
  const auto ko = intPair(kernel_size, kernel_size), so = intPair(stride, kernel_size),
             po = intPair(padding, padding), do_ = intPair(dilation, dilation);
  if (!isFloating(x) || (x.dim() != 3 && x.dim() != 4) || !ko || !so || !po || !do_) {
    return viaCpu<at::_ops::max_pool2d_with_indices>(x, kernel_size, stride, padding, dilation, ceil_mode);
  }
  const c10::DeviceGuard guard(x.device());
  const std::array<int, 2> k = *ko, s = *so, p = *po, d = *do_;
  std::vector<int64_t> sizes = x.sizes().vec();
  const int64_t h = x.dim() - 2;
  sizes[h] = poolOutputSize(x.size(h), k[0], s[0], p[0], d[0], ceil_mode);
  sizes[h + 1] = poolOutputSize(x.size(h + 1), k[1], s[1], p[1], d[1], ceil_mode);
  Tensor y = newTensor(x, sizes, x.scalar_type());
  Tensor indices = newTensor(x, sizes, at::kLong);
  const Descriptor xd(x), yd(y), id(indices);
  checkOps(
      mluopMaxPool2dForward(handle(), k.data(), 2, s.data(), 2, p.data(), 2, d.data(), 2, ceil_mode, xd.get(),
                            x.data_ptr(), yd.get(), y.data_ptr(), id.get(), indices.data_ptr()),
      "max_pool2d_forward");
  return {y, indices};
}

Tensor maxPool2dWithIndicesBackward(const Tensor& grad_output, const Tensor& x, at::IntArrayRef kernel_size,
                                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                    bool ceil_mode, const Tensor& indices) {
  const auto ko = intPair(kernel_size, kernel_size), so = intPair(stride, kernel_size),
             po = intPair(padding, padding), do_ = intPair(dilation, dilation);
  if (!isFloating(x) || grad_output.scalar_type() != x.scalar_type() || !ko || !so || !po || !do_) {
    return viaCpu<at::_ops::max_pool2d_with_indices_backward>(grad_output, x, kernel_size, stride, padding,
                                                              dilation, ceil_mode, indices);
  }
  const c10::DeviceGuard guard(x.device());
  const std::array<int, 2> k = *ko, s = *so, p = *po, d = *do_;
  Tensor grad_input = newTensor(x);
  const Descriptor god(grad_output), id(indices), gid(grad_input);
  checkOps(mluopMaxPool2dBackward(handle(), k.data(), 2, s.data(), 2, p.data(), 2, d.data(), 2, ceil_mode,
                                  god.get(), grad_output.data_ptr(), id.get(), indices.data_ptr(), gid.get(),
                                  grad_input.data_ptr()),
           "max_pool2d_backward");
  return grad_input;
}

// ---- softmax and losses ----

using SoftmaxFn = mluopStatus_t (*)(mluopHandle_t, int, const mluopTensorDescriptor_t, const void*,
                                    const mluopTensorDescriptor_t, void*);
using SoftmaxBackwardFn = mluopStatus_t (*)(mluopHandle_t, int, const mluopTensorDescriptor_t, const void*,
                                            const mluopTensorDescriptor_t, const void*,
                                            const mluopTensorDescriptor_t, void*);

template <SoftmaxFn fn>
Tensor softmaxForward(const Tensor& x, int64_t dim, const char* name) {
  const c10::DeviceGuard guard(x.device());
  Tensor y = newTensor(x);
  const Descriptor xd(x), yd(y);
  checkOps(fn(handle(), static_cast<int>(c10::maybe_wrap_dim(dim, x.dim())), xd.get(), x.data_ptr(), yd.get(),
              y.data_ptr()),
           name);
  return y;
}

template <SoftmaxBackwardFn fn>
Tensor softmaxBackward(const Tensor& grad_output, const Tensor& y, int64_t dim, const char* name) {
  const c10::DeviceGuard guard(y.device());
  Tensor grad_input = newTensor(y);
  const Descriptor yd(y), god(grad_output), gid(grad_input);
  checkOps(fn(handle(), static_cast<int>(c10::maybe_wrap_dim(dim, y.dim())), yd.get(), y.data_ptr(),
              god.get(), grad_output.data_ptr(), gid.get(), grad_input.data_ptr()),
           name);
  return grad_input;
}

Tensor logSoftmax(const Tensor& x, int64_t dim, bool half_to_float) {
  if (half_to_float || !isFloating(x) || x.dim() == 0)
    return viaCpu<at::_ops::_log_softmax>(x, dim, half_to_float);
  return softmaxForward<mluopLogSoftmaxForward>(x, dim, "log_softmax_forward");
}
Tensor logSoftmaxBackward(const Tensor& grad_output, const Tensor& output, int64_t dim,
                          at::ScalarType input_dtype) {
  if (input_dtype != output.scalar_type() || grad_output.scalar_type() != output.scalar_type() ||
      output.dim() == 0) {
    return viaCpu<at::_ops::_log_softmax_backward_data>(grad_output, output, dim, input_dtype);
  }
  return softmaxBackward<mluopLogSoftmaxBackward>(grad_output, output, dim, "log_softmax_backward");
}
Tensor softmax(const Tensor& x, int64_t dim, bool half_to_float) {
  if (half_to_float || !isFloating(x) || x.dim() == 0)
    return viaCpu<at::_ops::_softmax>(x, dim, half_to_float);
  return softmaxForward<mluopSoftmaxForward>(x, dim, "softmax_forward");
}
Tensor softmaxBackwardData(const Tensor& grad_output, const Tensor& output, int64_t dim,
                           at::ScalarType input_dtype) {
  if (input_dtype != output.scalar_type() || grad_output.scalar_type() != output.scalar_type() ||
      output.dim() == 0) {
    return viaCpu<at::_ops::_softmax_backward_data>(grad_output, output, dim, input_dtype);
  }
  return softmaxBackward<mluopSoftmaxBackward>(grad_output, output, dim, "softmax_backward");
}

// PyTorch's total_weight: the summed class weights of the rows not ignored (their count without weights),
// which nll_loss_forward returns beside the loss. Computed on the device by the kernel library's ops.
Tensor totalWeight(const Tensor& input, const Tensor& target, const c10::optional<Tensor>& weight,
                   int64_t ignore_index) {
  Tensor ignore = newTensor(target, {}, at::kLong);
  ignore.fill_(ignore_index);
  Tensor counted = newTensor(target, target.sizes(), at::kBool);
  {
    const Descriptor td(target), id(ignore), cd(counted);
    checkOps(mluopNe(handle(), td.get(), target.data_ptr(), id.get(), ignore.data_ptr(), cd.get(),
                     counted.data_ptr()),
             "ne");
  }
  Tensor total = newTensor(input, {}, input.scalar_type());
  if (!weight.has_value() || !weight->defined()) {
    const Tensor count = sumAll(counted, c10::nullopt);
    const Descriptor cd(count), td(total);
    checkOps(mluopCopy(handle(), cd.get(), count.data_ptr(), td.get(), total.data_ptr()), "copy");
    return total;
  }
  // The weights of the counted rows: weight[where(counted, target, 0)] masked by counted.
  Tensor zero = newTensor(target, {}, at::kLong);
  zero.fill_(0);
  Tensor safe = newTensor(target, target.sizes(), at::kLong);
  Tensor flat_weights = newTensor(input, {target.numel()}, input.scalar_type());
  {
    const Descriptor cd(counted), td(target), zd(zero), sd(safe);
    checkOps(mluopWhere(handle(), cd.get(), counted.data_ptr(), td.get(), target.data_ptr(), zd.get(),
                        zero.data_ptr(), sd.get(), safe.data_ptr()),
             "where");
    const Tensor safe_flat = safe.reshape({-1});
    const Descriptor wd(*weight), fd(safe_flat), ywd(flat_weights);
    checkOps(mluopIndexSelect(handle(), 0, wd.get(), weight->data_ptr(), fd.get(), safe_flat.data_ptr(),
                              ywd.get(), flat_weights.data_ptr()),
             "index_select");
  }
  Tensor zeros = newTensor(input, {}, input.scalar_type());
  zeros.fill_(0);
  const Tensor counted_flat = counted.reshape({-1});
  Tensor kept = newTensor(flat_weights);
  {
    const Descriptor cd(counted_flat), fd(flat_weights), zd(zeros), kd(kept);
    checkOps(mluopWhere(handle(), cd.get(), counted_flat.data_ptr(), fd.get(), flat_weights.data_ptr(),
                        zd.get(), zeros.data_ptr(), kd.get(), kept.data_ptr()),
             "where");
  }
  return sumAll(kept, c10::nullopt);
}

std::tuple<Tensor, Tensor> nllLossForward(const Tensor& self, const Tensor& target,
                                          const c10::optional<Tensor>& weight, int64_t reduction,
                                          int64_t ignore_index) {
  const bool has_weight = weight.has_value() && weight->defined();
  if (!isFloating(self) || target.scalar_type() != at::kLong || !isMlu(target) ||
      (has_weight && weight->scalar_type() != self.scalar_type())) {
    return viaCpu<at::_ops::nll_loss_forward>(self, target, weight, reduction, ignore_index);
  }
  const c10::DeviceGuard guard(self.device());
  Tensor output = reduction == at::Reduction::None ? newTensor(self, target.sizes(), self.scalar_type())
                                                   : newTensor(self, {}, self.scalar_type());
  const Descriptor xd(self), td(target), od(output);
  const std::optional<Descriptor> wd =
      has_weight ? std::optional<Descriptor>(std::in_place, *weight) : std::nullopt;
  checkOps(mluopNllLossForward(handle(), static_cast<int>(reduction), ignore_index, xd.get(), self.data_ptr(),
                               td.get(), target.data_ptr(), has_weight ? wd->get() : nullptr,
                               has_weight ? weight->data_ptr() : nullptr, od.get(), output.data_ptr()),
           "nll_loss_forward");
  return {output, totalWeight(self, target, weight, ignore_index)};
}

Tensor nllLossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                       const c10::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                       const Tensor& total_weight) {
  const bool has_weight = weight.has_value() && weight->defined();
  if (!isFloating(self) || target.scalar_type() != at::kLong ||
      grad_output.scalar_type() != self.scalar_type()) {
    return viaCpu<at::_ops::nll_loss_backward>(grad_output, self, target, weight, reduction, ignore_index,
                                               total_weight);
  }
  const c10::DeviceGuard guard(self.device());
  Tensor grad_input = newTensor(self);
  const Descriptor god(grad_output), td(target), gid(grad_input);
  const std::optional<Descriptor> wd =
      has_weight ? std::optional<Descriptor>(std::in_place, *weight) : std::nullopt;
  checkOps(mluopNllLossBackward(handle(), static_cast<int>(reduction), ignore_index, god.get(),
                                grad_output.data_ptr(), td.get(), target.data_ptr(),
                                has_weight ? wd->get() : nullptr, has_weight ? weight->data_ptr() : nullptr,
                                gid.get(), grad_input.data_ptr()),
           "nll_loss_backward");
  return grad_input;
}

// mse_loss: the mean (sum, or none) of (self - target)^2, composed of the device's ops; the backward is
// 2 (self - target) grad, divided by the elements for the mean. Operands of other shapes or dtypes, or not on
// the device, go to the CPU.
bool mseOnDevice(const Tensor& self, const Tensor& target) {
  return isMlu(self) && isMlu(target) && isFloating(self) && target.scalar_type() == self.scalar_type() &&
         target.sizes() == self.sizes();
}

Tensor mseLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  if (!mseOnDevice(self, target)) return viaCpu<at::_ops::mse_loss>(self, target, reduction);
  const c10::DeviceGuard guard(self.device());
  const Tensor diff = self - target;
  const Tensor squared = diff * diff;
  if (reduction == at::Reduction::Mean) return squared.mean();
  if (reduction == at::Reduction::Sum) return squared.sum();
  return squared;
}

Tensor mseLossBackward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                       int64_t reduction) {
  if (!mseOnDevice(self, target) || !isMlu(grad_output) || grad_output.scalar_type() != self.scalar_type())
    return viaCpu<at::_ops::mse_loss_backward>(grad_output, self, target, reduction);
  const c10::DeviceGuard guard(self.device());
  const double scale =
      reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(std::max<int64_t>(self.numel(), 1)) : 2.0;
  return (self - target) * scale * grad_output;
}

// ---- indexing ----

// cat: two tensors by the kernel library's concat; more, each copied into its slice of the output.
Tensor cat(const at::ITensorListRef& list, int64_t dim) {
  const std::vector<Tensor> tensors(list.begin(), list.end());
  std::vector<Tensor> parts;  // the legacy empty [0] tensors PyTorch skips
  for (const Tensor& t : tensors) {
    if (!(t.dim() == 1 && t.size(0) == 0)) parts.push_back(t);
  }
  bool native = !parts.empty() && toMluDtype(parts[0].scalar_type()).has_value();
  for (const Tensor& t : parts) {
    native = native && isMlu(t) && t.scalar_type() == parts[0].scalar_type() && t.dim() == parts[0].dim();
  }
  if (!native) return viaCpu<at::_ops::cat>(list, dim);
  const Tensor& first = parts[0];
  const int d = static_cast<int>(c10::maybe_wrap_dim(dim, first.dim()));
  std::vector<int64_t> sizes = first.sizes().vec();
  sizes[d] = 0;
  for (const Tensor& t : parts) {
    for (int64_t i = 0; i < first.dim(); ++i) {
      TORCH_CHECK(i == d || t.size(i) == first.size(i),
                  "torch_mlu: cat: sizes of tensors must match except in ", "dimension ", d, ", got ",
                  first.sizes(), " and ", t.sizes());
    }
    sizes[d] += t.size(d);
  }
  const c10::DeviceGuard guard(first.device());
  Tensor y = newTensor(first, sizes, first.scalar_type());
  if (parts.size() == 2) {
    const Descriptor ad(parts[0]), bd(parts[1]), yd(y);
    checkOps(mluopConcat(handle(), d, ad.get(), parts[0].data_ptr(), bd.get(), parts[1].data_ptr(), yd.get(),
                         y.data_ptr()),
             "concat");
    return y;
  }
  int64_t offset = 0;
  for (const Tensor& t : parts) {
    const Tensor slice = y.narrow(d, offset, t.size(d));
    offset += t.size(d);
    if (t.numel() == 0) continue;
    const Descriptor td(t), sd(slice);
    checkOps(mluopCopy(handle(), td.get(), t.data_ptr(), sd.get(), slice.data_ptr()), "copy");
  }
  return y;
}

Tensor indexSelect(const Tensor& x, int64_t dim, const Tensor& index) {
  if (!toMluDtype(x.scalar_type()) || index.scalar_type() != at::kLong || !isMlu(index)) {
    return viaCpu<at::_ops::index_select>(x, dim, index);
  }
  const c10::DeviceGuard guard(x.device());
  const int d = static_cast<int>(c10::maybe_wrap_dim(dim, x.dim()));
  std::vector<int64_t> sizes = x.sizes().vec();
  if (!sizes.empty()) sizes[d] = index.numel();
  Tensor y = newTensor(x, sizes, x.scalar_type());
  const Descriptor xd(x), id(index), yd(y);
  checkOps(mluopIndexSelect(handle(), d, xd.get(), x.data_ptr(), id.get(), index.data_ptr(), yd.get(),
                            y.data_ptr()),
           "index_select");
  return y;
}

Tensor embeddingDenseBackward(const Tensor& grad_output, const Tensor& indices, c10::SymInt num_weights,
                              int64_t padding_idx, bool scale_grad_by_freq) {
  if (scale_grad_by_freq || !isFloating(grad_output) || indices.scalar_type() != at::kLong) {
    return viaCpuSymint<at::_ops::embedding_dense_backward>(grad_output, indices, num_weights, padding_idx,
                                                            scale_grad_by_freq);
  }
  const c10::DeviceGuard guard(grad_output.device());
  Tensor grad_weight =
      newTensor(grad_output, {num_weights.expect_int(), grad_output.size(-1)}, grad_output.scalar_type());
  const Descriptor god(grad_output), id(indices), gwd(grad_weight);
  checkOps(mluopEmbeddingBackward(handle(), padding_idx, god.get(), grad_output.data_ptr(), id.get(),
                                  indices.data_ptr(), gwd.get(), grad_weight.data_ptr()),
           "embedding_backward");
  return grad_weight;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add_.Tensor", TORCH_FN(addInPlace));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("sub_.Tensor", TORCH_FN(subInPlace));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("mul_.Tensor", TORCH_FN(mulInPlace));
  m.impl("mul.out", TORCH_FN(mulOut));
  m.impl("mul_.Scalar", TORCH_FN(mulScalarInPlace));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("div_.Tensor", TORCH_FN(divInPlace));
  m.impl("div_.Scalar", TORCH_FN(divScalarInPlace));
  m.impl("addcmul_", TORCH_FN(addcmulInPlace));
  m.impl("addcdiv_", TORCH_FN(addcdivInPlace));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(reluInPlace));
  m.impl("sqrt", TORCH_FN(sqrt));
  m.impl("sqrt_", TORCH_FN(sqrtInPlace));
  m.impl("rsqrt", TORCH_FN(rsqrt));
  m.impl("rsqrt_", TORCH_FN(rsqrtInPlace));
  m.impl("exp", TORCH_FN(exp));
  m.impl("exp_", TORCH_FN(expInPlace));
  m.impl("log", TORCH_FN(log));
  m.impl("log_", TORCH_FN(logInPlace));
  m.impl("neg", TORCH_FN(neg));
  m.impl("neg_", TORCH_FN(negInPlace));
  m.impl("silu", TORCH_FN(silu));
  m.impl("silu_", TORCH_FN(siluInPlace));
  m.impl("sigmoid", TORCH_FN(sigmoid));
  m.impl("sigmoid_", TORCH_FN(sigmoidInPlace));
  m.impl("tanh", TORCH_FN(tanh));
  m.impl("tanh_", TORCH_FN(tanhInPlace));
  m.impl("sin", TORCH_FN(sin));
  m.impl("sin_", TORCH_FN(sinInPlace));
  m.impl("cos", TORCH_FN(cos));
  m.impl("cos_", TORCH_FN(cosInPlace));
  m.impl("abs", TORCH_FN(abs));
  m.impl("abs_", TORCH_FN(absInPlace));
  m.impl("sign", TORCH_FN(sign));
  m.impl("sign_", TORCH_FN(signInPlace));
  m.impl("sgn", TORCH_FN(sgn));
  m.impl("sgn_", TORCH_FN(sgnInPlace));
  m.impl("sigmoid_backward", TORCH_FN(sigmoidBackward));
  m.impl("tanh_backward", TORCH_FN(tanhBackward));
  m.impl("threshold_backward", TORCH_FN(thresholdBackward));
  m.impl("silu_backward", TORCH_FN(siluBackward));
  m.impl("pow.Tensor_Scalar", TORCH_FN(powScalar));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(powScalarOut));
  m.impl("bernoulli_.float", TORCH_FN(bernoulliInPlace));
  m.impl("normal_", TORCH_FN(normalInPlace));
  m.impl("uniform_", TORCH_FN(uniformInPlace));
  m.impl("sum.dim_IntList", TORCH_FN(sumDims));
  m.impl("sum", TORCH_FN(sumAll));
  m.impl("mean.dim", TORCH_FN(meanDims));
  m.impl("argmax", TORCH_FN(argmax));
  m.impl("mm", TORCH_FN(mm));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("convolution", TORCH_FN(convolution));
  m.impl("convolution_backward", TORCH_FN(convolutionBackward));
  m.impl("max_pool2d_with_indices", TORCH_FN(maxPool2dWithIndices));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(maxPool2dWithIndicesBackward));
  m.impl("_log_softmax", TORCH_FN(logSoftmax));
  m.impl("_log_softmax_backward_data", TORCH_FN(logSoftmaxBackward));
  m.impl("_softmax", TORCH_FN(softmax));
  m.impl("_softmax_backward_data", TORCH_FN(softmaxBackwardData));
  m.impl("nll_loss_forward", TORCH_FN(nllLossForward));
  m.impl("nll_loss_backward", TORCH_FN(nllLossBackward));
  m.impl("mse_loss", TORCH_FN(mseLoss));
  m.impl("mse_loss_backward", TORCH_FN(mseLossBackward));
  m.impl("index_select", TORCH_FN(indexSelect));
  m.impl("cat", TORCH_FN(cat));
  m.impl("embedding_dense_backward", TORCH_FN(embeddingDenseBackward));
}

}  // namespace
}  // namespace torch_mlu
