// stats.h — the statistics of a tensor that OP_CAPTURE_MODE=stats keeps for every tensor of every op call
// (a row of capture.db's tensor_stats), instead of the tensor itself.
#pragma once

#include <opscope/rundb/record.h>

#include <cstdint>

namespace opscope::rundb {

struct TensorStats {
  std::int64_t numel = 0;
  // Over the finite elements (NaN and Inf are counted apart, so that one NaN does not hide the rest): 0
  // when there is none. Integers and bool are read as float64.
  double min = 0, max = 0, mean = 0;
  double l2 = 0;  // sqrt of the sum of squares of the finite elements
  std::int64_t nan = 0, inf = 0;
  // XXH3-64 of the packed bytes (Debian's libxxhash, which capture already uses to find duplicate
  // tensors: ~17 GB/s here, where a table-driven CRC-32C runs at a few GB/s): equal bytes, equal checksum.
  std::uint64_t checksum = 0;
};

// The statistics of a tensor record's packed data.
TensorStats tensorStats(const TensorRecord& t);

}  // namespace opscope::rundb
