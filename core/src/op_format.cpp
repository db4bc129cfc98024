#include <opscope/op_format.h>

#include <mlu/dtype.h>

#include <type_traits>
#include <vector>

namespace opscope {

std::string tensorText(std::string_view dtype, std::span<const std::int64_t> dims,
                       std::span<const std::int64_t> strides, StridesShown shown) {
  std::string out(dtype);
  appendInts(out, dims, dims.size());
  // Row-major contiguity as TensorView::contiguous() decides it, in unsigned arithmetic (the dims may come
  // from a capture.db someone sent: a product that wraps must not be undefined behaviour).
  bool contiguous = strides.size() == dims.size();
  std::uint64_t expected = 1;
  for (std::size_t i = dims.size(); contiguous && i-- > 0;) {
    if (dims[i] != 1 && static_cast<std::uint64_t>(strides[i]) != expected) contiguous = false;
    expected *= static_cast<std::uint64_t>(dims[i]);
  }
  if (shown == StridesShown::kAlways || !contiguous) {
    out += " strides ";
    appendInts(out, strides, strides.size());
  }
  return out;
}

std::string tensorText(const mlu::TensorView& v, StridesShown shown) {
  const auto n = static_cast<std::size_t>(v.ndim);
  return tensorText(mlu::dtypeName(v.dtype), std::span(v.dims.data(), n), std::span(v.strides.data(), n),
                    shown);
}

std::string packedTensorText(std::string_view dtype, std::span<const std::int64_t> dims) {
  std::string out(dtype);
  appendInts(out, dims, dims.size());
  return out;
}

std::string convText(const mlu::ConvParams& p) {
  std::string out = "{\"padding\":";
  appendInts(out, p.padding, 2);
  out += ",\"stride\":";
  appendInts(out, p.stride, 2);
  out += ",\"dilation\":";
  appendInts(out, p.dilation, 2);
  out += ",\"groups\":" + std::to_string(p.groups) + "}";
  return out;
}

std::string tensorsLine(std::span<const NamedTensor> tensors) {
  std::string out;
  for (const NamedTensor& t : tensors) {
    if (!out.empty()) out += "; ";
    out += t.name;
    out += ' ';
    out += t.text;
  }
  return out;
}

std::string tensorsLine(const OpCall& call) {
  std::vector<NamedTensor> tensors;
  if (!call.args_ok) return {};
  call.withArgs([&](const auto& args) {
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
        if (value.present) tensors.push_back({std::string(meta.name), tensorText(value)});
      }
    });
  });
  return tensorsLine(tensors);
}

}  // namespace opscope
