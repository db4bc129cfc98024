// libFuzzer target: the MLU_SIM_FAULT parser of the simulated kernel library (runtime/mluops/fault.cpp).
// It must give a table or a message, never crash.
#include "../../runtime/mluops/fault.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto result = mlu::parseFaults(std::string_view(reinterpret_cast<const char*>(data), size));
  static_cast<void>(result);
  return 0;
}
