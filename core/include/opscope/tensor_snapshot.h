// tensor_snapshot.h — copying a tensor argument out of device memory, packed contiguous in row-major order,
// and reading elements as float64 (for printing and metrics).
//
// The caller syncs the op's queue first. Inside libopscope.so the copies go through the hook's own
// mlurtMemcpy with the recursion guard set, so they reach the runtime unseen.
#pragma once

#include <opscope/bytes.h>

#include <mlu/dtype.h>
#include <mlu/op_args.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace opscope {

// Calls f(i, offset) for element i (row-major order) of t at `offset` elements from its first element.
template <typename F>
void forEachElement(const mlu::TensorView& t, F&& f) {
  const std::int64_t n = t.numel();
  if (n == 0) return;
  std::vector<std::int64_t> index(static_cast<std::size_t>(t.ndim), 0);
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    f(i, offset);
    for (int d = t.ndim - 1; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      offset += t.stride(d);
      if (++index[u] < t.dim(d)) break;
      offset -= index[u] * t.stride(d);
      index[u] = 0;
    }
  }
}

// The tensor's elements packed contiguous (row-major), little-endian; broadcast (stride 0) dims are
// expanded. A contiguous tensor is copied once, straight into the result. The result reuses `into`'s
// memory when it is large enough (a buffer from an earlier snapshot: no fresh pages to fault in). Throws
// std::runtime_error when the runtime refuses the copy.
Bytes snapshotTensor(const mlu::TensorView& t, Bytes into = {});

// How a copy writes its destination: through the cache (for data read again soon), or around it, with
// streaming stores, for a copy kept for later (it then neither reads the destination in first nor evicts
// what the program works on; ~1.4x memcpy's speed on buffers of a few hundred KiB from memory, measured on
// this project's machine).
enum class CopyStores { kCached, kStreaming };

// Packs elements already in host memory (data points at the tensor's first element) into `into`.
Bytes packTensor(const mlu::TensorView& t, const void* data, Bytes into = {},
                 CopyStores stores = CopyStores::kCached);

// n bytes from src to dst with streaming stores (memcpy where the CPU has none, and for small copies).
void copyStreaming(void* dst, const void* src, std::size_t n);

// Element i of packed data of this dtype, as float64 (bool as 0/1, half types widened).
inline double elementAsDouble(mluopDataType_t dtype, const std::byte* packed, std::size_t i) {
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

// PyTorch-style text of packed values: "tensor([[ 0.1000, -2.0000], ...], dtype=float32)", with 3 edge
// items per dim and "..." when the tensor has more than 1000 elements.
std::string formatTensorValues(const mlu::TensorView& t, const Bytes& packed);

}  // namespace opscope
