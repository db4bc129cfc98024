// CPU reference of the fused optimizer steps of issue 4 (adamw_step): torch.optim.AdamW's update written
// plainly, one element at a time, in float64 (amsgrad: the denominator uses the running max of v).
#include "element.h"
#include "validate.h"

#include <mlu/reference.h>

#include <cmath>
#include <cstdint>

namespace mlu::reference {

Status run(const adamw_step_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  const double lr = args.lr, beta1 = args.beta1, beta2 = args.beta2, eps = args.eps;
  const double weight_decay = args.weight_decay, grad_scale = args.grad_scale;
  const auto t = static_cast<double>(args.step);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  const OffsetWalker wp(args.param), wg(args.grad), wm(args.exp_avg), wv(args.exp_avg_sq),
      wx(args.max_exp_avg_sq), wc(args.model_param);
  bool ok = true;
  for (std::int64_t i = 0; i < args.param.numel() && ok; ++i) {
    double g = 0;
    ok = ok && dispatchFloating(args.grad.dtype, [&]<typename G>() {
           g = load<double>(typed<const G>(args.grad)[wg.offsetOf(i)]) / grad_scale;
         });
    double p = 0;
    ok = ok && dispatchFloating(args.param.dtype, [&]<typename T>() {
           T& param = typed<T>(args.param)[wp.offsetOf(i)];
           T& exp_avg = typed<T>(args.exp_avg)[wm.offsetOf(i)];
           T& exp_avg_sq = typed<T>(args.exp_avg_sq)[wv.offsetOf(i)];
           p = load<double>(param) * (1.0 - lr * weight_decay);
           const double m = beta1 * load<double>(exp_avg) + (1.0 - beta1) * g;
           const double v = beta2 * load<double>(exp_avg_sq) + (1.0 - beta2) * g * g;
           exp_avg = store<T>(m);
           exp_avg_sq = store<T>(v);
           double v_used = v;
           if (args.amsgrad) {  // PyTorch keeps max(max_exp_avg_sq, exp_avg_sq) of the stored values
             T& vmax = typed<T>(args.max_exp_avg_sq)[wx.offsetOf(i)];
             const double stored = load<double>(exp_avg_sq), kept = load<double>(vmax);
             v_used = stored > kept || std::isnan(stored) ? stored : kept;
             vmax = store<T>(v_used);
           }
           p -= lr * (m / bias_correction1) / (std::sqrt(v_used / bias_correction2) + eps);
           param = store<T>(p);
           p = load<double>(param);  // the model copy is the stored master weight, rounded to its dtype
         });
    if (ok && args.model_param.present) {
      ok = dispatchFloating(args.model_param.dtype,
                            [&]<typename M>() { typed<M>(args.model_param)[wc.offsetOf(i)] = store<M>(p); });
    }
  }
  if (!ok) return notSupported("the reference has no kernel for these dtypes");
  return Status::success();
}

}  // namespace mlu::reference
