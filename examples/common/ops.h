// ops.h — one-line op calls for the demo programs: each method passes DeviceTensors (which carry their
// descriptors) to one kernel-library op on the handle's queue and stops the program with the library's
// message if the call is refused. The ops run later, in order, on the queue; nothing here blocks.
#pragma once

#include "device_tensor.h"

#include <cstdint>
#include <vector>

namespace examples {

class Ops {
 public:
  explicit Ops(mluopHandle_t handle) : h_(handle) {}
  mluopHandle_t handle() const { return h_; }

  // creation, copy (copy is also the dtype cast), random
  void fill(const DeviceTensor& y, double value) const;
  void copy(const DeviceTensor& x, const DeviceTensor& y) const;
  void uniform(std::uint64_t seed, std::uint64_t offset, double low, double high,
               const DeviceTensor& y) const;
  void normal(std::uint64_t seed, std::uint64_t offset, double mean, double std, const DeviceTensor& y) const;

  // elementwise (NumPy broadcasting)
  void add(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& c, float alpha = 1.0f) const;
  void mul(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& c) const;
  void mulScalar(const DeviceTensor& x, double value, const DeviceTensor& y) const;
  void relu(const DeviceTensor& x, const DeviceTensor& y) const;
  void reluBackward(const DeviceTensor& grad_output, const DeviceTensor& x,
                    const DeviceTensor& grad_input) const;

  // reductions and matrix products
  void sum(const DeviceTensor& x, const std::vector<int>& dims, bool keepdim, const DeviceTensor& y) const;
  // c = op(a) op(b), op = transpose when the flag is set.
  void matmul(const DeviceTensor& a, const DeviceTensor& b, const DeviceTensor& c, bool trans_a = false,
              bool trans_b = false) const;
  // y = x weight^T (+ bias when given).
  void linear(const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor* bias,
              const DeviceTensor& y) const;

  // losses (mean over the rows)
  void crossEntropyForward(const DeviceTensor& logits, const DeviceTensor& target,
                           const DeviceTensor& loss) const;
  void crossEntropyBackward(const DeviceTensor& grad_loss, const DeviceTensor& logits,
                            const DeviceTensor& target, const DeviceTensor& grad_logits) const;

  // activations
  void silu(const DeviceTensor& x, const DeviceTensor& y) const;
  void siluBackward(const DeviceTensor& grad_output, const DeviceTensor& x,
                    const DeviceTensor& grad_input) const;

  // embedding: y[i] = weight[indices[i]]; the backward overwrites grad_weight (no padding index)
  void embeddingForward(const DeviceTensor& weight, const DeviceTensor& indices, const DeviceTensor& y) const;
  void embeddingBackward(const DeviceTensor& grad_output, const DeviceTensor& indices,
                         const DeviceTensor& grad_weight) const;

  // RMS norm over the last dim: y = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps) (float32 for half x)
  void rmsNormForward(double eps, const DeviceTensor& x, const DeviceTensor& weight, const DeviceTensor& y,
                      const DeviceTensor& rstd) const;
  void rmsNormBackward(const DeviceTensor& grad_output, const DeviceTensor& x, const DeviceTensor& rstd,
                       const DeviceTensor& weight, const DeviceTensor& grad_input,
                       const DeviceTensor& grad_weight) const;

  // rotary position embedding of x [B, S, H, D], positions from 0 (y may be x itself: in place)
  void ropeForward(double theta, const DeviceTensor& x, const DeviceTensor& y) const;
  void ropeBackward(double theta, const DeviceTensor& grad_output, const DeviceTensor& grad_input) const;

  // causal scaled-dot-product attention with the default scale 1/sqrt(D): q, k, v, o [B, H, S, D] (any
  // strides), lse [B, H, S] float32
  void attentionForward(const DeviceTensor& q, const DeviceTensor& k, const DeviceTensor& v,
                        const DeviceTensor& o, const DeviceTensor& lse) const;
  void attentionBackward(const DeviceTensor& grad_o, const DeviceTensor& q, const DeviceTensor& k,
                         const DeviceTensor& v, const DeviceTensor& o, const DeviceTensor& lse,
                         const DeviceTensor& grad_q, const DeviceTensor& grad_k,
                         const DeviceTensor& grad_v) const;

  // optimizers (in place)
  void sgdStep(float lr, float momentum, float weight_decay, const DeviceTensor& param,
               const DeviceTensor& grad, const DeviceTensor& momentum_buffer) const;
  struct AdamW {
    float lr, beta1, beta2, eps, weight_decay;
  };
  // One AdamW step t (1-based) with the gradient divided by grad_scale; model_param (a half copy of param,
  // set to the updated param) may be null.
  void adamwStep(const AdamW& hp, std::int64_t step, float grad_scale, const DeviceTensor& param,
                 const DeviceTensor& grad, const DeviceTensor& exp_avg, const DeviceTensor& exp_avg_sq,
                 const DeviceTensor* model_param) const;

 private:
  mluopHandle_t h_;
};

}  // namespace examples
