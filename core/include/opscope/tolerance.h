// tolerance.h — an accuracy tolerance: |device − reference| ≤ atol + rtol·|reference|.
#pragma once

namespace opscope {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

}  // namespace opscope
