#include <opscope/compare/op_class.h>

#include <array>

namespace opscope::compare {
namespace {

using mlu::OpId;

// Ops whose every output value is one of the inputs' (or the op's scalars') values, unchanged or with its
// sign flipped, or a comparison's 0/1: no rounding anywhere, so the device and the reference agree exactly.
// (max_pool2d_backward is not here: overlapping windows add gradients, in an order the device chooses.)
constexpr std::array kExactOps = {
    OpId::fill,
    OpId::copy,
    OpId::permute,
    OpId::maximum,
    OpId::minimum,
    OpId::neg,
    OpId::abs,
    OpId::relu,
    OpId::relu_backward,
    OpId::max,
    OpId::min,
    OpId::argmax,
    OpId::max_pool2d_forward,
    OpId::embedding_forward,
    OpId::index_select,
    OpId::gather,
    OpId::concat,
    OpId::split,
    OpId::where,
    OpId::eq,
    OpId::ne,
    OpId::lt,
    OpId::le,
    OpId::gt,
    OpId::ge,
    OpId::logical_and,
    OpId::logical_or,
    OpId::logical_xor,
    OpId::logical_not,
    OpId::bitwise_and,
    OpId::bitwise_or,
    OpId::bitwise_xor,
    OpId::bitwise_not,
    OpId::clamp,
    OpId::floor,
    OpId::ceil,
    OpId::round,
    OpId::trunc,
    OpId::sign,
    OpId::sort,
    OpId::topk,
};

// Ops that sum over many elements of their inputs (or scatter into sums).
constexpr std::array kReductionOps = {
    OpId::sum,
    OpId::mean,
    OpId::norm,
    OpId::var,
    OpId::cumsum,
    OpId::matmul,
    OpId::linear,
    OpId::conv2d_forward,
    OpId::conv2d_backward_data,
    OpId::conv2d_backward_filter,
    OpId::conv2d_backward_bias,
    OpId::max_pool2d_backward,
    OpId::avg_pool2d_forward,
    OpId::avg_pool2d_backward,
    OpId::adaptive_avg_pool2d_forward,
    OpId::adaptive_avg_pool2d_backward,
    OpId::softmax_forward,
    OpId::softmax_backward,
    OpId::log_softmax_forward,
    OpId::log_softmax_backward,
    OpId::nll_loss_forward,
    OpId::nll_loss_backward,
    OpId::cross_entropy_forward,
    OpId::cross_entropy_backward,
    OpId::layer_norm_forward,
    OpId::layer_norm_backward,
    OpId::rms_norm_forward,
    OpId::rms_norm_backward,
    OpId::batch_norm_forward,
    OpId::batch_norm_backward,
    OpId::scaled_dot_product_attention_forward,
    OpId::scaled_dot_product_attention_backward,
    OpId::attention_varlen_forward,
    OpId::attention_varlen_backward,
    OpId::embedding_backward,
    OpId::scatter_add,
};

constexpr std::array kRandomOps = {OpId::uniform, OpId::normal, OpId::normal_tensor, OpId::dropout_forward};

// Every op's class by its OpId, made once from the lists above (compare::opClass is asked once per compared
// op).
constexpr std::array<OpClass, mlu::kOpCount> kClassOf = [] {
  std::array<OpClass, mlu::kOpCount> c{};
  c.fill(OpClass::kElementwise);
  for (const OpId op : kExactOps) c[static_cast<std::size_t>(op)] = OpClass::kExact;
  for (const OpId op : kReductionOps) c[static_cast<std::size_t>(op)] = OpClass::kReduction;
  for (const OpId op : kRandomOps) c[static_cast<std::size_t>(op)] = OpClass::kRandom;
  return c;
}();

}  // namespace

OpClass opClass(OpId op) {
  const auto i = static_cast<std::size_t>(op);
  return i < kClassOf.size() ? kClassOf[i] : OpClass::kElementwise;
}

std::string_view opClassName(OpClass c) {
  switch (c) {
    case OpClass::kExact:
      return "exact";
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kReduction:
      return "reduction";
    case OpClass::kRandom:
      return "random";
  }
  return "elementwise";
}

}  // namespace opscope::compare
