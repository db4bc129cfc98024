// bytes.h — a byte vector whose resize() leaves the new bytes as they are: for buffers a copy is about to
// fill (tensor snapshots), where zeroing first would be one more pass over memory for nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace opscope {

// std::allocator, except that value-initialization (vector::resize(n), vector(n)) default-initializes:
// for std::byte that means no write at all.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(args)...);
  }
};

// Tensor data as opscope copies it around: Bytes b; b.resize(n) allocates without writing.
using Bytes = std::vector<std::byte, UninitializedAllocator<std::byte>>;

}  // namespace opscope

namespace opscope {

// Whether the byte ranges [a, a + an) and [b, b + bn) share a byte (empty ranges share none).
inline bool bytesOverlap(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

}  // namespace opscope
