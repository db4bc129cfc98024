// regions.cpp — the open regions of the program and what they cover.
//
// Global state, and why: a region opened on one thread covers the calls of others (a backward pass on the
// autograd engine's thread), so the open regions are process-wide; a count per tool keeps a tool with no
// open region from taking the lock.
#include "regions.h"

#include "hook.h"

#include "../../runtime/common/no_destructor.h"

#include <opscope/results/run_file.h>

#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace opscope::hook {
namespace {

constexpr std::size_t kTools = static_cast<std::size_t>(ToolId::kCount);

struct OpenRegion {
  int id = 0;
  ToolId tool = ToolId::kCount;
  std::string_view label;  // interned
  std::optional<OpFilter> filter;
  std::optional<std::uint32_t> thread;
};

// What the regions of one label did, for run.json's findings.
struct LabelStats {
  ToolId tool = ToolId::kCount;
  std::uint64_t opened = 0;
  std::uint64_t calls = 0;  // library calls made inside (the innermost region of their thread)
  std::uint64_t taken = 0;  // of those, the calls the region's tool took (a regional tool's)
};

class Regions {
 public:
  bool takes(ToolId tool, OpCall& call) {
    if (open_[index(tool)].load(std::memory_order_acquire) == 0) return false;
    const std::uint32_t thread = threadNumber();
    const std::lock_guard lock(mutex_);
    for (auto r = regions_.rbegin(); r != regions_.rend(); ++r) {
      if (r->tool != tool || (r->thread && *r->thread != thread)) continue;
      if (r->filter && !r->filter->matches(call)) continue;
      call.region = r->label;
      if (auto s = stats_.find(r->label); s != stats_.end()) ++s->second.taken;
      return true;
    }
    return false;
  }
  bool covers(ToolId tool) {
    if (open_[index(tool)].load(std::memory_order_acquire) == 0) return false;
    const std::uint32_t thread = threadNumber();
    const std::lock_guard lock(mutex_);
    for (const OpenRegion& r : regions_) {
      if (r.tool == tool && (!r.thread || *r.thread == thread)) return true;
    }
    return false;
  }
  std::string_view label() {
    if (total_.load(std::memory_order_acquire) == 0) return {};
    const std::uint32_t thread = threadNumber();
    const std::lock_guard lock(mutex_);
    for (auto r = regions_.rbegin(); r != regions_.rend(); ++r) {
      if (!r->thread || *r->thread == thread) {
        if (auto s = stats_.find(r->label); s != stats_.end()) ++s->second.calls;
        return r->label;
      }
    }
    return {};
  }
  int open(ToolId tool, std::string label, std::optional<OpFilter> filter,
           std::optional<std::uint32_t> thread) {
    const std::lock_guard lock(mutex_);
    auto [it, fresh] = labels_.insert(std::move(label));
    static_cast<void>(fresh);
    if (stats_.size() < results::kMaxRegionLabels || stats_.contains(*it)) {
      LabelStats& s = stats_[*it];
      s.tool = tool;
      ++s.opened;
    } else {
      ++other_regions_;
    }
    const int id = ++last_id_;
    regions_.push_back({id, tool, *it, std::move(filter), thread});
    ++opened_[index(tool)];
    open_[index(tool)].fetch_add(1, std::memory_order_release);
    total_.fetch_add(1, std::memory_order_release);
    return id;
  }
  bool close(int id) {
    const std::lock_guard lock(mutex_);
    for (auto r = regions_.begin(); r != regions_.end(); ++r) {
      if (r->id != id) continue;
      open_[index(r->tool)].fetch_sub(1, std::memory_order_release);
      total_.fetch_sub(1, std::memory_order_release);
      regions_.erase(r);
      return true;
    }
    return false;
  }
  int opened(ToolId tool) {
    const std::lock_guard lock(mutex_);
    return opened_[index(tool)];
  }
  nlohmann::json findings() {
    const std::lock_guard lock(mutex_);
    if (stats_.empty()) return nullptr;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [label, s] : stats_) {
      rows.push_back({{"label", std::string(label)},
                      {"tool", std::string(toolName(s.tool))},
                      {"opened", s.opened},
                      {"calls", s.calls},
                      {"taken", s.taken}});
    }
    return {{"regions", rows}, {"other_regions", other_regions_}};
  }

 private:
  static std::size_t index(ToolId tool) { return static_cast<std::size_t>(tool) % kTools; }
  std::array<std::atomic<int>, kTools> open_{};
  std::atomic<int> total_{0};
  std::mutex mutex_;
  std::vector<OpenRegion> regions_;  // open, in the order opened
  std::unordered_set<std::string> labels_;
  std::map<std::string_view, LabelStats> stats_;  // by label (interned in labels_)
  std::uint64_t other_regions_ = 0;
  std::array<int, kTools> opened_{};
  int last_id_ = 0;
};

Regions& regions() {
  static mlu::NoDestructor<Regions> r;
  return r.get();
}

}  // namespace

bool regionTakes(ToolId tool, OpCall& call) { return regions().takes(tool, call); }
bool regionCovers(ToolId tool) { return regions().covers(tool); }
std::string_view regionLabel() { return regions().label(); }
int openRegion(ToolId tool, std::string label, std::optional<OpFilter> filter,
               std::optional<std::uint32_t> thread) {
  return regions().open(tool, std::move(label), std::move(filter), thread);
}
bool closeRegion(int id) { return regions().close(id); }
int regionsOpened(ToolId tool) { return regions().opened(tool); }
nlohmann::json regionFindings() { return regions().findings(); }

}  // namespace opscope::hook
