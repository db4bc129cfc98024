// stats.h — computing the statistics (record.h's TensorStats) that OP_CAPTURE_MODE=stats keeps for every
// tensor of every op call.
#pragma once

#include <opscope/rundb/record.h>

#include <cstddef>
#include <cstdint>

namespace opscope::rundb {

// The statistics of `bytes` bytes of packed elements of dtype.
TensorStats tensorStats(mluopDataType_t dtype, const std::byte* data, std::size_t bytes);
// The same when their checksum (tensorChecksum) is known already.
TensorStats tensorStats(mluopDataType_t dtype, const std::byte* data, std::size_t bytes,
                        std::uint64_t checksum);
// The same, copying the bytes to copy_to (room for `bytes`; null: no copy) on the way: in one pass over
// them, the copy read back while in cache. The figures are those tensorStats gives.
TensorStats copyWithStats(mluopDataType_t dtype, const std::byte* data, std::byte* copy_to, std::size_t bytes,
                          std::uint64_t checksum);
// TensorStats::checksum of `bytes` bytes.
std::uint64_t tensorChecksum(const std::byte* data, std::size_t bytes);

// The statistics of a tensor record's packed data.
inline TensorStats tensorStats(const TensorRecord& t) {
  return tensorStats(t.dtype, t.data.data(), t.data.size());
}

}  // namespace opscope::rundb
