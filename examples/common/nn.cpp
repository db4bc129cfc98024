#include "nn.h"

#include <algorithm>
#include <cmath>

namespace examples {

Parameter& ParameterSet::add(std::string name, Dims dims, Init init, bool decay) {
  auto p = std::make_unique<Parameter>();
  p->name = std::move(name);
  p->decay = decay;
  p->master = DeviceTensor(dims, MLUOP_DTYPE_FLOAT);
  switch (init.kind) {
    case Init::kUniform:
      ops_.uniform(seed_, next_offset_, -init.a, init.a, p->master);
      break;
    case Init::kNormal:
      ops_.normal(seed_, next_offset_, 0.0, init.a, p->master);
      break;
    case Init::kConstant:
      ops_.fill(p->master, init.a);
      break;
  }
  next_offset_ += static_cast<std::uint64_t>(p->master.numel());
  if (dtype_ == MLUOP_DTYPE_FLOAT) {
    p->model = p->master;
  } else {
    p->model = DeviceTensor(dims, dtype_);
    ops_.copy(p->master, p->model);
  }
  p->grad = DeviceTensor(dims, dtype_);
  params_.push_back(std::move(p));
  return *params_.back();
}

std::int64_t ParameterSet::count() const {
  std::int64_t n = 0;
  for (const auto& p : params_) n += p->master.numel();
  return n;
}

void ParameterSet::sgdStep(float lr, float momentum, float weight_decay) {
  for (const auto& p : params_) {
    if (!p->state1.defined()) {  // zero-initialized momentum matches PyTorch's first step
      p->state1 = DeviceTensor(p->master.dims(), MLUOP_DTYPE_FLOAT);
      ops_.fill(p->state1, 0.0);
    }
    const DeviceTensor* grad = &p->grad;
    if (dtype_ != MLUOP_DTYPE_FLOAT) {
      if (!p->grad32.defined()) p->grad32 = DeviceTensor(p->master.dims(), MLUOP_DTYPE_FLOAT);
      ops_.copy(p->grad, p->grad32);
      grad = &p->grad32;
    }
    ops_.sgdStep(lr, momentum, p->decay ? weight_decay : 0.0f, p->master, *grad, p->state1);
    if (dtype_ != MLUOP_DTYPE_FLOAT) ops_.copy(p->master, p->model);
  }
}

void ParameterSet::adamwStep(const Ops::AdamW& hp, std::int64_t step, float grad_scale) {
  for (const auto& p : params_) {
    if (!p->state1.defined()) {
      p->state1 = DeviceTensor(p->master.dims(), MLUOP_DTYPE_FLOAT);
      p->state2 = DeviceTensor(p->master.dims(), MLUOP_DTYPE_FLOAT);
      ops_.fill(p->state1, 0.0);
      ops_.fill(p->state2, 0.0);
    }
    Ops::AdamW h = hp;
    if (!p->decay) h.weight_decay = 0.0f;
    ops_.adamwStep(h, step, grad_scale, p->master, p->grad, p->state1, p->state2,
                   dtype_ == MLUOP_DTYPE_FLOAT ? nullptr : &p->model);
  }
}

bool ParameterSet::gradsFinite() {
  // 0 * g is 0 for a finite g and NaN for inf or NaN, so sum(0 * g) is NaN exactly when g has a
  // non-finite element (and the sum of zeros cannot overflow).
  std::int64_t largest = 0;
  for (const auto& p : params_) largest = std::max(largest, p->grad.numel());
  if (finite_scratch_.numel() < largest || finite_scratch_.dtype() != dtype_) {
    finite_scratch_ = DeviceTensor({largest}, dtype_);
    finite_sums_ = DeviceTensor({static_cast<std::int64_t>(params_.size())}, dtype_);
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const DeviceTensor& g = params_[i]->grad;
    const DeviceTensor zeros = finite_scratch_.view(g.dims(), contiguousStrides(g.dims()));
    ops_.mulScalar(g, 0.0, zeros);
    std::vector<int> dims(g.dims().size());
    for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
    ops_.sum(zeros, dims, false, finite_sums_.view({}, {}, static_cast<std::int64_t>(i)));
  }
  for (float s : finite_sums_.download()) {
    if (!std::isfinite(s)) return false;
  }
  return true;
}

Linear::Linear(ParameterSet& params, const std::string& name, std::int64_t in, std::int64_t out, bool bias)
    : Linear(params, name, in, out, bias, Init::uniform(1.0 / std::sqrt(static_cast<double>(in)))) {}

Linear::Linear(ParameterSet& params, const std::string& name, std::int64_t in, std::int64_t out, bool bias,
               Init weight_init)
    : in_(in), out_(out) {
  weight_ = &params.add(name + ".weight", {out, in}, weight_init);
  if (bias) {
    bias_ = &params.add(name + ".bias", {out}, Init::uniform(1.0 / std::sqrt(static_cast<double>(in))));
  }
}

void Linear::forward(const Ops& ops, const DeviceTensor& x, const DeviceTensor& y) const {
  ops.linear(x, weight_->model, bias_ ? &bias_->model : nullptr, y);
}

void Linear::backward(const Ops& ops, const DeviceTensor& x, const DeviceTensor& dy,
                      const DeviceTensor* dx) const {
  ops.matmul(dy, x, weight_->grad, /*trans_a=*/true, /*trans_b=*/false);
  if (bias_ != nullptr) ops.sum(dy, {0}, false, bias_->grad);
  if (dx != nullptr) ops.matmul(dy, weight_->model, *dx);
}

}  // namespace examples
