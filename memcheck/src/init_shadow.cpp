#include "init_shadow.h"

#include <algorithm>
#include <iterator>

namespace opscope::memcheck {

void InitShadow::allocate(std::uintptr_t ptr, std::size_t size, bool piece) {
  Shadow& s = (piece ? pieces_ : blocks_)[ptr];
  s.size = size;
  s.written.clear();
}

void InitShadow::release(std::uintptr_t ptr, bool piece) {
  Map& map = piece ? pieces_ : blocks_;
  const auto it = map.find(ptr);
  if (it == map.end()) return;
  if (!piece)  // the pieces of a block given back go with it
    pieces_.erase(pieces_.lower_bound(ptr), pieces_.lower_bound(ptr + it->second.size));
  map.erase(it);
}

InitShadow::Shadow* InitShadow::holding(Map& map, std::uintptr_t p, std::uintptr_t* base) {
  auto it = map.upper_bound(p);
  if (it == map.begin()) return nullptr;
  --it;
  if (p >= it->first + std::max<std::size_t>(it->second.size, 1)) return nullptr;
  *base = it->first;
  return &it->second;
}

std::pair<InitShadow::Shadow*, std::uintptr_t> InitShadow::find(std::uintptr_t p) {
  std::uintptr_t base = 0;
  if (Shadow* s = holding(pieces_, p, &base)) return {s, base};
  if (Shadow* s = holding(blocks_, p, &base)) return {s, base};
  return {nullptr, 0};
}

std::pair<const InitShadow::Shadow*, std::uintptr_t> InitShadow::find(std::uintptr_t p) const {
  return const_cast<InitShadow*>(this)->find(p);
}

void InitShadow::write(std::uintptr_t p, std::size_t bytes) {
  if (bytes == 0) return;
  auto [s, base] = find(p);
  if (s == nullptr) return;
  std::uintptr_t begin = p, end = std::min<std::uintptr_t>(p + bytes, base + s->size);
  if (end <= begin) return;
  auto& w = s->written;
  // Merge with every range it touches or overlaps.
  auto it = w.upper_bound(begin);
  if (it != w.begin() && std::prev(it)->second >= begin) --it;
  while (it != w.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = w.erase(it);
  }
  w.emplace(begin, end);
}

std::optional<InitShadow::Unwritten> InitShadow::read(std::uintptr_t p, std::size_t bytes) const {
  if (bytes == 0) return std::nullopt;
  const auto [s, base] = find(p);
  if (s == nullptr) return std::nullopt;
  const std::uintptr_t end = std::min<std::uintptr_t>(p + bytes, base + s->size);
  const auto& w = s->written;
  std::uintptr_t at = p;  // the first byte not yet known to be written
  auto it = w.upper_bound(at);
  if (it != w.begin()) {
    const auto prev = std::prev(it);
    if (prev->second > at) at = prev->second;
  }
  if (at >= end) return std::nullopt;
  // at is unwritten: up to the next written range, or the read's end.
  const std::uintptr_t stop = it != w.end() ? std::min(end, it->first) : end;
  return Unwritten{{base, base + s->size}, {at, stop}};
}

}  // namespace opscope::memcheck
