// tensor_snapshot.h — copying a tensor argument out of device memory, packed contiguous in row-major order,
// and reading elements as float64 (for printing and metrics).
//
// The caller syncs the op's queue first. Inside libopscope.so the copies go through the hook's own
// mlurtMemcpy with the recursion guard set, so they reach the runtime unseen.
#pragma once

#include <mlu/op_args.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace opscope {

// The tensor's elements packed contiguous (row-major), little-endian; broadcast (stride 0) dims are
// expanded. Throws std::runtime_error when the runtime refuses the copy.
std::vector<std::byte> snapshotTensor(const mlu::TensorView& t);

// Packs elements already in host memory (data points at the tensor's first element).
std::vector<std::byte> packTensor(const mlu::TensorView& t, const void* data);

// Element i of packed data of this dtype, as float64 (bool as 0/1, half types widened).
double elementAsDouble(mluopDataType_t dtype, const std::byte* packed, std::size_t i);

// PyTorch-style text of packed values: "tensor([[ 0.1000, -2.0000], ...], dtype=float32)", with 3 edge
// items per dim and "..." when the tensor has more than 1000 elements.
std::string formatTensorValues(const mlu::TensorView& t, const std::vector<std::byte>& packed);

}  // namespace opscope
