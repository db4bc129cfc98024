// collective_fault.h — the MLU_SIM_FAULT items that plant faults in collectives (libmlucl), parsed alike by
// libmlucl (which applies them) and libmluops (which checks every item of the variable when it loads).
//
//   COLLECTIVE:KIND[=VALUE][@rank=R][@call=N][@FRACTION]
//     COLLECTIVE  allreduce, broadcast, allgather, reduce_scatter, send, recv or barrier
//     hang        the rank never reaches the collective: its host call never returns (as a rank stuck in
//                 its own code before it), so it never enqueues it
//     skip        the rank does not take part in that call (it returns success, enqueues nothing, and its
//                 communicator's sequence number moves on as if it had: its next collective disagrees)
//     count=D     the rank's count is off by D (a whole number, not 0)
//     dtype=NAME  the rank passes that dtype (float32, float16, bfloat16, float64, int8, ..., bool)
//     nan         NaN into that fraction (default 1e-3, at least one element) of the rank's send buffer
//                 before the transfer (floating dtypes; integer buffers are left alone)
//     delay=MS    the rank reaches the collective MS milliseconds late: its host call sleeps that long
//                 first (0 to 3,600,000)
//   @rank=R  only on communicator rank R (default every rank); @call=N only the N-th call (1-based) of that
//   collective in the process (default every call).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace mlu {

enum class CollectiveFaultKind { kHang, kSkip, kCount, kDtype, kNan, kDelay };

struct CollectiveFault {
  std::string collective;  // "allreduce", ...
  CollectiveFaultKind kind = CollectiveFaultKind::kHang;
  double value = 0;       // count delta, dtype (its mluclDataType_t value) or milliseconds
  double fraction = 1;    // nan
  int rank = -1;          // -1: every rank
  std::int64_t call = 0;  // 0: every call
};

// The text helpers of both parsers: spaces and tabs trimmed; a whole finite number.
std::string_view trimFaultText(std::string_view s);
bool parseFaultNumber(std::string_view text, double* out);

// Whether an MLU_SIM_FAULT item's name (before the colon) names a collective.
bool isCollectiveName(std::string_view name);

// Parses one item whose name is a collective (item: the whole trimmed "name:kind..." text); on error, a
// message naming the item.
std::variant<CollectiveFault, std::string> parseCollectiveFault(std::string_view item);

}  // namespace mlu
