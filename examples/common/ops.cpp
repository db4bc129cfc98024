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
  check(mluopCrossEntropyForward(h_, MLUOP_REDUCTION_MEAN, -100, 0.0, logits.desc(), logits.data(),
                                 target.desc(), target.data(), nullptr, nullptr, loss.desc(), loss.data()),
        "cross_entropy_forward");
}

void Ops::crossEntropyBackward(const DeviceTensor& grad_loss, const DeviceTensor& logits,
                               const DeviceTensor& target, const DeviceTensor& grad_logits) const {
  check(mluopCrossEntropyBackward(h_, MLUOP_REDUCTION_MEAN, -100, 0.0, grad_loss.desc(), grad_loss.data(),
                                  logits.desc(), logits.data(), target.desc(), target.data(), nullptr,
                                  nullptr, grad_logits.desc(), grad_logits.data()),
        "cross_entropy_backward");
}

void Ops::silu(const DeviceTensor& x, const DeviceTensor& y) const {
  check(mluopSilu(h_, x.desc(), x.data(), y.desc(), y.data()), "silu");
}

void Ops::siluBackward(const DeviceTensor& grad_output, const DeviceTensor& x,
                       const DeviceTensor& grad_input) const {
  check(mluopSiluBackward(h_, grad_output.desc(), grad_output.data(), x.desc(), x.data(), grad_input.desc(),
                          grad_input.data()),
        "silu_backward");
}

void Ops::embeddingForward(const DeviceTensor& weight, const DeviceTensor& indices,
                           const DeviceTensor& y) const {
  check(mluopEmbeddingForward(h_, weight.desc(), weight.data(), indices.desc(), indices.data(), y.desc(),
                              y.data()),
        "embedding_forward");
}

void Ops::embeddingBackward(const DeviceTensor& grad_output, const DeviceTensor& indices,
                            const DeviceTensor& grad_weight) const {
  check(mluopEmbeddingBackward(h_, -1, grad_output.desc(), grad_output.data(), indices.desc(), indices.data(),
                               grad_weight.desc(), grad_weight.data()),
        "embedding_backward");
}

void Ops::rmsNormForward(double eps, const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor& y,
                         const DeviceTensor& rstd) const {
  check(mluopRmsNormForward(h_, 1, eps, x.desc(), x.data(), weight.desc(), weight.data(), y.desc(), y.data(),
                            rstd.desc(), rstd.data()),
        "rms_norm_forward");
}

void Ops::rmsNormBackward(const DeviceTensor& grad_output, const DeviceTensor& x, const DeviceTensor& rstd,
                          const DeviceTensor& weight, const DeviceTensor& grad_input,
                          const DeviceTensor& grad_weight) const {
  check(mluopRmsNormBackward(h_, 1, grad_output.desc(), grad_output.data(), x.desc(), x.data(), rstd.desc(),
                             rstd.data(), weight.desc(), weight.data(), grad_input.desc(), grad_input.data(),
                             grad_weight.desc(), grad_weight.data()),
        "rms_norm_backward");
}

void Ops::ropeForward(double theta, const DeviceTensor& x, const DeviceTensor& y) const {
  check(mluopRopeForward(h_, theta, 0, x.desc(), x.data(), y.desc(), y.data()), "rope_forward");
}

void Ops::ropeBackward(double theta, const DeviceTensor& grad_output, const DeviceTensor& grad_input) const {
  check(mluopRopeBackward(h_, theta, 0, grad_output.desc(), grad_output.data(), grad_input.desc(),
                          grad_input.data()),
        "rope_backward");
}

void Ops::attentionForward(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                           const DeviceTensor& o, const DeviceTensor& lse) const {
  check(mluopScaledDotProductAttentionForward(h_, true, 0.0, q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                                              v.data(), o.desc(), o.data(), lse.desc(), lse.data()),
        "scaled_dot_product_attention_forward");
}

void Ops::attentionBackward(const DeviceTensor& grad_o, const DeviceTensor& q, const DeviceTensor& k,
                            const DeviceTensor& v, const DeviceTensor& o, const DeviceTensor& lse,
                            const DeviceTensor& grad_q, const DeviceTensor& grad_k,
                            const DeviceTensor& grad_v) const {
  check(mluopScaledDotProductAttentionBackward(h_, true, 0.0, grad_o.desc(), grad_o.data(), q.desc(),
                                               q.data(), k.desc(), k.data(), v.desc(), v.data(), o.desc(),
                                               o.data(), lse.desc(), lse.data(), grad_q.desc(), grad_q.data(),
                                               grad_k.desc(), grad_k.data(), grad_v.desc(), grad_v.data()),
        "scaled_dot_product_attention_backward");
}

void Ops::sgdStep(float lr, float momentum, float weight_decay, const DeviceTensor& param,
                  const DeviceTensor& grad, const DeviceTensor& momentum_buffer) const {
  // A zero-initialized buffer and no dampening: momentum * 0 + d is PyTorch's first step (buf = d).
  check(mluopSgdStep(h_, lr, momentum, 0.0f, weight_decay, false, false, param.desc(), param.data(),
                     grad.desc(), grad.data(), momentum_buffer.desc(), momentum_buffer.data()),
        "sgd_step");
}

void Ops::adamwStep(const AdamW& hp, std::int64_t step, float grad_scale, const DeviceTensor& param,
                    const DeviceTensor& grad, const DeviceTensor& exp_avg, const DeviceTensor& exp_avg_sq,
                    const DeviceTensor* model_param) const {
  check(mluopAdamwStep(h_, hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, step, grad_scale, false,
                       param.desc(), param.data(), grad.desc(), grad.data(), exp_avg.desc(), exp_avg.data(),
                       exp_avg_sq.desc(), exp_avg_sq.data(), nullptr, nullptr,
                       model_param ? model_param->desc() : nullptr,
                       model_param ? model_param->data() : nullptr),
        "adamw_step");
}

}  // namespace examples
