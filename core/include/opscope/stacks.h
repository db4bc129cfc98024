// stacks.h — backtraces (memcheck's allocations, the flight recorder's collectives): captured with
// libunwind's unw_backtrace on the allocating thread and kept once per distinct stack (hash of the frames,
// then the frames compared), so that a loop of a million allocations from one site stores one stack.
// Addresses only: symbols are looked up when a report is written (symbolizer.h).
#pragma once

#include <opscope/program_stack.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace opscope {

struct FrameworkSite;

// 0: no backtrace (MEM_CHECK_ENABLE_BACKTRACE off, or the unwinder found no frame).
using StackId = std::uint32_t;

// The address range of the shared object that contains `inside` (its loaded segments), for trimming the
// frames of opscope itself off the top of a backtrace.
struct AddressRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool contains(std::uintptr_t a) const { return a >= begin && a < end; }
};
AddressRange moduleRangeOf(const void* inside);

class StackTable {
 public:
  // depth: frames kept per stack (after trimming); skip: frames in this range at the top are left out.
  StackTable(int depth, AddressRange skip);

  // The calling thread's stack, interned: the program's frames (program_stack.h) first when its framework
  // gives them, else a frame for `site` when it has a source line (a thread of the framework's own, as
  // autograd's, runs no program code: the site of its call stands for it), then the native frames.
  StackId capture(const FrameworkSite* site = nullptr);
  // The return addresses of a stack, innermost first (empty for 0 or an unknown id).
  std::vector<std::uintptr_t> frames(StackId id) const;

  // Interns a stack given as addresses (capture() calls this; tests use it directly).
  StackId intern(const std::uintptr_t* frames, int count);

  // A frame of the program's (an address capture() made up for it, not machine code): its file, function
  // and line; nothing for a native frame's address.
  struct Program {
    std::string file;  // "" for a site's frame
    std::string function;
    int line = 0;
  };
  std::optional<Program> programFrame(std::uintptr_t address) const;

 private:
  // opscope's own frames above the program's (the tool, the hook's dispatch, the wrapper): this many are
  // unwound besides the depth kept at first, then as many as seen (capture()), at most kMaxOwnFrames.
  static constexpr int kOwnFrames = 12;
  static constexpr int kMaxOwnFrames = 4 * kOwnFrames;
  static constexpr int kMaxUnwound = 256 + kMaxOwnFrames;
  static constexpr std::uint64_t kLearnCaptures = 64;

  const int depth_;
  const AddressRange skip_;
  const std::uint64_t serial_;  // this table among every table made (the threads' caches tell them apart)
  std::atomic<int> own_frames_{kOwnFrames};  // opscope's own frames unwound on top of the depth kept
  std::atomic<int> own_seen_{0};             // the most seen on one stack
  std::atomic<std::uint64_t> captures_{0};
  mutable std::mutex mutex_;
  std::vector<std::uintptr_t> frames_;                           // every stack's frames, back to back
  std::vector<std::pair<std::uint32_t, std::uint32_t>> stacks_;  // id - 1 -> (offset, count)
  std::unordered_multimap<std::uint64_t, StackId> by_hash_;
  // The program's frames and sites seen, each once; their addresses are kProgramTag | index.
  std::map<std::tuple<const char*, const char*, int>, std::uintptr_t> program_ids_;
  std::map<const FrameworkSite*, std::uintptr_t> site_ids_;
  std::vector<Program> programs_;
  int programFrames(const FrameworkSite* site, std::uintptr_t* out, int max);
};

}  // namespace opscope
