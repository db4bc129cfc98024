// Argument checks of the indexing (embedding forward/backward, index_select, gather, scatter_add),
// joining (concat, split), where and comparison (eq, lt, gt) ops. The shape helpers live in
// index_shapes.h and elementwise_shapes.h, shared with the device kernels and the CPU reference.
//
// Index values are device data, read only when the kernel runs, so they cannot be checked here: see the
// device kernels (device_index.cpp) for what an out-of-range index gives.
#include "elementwise_shapes.h"
#include "index_shapes.h"
#include "validate.h"

#include "checks.h"

#include <string>
#include <string_view>

namespace mlu {
namespace {

using elementwise::broadcastShapes;
using elementwise::sameShape;
using index_shapes::checkDisjoint;
using index_shapes::checkOutput;
using index_shapes::memoryOverlaps;
using index_shapes::normalizeDim;

Status checkIndexDtype(std::string_view name, const TensorView& t) {
  if (t.dtype == MLUOP_DTYPE_INT64 || t.dtype == MLUOP_DTYPE_INT32) return Status::success();
  return badParam("{} is {}; expected int64 or int32", name, dtypeName(t.dtype));
}

// For the elementwise ops (where, eq, lt, gt): an input may be exactly the output's memory (in place),
// but must not partially overlap it.
Status checkDisjointOrSame(std::string_view out_name, const TensorView& out, std::string_view in_name,
                           const TensorView& in) {
  if (!memoryOverlaps(out, in) || index_shapes::exactAlias(in, out)) return Status::success();
  return badParam(
      "{} overlaps {} in memory without being the same elements; an output may only be exactly an input "
      "(in place)",
      out_name, in_name);
}

// The shape `prefix` + [last] (embedding outputs: indices.shape + [embedding_dim]).
TensorView appended(const TensorView& prefix, std::int64_t last) {
  TensorView v = prefix;
  v.dims[static_cast<std::size_t>(prefix.ndim)] = last;
  v.ndim = prefix.ndim + 1;
  return v;
}

// The embedding table ([num_embeddings, embedding_dim]) and the indices of embedding_forward/backward;
// `rows` is y or grad_output, which must have the shape indices.shape + [embedding_dim].
Status checkEmbedding(std::string_view table_name, const TensorView& table, const TensorView& indices,
                      std::string_view rows_name, const TensorView& rows) {
  MLU_RETURN_IF_ERROR(checkIndexDtype("indices", indices));
  if (table.ndim != 2) {
    return badParam("{} has shape {}; expected 2 dims [num_embeddings, embedding_dim]", table_name,
                    table.shapeString());
  }
  if (indices.ndim >= MLUOP_DIM_MAX) {
    return badParam("indices has {} dims; at most {} (then {} has indices' dims + [embedding_dim])",
                    indices.ndim, MLUOP_DIM_MAX - 1, rows_name);
  }
  const TensorView expected = appended(indices, table.dim(1));
  if (!sameShape(rows, expected)) {
    return badParam("{} has shape {} but indices {} and {} {} give {}", rows_name, rows.shapeString(),
                    indices.shapeString(), table_name, table.shapeString(), expected.shapeString());
  }
  return Status::success();
}

// a and b must have the same number of dims and equal sizes in every dim but d.
Status checkSameExceptDim(std::string_view name, const TensorView& t, std::string_view ref_name,
                          const TensorView& ref, int d) {
  bool same = t.ndim == ref.ndim;
  for (int i = 0; same && i < t.ndim; ++i) same = i == d || t.dim(i) == ref.dim(i);
  if (same) return Status::success();
  return badParam("{} has shape {} but {} has shape {}; they must match in every dim but dim {}", name,
                  t.shapeString(), ref_name, ref.shapeString(), d);
}

// c = a op b (eq, lt, gt): a and b of one dtype, broadcasting, c bool of the broadcast shape.
Status checkCompare(const TensorView& a, const TensorView& b, const TensorView& c) {
  MLU_RETURN_IF_ERROR(checks::tensor("a", a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", b));
  MLU_RETURN_IF_ERROR(checks::tensor("c", c));
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", b, "a", a));
  if (c.dtype != MLUOP_DTYPE_BOOL) return badParam("c is {}; expected bool", dtypeName(c.dtype));
  TensorView shape;
  if (!broadcastShapes(a, b, shape)) {
    return badParam("a has shape {} and b {}, which do not broadcast", a.shapeString(), b.shapeString());
  }
  if (!sameShape(c, shape)) {
    return badParam("c has shape {} but a {} and b {} broadcast to {}", c.shapeString(), a.shapeString(),
                    b.shapeString(), shape.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkOutput("c", c));
  MLU_RETURN_IF_ERROR(checkDisjointOrSame("c", c, "a", a));
  return checkDisjointOrSame("c", c, "b", b);
}

}  // namespace

Status validate(const embedding_forward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("weight", a.weight));
  MLU_RETURN_IF_ERROR(checks::tensor("indices", a.indices));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::floating("weight", a.weight));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "weight", a.weight));
  MLU_RETURN_IF_ERROR(checkEmbedding("weight", a.weight, a.indices, "y", a.y));
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  MLU_RETURN_IF_ERROR(checkDisjoint("y", a.y, "weight", a.weight));
  return checkDisjoint("y", a.y, "indices", a.indices);
}

