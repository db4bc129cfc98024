// Device kernels of the fused optimizer steps of issue 4 (adamw_step): one pass over the parameters that
// reads grad, param, exp_avg and exp_avg_sq once and writes param, exp_avg, exp_avg_sq and the optional
// half-precision model copy, as torch.optim.AdamW's single-tensor step:
//   param *= 1 - lr * weight_decay;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g²;
//   param -= (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps),  g = grad / grad_scale,
// and with amsgrad the denominator takes vmax = max(vmax, v) (kept in max_exp_avg_sq) in place of v.
// The step-dependent factors are computed once in float64; the per-element work is float32 (half types
// converted on load, rounded once on store). Contiguous tensors take a flat loop that GCC vectorizes;
// other strides walk each tensor with its own cursor.
#include "device.h"

#include "element.h"
#include "reduce_shapes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace mlu {
namespace {

struct AdamwFactors {
  float beta1 = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0, eps = 0;
  float decay = 1;         // 1 - lr * weight_decay
  float step_size = 0;     // lr / (1 - beta1^t)
  float inv_bc2_sqrt = 1;  // 1 / sqrt(1 - beta2^t)
  float inv_grad_scale = 1;
};

struct AdamwJob {
  TensorView param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, model;
  AdamwFactors f;
};

// The update of one element; vmax is null without amsgrad.
template <typename P, typename G>
[[gnu::always_inline]] inline void updateOne(const AdamwFactors& f, P& param, const G& grad, P& exp_avg,
                                             P& exp_avg_sq, P* vmax) {
  const float g = load<float>(grad) * f.inv_grad_scale;
  const float m = f.beta1 * load<float>(exp_avg) + f.one_minus_beta1 * g;
  const float v = f.beta2 * load<float>(exp_avg_sq) + f.one_minus_beta2 * g * g;
  float v_used = v;
  if (vmax != nullptr) {  // torch.maximum: NaN wins
    const float kept = load<float>(*vmax);
    v_used = v > kept || std::isnan(v) ? v : kept;
    *vmax = store<P>(v_used);
  }
  const float denom = std::sqrt(v_used) * f.inv_bc2_sqrt + f.eps;
  const float p = load<float>(param) * f.decay - f.step_size * m / denom;
  exp_avg = store<P>(m);
  exp_avg_sq = store<P>(v);
  param = store<P>(p);
}

// M = void: no model copy; kAmsgrad: max_exp_avg_sq is updated and used.
template <typename P, typename G, typename M, bool kAmsgrad>
void adamwRange(const AdamwJob& job, std::int64_t begin, std::int64_t end, bool contiguous) {
  P* param = typed<P>(job.param);
  const G* grad = typed<const G>(job.grad);
  P* exp_avg = typed<P>(job.exp_avg);
  P* exp_avg_sq = typed<P>(job.exp_avg_sq);
  [[maybe_unused]] P* vmax = nullptr;
  if constexpr (kAmsgrad) vmax = typed<P>(job.max_exp_avg_sq);
  [[maybe_unused]] M* model = nullptr;
  if constexpr (!std::is_void_v<M>) model = typed<M>(job.model);
  const AdamwFactors f = job.f;
  if (contiguous) {
    for (std::int64_t i = begin; i < end; ++i) {
      P* vmax_i = nullptr;
      if constexpr (kAmsgrad) vmax_i = vmax + i;
      updateOne(f, param[i], grad[i], exp_avg[i], exp_avg_sq[i], vmax_i);
      if constexpr (!std::is_void_v<M>) model[i] = store<M>(load<float>(param[i]));
    }
    return;
  }
  const reduce::IndexSpace sp = reduce::allDims(job.param), sg = reduce::allDims(job.grad),
                           sm = reduce::allDims(job.exp_avg), sv = reduce::allDims(job.exp_avg_sq);
  reduce::Cursor cp(sp, begin), cg(sg, begin), cm(sm, begin), cv(sv, begin);
  reduce::IndexSpace sc, sx;
  if constexpr (!std::is_void_v<M>) sc = reduce::allDims(job.model);
  if constexpr (kAmsgrad) sx = reduce::allDims(job.max_exp_avg_sq);
  reduce::Cursor cc(sc, begin), cx(sx, begin);
  for (std::int64_t i = begin; i < end; ++i) {
    P* vmax_i = nullptr;
    if constexpr (kAmsgrad) {
      vmax_i = vmax + cx.offset();
      cx.next();
    }
    updateOne(f, param[cp.offset()], grad[cg.offset()], exp_avg[cm.offset()], exp_avg_sq[cv.offset()],
              vmax_i);
    if constexpr (!std::is_void_v<M>) {
      model[cc.offset()] = store<M>(load<float>(param[cp.offset()]));
      cc.next();
    }
    cp.next();
    cg.next();
    cm.next();
    cv.next();
  }
}

template <typename F>
void dispatchDevice(mluopDataType_t dtype, F&& f) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      f.template operator()<float>();
      break;
    case MLUOP_DTYPE_HALF:
      f.template operator()<Half>();
      break;
    case MLUOP_DTYPE_BFLOAT16:
      f.template operator()<BFloat16>();
      break;
    default:
      break;
  }
}

void adamwKernel(const AdamwJob& job, int cores) {
  const std::int64_t n = job.param.numel();
  const bool amsgrad = job.max_exp_avg_sq.present;
  const bool contiguous = job.param.contiguous() && job.grad.contiguous() && job.exp_avg.contiguous() &&
                          job.exp_avg_sq.contiguous() && (!job.model.present || job.model.contiguous()) &&
                          (!amsgrad || job.max_exp_avg_sq.contiguous());
  dispatchDevice(job.param.dtype, [&]<typename P>() {
    dispatchDevice(job.grad.dtype, [&]<typename G>() {
      const auto run = [&]<typename M>() {
        parallelFor(n, 32768, cores, [&](std::int64_t begin, std::int64_t end) {
          if (amsgrad) {
            adamwRange<P, G, M, true>(job, begin, end, contiguous);
          } else {
            adamwRange<P, G, M, false>(job, begin, end, contiguous);
          }
        });
      };
      if (!job.model.present) {
        run.template operator()<void>();
      } else {
        dispatchDevice(job.model.dtype, run);
      }
    });
  });
}

}  // namespace

Status device(const Launch& launch, const adamw_step_args& a) {
  AdamwJob job;
  job.param = a.param;
  job.grad = a.grad;
  job.exp_avg = a.exp_avg;
  job.exp_avg_sq = a.exp_avg_sq;
  if (a.amsgrad) job.max_exp_avg_sq = a.max_exp_avg_sq;
  job.model = a.model_param;
  const auto t = static_cast<double>(a.step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(a.beta1), t);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(a.beta2), t);
  AdamwFactors& f = job.f;
  f.beta1 = a.beta1;
  f.beta2 = a.beta2;
  f.one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(a.beta1));
  f.one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(a.beta2));
  f.eps = a.eps;
  f.decay = static_cast<float>(1.0 - static_cast<double>(a.lr) * static_cast<double>(a.weight_decay));
  f.step_size = static_cast<float>(static_cast<double>(a.lr) / bias_correction1);
  f.inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(bias_correction2));
  f.inv_grad_scale = static_cast<float>(1.0 / static_cast<double>(a.grad_scale));
  return launch.enqueue([job, cores = launch.cores()] { adamwKernel(job, cores); });
}

}  // namespace mlu
