// tensor_row.h — a tensor row of capture.db read as untrusted input. A capture.db is a file people send each
// other: before op-replay lays a tensor out in memory, its row must describe exactly its blob (a known
// dtype, at most MLUOP_DIM_MAX dims, as many strides as dims, none negative, shape x dtype = the blob's
// bytes, an extent op-replay can allocate). (A row at an argument that is not a tensor is never read.)
#pragma once

#include <opscope/rundb/record.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::rundb {

// The most bytes op-replay lays out for one tensor (its extent, strides included): 64 GiB. A stride of
// 2^40 in a hostile file is an error, not an attempt to allocate a terabyte.
inline constexpr std::uint64_t kMaxExtentBytes = std::uint64_t{1} << 36;

// "[1, 2, 3]" as integers; nothing when the text is anything else: one flat JSON array of at most 64
// integers that fit in int64, with optional spaces (no recursion, no allocation beyond the 64 values).
std::optional<std::vector<std::int64_t>> parseIntArray(std::string_view text);

// What is wrong with tensor row r whose nbytes column says nbytes, or "" when nothing: the message names
// the field ("3 strides for 4 dims", "stride 1 is -2", ...).
std::string tensorRowProblem(const TensorRecord& r, std::int64_t nbytes);

}  // namespace opscope::rundb
