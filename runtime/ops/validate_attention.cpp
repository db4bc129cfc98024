// Argument checks of scaled_dot_product_attention (forward and backward). Shapes: q [B, H, Sq, D],
// k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] with H a multiple of Hkv (grouped-query attention: query head h
// attends with key/value head h / (H / Hkv); Hkv = H is multi-head attention), o and grad_o [B, H, Sq, Dv],
// lse [B, H, Sq] float32, the gradients shaped like their inputs; any strides. Outputs must not overlap
// themselves, each other or an input.
#include "attention_shapes.h"
#include "checks.h"
#include "elementwise_shapes.h"
#include "reduce_shapes.h"
#include "validate.h"
#include "view_overlap.h"

#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace mlu {
namespace {

using reduce::expectShape;
using reduce::Shape;

using Named = std::pair<std::string_view, const TensorView*>;

Status checkRank(std::string_view name, const TensorView& t, int ndim, std::string_view dims) {
  if (t.ndim == ndim) return Status::success();
  return badParam("{} has shape {}; expected {} dims {}", name, t.shapeString(), ndim, dims);
}

// q, k and v present, of one floating dtype.
Status checkDtypes(const TensorView& q, const TensorView& k, const TensorView& v) {
  MLU_RETURN_IF_ERROR(checks::tensor("q", q));
  MLU_RETURN_IF_ERROR(checks::tensor("k", k));
  MLU_RETURN_IF_ERROR(checks::tensor("v", v));
  MLU_RETURN_IF_ERROR(checks::floating("q", q));
  MLU_RETURN_IF_ERROR(checks::sameDtype("k", k, "q", q));
  MLU_RETURN_IF_ERROR(checks::sameDtype("v", v, "q", q));
  return Status::success();
}

// q, k, v: present, one floating dtype, 4-d with matching B, H, D (q, k) and Sk (k, v); D >= 1.
Status checkInputs(const TensorView& q, const TensorView& k, const TensorView& v) {
  MLU_RETURN_IF_ERROR(checkDtypes(q, k, v));
  MLU_RETURN_IF_ERROR(checkRank("q", q, 4, "[B, H, Sq, D]"));
  MLU_RETURN_IF_ERROR(checkRank("k", k, 4, "[B, Hkv, Sk, D]"));
  MLU_RETURN_IF_ERROR(checkRank("v", v, 4, "[B, Hkv, Sk, Dv]"));
  if (q.dim(3) == 0)
    return badParam("q has shape {}: head dim D = 0; attention needs D >= 1", q.shapeString());
  if (k.dim(0) != q.dim(0) || k.dim(3) != q.dim(3)) {
    return badParam("k has shape {} but q has shape {}; expected k [B, Hkv, Sk, D] = [{}, Hkv, Sk, {}]",
                    k.shapeString(), q.shapeString(), q.dim(0), q.dim(3));
  }
  const std::int64_t heads = q.dim(1), kv_heads = k.dim(1);
  if (kv_heads == 0 ? heads != 0 : heads % kv_heads != 0) {
    return badParam(
        "k has {} heads and q {}: grouped-query attention needs the query heads H a multiple of the "
        "key/value "
        "heads Hkv (query head h uses key/value head h / (H / Hkv))",
        kv_heads, heads);
  }
  if (v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1) || v.dim(2) != k.dim(2)) {
    return badParam(
        "v has shape {} but q has shape {} and k {}; expected v [B, Hkv, Sk, Dv] = [{}, {}, {}, Dv]",
        v.shapeString(), q.shapeString(), k.shapeString(), q.dim(0), k.dim(1), k.dim(2));
  }
  return Status::success();
}

Status checkScale(double scale) {
  if (std::isfinite(scale)) return Status::success();
  return badParam("scale = {} must be finite (a value <= 0 selects the default 1/sqrt(D))", scale);
}

// lse is float32 (float64 is accepted too when q is float64: the reference's own precision).
Status checkLse(const TensorView& lse, const TensorView& q) {
  MLU_RETURN_IF_ERROR(checks::tensor("lse", lse));
  const bool ok =
      lse.dtype == MLUOP_DTYPE_FLOAT || (lse.dtype == MLUOP_DTYPE_DOUBLE && q.dtype == MLUOP_DTYPE_DOUBLE);
  if (!ok) {
    return badParam("lse is {}; expected float32{}", dtypeName(lse.dtype),
                    q.dtype == MLUOP_DTYPE_DOUBLE ? " or float64" : "");
  }
  return expectShape("lse", lse, Shape{q.dim(0), q.dim(1), q.dim(2)});
}

