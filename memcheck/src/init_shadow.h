// init_shadow.h — MEM_CHECK_INIT's record of which bytes of each live device allocation have been written
// since it was made: the written ranges of each allocation, and of each piece a program's own allocator
// hands out (opscope_pool_alloc: a piece handed out again is unwritten, as PyTorch's `empty` is). Writes
// and reads are byte ranges in program order (a tensor's whole extent, a copy's or memset's range); a read
// of bytes never written is an uninitialized read. Plain data, no lock: the tool holds one over it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace opscope::memcheck {

class InitShadow {
 public:
  // A range [begin, end) of addresses.
  struct Range {
    std::uintptr_t begin = 0, end = 0;
  };
  // What a read found: the allocation (or piece) it reads and the first range of it never written.
  struct Unwritten {
    Range allocation;
    Range unwritten;
  };

  // A new allocation (piece: a piece of a pool block) at ptr of size bytes, all unwritten.
  void allocate(std::uintptr_t ptr, std::size_t size, bool piece);
  // The allocation (piece) at ptr is gone.
  void release(std::uintptr_t ptr, bool piece);
  // [p, p + bytes) written: within the piece, else the allocation, that holds p.
  void write(std::uintptr_t p, std::size_t bytes);
  // The first bytes of [p, p + bytes) never written, in the piece, else the allocation, that holds p;
  // nothing when all were written, or when p is in no allocation this knows.
  std::optional<Unwritten> read(std::uintptr_t p, std::size_t bytes) const;

  std::size_t allocations() const { return blocks_.size() + pieces_.size(); }

 private:
  struct Shadow {
    std::size_t size = 0;
    std::map<std::uintptr_t, std::uintptr_t> written;  // begin -> end, disjoint and not touching
  };
  using Map = std::map<std::uintptr_t, Shadow>;
  static Shadow* holding(Map& map, std::uintptr_t p, std::uintptr_t* base);
  std::pair<Shadow*, std::uintptr_t> find(std::uintptr_t p);
  std::pair<const Shadow*, std::uintptr_t> find(std::uintptr_t p) const;

  Map blocks_;  // allocations by start
  Map pieces_;  // pieces of pool blocks by start (looked up first)
};

}  // namespace opscope::memcheck