Status validate(const embedding_backward_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::tensor("indices", a.indices));
  MLU_RETURN_IF_ERROR(checks::tensor("grad_weight", a.grad_weight));
  MLU_RETURN_IF_ERROR(checks::floating("grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checks::sameDtype("grad_weight", a.grad_weight, "grad_output", a.grad_output));
  MLU_RETURN_IF_ERROR(checkEmbedding("grad_weight", a.grad_weight, a.indices, "grad_output", a.grad_output));
  const std::int64_t rows = a.grad_weight.dim(0);
  if (a.padding_idx < -1 || a.padding_idx >= rows) {
    return badParam("padding_idx = {} is out of range for {} embeddings (expected 0 to {}, or -1 for none)",
                    a.padding_idx, rows, rows - 1);
  }
  MLU_RETURN_IF_ERROR(checkOutput("grad_weight", a.grad_weight));
  MLU_RETURN_IF_ERROR(checkDisjoint("grad_weight", a.grad_weight, "grad_output", a.grad_output));
  return checkDisjoint("grad_weight", a.grad_weight, "indices", a.indices);
}

Status validate(const index_select_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("index", a.index));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkIndexDtype("index", a.index));
  int d = 0;
  MLU_RETURN_IF_ERROR(normalizeDim(a.dim, a.x.ndim, "x", d));
  if (a.index.ndim > 1) {
    return badParam("index has shape {}; expected 1 dim (or 0-d)", a.index.shapeString());
  }
  TensorView expected = a.x;
  expected.dims[static_cast<std::size_t>(d)] = a.index.numel();
  if (!sameShape(a.y, expected)) {
    return badParam("y has shape {} but x {} with {} indices along dim {} gives {}", a.y.shapeString(),
                    a.x.shapeString(), a.index.numel(), d, expected.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  MLU_RETURN_IF_ERROR(checkDisjoint("y", a.y, "x", a.x));
  return checkDisjoint("y", a.y, "index", a.index);
}

// As PyTorch: a 0-d x or index counts as 1-d of size 1, and an empty index (an empty y) needs no other
// shape agreement with x.
Status validate(const gather_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("index", a.index));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "x", a.x));
  MLU_RETURN_IF_ERROR(checkIndexDtype("index", a.index));
  const TensorView x = index_shapes::atLeast1d(a.x), index = index_shapes::atLeast1d(a.index);
  int d = 0;
  MLU_RETURN_IF_ERROR(normalizeDim(a.dim, x.ndim, "x", d));
  if (index.numel() > 0) {
    if (index.ndim != x.ndim) {
      return badParam("index has {} dims but x has {}; they must have the same number of dims", a.index.ndim,
                      a.x.ndim);
    }
    for (int i = 0; i < x.ndim; ++i) {
      if (i != d && index.dim(i) > x.dim(i)) {
        return badParam("index {} is larger than x {} in dim {} (only dim {} may be larger)",
                        a.index.shapeString(), a.x.shapeString(), i, d);
      }
    }
  }
  if (!sameShape(a.y, a.index)) {
    return badParam("y has shape {} but index has shape {}; they must be equal", a.y.shapeString(),
                    a.index.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  MLU_RETURN_IF_ERROR(checkDisjoint("y", a.y, "x", a.x));
  return checkDisjoint("y", a.y, "index", a.index);
}

Status validate(const scatter_add_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::tensor("index", a.index));
  MLU_RETURN_IF_ERROR(checks::tensor("src", a.src));
  if (a.y.dtype == MLUOP_DTYPE_BOOL) return badParam("y is bool, which cannot be added to");
  MLU_RETURN_IF_ERROR(checks::sameDtype("src", a.src, "y", a.y));
  MLU_RETURN_IF_ERROR(checkIndexDtype("index", a.index));
  int d = 0;
  MLU_RETURN_IF_ERROR(normalizeDim(a.dim, a.y.ndim, "y", d));
  if (a.index.ndim != a.y.ndim || a.src.ndim != a.y.ndim) {
    return badParam("y, index and src have {}, {} and {} dims; they must have the same number of dims",
                    a.y.ndim, a.index.ndim, a.src.ndim);
  }
  for (int i = 0; i < a.y.ndim; ++i) {
    if (a.index.dim(i) > a.src.dim(i)) {
      return badParam("index {} is larger than src {} in dim {}", a.index.shapeString(), a.src.shapeString(),
                      i);
    }
    if (i != d && a.index.dim(i) > a.y.dim(i)) {
      return badParam("index {} is larger than y {} in dim {} (only dim {} may be larger)",
                      a.index.shapeString(), a.y.shapeString(), i, d);
    }
  }
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  MLU_RETURN_IF_ERROR(checkDisjoint("y", a.y, "index", a.index));
  return checkDisjoint("y", a.y, "src", a.src);
}

