// Argument checks of the fused optimizer steps of issue 4 (adamw_step). The rules follow
// torch.optim.AdamW's own checks on the hyper-parameters; the tensors all have one shape, any strides.
#include "checks.h"
#include "elementwise_shapes.h"
#include "validate.h"
#include "view_overlap.h"

#include <cmath>
#include <string_view>
#include <utility>
#include <vector>

namespace mlu {
namespace {

using Named = std::pair<std::string_view, const TensorView*>;

Status checkShapeOf(std::string_view name, const TensorView& t, const TensorView& param) {
  if (elementwise::sameShape(t, param)) return Status::success();
  return badParam("{} has shape {} but param has shape {}; they must be equal", name, t.shapeString(),
                  param.shapeString());
}

}  // namespace

Status validate(const adamw_step_args& a) {
  if (!(a.lr >= 0) || !std::isfinite(a.lr)) return badParam("lr = {} must be non-negative and finite", a.lr);
  if (!(a.beta1 >= 0 && a.beta1 < 1)) return badParam("beta1 = {} must be in [0, 1)", a.beta1);
  if (!(a.beta2 >= 0 && a.beta2 < 1)) return badParam("beta2 = {} must be in [0, 1)", a.beta2);
  if (!(a.eps > 0) || !std::isfinite(a.eps)) return badParam("eps = {} must be positive and finite", a.eps);
  if (!(a.weight_decay >= 0) || !std::isfinite(a.weight_decay)) {
    return badParam("weight_decay = {} must be non-negative and finite", a.weight_decay);
  }
  if (a.step < 1) return badParam("step = {} must be at least 1 (the step count is 1-based)", a.step);
  if (!(a.grad_scale > 0) || !std::isfinite(a.grad_scale)) {
    return badParam("grad_scale = {} must be positive and finite (1 = no loss scaling)", a.grad_scale);
  }
  MLU_RETURN_IF_ERROR(checks::tensor("param", a.param));
  MLU_RETURN_IF_ERROR(checks::tensor("grad", a.grad));
  MLU_RETURN_IF_ERROR(checks::tensor("exp_avg", a.exp_avg));
  MLU_RETURN_IF_ERROR(checks::tensor("exp_avg_sq", a.exp_avg_sq));
  MLU_RETURN_IF_ERROR(checks::floating("param", a.param));
  MLU_RETURN_IF_ERROR(checks::floating("grad", a.grad));
  MLU_RETURN_IF_ERROR(checks::sameDtype("exp_avg", a.exp_avg, "param", a.param));
  MLU_RETURN_IF_ERROR(checks::sameDtype("exp_avg_sq", a.exp_avg_sq, "param", a.param));
  MLU_RETURN_IF_ERROR(checkShapeOf("grad", a.grad, a.param));
  MLU_RETURN_IF_ERROR(checkShapeOf("exp_avg", a.exp_avg, a.param));
  MLU_RETURN_IF_ERROR(checkShapeOf("exp_avg_sq", a.exp_avg_sq, a.param));
  std::vector<Named> updated{{"param", &a.param}, {"exp_avg", &a.exp_avg}, {"exp_avg_sq", &a.exp_avg_sq}};
  if (a.amsgrad && !a.max_exp_avg_sq.present) return badParam("amsgrad needs max_exp_avg_sq");
  if (!a.amsgrad && a.max_exp_avg_sq.present) return badParam("max_exp_avg_sq is given but amsgrad is off");
  if (a.amsgrad) {
    MLU_RETURN_IF_ERROR(checks::tensor("max_exp_avg_sq", a.max_exp_avg_sq));
    MLU_RETURN_IF_ERROR(checks::sameDtype("max_exp_avg_sq", a.max_exp_avg_sq, "param", a.param));
    MLU_RETURN_IF_ERROR(checkShapeOf("max_exp_avg_sq", a.max_exp_avg_sq, a.param));
    updated.emplace_back("max_exp_avg_sq", &a.max_exp_avg_sq);
  }
  if (a.model_param.present) {
    MLU_RETURN_IF_ERROR(checks::tensor("model_param", a.model_param));
    MLU_RETURN_IF_ERROR(checks::floating("model_param", a.model_param));
    MLU_RETURN_IF_ERROR(checkShapeOf("model_param", a.model_param, a.param));
    updated.emplace_back("model_param", &a.model_param);
  }
  // Every updated tensor needs its own memory: distinct elements, not shared with another or with grad.
  for (std::size_t i = 0; i < updated.size(); ++i) {
    const auto& [name, t] = updated[i];
    if (elementwise::overlapsItself(*t)) {
      return badParam(
          "{} (shape {}, strides {}) overlaps itself; an updated tensor needs a distinct element at "
          "every position",
          name, t->shapeString(), elementwise::stridesString(*t));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (view_overlap::overlap(*t, *updated[j].second)) {
        return badParam("{} and {} share memory; each updated tensor needs its own", updated[j].first, name);
      }
    }
    if (view_overlap::overlap(*t, a.grad)) return badParam("{} shares memory with grad", name);
  }
  return Status::success();
}

}  // namespace mlu
