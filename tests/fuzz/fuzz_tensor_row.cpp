// libFuzzer target: a tensor row of capture.db as op-replay reads it (core/src/rundb/tensor_row.cpp): the
// shape and strides texts, the dtype, the nbytes column and the blob come from the file. Whatever they hold,
// the check must answer without crashing, and a row it accepts must be safe to lay out: its elements fit its
// blob and its extent fits the limit.
#include "../../core/src/rundb/tensor_row.h"

#include <mlu/dtype.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // [dtype byte][nbytes byte] shape-text '\n' strides-text '\n' blob
  if (size < 2) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::size_t a = text.find('\n');
  const std::size_t b = a == std::string_view::npos ? a : text.find('\n', a + 1);
  if (b == std::string_view::npos) return 0;
  const auto shape = opscope::rundb::parseIntArray(text.substr(0, a));
  const auto strides = opscope::rundb::parseIntArray(text.substr(a + 1, b - a - 1));
  if (!shape || !strides) return 0;
  opscope::rundb::TensorRecord r;
  r.role = "input";
  r.dtype = static_cast<mluopDataType_t>(data[0] % 12);
  r.shape = *shape;
  r.strides = *strides;
  const std::string_view blob = text.substr(b + 1);
  r.data.assign(reinterpret_cast<const std::byte*>(blob.data()),
                reinterpret_cast<const std::byte*>(blob.data()) + blob.size());
  const std::int64_t nbytes = data[1] == 0 ? static_cast<std::int64_t>(blob.size()) : data[1];
  if (!opscope::rundb::tensorRowProblem(r, nbytes).empty() || r.dtype == MLUOP_DTYPE_INVALID) return 0;
  // Accepted: the invariants op-replay relies on.
  std::uint64_t count = 1, last = 0;
  for (std::size_t d = 0; d < r.shape.size(); ++d) {
    count *= static_cast<std::uint64_t>(r.shape[d]);
    if (r.shape[d] > 0)
      last += static_cast<std::uint64_t>(r.shape[d] - 1) * static_cast<std::uint64_t>(r.strides[d]);
  }
  const std::uint64_t elem = mlu::dtypeSize(r.dtype);
  if (count * elem != r.data.size()) std::abort();
  if (count > 0 && (last + 1) * elem > opscope::rundb::kMaxExtentBytes) std::abort();
  return 0;
}
