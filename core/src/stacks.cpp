#include <opscope/stacks.h>

#include <opscope/framework_site.h>

#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

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

namespace {

std::atomic<std::uint64_t> g_table_serial{0};

// Each thread's stacks interned lately, so that a stack seen before is found without taking the table's
// lock (an allocation site is most often seen again from the same thread: a training step allocates from the
// same places every time). Direct-mapped by the stack's hash; an entry belongs to one table (its serial
// number: a table made later at the same address is another). Made on a thread's first stack.
struct InternCache {
  static constexpr std::size_t kEntries = 64;
  static constexpr int kMaxFrames = 48;  // deeper stacks are looked up in the table only
  struct Entry {
    std::uint64_t serial = 0, hash = 0;
    StackId id = 0;
    int count = 0;
    std::uintptr_t frames[kMaxFrames];
  };
  Entry entries[kEntries];
};

}  // namespace

StackTable::StackTable(int depth, AddressRange skip)
    : depth_(depth), skip_(skip), serial_(g_table_serial.fetch_add(1, std::memory_order_relaxed) + 1) {
  // Each thread keeps its own cache of unwind information: no lock shared by the allocating threads.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

namespace {

// Addresses no machine code has (user space ends far below): a program frame's index.
constexpr std::uintptr_t kProgramTag = std::uintptr_t{1} << 62;
constexpr int kMaxProgramFrames = 32;
constexpr std::size_t kMaxPrograms = 1 << 16;

std::atomic<ProgramStackSource> g_program_stack{nullptr};

}  // namespace

void setProgramStackSource(ProgramStackSource source) { g_program_stack.store(source); }

int programStack(ProgramFrame* frames, int max) {
  const ProgramStackSource source = g_program_stack.load(std::memory_order_acquire);
  return source != nullptr && max > 0 ? std::clamp(source(frames, max), 0, max) : 0;
}

int StackTable::programFrames(const FrameworkSite* site, std::uintptr_t* out, int max) {
  if (g_program_stack.load(std::memory_order_acquire) == nullptr && (site == nullptr || site->source.empty()))
    return 0;  // a program of native code only
  ProgramFrame frames[kMaxProgramFrames];
  const int n = programStack(frames, std::min(max, kMaxProgramFrames));
  if (n == 0 && (site == nullptr || site->source.empty())) return 0;
  std::lock_guard lock(mutex_);
  auto add = [&](auto& ids, const auto& key, auto make) -> std::uintptr_t {
    if (auto it = ids.find(key); it != ids.end()) return it->second;
    if (programs_.size() >= kMaxPrograms) return 0;
    programs_.push_back(make());
    return ids.emplace(key, kProgramTag | (programs_.size() - 1)).first->second;
  };
  int count = 0;
  for (int i = 0; i < n; ++i) {
    const ProgramFrame& f = frames[i];
    if (f.file == nullptr || f.function == nullptr) continue;
    const std::uintptr_t id = add(program_ids_, std::tuple(f.file, f.function, f.line), [&] {
      return Program{f.file, f.function, f.line};
    });
    if (id != 0) out[count++] = id;
  }
  if (n == 0) {
    const std::uintptr_t id = add(site_ids_, site, [&] { return Program{"", siteText(site), 0}; });
    if (id != 0) out[count++] = id;
  }
  return count;
}

std::optional<StackTable::Program> StackTable::programFrame(std::uintptr_t address) const {
  if ((address & kProgramTag) == 0) return std::nullopt;
  std::lock_guard lock(mutex_);
  const std::size_t index = address & ~kProgramTag;
  if (index >= programs_.size()) return std::nullopt;
  return programs_[index];
}

StackId StackTable::capture(const FrameworkSite* site) {
  // Unwinding is most of the cost: stop at the depth kept plus opscope's own frames on top.
  void* raw[kMaxUnwound];
  int own = own_frames_.load(std::memory_order_relaxed);
  int n = 0, i = 0;
  for (;;) {
    const int limit = std::min(kMaxUnwound, depth_ + own);
    n = unwind(raw, limit);
    i = 0;
    while (i < n && skip_.contains(reinterpret_cast<std::uintptr_t>(raw[i]))) ++i;
    // More of opscope's own frames than were unwound, so fewer of the program's than kept: unwind deeper.
    if (i <= own || n < limit || own >= kMaxOwnFrames) break;
    own = std::min(i + kOwnFrames, kMaxOwnFrames);
    own_frames_.store(own, std::memory_order_relaxed);
  }
  // Each frame unwound for nothing costs as much as one kept: once kLearnCaptures stacks have shown how many
  // frames of its own opscope puts on top (by the paths taken so far), only that many are unwound.
  int seen = own_seen_.load(std::memory_order_relaxed);
  while (i > seen && !own_seen_.compare_exchange_weak(seen, i, std::memory_order_relaxed)) {
  }
  // (Counted only while learning: past it, no shared counter is written at every stack.)
  if (captures_.load(std::memory_order_relaxed) >= kLearnCaptures ||
      captures_.fetch_add(1, std::memory_order_relaxed) + 1 >= kLearnCaptures) {
    if (const int fit = std::max(seen, i); fit < own) own_frames_.store(fit, std::memory_order_relaxed);
  }
  std::uintptr_t frames[kMaxUnwound + kMaxProgramFrames];
  int count = programFrames(site, frames, kMaxProgramFrames);
  const int native_end = count + depth_;
  for (; i < n && count < native_end; ++i) frames[count++] = reinterpret_cast<std::uintptr_t>(raw[i]);
  return intern(frames, count);
}

StackId StackTable::intern(const std::uintptr_t* frames, int count) {
  if (count <= 0) return 0;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < count; ++i) h = (h ^ frames[i]) * 0x100000001b3ULL;
  thread_local std::unique_ptr<InternCache> cache;
  InternCache::Entry* entry = nullptr;
  if (count <= InternCache::kMaxFrames) {
    if (!cache) cache = std::make_unique<InternCache>();
    entry = &cache->entries[h % InternCache::kEntries];
    if (entry->serial == serial_ && entry->hash == h && entry->count == count &&
        std::equal(frames, frames + count, entry->frames)) {
      return entry->id;
    }
  }
  const StackId id = [&] {
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
    const auto made = static_cast<StackId>(stacks_.size());
    by_hash_.emplace(h, made);
    return made;
  }();
  if (entry != nullptr) {
    entry->serial = serial_;
    entry->hash = h;
    entry->id = id;
    entry->count = count;
    std::copy(frames, frames + count, entry->frames);
  }
  return id;
}

std::vector<std::uintptr_t> StackTable::frames(StackId id) const {
  std::lock_guard lock(mutex_);
  if (id == 0 || id > stacks_.size()) return {};
  const auto [offset, size] = stacks_[id - 1];
  return {frames_.begin() + offset, frames_.begin() + offset + size};
}

}  // namespace opscope
