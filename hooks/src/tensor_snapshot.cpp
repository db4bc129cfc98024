#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>
#include <mlu/mlurt.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace opscope {

std::vector<std::byte> packTensor(const mlu::TensorView& t, const void* data) {
  const std::size_t elem = t.elementSize();
  const std::int64_t n = t.numel();
  std::vector<std::byte> out(static_cast<std::size_t>(n) * elem);
  if (n == 0) return out;
  const auto* src = static_cast<const std::byte*>(data);
  if (t.contiguous()) {
    std::memcpy(out.data(), src, out.size());
    return out;
  }
  const auto e = static_cast<std::int64_t>(elem);
  forEachElement(t, [&](std::int64_t i, std::int64_t offset) {
    std::memcpy(out.data() + i * e, src + offset * e, elem);
  });
  return out;
}

std::vector<std::byte> snapshotTensor(const mlu::TensorView& t) {
  if (!t.present || t.numel() == 0) return {};
  const std::size_t extent = t.extentBytes();
  std::vector<std::byte> raw(extent);
  // (Only the runtime calls the hook wraps may be used here: libopscope.so links no runtime library.)
  if (const mlurtStatus_t s = mlurtMemcpy(raw.data(), t.data, extent, MLURT_MEMCPY_DEVICE_TO_HOST);
      s != MLURT_SUCCESS) {
    throw std::runtime_error(fmt::format("cannot copy {} bytes from device address {} (runtime status {})",
                                         extent, t.data, static_cast<int>(s)));
  }
  return packTensor(t, raw.data());
}

namespace {

constexpr std::int64_t kSummarizeAbove = 1000;
constexpr std::int64_t kEdgeItems = 3;

struct Printer {
  const mlu::TensorView& t;
  const std::vector<std::byte>& packed;
  bool summarize;
  bool floating;
  std::string out;

  std::string value(std::int64_t i) const {
    const double v = elementAsDouble(t.dtype, packed.data(), static_cast<std::size_t>(i));
    if (t.dtype == MLUOP_DTYPE_BOOL) return v != 0 ? "True" : "False";
    if (!floating) return fmt::format("{}", static_cast<long long>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return fmt::format("{:.4f}", v);
  }

  // Dim d of the block starting at element `base`, whose row-major stride is `block`.
  void dim(int d, std::int64_t base, int indent) {
    const std::int64_t size = t.dim(d);
    std::int64_t block = 1;
    for (int k = d + 1; k < t.ndim; ++k) block *= t.dim(k);
    out += '[';
    for (std::int64_t i = 0; i < size; ++i) {
      if (summarize && size > 2 * kEdgeItems && i == kEdgeItems) {
        out += d + 1 == t.ndim ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
        i = size - kEdgeItems - 1;
        continue;
      }
      if (d + 1 == t.ndim) {
        out += value(base + i);
      } else {
        dim(d + 1, base + i * block, indent + 1);
      }
      if (i + 1 < size) out += d + 1 == t.ndim ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
    }
    out += ']';
  }
};

}  // namespace

std::string formatTensorValues(const mlu::TensorView& t, const std::vector<std::byte>& packed) {
  Printer p{t, packed, t.numel() > kSummarizeAbove, mlu::isFloating(t.dtype), {}};
  const std::string prefix = "tensor(";
  if (t.ndim == 0) {
    p.out = p.value(0);
  } else if (t.numel() == 0) {
    p.out = "[]";
  } else {
    p.dim(0, 0, static_cast<int>(prefix.size()));
  }
  return fmt::format("{}{}, dtype={})", prefix, p.out, mlu::dtypeName(t.dtype));
}

}  // namespace opscope
