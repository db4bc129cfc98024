// Argument checks of the matrix-product ops (matmul, linear) and the convolution ops (conv2d forward,
// backward data, backward filter, backward bias). The shape rules live in gemm_shapes.h, shared with the
// device kernels and the CPU reference. Messages say what is wrong with the actual values; the entry
// point prefixes the op name.
#include "gemm_shapes.h"
#include "validate.h"

#include "checks.h"

#include <mlu/dtype.h>

#include <array>
#include <string>
#include <string_view>

namespace mlu {
namespace {

using gemm_shapes::ConvGeometry;

// An output must address a distinct element at every logical position (no broadcast views).
Status checkOutput(std::string_view name, const TensorView& t) {
  if (!gemm_shapes::overlapsItself(t)) return Status::success();
  std::string strides = gemm_shapes::dimsString(t.strides.begin(), t.strides.begin() + t.ndim);
  return badParam(
      "{} (shape {}, strides {}) overlaps itself; an output needs a distinct element at every "
      "position",
      name, t.shapeString(), strides);
}

// One tensor argument of an op, for checkTensors.
struct NamedTensor {
  std::string_view name;
  const TensorView* view;
  bool optional = false;  // may be absent (bias)
};

// Checks every tensor (an optional one only when present) and that all share the first one's floating
// dtype.
template <std::size_t N>
Status checkTensors(const std::array<NamedTensor, N>& tensors) {
  for (const NamedTensor& t : tensors) {
    if (t.view->present || !t.optional) MLU_RETURN_IF_ERROR(checks::tensor(t.name, *t.view));
  }
  const NamedTensor& first = tensors[0];
  MLU_RETURN_IF_ERROR(checks::floating(first.name, *first.view));
  for (const NamedTensor& t : tensors) {
    if (t.view->present) MLU_RETURN_IF_ERROR(checks::sameDtype(t.name, *t.view, first.name, *first.view));
  }
  return Status::success();
}

// ---- convolution helpers ----

Status checkConvParams(const ConvParams& p) {
  for (std::size_t i = 0; i < 2; ++i) {
    if (p.padding[i] < 0)
      return badParam("padding [{}, {}] must not be negative", p.padding[0], p.padding[1]);
    if (p.stride[i] < 1) return badParam("stride [{}, {}] must be at least 1", p.stride[0], p.stride[1]);
    if (p.dilation[i] < 1) {
      return badParam("dilation [{}, {}] must be at least 1", p.dilation[0], p.dilation[1]);
    }
  }
  if (p.groups < 1) return badParam("groups = {} must be at least 1", p.groups);
  return Status::success();
}

// A 4-d image tensor in NCHW order (layout NCHW or ARRAY); `what` names its dims.
Status checkImage(std::string_view name, const TensorView& t, std::string_view what) {
  if (t.layout == MLUOP_LAYOUT_NHWC) {
    return notSupported("{} has layout NHWC; only NCHW (or ARRAY in NCHW order) is supported", name);
  }
  if (t.ndim != 4) return badParam("{} has shape {} but must be 4-d {}", name, t.shapeString(), what);
  return Status::success();
}

// The geometry of a convolution of `input` ([N, C, H, W]) with `filter` ([Cout, C/groups, kh, kw]):
// channels must match the groups and the dilated kernel must fit in the padded input.
Status convGeometry(const ConvParams& p, const TensorView& input, std::string_view filter_name,
                    const TensorView& filter, ConvGeometry* g) {
  MLU_RETURN_IF_ERROR(checkConvParams(p));
  const std::int64_t c = input.dim(1), cout = filter.dim(0), cin_g = filter.dim(1);
  const std::int64_t kh = filter.dim(2), kw = filter.dim(3);
  if (kh < 1 || kw < 1) {
    return badParam("{} has shape {}: its {}x{} kernel is empty", filter_name, filter.shapeString(), kh, kw);
  }
  if (c != cin_g * p.groups) {
    return badParam("input channels {} do not match filter channels {} x groups {}", c, cin_g, p.groups);
  }
  if (cout % p.groups != 0) {
    return badParam("output channels {} are not divisible by groups {}", cout, p.groups);
  }
  *g = gemm_shapes::convGeometry(p, input.dim(0), c, input.dim(2), input.dim(3), cout, kh, kw);
  if (g->ho < 1 || g->wo < 1) {
    return badParam("the padded input {}x{} is smaller than the dilated kernel {}x{}",
                    input.dim(2) + 2 * p.padding[0], input.dim(3) + 2 * p.padding[1],
                    p.dilation[0] * (kh - 1) + 1, p.dilation[1] * (kw - 1) + 1);
  }
  return Status::success();
}

// `out` (y or grad_output) must have the convolution's output shape.
Status checkConvOutput(std::string_view name, const TensorView& out, const ConvGeometry& g) {
  if (out.dim(0) == g.n && out.dim(1) == g.cout && out.dim(2) == g.ho && out.dim(3) == g.wo) {
    return Status::success();
  }
  return badParam("{} has shape {} but the convolution gives {}", name, out.shapeString(), g.outputString());
}

// A per-channel vector [channels]; `why` says where the channel count comes from.
Status checkBias(std::string_view name, const TensorView& bias, std::int64_t channels, std::string_view why) {
  if (bias.ndim == 1 && bias.dim(0) == channels) return Status::success();
  return badParam("{} has shape {} but {} {} channels; it must be [{}]", name, bias.shapeString(), why,
                  channels, channels);
}

}  // namespace

Status validate(const matmul_args& args) {
  MLU_RETURN_IF_ERROR(checkTensors<3>({{{"a", &args.a}, {"b", &args.b}, {"c", &args.c}}}));
  const TensorView &a = args.a, &b = args.b, &c = args.c;
  if (a.ndim < 2) return badParam("a has shape {} but needs at least 2 dims [..., M, K]", a.shapeString());
  if (b.ndim < 2) return badParam("b has shape {} but needs at least 2 dims [..., K, N]", b.shapeString());
  const std::int64_t ka = args.trans_a ? a.dim(a.ndim - 2) : a.dim(a.ndim - 1);
  const std::int64_t kb = args.trans_b ? b.dim(b.ndim - 1) : b.dim(b.ndim - 2);
  if (ka != kb) {
    return badParam("a has K = {} {} but b has {} {}", ka, args.trans_a ? "rows (trans_a)" : "columns", kb,
                    args.trans_b ? "columns (trans_b)" : "rows");
  }
  if (std::string mismatch = gemm_shapes::matmulBatchMismatch(a, b); !mismatch.empty()) {
    return badParam("the batch dims of a and b, {}, do not broadcast", mismatch);
  }
  const gemm_shapes::MatmulShape s = gemm_shapes::matmulShape(args.trans_a, args.trans_b, a, b);
  bool same = c.ndim == s.batch_ndim + 2 && c.dim(c.ndim - 2) == s.m && c.dim(c.ndim - 1) == s.n;
  for (int d = 0; same && d < s.batch_ndim; ++d) same = c.dim(d) == s.batch[static_cast<std::size_t>(d)];
  if (!same) return badParam("c has shape {} but a x b gives {}", c.shapeString(), s.outputString());
  return checkOutput("c", c);
}

Status validate(const linear_args& args) {
  MLU_RETURN_IF_ERROR(checkTensors<4>(
      {{{"x", &args.x}, {"weight", &args.weight}, {"bias", &args.bias, true}, {"y", &args.y}}}));
  const TensorView &x = args.x, &w = args.weight, &y = args.y;
  if (w.ndim != 2) {
    return badParam("weight has shape {} but must be 2-d [out_features, in_features]", w.shapeString());
  }
  if (x.ndim < 1) return badParam("x is 0-d but needs at least 1 dim [..., in_features]");
  const std::int64_t in = x.dim(x.ndim - 1), out = w.dim(0);
  if (in != w.dim(1)) {
    return badParam("x has {} input features (its last dim) but weight {} expects {}", in, w.shapeString(),
                    w.dim(1));
  }
  std::array<std::int64_t, MLUOP_DIM_MAX> expected = x.dims;
  expected[static_cast<std::size_t>(x.ndim - 1)] = out;
  if (args.bias.present) {
    // As PyTorch (the bias is added with addmm's broadcasting): any bias that broadcasts to y, and when y
    // is not empty one that is constant along the rows: [out] (or [1, ..., out], or size 1).
    const TensorView& b = args.bias;
    bool broadcasts = b.ndim <= x.ndim;
    std::int64_t rows = 1;
    for (int d = 0; d < x.ndim - 1; ++d) rows *= x.dim(d);
    for (int i = 1; broadcasts && i <= b.ndim; ++i) {
      const std::int64_t have = b.dim(b.ndim - i), want = expected[static_cast<std::size_t>(x.ndim - i)];
      broadcasts = have == want || have == 1;
    }
    bool per_row = false;
    for (int d = 0; d + 1 < b.ndim; ++d) per_row = per_row || b.dim(d) != 1;
    if (!broadcasts || (per_row && rows * out > 0)) {
      return badParam(
          "bias has shape {} but weight has {} output features; it must be [{}] (or broadcast to "
          "y {} with every dim but the last of size 1)",
          b.shapeString(), out, out, gemm_shapes::dimsString(expected.begin(), expected.begin() + x.ndim));
    }
  }
  bool same = y.ndim == x.ndim;
  for (int d = 0; same && d < x.ndim; ++d) same = y.dim(d) == expected[static_cast<std::size_t>(d)];
  if (!same) {
    return badParam("y has shape {} but x x weight^T gives {}", y.shapeString(),
                    gemm_shapes::dimsString(expected.begin(), expected.begin() + x.ndim));
  }
  return checkOutput("y", y);
}

Status validate(const conv2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(
      checkTensors<4>({{{"x", &args.x}, {"w", &args.w}, {"bias", &args.bias, true}, {"y", &args.y}}}));
  MLU_RETURN_IF_ERROR(checkImage("x", args.x, "[N, C, H, W]"));
  MLU_RETURN_IF_ERROR(checkImage("w", args.w, "[Cout, C / groups, kh, kw]"));
  MLU_RETURN_IF_ERROR(checkImage("y", args.y, "[N, Cout, Ho, Wo]"));
  ConvGeometry g;
  MLU_RETURN_IF_ERROR(convGeometry(args.conv_desc, args.x, "w", args.w, &g));
  if (args.bias.present) MLU_RETURN_IF_ERROR(checkBias("bias", args.bias, g.cout, "the convolution has"));
  MLU_RETURN_IF_ERROR(checkConvOutput("y", args.y, g));
  return checkOutput("y", args.y);
}

Status validate(const conv2d_backward_data_args& args) {
  MLU_RETURN_IF_ERROR(checkTensors<3>(
      {{{"grad_output", &args.grad_output}, {"w", &args.w}, {"grad_input", &args.grad_input}}}));
  MLU_RETURN_IF_ERROR(checkImage("grad_output", args.grad_output, "[N, Cout, Ho, Wo]"));
  MLU_RETURN_IF_ERROR(checkImage("w", args.w, "[Cout, C / groups, kh, kw]"));
  MLU_RETURN_IF_ERROR(checkImage("grad_input", args.grad_input, "[N, C, H, W]"));
  ConvGeometry g;
  MLU_RETURN_IF_ERROR(convGeometry(args.conv_desc, args.grad_input, "w", args.w, &g));
  MLU_RETURN_IF_ERROR(checkConvOutput("grad_output", args.grad_output, g));
  return checkOutput("grad_input", args.grad_input);
}

Status validate(const conv2d_backward_filter_args& args) {
  MLU_RETURN_IF_ERROR(
      checkTensors<3>({{{"x", &args.x}, {"grad_output", &args.grad_output}, {"grad_w", &args.grad_w}}}));
  MLU_RETURN_IF_ERROR(checkImage("x", args.x, "[N, C, H, W]"));
  MLU_RETURN_IF_ERROR(checkImage("grad_output", args.grad_output, "[N, Cout, Ho, Wo]"));
  MLU_RETURN_IF_ERROR(checkImage("grad_w", args.grad_w, "[Cout, C / groups, kh, kw]"));
  ConvGeometry g;
  MLU_RETURN_IF_ERROR(convGeometry(args.conv_desc, args.x, "grad_w", args.grad_w, &g));
  MLU_RETURN_IF_ERROR(checkConvOutput("grad_output", args.grad_output, g));
  return checkOutput("grad_w", args.grad_w);
}

Status validate(const conv2d_backward_bias_args& args) {
  MLU_RETURN_IF_ERROR(
      checkTensors<2>({{{"grad_output", &args.grad_output}, {"grad_bias", &args.grad_bias}}}));
  MLU_RETURN_IF_ERROR(checkImage("grad_output", args.grad_output, "[N, Cout, Ho, Wo]"));
  MLU_RETURN_IF_ERROR(checkBias("grad_bias", args.grad_bias, args.grad_output.dim(1),
                                "grad_output " + args.grad_output.shapeString() + " has"));
  return checkOutput("grad_bias", args.grad_bias);
}

}  // namespace mlu
