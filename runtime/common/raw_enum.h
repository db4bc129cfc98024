// raw_enum.h — the bits of an enum argument as an int. A C caller may pass any value; loading an
// out-of-range value as the enum type is undefined behaviour (UBSan reports it), so APIs check it as an int.
#pragma once

#include <cstring>

namespace mlu {

template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int raw;
  std::memcpy(&raw, &e, sizeof raw);
  return raw;
}

}  // namespace mlu
