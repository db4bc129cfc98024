#include <opscope/tensor_snapshot.h>

#include <mlu/dtype.h>
#include <mlu/mlurt.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace opscope {

namespace {

// Copies `count` elements of `elem` bytes from src (every `stride` elements) to dst (packed).
void copyRun(std::byte* dst, const std::byte* src, std::int64_t count, std::int64_t stride,
             std::size_t elem) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(count) * elem);
    return;
  }
  auto each = [&]<std::size_t kSize>() {
    for (std::int64_t i = 0; i < count; ++i)
      std::memcpy(dst + static_cast<std::size_t>(i) * kSize,
                  src + i * stride * static_cast<std::int64_t>(kSize), kSize);
  };
  switch (elem) {
    case 1:
      return each.template operator()<1>();
    case 2:
      return each.template operator()<2>();
    case 4:
      return each.template operator()<4>();
    case 8:
      return each.template operator()<8>();
    default:
      for (std::int64_t i = 0; i < count; ++i)
        std::memcpy(dst + static_cast<std::size_t>(i) * elem,
                    src + i * stride * static_cast<std::int64_t>(elem), elem);
  }
}

}  // namespace

void copyStreaming(void* dst, const void* src, std::size_t n) {
#if defined(__x86_64__)
  constexpr std::size_t kMin = 4096;  // below this, memcpy
  if (n >= kMin) {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    // Up to the first 16-byte boundary of the destination, then 64 bytes a turn (SSE2: every x86-64 CPU).
    const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    _mm_sfence();  // the streamed stores ordered before what follows (another thread may read the copy)
    std::memcpy(d, s, n);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

Bytes packTensor(const mlu::TensorView& t, const void* data, Bytes out, CopyStores stores) {
  const std::size_t elem = t.elementSize();
  const std::int64_t n = t.numel();
  out.resize(static_cast<std::size_t>(n) * elem);
  if (n == 0) return out;
  const auto* src = static_cast<const std::byte*>(data);
  if (t.contiguous()) {
    if (stores == CopyStores::kStreaming)
      copyStreaming(out.data(), src, out.size());
    else
      std::memcpy(out.data(), src, out.size());
    return out;
  }
  // One run per row of the innermost dim (a single memcpy when that dim is dense), the outer dims walked
  // by an odometer: no per-element index arithmetic.
  const int last = t.ndim - 1;  // >= 0: a 0-d tensor is contiguous
  const std::int64_t row = t.dim(last), row_stride = t.stride(last);
  const std::int64_t rows = n / row;
  std::vector<std::int64_t> index(static_cast<std::size_t>(last), 0);
  std::int64_t offset = 0;  // in elements, of the current row's first element
  const auto e = static_cast<std::int64_t>(elem);
  for (std::int64_t r = 0; r < rows; ++r) {
    copyRun(out.data() + static_cast<std::size_t>(r * row) * elem, src + offset * e, row, row_stride, elem);
    for (int d = last - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      offset += t.stride(d);
      if (++index[u] < t.dim(d)) break;
      offset -= index[u] * t.stride(d);
      index[u] = 0;
    }
  }
  return out;
}

namespace {

void copyFromDevice(std::byte* host, const void* device, std::size_t bytes) {
  // (Only the runtime calls the hook wraps may be used here: libopscope.so links no runtime library.)
  if (const mlurtStatus_t s = mlurtMemcpy(host, device, bytes, MLURT_MEMCPY_DEVICE_TO_HOST);
      s != MLURT_SUCCESS) {
    throw std::runtime_error(fmt::format("cannot copy {} bytes from device address {} (runtime status {})",
                                         bytes, device, static_cast<int>(s)));
  }
}

}  // namespace

Bytes snapshotTensor(const mlu::TensorView& t, Bytes into) {
  into.clear();
  if (!t.present || t.numel() == 0) return into;
  if (t.contiguous()) {  // the packed form is the device extent itself
    into.resize(static_cast<std::size_t>(t.numel()) * t.elementSize());
    copyFromDevice(into.data(), t.data, into.size());
    return into;
  }
  Bytes raw(t.extentBytes());
  copyFromDevice(raw.data(), t.data, raw.size());
  return packTensor(t, raw.data(), std::move(into));
}

namespace {

constexpr std::int64_t kSummarizeAbove = 1000;
constexpr std::int64_t kEdgeItems = 3;

struct Printer {
  const mlu::TensorView& t;
  const Bytes& packed;
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

std::string formatTensorValues(const mlu::TensorView& t, const Bytes& packed) {
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
