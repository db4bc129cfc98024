#include "tensor_row.h"

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <cctype>

namespace opscope::rundb {
namespace {

constexpr std::size_t kMaxArrayEntries = 64;

}  // namespace

std::optional<std::vector<std::int64_t>> parseIntArray(std::string_view text) {
  std::size_t i = 0;
  auto skipSpace = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
  };
  std::vector<std::int64_t> out;
  skipSpace();
  if (i >= text.size() || text[i] != '[') return std::nullopt;
  ++i;
  skipSpace();
  if (i < text.size() && text[i] == ']') {
    ++i;
    skipSpace();
    return i == text.size() ? std::optional(out) : std::nullopt;
  }
  for (;;) {
    skipSpace();
    const bool negative = i < text.size() && text[i] == '-';
    if (negative) ++i;
    if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    // Magnitudes up to 2^63 (for INT64_MIN); digits are accumulated with an overflow check.
    std::uint64_t magnitude = 0;
    constexpr std::uint64_t kLimit = std::uint64_t{1} << 63;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      const auto digit = static_cast<std::uint64_t>(text[i] - '0');
      if (magnitude > (kLimit - digit) / 10) return std::nullopt;
      magnitude = magnitude * 10 + digit;
      ++i;
    }
    if (!negative && magnitude == kLimit) return std::nullopt;
    if (out.size() == kMaxArrayEntries) return std::nullopt;
    out.push_back(negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude));
    skipSpace();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == ']') {
      ++i;
      skipSpace();
      return i == text.size() ? std::optional(out) : std::nullopt;
    }
    return std::nullopt;
  }
}

std::string tensorRowProblem(const TensorRecord& r, std::int64_t nbytes) {
  if (r.role != "input" && r.role != "output" && r.role != "cpu_output")
    return fmt::format("role '{}' is none of input, output, cpu_output", r.role);
  // (A value outside the enum has no size: found by fuzz_tensor_row, a division by zero below.)
  if (r.dtype == MLUOP_DTYPE_INVALID || mlu::dtypeSize(r.dtype) == 0) return "its dtype is unknown";
  if (r.shape.size() > static_cast<std::size_t>(MLUOP_DIM_MAX))
    return fmt::format("{} dims (at most {})", r.shape.size(), MLUOP_DIM_MAX);
  if (r.strides.size() != r.shape.size())
    return fmt::format("{} strides for {} dims", r.strides.size(), r.shape.size());
  const auto elem = static_cast<std::uint64_t>(mlu::dtypeSize(r.dtype));
  // Elements and bytes, then the extent, each with an overflow check: all bounded by kMaxExtentBytes.
  std::uint64_t count = 1, last = 0;
  for (std::size_t d = 0; d < r.shape.size(); ++d) {
    if (r.shape[d] < 0) return fmt::format("dim {} is {}", d, r.shape[d]);
    if (r.strides[d] < 0) return fmt::format("stride {} is {}", d, r.strides[d]);
    const auto dim = static_cast<std::uint64_t>(r.shape[d]);
    if (dim != 0 && count > kMaxExtentBytes / dim) return "its shape holds too many elements";
    count *= dim;
  }
  if (count * elem != static_cast<std::uint64_t>(r.data.size()) ||
      nbytes != static_cast<std::int64_t>(r.data.size())) {
    return fmt::format("shape {} of {} needs {} bytes, its blob has {} (nbytes says {})",
                       fmt::format("[{}]", fmt::join(r.shape, ", ")), mlu::dtypeName(r.dtype), count * elem,
                       r.data.size(), nbytes);
  }
  if (count == 0) return "";
  for (std::size_t d = 0; d < r.shape.size(); ++d) {
    const auto span = static_cast<std::uint64_t>(r.shape[d] - 1);
    const auto stride = static_cast<std::uint64_t>(r.strides[d]);
    if (stride != 0 && span > (kMaxExtentBytes - last) / stride)
      return fmt::format("its strides span more than {} GiB", kMaxExtentBytes >> 30);
    last += span * stride;
  }
  if ((last + 1) > kMaxExtentBytes / elem)
    return fmt::format("its strides span more than {} GiB", kMaxExtentBytes >> 30);
  return "";
}

}  // namespace opscope::rundb