// A tensor of q's dtype with the given shape.
Status checkLike(std::string_view name, const TensorView& t, const TensorView& q, const Shape& shape) {
  MLU_RETURN_IF_ERROR(checks::tensor(name, t));
  MLU_RETURN_IF_ERROR(checks::sameDtype(name, t, "q", q));
  return expectShape(name, t, shape);
}

// Every output addresses distinct elements and shares no memory with another output or an input.
Status checkNoAliasing(const std::vector<Named>& outputs, const std::vector<Named>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [name, t] = outputs[i];
    if (elementwise::overlapsItself(*t)) {
      return badParam(
          "{} (shape {}, strides {}) overlaps itself; an output needs a distinct element at every "
          "position",
          name, t->shapeString(), elementwise::stridesString(*t));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (view_overlap::overlap(*t, *outputs[j].second)) {
        return badParam("{} and {} share memory; outputs must not overlap", outputs[j].first, name);
      }
    }
    for (const auto& [in_name, in] : inputs) {
      if (view_overlap::overlap(*t, *in)) {
        return badParam("{} shares memory with the input {}; outputs must not overlap inputs", name, in_name);
      }
    }
  }
  return Status::success();
}

// Variable-length attention's packed q [Tq, H, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv] and its offsets:
// cu_seqlens_q and cu_seqlens_k int32 or int64, 1-d, of one length B + 1 >= 1 (their values are device
// data, checked when the kernel runs).
Status checkPacked(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& cu_q,
                   const TensorView& cu_k) {
  MLU_RETURN_IF_ERROR(checkDtypes(q, k, v));
  MLU_RETURN_IF_ERROR(checkRank("q", q, 3, "[Tq, H, D]"));
  MLU_RETURN_IF_ERROR(checkRank("k", k, 3, "[Tk, Hkv, D]"));
  MLU_RETURN_IF_ERROR(checkRank("v", v, 3, "[Tk, Hkv, Dv]"));
  if (q.dim(2) == 0)
    return badParam("q has shape {}: head dim D = 0; attention needs D >= 1", q.shapeString());
  if (k.dim(2) != q.dim(2)) {
    return badParam("k has shape {} but q has shape {}; expected k [Tk, Hkv, {}]", k.shapeString(),
                    q.shapeString(), q.dim(2));
  }
  const std::int64_t heads = q.dim(1), kv_heads = k.dim(1);
  if (kv_heads == 0 ? heads != 0 : heads % kv_heads != 0) {
    return badParam(
        "k has {} heads and q {}: the query heads H must be a multiple of the key/value heads Hkv", kv_heads,
        heads);
  }
  if (v.dim(0) != k.dim(0) || v.dim(1) != k.dim(1)) {
    return badParam("v has shape {} but k has shape {}; expected v [{}, {}, Dv]", v.shapeString(),
                    k.shapeString(), k.dim(0), k.dim(1));
  }
  for (const auto& [name, cu] : {Named{"cu_seqlens_q", &cu_q}, Named{"cu_seqlens_k", &cu_k}}) {
    MLU_RETURN_IF_ERROR(checks::tensor(name, *cu));
    if (cu->dtype != MLUOP_DTYPE_INT32 && cu->dtype != MLUOP_DTYPE_INT64)
      return badParam("{} is {}; expected int32 or int64", name, dtypeName(cu->dtype));
    if (cu->ndim != 1 || cu->dim(0) < 1)
      return badParam("{} has shape {}; expected [B + 1] offsets (B >= 0)", name, cu->shapeString());
  }
  if (cu_q.dim(0) != cu_k.dim(0)) {
    return badParam("cu_seqlens_q has {} offsets and cu_seqlens_k {}; both are [B + 1]", cu_q.dim(0),
                    cu_k.dim(0));
  }
  return Status::success();
}

// lse [H, Tq]: float32 (float64 too with float64 q).
Status checkPackedLse(const TensorView& lse, const TensorView& q) {
  MLU_RETURN_IF_ERROR(checks::tensor("lse", lse));
  const bool ok =
      lse.dtype == MLUOP_DTYPE_FLOAT || (lse.dtype == MLUOP_DTYPE_DOUBLE && q.dtype == MLUOP_DTYPE_DOUBLE);
  if (!ok) return badParam("lse is {}; expected float32", dtypeName(lse.dtype));
  return expectShape("lse", lse, Shape{q.dim(1), q.dim(0)});
}

