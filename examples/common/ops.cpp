#include "ops.h"

namespace examples {

void Ops::fill(const DeviceTensor& y, double value) const {
  check(mluopFill(h_, value, y.desc(), y.data()), "fill");
}

void Ops::copy(const DeviceTensor& x, const DeviceTensor& y) const {
  check(mluopCopy(h_, x.desc(), x.data(), y.desc(), y.data()), "copy");
}

void Ops::uniform(std::uint64_t seed, std::uint64_t offset, double low, double high,
                  const DeviceTensor& y) const {
  check(mluopRandUniform(h_, seed, offset, low, high, y.desc(), y.data()), "uniform");
}

void Ops::normal(std::uint64_t seed, std::uint64_t offset, double mean, double std,
                 const DeviceTensor& y) const {
  check(mluopRandNormal(h_, seed, offset, mean, std, y.desc(), y.data()), "normal");
}

void Ops::add(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& c, float alpha) const {
  check(mluopAdd(h_, alpha, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()), "add");
}

void Ops::mul(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& c) const {
  check(mluopMul(h_, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()), "mul");
}

void Ops::mulScalar(const DeviceTensor& x, double value, const DeviceTensor& y) const {
  check(mluopMulScalar(h_, x.desc(), x.data(), value, y.desc(), y.data()), "mul_scalar");
}

void Ops::relu(const DeviceTensor& x, const DeviceTensor& y) const {
  check(mluopRelu(h_, x.desc(), x.data(), y.desc(), y.data()), "relu");
}

void Ops::reluBackward(const DeviceTensor& grad_output, const DeviceTensor& x,
                       const DeviceTensor& grad_input) const {
  check(mluopReluBackward(h_, grad_output.desc(), grad_output.data(), x.desc(), x.data(), grad_input.desc(),
                          grad_input.data()),
        "relu_backward");
}

void Ops::sum(const DeviceTensor& x, const std::vector<int>& dims, bool keepdim,
              const DeviceTensor& y) const {
  check(mluopReduceSum(h_, dims.data(), static_cast<int>(dims.size()), keepdim, x.desc(), x.data(), y.desc(),
                       y.data()),
        "sum");
}

void Ops::matmul(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& c, bool trans_a,
                 bool trans_b) const {
  check(mluopMatmul(h_, trans_a, trans_b, a.desc(), a.data(), b.desc(), b.data(), c.desc(), c.data()),
        "matmul");
}

void Ops::linear(const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor* bias,
                 const DeviceTensor& y) const {
  check(mluopLinear(h_, x.desc(), x.data(), weight.desc(), weight.data(), bias ? bias->desc() : nullptr,
                    bias ? bias->data() : nullptr, y.desc(), y.data()),
        "linear");
}

void Ops::crossEntropyForward(const DeviceTensor& logits, const DeviceTensor& target,
                              const DeviceTensor& loss) const {
  check(mluopCrossEntropyForward(h_, MLUOP_REDUCTION_MEAN, -100, logits.desc(), logits.data(), target.desc(),
                                 target.data(), loss.desc(), loss.data()),
        "cross_entropy_forward");
}

void Ops::crossEntropyBackward(const DeviceTensor& grad_loss, const DeviceTensor& logits,
                               const DeviceTensor& target, const DeviceTensor& grad_logits) const {
  check(mluopCrossEntropyBackward(h_, MLUOP_REDUCTION_MEAN, -100, grad_loss.desc(), grad_loss.data(),
                                  logits.desc(), logits.data(), target.desc(), target.data(),
                                  grad_logits.desc(), grad_logits.data()),
        "cross_entropy_backward");
}

void Ops::sgdStep(float lr, float momentum, float weight_decay, const DeviceTensor& param,
                  const DeviceTensor& grad, const DeviceTensor& momentum_buffer) const {
  check(mluopSgdStep(h_, lr, momentum, weight_decay, param.desc(), param.data(), grad.desc(), grad.data(),
                     momentum_buffer.desc(), momentum_buffer.data()),
        "sgd_step");
}

}  // namespace examples
