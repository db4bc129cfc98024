#include <opscope/stacks.h>

#include <opscope/framework_site.h>

#include <link.h>

#include <algorithm>
#include <atomic>
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
  const int n = unwind(raw, std::min(kMaxUnwound, depth_ + kOwnFrames));
  std::uintptr_t frames[kMaxUnwound + kMaxProgramFrames];
  int count = programFrames(site, frames, kMaxProgramFrames);
  const int native_end = count + depth_;
  int i = 0;
  while (i < n && skip_.contains(reinterpret_cast<std::uintptr_t>(raw[i]))) ++i;
  for (; i < n && count < native_end; ++i) frames[count++] = reinterpret_cast<std::uintptr_t>(raw[i]);
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
