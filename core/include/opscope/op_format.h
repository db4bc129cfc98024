// op_format.h — how opscope writes an op call's arguments, in one place (in the manner of oneDNN's verbose
// line): a tensor is "float32[4,1,28,28]" (" strides [..]" added when it is not contiguous), an int list
// "[1,2]", convolution parameters a JSON object, and the one-line form of a call's tensors
// "x float32[4,1,28,28]; y float32[4,10]". OP_DUMP_ARGS, the trace's span arguments, time_measure.csv,
// capture.db's scalars and `op-replay --list` all write them with these functions.
#pragma once

#include <opscope/op_call.h>

#include <mlu/op_args.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace opscope {

// "[1,2,3]": the first n of values.
template <typename Values>
void appendInts(std::string& out, const Values& values, std::size_t n) {
  out += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}
template <typename Values>
std::string intsText(const Values& values, std::size_t n) {
  std::string out;
  appendInts(out, values, n);
  return out;
}

enum class StridesShown { kWhenNotContiguous, kAlways };

// A tensor: its dtype and shape, "float32[4,1,28,28]", then " strides [784,784,28,1]" when its strides are
// not the row-major ones of its shape (or always). Strides shorter than dims count as not contiguous.
std::string tensorText(std::string_view dtype, std::span<const std::int64_t> dims,
                       std::span<const std::int64_t> strides,
                       StridesShown shown = StridesShown::kWhenNotContiguous);
std::string tensorText(const mlu::TensorView& v, StridesShown shown = StridesShown::kWhenNotContiguous);
// A tensor packed row-major (as capture.db stores data): "bfloat16[2,3]".
std::string packedTensorText(std::string_view dtype, std::span<const std::int64_t> dims);

// {"padding":[0,0],"stride":[1,1],"dilation":[1,1],"groups":1}
std::string convText(const mlu::ConvParams& p);

// One tensor of the one-line form: "x float32[4,1,28,28]".
struct NamedTensor {
  std::string name;
  std::string text;  // tensorText
};
// "x float32[4,1,28,28]; y float32[4,10]"
std::string tensorsLine(std::span<const NamedTensor> tensors);
// The call's present tensors in schema order (empty when its arguments are unreadable).
std::string tensorsLine(const OpCall& call);

}  // namespace opscope