Shape qShape(const TensorView& q) { return {q.dim(0), q.dim(1), q.dim(2), q.dim(3)}; }
Shape oShape(const TensorView& q, const TensorView& v) { return {q.dim(0), q.dim(1), q.dim(2), v.dim(3)}; }
Shape kvShape(const TensorView& t) { return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)}; }

}  // namespace

Status validate(const scaled_dot_product_attention_forward_args& a) {
  MLU_RETURN_IF_ERROR(checkScale(a.scale));
  MLU_RETURN_IF_ERROR(checkInputs(a.q, a.k, a.v));
  MLU_RETURN_IF_ERROR(checkLike("o", a.o, a.q, oShape(a.q, a.v)));
  MLU_RETURN_IF_ERROR(checkLse(a.lse, a.q));
  return checkNoAliasing({{"o", &a.o}, {"lse", &a.lse}}, {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}});
}

Status validate(const scaled_dot_product_attention_backward_args& a) {
  MLU_RETURN_IF_ERROR(checkScale(a.scale));
  MLU_RETURN_IF_ERROR(checkInputs(a.q, a.k, a.v));
  MLU_RETURN_IF_ERROR(checkLike("o", a.o, a.q, oShape(a.q, a.v)));
  MLU_RETURN_IF_ERROR(checkLike("grad_o", a.grad_o, a.q, oShape(a.q, a.v)));
  MLU_RETURN_IF_ERROR(checkLse(a.lse, a.q));
  MLU_RETURN_IF_ERROR(checkLike("grad_q", a.grad_q, a.q, qShape(a.q)));
  MLU_RETURN_IF_ERROR(checkLike("grad_k", a.grad_k, a.q, kvShape(a.k)));
  MLU_RETURN_IF_ERROR(checkLike("grad_v", a.grad_v, a.q, kvShape(a.v)));
  return checkNoAliasing(
      {{"grad_q", &a.grad_q}, {"grad_k", &a.grad_k}, {"grad_v", &a.grad_v}},
      {{"grad_o", &a.grad_o}, {"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"o", &a.o}, {"lse", &a.lse}});
}

Status validate(const attention_varlen_forward_args& a) {
  MLU_RETURN_IF_ERROR(checkScale(a.scale));
  MLU_RETURN_IF_ERROR(checkPacked(a.q, a.k, a.v, a.cu_seqlens_q, a.cu_seqlens_k));
  MLU_RETURN_IF_ERROR(checkLike("o", a.o, a.q, Shape{a.q.dim(0), a.q.dim(1), a.v.dim(2)}));
  MLU_RETURN_IF_ERROR(checkPackedLse(a.lse, a.q));
  return checkNoAliasing({{"o", &a.o}, {"lse", &a.lse}}, {{"q", &a.q},
                                                          {"k", &a.k},
                                                          {"v", &a.v},
                                                          {"cu_seqlens_q", &a.cu_seqlens_q},
                                                          {"cu_seqlens_k", &a.cu_seqlens_k}});
}

Status validate(const attention_varlen_backward_args& a) {
  MLU_RETURN_IF_ERROR(checkScale(a.scale));
  MLU_RETURN_IF_ERROR(checkPacked(a.q, a.k, a.v, a.cu_seqlens_q, a.cu_seqlens_k));
  const Shape o_shape{a.q.dim(0), a.q.dim(1), a.v.dim(2)};
  MLU_RETURN_IF_ERROR(checkLike("o", a.o, a.q, o_shape));
  MLU_RETURN_IF_ERROR(checkLike("grad_o", a.grad_o, a.q, o_shape));
  MLU_RETURN_IF_ERROR(checkPackedLse(a.lse, a.q));
  MLU_RETURN_IF_ERROR(checkLike("grad_q", a.grad_q, a.q, Shape{a.q.dim(0), a.q.dim(1), a.q.dim(2)}));
  MLU_RETURN_IF_ERROR(checkLike("grad_k", a.grad_k, a.q, Shape{a.k.dim(0), a.k.dim(1), a.k.dim(2)}));
  MLU_RETURN_IF_ERROR(checkLike("grad_v", a.grad_v, a.q, Shape{a.v.dim(0), a.v.dim(1), a.v.dim(2)}));
  return checkNoAliasing({{"grad_q", &a.grad_q}, {"grad_k", &a.grad_k}, {"grad_v", &a.grad_v}},
                         {{"grad_o", &a.grad_o},
                          {"q", &a.q},
                          {"k", &a.k},
                          {"v", &a.v},
                          {"o", &a.o},
                          {"lse", &a.lse},
                          {"cu_seqlens_q", &a.cu_seqlens_q},
                          {"cu_seqlens_k", &a.cu_seqlens_k}});
}

}  // namespace mlu
