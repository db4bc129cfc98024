// nonfinite_scalars.h — whether an op was asked for NaN or infinity by a scalar argument: a fill with -inf
// (the causal mask of every GPT-style attention), a masked fill with NaN. Its outputs' NaN/Inf are then what
// the program wanted, not an overflow: the overflow check and the statistics capture's first NaN/Inf leave
// such a call out (as they leave out a call whose inputs already held NaN/Inf).
#pragma once

#include <mlu/op_args.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace opscope {

template <typename Args>
bool hasNonFiniteScalar(const Args& args) {
  bool found = false;
  args.visit([&](const mlu::ArgMeta&, const auto& value) {
    using V = std::decay_t<decltype(value)>;
    if constexpr (std::is_floating_point_v<V>) found = found || !std::isfinite(value);
  });
  return found;
}

// The same of a captured call's scalars as text ({name, "-inf"}: fmt's shortest form of a double).
inline bool hasNonFiniteScalarText(const std::vector<std::pair<std::string, std::string>>& scalars) {
  for (const auto& [name, value] : scalars) {
    if (value == "inf" || value == "-inf" || value == "nan" || value == "-nan") return true;
  }
  return false;
}

}  // namespace opscope
