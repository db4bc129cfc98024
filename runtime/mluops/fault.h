// fault.h — MLU_SIM_FAULT: known bugs planted in named ops, so every tool can be shown to find them.
//
//   MLU_SIM_FAULT=op[/dtype]:kind[=value][@fraction],...   (/dtype: only the calls whose first output is of
//   that dtype, by its name: float32, float16, bfloat16, ...)   kinds:
//     nan            NaN into that fraction of the first output's elements (default 1e-3, deterministic)
//     scale=F        multiply (that fraction of, default all) the first output by F
//     offset=F       add F to (that fraction of, default all) the first output
//     noncontig      the op ignores its inputs' strides and reads them as contiguous
//     oob=N          the kernel also writes N bytes past the end of its first output (1 to 1 MiB)
//     notsupported   the op returns MLUOP_STATUS_NOT_SUPPORTED
//     delay=MS       the kernel sleeps MS milliseconds before running (0 to 3,600,000)
//     unstable       softmax and log_softmax skip the max-subtraction and compute in the tensor's own dtype
//                    (each exponential and the running sum rounded to it), as a naive half kernel does
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mlu {

enum class FaultKind { kNan, kScale, kOffset, kNonContig, kOob, kNotSupported, kDelay, kUnstable };

struct Fault {
  FaultKind kind;
  double value = 0;       // scale factor, offset, bytes (oob) or milliseconds (delay)
  double fraction = 1.0;  // share of elements affected (nan, scale, offset)
  int dtype = -1;         // mluopDataType_t of the calls it applies to (their first output's); -1: every call
};

// The faults of each op, by canonical op name.
using FaultTable = std::map<std::string, std::vector<Fault>, std::less<>>;

// Parses an MLU_SIM_FAULT value; on error, a message naming the bad item.
std::variant<FaultTable, std::string> parseFaults(std::string_view spec);

// The process's faults, parsed once when the library loads (a malformed value exits with status 2).
const FaultTable& faults();

// The faults of faults (may be null) that apply to a call whose first output is of dtype (-1: none).
std::vector<Fault> faultsFor(const std::vector<Fault>* faults, int dtype);

// Whether element i (of n) is in the deterministic subset selected by fraction.
bool faultSelects(std::uint64_t i, double fraction);

}  // namespace mlu
