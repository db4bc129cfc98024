// The collective faults of MLU_SIM_FAULT (runtime/common/collective_fault.h), parsed once when the library
// loads (a malformed value exits with status 2), and which of them apply to a call.
#pragma once

#include "transfer.h"

#include <mlu/mlucl.h>

#include <cstddef>

namespace mlucl {

struct CallFaults {
  bool hang = false;  // the host call never returns (the rank never reaches the collective)
  bool skip = false;  // the call does nothing but take its sequence number
  bool nan = false;   // NaN into the send buffer first
  double nan_fraction = 0;
  double delay_ms = 0;  // the host call sleeps first (a slow rank)
  bool any() const { return hang || skip || nan || delay_ms > 0; }
};

// Counts this call of `kind` in the process and returns the faults planted in it on communicator rank
// `rank`; count and dtype faults change *count and *dtype (before the call's checks, as a caller's bug
// would).
CallFaults faultsForCall(Kind kind, int rank, std::size_t* count, int* dtype);

}  // namespace mlucl
