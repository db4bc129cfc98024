// nn.h — the trainable-parameter and module helpers the demo programs share.
//
// Mixed precision as training frameworks do it: each Parameter keeps float32 master weights (what the
// optimizer updates, with its float32 state) and the copy the model computes with in the compute dtype
// (float32, float16 or bfloat16; in float32 mode it is the master tensor itself). Gradients are in the
// compute dtype and are overwritten by every backward pass.
#pragma once

#include "device_tensor.h"
#include "ops.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace examples {

// How a parameter starts: U(-a, a), N(0, a^2) or the constant a.
struct Init {
  enum Kind { kUniform, kNormal, kConstant } kind;
  double a;
  static Init uniform(double bound) { return {kUniform, bound}; }
  static Init normal(double std) { return {kNormal, std}; }
  static Init constant(double value) { return {kConstant, value}; }
};

struct Parameter {
  std::string name;
  DeviceTensor master;  // float32 weights, updated by the optimizer
  DeviceTensor model;   // the copy in the compute dtype the model reads (== master in float32 mode)
  DeviceTensor grad;    // gradient in the compute dtype
  DeviceTensor state1;  // optimizer state, float32: SGD's momentum buffer or AdamW's exp_avg
  DeviceTensor state2;  // AdamW's exp_avg_sq
  DeviceTensor grad32;  // SGD in a half dtype: the gradient cast to float32
  bool decay = true;    // whether weight decay applies (not to norm weights)
};

// The parameters of a model, created in a fixed order from one seed (each draws its own Philox stream).
class ParameterSet {
 public:
  ParameterSet(const Ops& ops, mluopDataType_t compute_dtype, std::uint64_t seed)
      : ops_(ops), dtype_(compute_dtype), seed_(seed) {}
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;

  Parameter& add(std::string name, Dims dims, Init init, bool decay = true);

  const std::vector<std::unique_ptr<Parameter>>& all() const { return params_; }
  std::int64_t count() const;  // total number of weights
  mluopDataType_t dtype() const { return dtype_; }
  const Ops& ops() const { return ops_; }

  // One SGD step (PyTorch's SGD with momentum) on every parameter, then the model copies are refreshed.
  void sgdStep(float lr, float momentum, float weight_decay);

  // One AdamW step t (1-based) on every parameter, the gradients divided by grad_scale (loss scaling); the
  // half model copies are refreshed by the same op.
  void adamwStep(const Ops::AdamW& hp, std::int64_t step, float grad_scale);

  // Whether every gradient is finite: one small reduction per parameter, then one download (it waits for
  // the queue). Used by dynamic loss scaling.
  bool gradsFinite();

 private:
  const Ops& ops_;
  mluopDataType_t dtype_;
  std::uint64_t seed_;
  std::uint64_t next_offset_ = 0;  // Philox counter: each parameter gets its own range
  std::vector<std::unique_ptr<Parameter>> params_;
  DeviceTensor finite_scratch_, finite_sums_;
};

// y = x W^T (+ b): x [N, in], W [out, in], b [out]. PyTorch's default initialization,
// U(-1/sqrt(in), 1/sqrt(in)) for W and b, unless another Init is given for W.
class Linear {
 public:
  Linear() = default;
  Linear(ParameterSet& params, const std::string& name, std::int64_t in, std::int64_t out, bool bias);
  Linear(ParameterSet& params, const std::string& name, std::int64_t in, std::int64_t out, bool bias,
         Init weight_init);

  void forward(const Ops& ops, const DeviceTensor& x, const DeviceTensor& y) const;
  // From dy [N, out]: dW = dy^T x, db = sum(dy, 0) and, if dx is given, dx = dy W.
  void backward(const Ops& ops, const DeviceTensor& x, const DeviceTensor& dy, const DeviceTensor* dx) const;

  Parameter& weight() const { return *weight_; }
  std::int64_t in() const { return in_; }
  std::int64_t out() const { return out_; }

 private:
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  std::int64_t in_ = 0, out_ = 0;
};

}  // namespace examples