Status validate(const concat_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("a", a.a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", a.b));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", a.b, "a", a.a));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "a", a.a));
  int d = 0;
  MLU_RETURN_IF_ERROR(normalizeDim(a.dim, a.a.ndim, "a", d));
  MLU_RETURN_IF_ERROR(checkSameExceptDim("b", a.b, "a", a.a, d));
  TensorView expected = a.a;
  expected.dims[static_cast<std::size_t>(d)] = a.a.dim(d) + a.b.dim(d);
  if (!sameShape(a.y, expected)) {
    return badParam("y has shape {} but a {} and b {} joined along dim {} give {}", a.y.shapeString(),
                    a.a.shapeString(), a.b.shapeString(), d, expected.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  MLU_RETURN_IF_ERROR(checkDisjoint("y", a.y, "a", a.a));
  return checkDisjoint("y", a.y, "b", a.b);
}

Status validate(const split_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("a", a.a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", a.b));
  MLU_RETURN_IF_ERROR(checks::sameDtype("a", a.a, "x", a.x));
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", a.b, "x", a.x));
  int d = 0;
  MLU_RETURN_IF_ERROR(normalizeDim(a.dim, a.x.ndim, "x", d));
  MLU_RETURN_IF_ERROR(checkSameExceptDim("a", a.a, "x", a.x, d));
  MLU_RETURN_IF_ERROR(checkSameExceptDim("b", a.b, "x", a.x, d));
  if (a.a.dim(d) + a.b.dim(d) != a.x.dim(d)) {
    return badParam("a {} and b {} have {} + {} = {} elements along dim {} but x {} has {}",
                    a.a.shapeString(), a.b.shapeString(), a.a.dim(d), a.b.dim(d), a.a.dim(d) + a.b.dim(d), d,
                    a.x.shapeString(), a.x.dim(d));
  }
  MLU_RETURN_IF_ERROR(checkOutput("a", a.a));
  MLU_RETURN_IF_ERROR(checkOutput("b", a.b));
  MLU_RETURN_IF_ERROR(checkDisjoint("a", a.a, "x", a.x));
  MLU_RETURN_IF_ERROR(checkDisjoint("b", a.b, "x", a.x));
  return checkDisjoint("a", a.a, "b", a.b);
}

Status validate(const where_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("condition", a.condition));
  MLU_RETURN_IF_ERROR(checks::tensor("a", a.a));
  MLU_RETURN_IF_ERROR(checks::tensor("b", a.b));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  if (a.condition.dtype != MLUOP_DTYPE_BOOL && a.condition.dtype != MLUOP_DTYPE_UINT8) {
    return badParam("condition is {}; expected bool (or uint8)", dtypeName(a.condition.dtype));
  }
  MLU_RETURN_IF_ERROR(checks::sameDtype("b", a.b, "a", a.a));
  MLU_RETURN_IF_ERROR(checks::sameDtype("y", a.y, "a", a.a));
  TensorView ab, shape;
  if (!broadcastShapes(a.a, a.b, ab) || !broadcastShapes(a.condition, ab, shape)) {
    return badParam("condition {}, a {} and b {} do not broadcast", a.condition.shapeString(),
                    a.a.shapeString(), a.b.shapeString());
  }
  if (!sameShape(a.y, shape)) {
    return badParam("y has shape {} but condition {}, a {} and b {} broadcast to {}", a.y.shapeString(),
                    a.condition.shapeString(), a.a.shapeString(), a.b.shapeString(), shape.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  MLU_RETURN_IF_ERROR(checkDisjointOrSame("y", a.y, "condition", a.condition));
  MLU_RETURN_IF_ERROR(checkDisjointOrSame("y", a.y, "a", a.a));
  return checkDisjointOrSame("y", a.y, "b", a.b);
}

Status validate(const eq_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const lt_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const gt_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const ne_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const le_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const ge_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const logical_and_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const logical_or_args& a) { return checkCompare(a.a, a.b, a.c); }

Status validate(const logical_xor_args& a) { return checkCompare(a.a, a.b, a.c); }

// y = !x: x of any dtype, y bool of x's shape (y may be x itself only when x is bool).
Status validate(const logical_not_args& a) {
  MLU_RETURN_IF_ERROR(checks::tensor("x", a.x));
  MLU_RETURN_IF_ERROR(checks::tensor("y", a.y));
  if (a.y.dtype != MLUOP_DTYPE_BOOL) return badParam("y is {}; expected bool", dtypeName(a.y.dtype));
  if (!sameShape(a.y, a.x)) {
    return badParam("y has shape {} but x has shape {}; they must be equal", a.y.shapeString(),
                    a.x.shapeString());
  }
  MLU_RETURN_IF_ERROR(checkOutput("y", a.y));
  return checkDisjointOrSame("y", a.y, "x", a.x);
}

}  // namespace mlu
