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
  // Walk the index space in row-major order, keeping the source offset up to date.
  std::vector<std::int64_t> index(static_cast<std::size_t>(t.ndim), 0);
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + static_cast<std::size_t>(i) * elem,
                src + offset * static_cast<std::int64_t>(elem), elem);
    for (int d = t.ndim - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      offset += t.stride(d);
      if (++index[u] < t.dim(d)) break;
      offset -= index[u] * t.stride(d);
      index[u] = 0;
    }
  }
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

double elementAsDouble(mluopDataType_t dtype, const std::byte* packed, std::size_t i) {
  const std::byte* p = packed + i * mlu::dtypeSize(dtype);
  auto load = [p]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT:
      return load(float{});
    case MLUOP_DTYPE_HALF:
      return mlu::halfToFloat(load(std::uint16_t{}));
    case MLUOP_DTYPE_BFLOAT16:
      return mlu::bfloat16ToFloat(load(std::uint16_t{}));
    case MLUOP_DTYPE_DOUBLE:
      return load(double{});
    case MLUOP_DTYPE_INT8:
      return load(std::int8_t{});
    case MLUOP_DTYPE_INT16:
      return load(std::int16_t{});
    case MLUOP_DTYPE_INT32:
      return load(std::int32_t{});
    case MLUOP_DTYPE_INT64:
      return static_cast<double>(load(std::int64_t{}));
    case MLUOP_DTYPE_UINT8:
      return load(std::uint8_t{});
    case MLUOP_DTYPE_BOOL:
      return load(std::uint8_t{}) != 0 ? 1.0 : 0.0;
    case MLUOP_DTYPE_INVALID:
      break;
  }
  return 0.0;
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
