#include <opscope/stacks.h>

#include <link.h>

#include <algorithm>
#include <cstring>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace opscope {

AddressRange moduleRangeOf(const void* inside) {
  struct Search {
    std::uintptr_t address;
    AddressRange found;
  } search{reinterpret_cast<std::uintptr_t>(inside), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        AddressRange range{UINTPTR_MAX, 0};
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
          range.begin = std::min(range.begin, begin);
          range.end = std::max(range.end, begin + ph.p_memsz);
        }
        if (!range.contains(s->address)) return 0;
        s->found = range;
        return 1;
      },
      &search);
  return search.found;
}

namespace {

// The return addresses of the calling thread's stack, innermost first (at most max).
int unwind(void** raw, int max) {
#if defined(__SANITIZE_THREAD__)
  // Under ThreadSanitizer, step frame by frame instead of unw_backtrace: unw_backtrace keeps a trace cache
  // per thread whose destructor takes a lock after ThreadSanitizer has ended the thread's state (a crash
  // inside ThreadSanitizer at every thread exit). This is what unw_backtrace does when it has no cache.
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) < 0) return 0;
  int n = 0;
  while (n < max) {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0) break;
    raw[n++] = reinterpret_cast<void*>(ip);
    if (unw_step(&cursor) <= 0) break;
  }
  return n;
#else
  return unw_backtrace(raw, max);
#endif
}

}  // namespace

StackTable::StackTable(int depth, AddressRange skip) : depth_(depth), skip_(skip) {
  // Each thread keeps its own cache of unwind information: no lock shared by the allocating threads.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

StackId StackTable::capture() {
  // Unwinding is most of the cost: stop at the depth kept plus opscope's own frames on top.
  void* raw[kMaxUnwound];
  const int n = unwind(raw, std::min(kMaxUnwound, depth_ + kOwnFrames));
  std::uintptr_t frames[kMaxUnwound];
  int count = 0;
  int i = 0;
  while (i < n && skip_.contains(reinterpret_cast<std::uintptr_t>(raw[i]))) ++i;
  for (; i < n && count < depth_; ++i) frames[count++] = reinterpret_cast<std::uintptr_t>(raw[i]);
  return intern(frames, count);
}

StackId StackTable::intern(const std::uintptr_t* frames, int count) {
  if (count <= 0) return 0;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < count; ++i) h = (h ^ frames[i]) * 0x100000001b3ULL;
  std::lock_guard lock(mutex_);
  const auto [first, last] = by_hash_.equal_range(h);
  for (auto it = first; it != last; ++it) {
    const auto [offset, size] = stacks_[it->second - 1];
    if (size == static_cast<std::uint32_t>(count) &&
        std::equal(frames, frames + count, frames_.begin() + offset)) {
      return it->second;
    }
  }
  stacks_.emplace_back(static_cast<std::uint32_t>(frames_.size()), static_cast<std::uint32_t>(count));
  frames_.insert(frames_.end(), frames, frames + count);
  const auto id = static_cast<StackId>(stacks_.size());
  by_hash_.emplace(h, id);
  return id;
}

std::vector<std::uintptr_t> StackTable::frames(StackId id) const {
  std::lock_guard lock(mutex_);
  if (id == 0 || id > stacks_.size()) return {};
  const auto [offset, size] = stacks_[id - 1];
  return {frames_.begin() + offset, frames_.begin() + offset + size};
}

}  // namespace opscope
