// The argument lines of OP_DUMP_ARGS=2, also used where a tool reports an op (overflow check).
#include <opscope/describe.h>
#include <opscope/op_format.h>

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <type_traits>

namespace opscope {
namespace {

const char* layoutName(mluopTensorLayout_t layout) {
  switch (layout) {
    case MLUOP_LAYOUT_NCHW:
      return "NCHW";
    case MLUOP_LAYOUT_NHWC:
      return "NHWC";
    case MLUOP_LAYOUT_ARRAY:
      return "ARRAY";
  }
  return "?";
}

}  // namespace

std::string describeArguments(const OpCall& call) {
  std::string out;
  if (!call.args_ok) return out;
  call.withArgs([&](auto& args) {
    args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
      using V = std::decay_t<decltype(value)>;
      const std::string_view role = mlu::roleName(meta.role);
      if constexpr (std::is_same_v<V, mlu::TensorView>) {
        if (!value.present) {
          out += fmt::format("opscope:   {:<9} {}: absent\n", role, meta.name);
          return;
        }
        out += fmt::format("opscope:   {:<9} {}: {} {} {} @{}\n", role, meta.name,
                           tensorText(value, StridesShown::kAlways), layoutName(value.layout),
                           value.contiguous() ? "contiguous" : "non-contiguous", value.data);
      } else if constexpr (std::is_same_v<V, mlu::IntList>) {
        out += fmt::format("opscope:   {:<9} {} = {}\n", role, meta.name, intsText(value, value.size()));
      } else if constexpr (std::is_same_v<V, mlu::ConvParams>) {
        out += fmt::format("opscope:   {:<9} {} = {}\n", role, meta.name, convText(value));
      } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
        out += fmt::format("opscope:   {:<9} {}: {} bytes @{}\n", role, meta.name, value.size, value.data);
      } else {
        out += fmt::format("opscope:   {:<9} {} = {}\n", role, meta.name, value);
      }
    });
  });
  return out;
}

}  // namespace opscope
