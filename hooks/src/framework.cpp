// framework.cpp — the frames a program's framework declares (opscope.h), the sites they make, and the
// forward of each backward call.
//
// Global state, and why: the sites are shared by every thread (a backward call runs on the autograd
// engine's thread, its forward on the program's) and must outlive every tool that keeps a pointer to one;
// the frames are per thread.
#include "framework.h"

#include "hook.h"

#include <opscope/program_stack.h>
#include <opscope/runtime_access.h>

#include "../../runtime/common/no_destructor.h"

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace opscope::hook {
namespace {

constexpr std::size_t kMaxModule = 256;
constexpr std::size_t kMaxSource = 512;
constexpr std::size_t kMaxForwardOp = 256;
constexpr std::size_t kMaxSites = 65536;

class SiteTable {
 public:
  const FrameworkSite* intern(std::string_view module, std::string_view source, std::string_view forward_op) {
    module = module.substr(0, kMaxModule);
    source = source.substr(0, kMaxSource);
    forward_op = forward_op.substr(0, kMaxForwardOp);
    if (module.empty() && source.empty() && forward_op.empty()) return nullptr;
    // A framework makes the same site from the same strings op after op (the module's path and the line are
    // the same objects): this thread's last sites by where the strings are, checked against their text,
    // spare the lock and the hash of the table.
    const std::size_t slot =
        (std::hash<const void*>()(module.data()) ^ std::hash<const void*>()(source.data()) * 3 ^
         std::hash<const void*>()(forward_op.data()) * 7) %
        kCached;
    thread_local std::array<const FrameworkSite*, kCached> cached{};
    if (const FrameworkSite* c = cached[slot];
        c != nullptr && c->module == module && c->source == source && c->forward_op == forward_op)
      return c;
    const FrameworkSite* site = internLocked(module, source, forward_op);
    cached[slot] = site;
    return site;
  }

 private:
  static constexpr std::size_t kCached = 64;
  const FrameworkSite* internLocked(std::string_view module, std::string_view source,
                                    std::string_view forward_op) {
    thread_local std::string key;
    key.assign(module).append(1, '\0').append(source).append(1, '\0').append(forward_op);
    const std::lock_guard lock(mutex_);
    if (auto it = sites_.find(key); it != sites_.end()) return it->second.get();
    if (sites_.size() >= kMaxSites) return nullptr;
    auto site = std::make_unique<FrameworkSite>();
    site->id = static_cast<std::uint32_t>(sites_.size() + 1);
    site->module = module;
    site->source = source;
    site->forward_op = forward_op;
    return sites_.emplace(key, std::move(site)).first->second.get();
  }

  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<FrameworkSite>> sites_;
};

SiteTable& sites() {
  static mlu::NoDestructor<SiteTable> table;
  return table.get();
}

// The site of each recent graph node's forward op (module, source, and the op as forward_op), by the node's
// id: a ring of the last 65,536 nodes, enough for the graph of a step of any model we know (ResNet-18
// makes about 200 nodes a step, a GPT-2 block about 40 per layer); an older node's backward call is
// attributed to the frame around it instead.
class NodeSites {
 public:
  void set(std::int64_t node, const FrameworkSite* site) {
    const std::lock_guard lock(mutex_);
    ring_[index(node)] = {node, site};
  }
  const FrameworkSite* get(std::int64_t node) const {
    const std::lock_guard lock(mutex_);
    const Entry& e = ring_[index(node)];
    return e.node == node ? e.site : nullptr;
  }

 private:
  struct Entry {
    std::int64_t node = -1;
    const FrameworkSite* site = nullptr;
  };
  static constexpr std::size_t kSize = 65536;
  static std::size_t index(std::int64_t node) { return static_cast<std::uint64_t>(node) % kSize; }
  mutable std::mutex mutex_;
  std::vector<Entry> ring_ = std::vector<Entry>(kSize);
};

// The frames' names, each distinct one once (a frame holds a pointer: no allocation per op, and the tools
// may keep the name). Bounded: past 65,536 distinct names a frame is named "?".
class NameTable {
 public:
  const std::string* intern(const char* name) {
    if (name == nullptr) return &unknown_;
    const std::string_view view = std::string_view(name).substr(0, kMaxName);
    // As for the sites: this thread's last names by where their text is, checked against it.
    thread_local std::array<const std::string*, kCached> cached{};
    const std::size_t slot = std::hash<const void*>()(name) % kCached;
    if (const std::string* c = cached[slot]; c != nullptr && *c == view) return c;
    thread_local std::string key;
    key.assign(view);
    const std::lock_guard lock(mutex_);
    const std::string* interned = &unknown_;
    if (auto it = names_.find(key); it != names_.end()) {
      interned = &*it;
    } else if (names_.size() < kMaxNames) {
      interned = &*names_.insert(key).first;
    }
    if (interned != &unknown_) cached[slot] = interned;
    return interned;
  }

 private:
  static constexpr std::size_t kCached = 256;
  static constexpr std::size_t kMaxName = 256;
  static constexpr std::size_t kMaxNames = 65536;
  std::mutex mutex_;
  std::unordered_set<std::string> names_;
  const std::string unknown_ = "?";
};

NameTable& names() {
  static mlu::NoDestructor<NameTable> table;
  return table.get();
}

NodeSites& nodeSites() {
  static mlu::NoDestructor<NodeSites> nodes;
  return nodes.get();
}

enum class Kind : std::uint8_t { kModule, kOp, kBackward };

// The calling thread's frames, innermost last, and their op names joined outermost first (rebuilt only when
// the frames changed since the last op call). A frame left open (a module whose forward raised, so that its
// end was never declared) is closed by the end of a frame outside it.
class Frames {
 public:
  void push(Kind kind, const char* name, const FrameworkSite* site, bool region = false) {
    if (frames_.size() >= kMaxDepth) {  // a framework that never pops: keep the outermost, count the rest
      ++beyond_;
      return;
    }
    const bool backward = kind == Kind::kBackward || (!frames_.empty() && frames_.back().backward);
    const bool hidden = name == nullptr && kind == Kind::kBackward;
    const std::int64_t start = g_framework_frames.load(std::memory_order_relaxed) ? monotonicNs() : 0;
    frames_.push_back(
        {kind, hidden ? nullptr : names().intern(name), site, backward, hidden, false, false, region, start});
    if (kind != Kind::kModule && !hidden) changed_ = true;
  }
  void markFallback() {
    for (std::size_t i = frames_.size(); i-- > 0;) {
      if (frames_[i].kind == Kind::kOp) {
        frames_[i].fallback = true;
        return;
      }
    }
  }
  // The outermost op's name, rebuilt with ops().
  std::string_view outer() {
    ops();
    return outer_;
  }
  // A backward call's site also becomes that of the engine's unnamed frame right around it (its other
  // calls, as autograd's checks of the gradients, are the node's), unless that frame has one already.
  void adopt(const FrameworkSite* site) {
    if (!frames_.empty() && frames_.back().hidden && !frames_.back().adopted) {
      frames_.back().site = site;
      frames_.back().adopted = true;
    }
  }
  // Pops frames up to and including the innermost of the kind (op or backward counts as one kind).
  void pop(bool module) {
    if (beyond_ > 0) {
      --beyond_;
      return;
    }
    for (std::size_t i = frames_.size(); i-- > 0;) {
      if ((frames_[i].kind == Kind::kModule) == module) {
        for (std::size_t j = i; j < frames_.size(); ++j)
          changed_ |= frames_[j].kind != Kind::kModule && !frames_[j].hidden;
        if (g_framework_frames.load(std::memory_order_relaxed)) ended(i);
        frames_.resize(i);
        return;
      }
    }
  }
  const FrameworkSite* site() const { return frames_.empty() ? nullptr : frames_.back().site; }
  bool inBackward() const { return !frames_.empty() && frames_.back().backward; }
  std::string_view ops() {
    if (changed_) {
      joined_.clear();
      outer_ = {};
      for (const Frame& f : frames_) {
        if (f.kind == Kind::kModule || f.hidden) continue;
        if (joined_.empty()) outer_ = *f.name;  // interned: outlives the frame
        if (!joined_.empty()) joined_ += " > ";
        joined_ += *f.name;
      }
      changed_ = false;
    }
    return joined_;
  }

 private:
  struct Frame {
    Kind kind;
    const std::string* name;  // interned (null for a hidden frame)
    const FrameworkSite* site;
    bool backward;         // this frame or one around it is a backward call
    bool hidden = false;   // the engine's frame around a backward call (not among the ops)
    bool adopted = false;  // hidden: it has taken the site of the call inside
    bool fallback = false;
    bool region = false;        // a module frame that is a region of the program's naming
    std::int64_t start_ns = 0;  // when some tool wants frames
  };
  // The frames from index `from` on end now, innermost first: the tools that want frames see them.
  void ended(std::size_t from) {
    const std::int64_t now = monotonicNs();
    const std::uint32_t thread = threadNumber();
    for (std::size_t j = frames_.size(); j-- > from;) {
      const Frame& f = frames_[j];
      if (f.hidden || f.start_ns == 0) continue;
      FrameworkFrame out;
      out.kind = f.region                  ? FrameworkFrame::Kind::kRegion
                 : f.kind == Kind::kModule ? FrameworkFrame::Kind::kModule
                 : f.kind == Kind::kOp     ? FrameworkFrame::Kind::kOp
                                           : FrameworkFrame::Kind::kBackward;
      out.name = *f.name;
      out.site = f.site;
      out.start_ns = f.start_ns;
      out.end_ns = now;
      out.thread = thread;
      out.depth = 0;
      for (std::size_t k = 0; k < j; ++k) out.depth += frames_[k].hidden ? 0 : 1;
      out.fallback = f.fallback;
      frameworkFrameEnded(out);
    }
  }
  static constexpr std::size_t kMaxDepth = 64;
  std::vector<Frame> frames_;
  std::size_t beyond_ = 0;
  std::string joined_;
  std::string_view outer_;
  bool changed_ = false;
};

Frames& frames() {
  thread_local Frames f;
  return f;
}

std::string_view moduleOf(const FrameworkSite* site) {
  return site != nullptr ? std::string_view(site->module) : std::string_view();
}
std::string_view sourceOf(const FrameworkSite* site) {
  return site != nullptr ? std::string_view(site->source) : std::string_view();
}

}  // namespace

const FrameworkSite* internSite(std::string_view module, std::string_view source,
                                std::string_view forward_op) {
  return sites().intern(module, source, forward_op);
}

std::string_view frameworkOps() { return frames().ops(); }

std::string_view frameworkOuterOp() { return frames().outer(); }

bool frameworkInBackward() { return frames().inBackward(); }

void frameworkMarkFallback() { frames().markFallback(); }

const FrameworkSite* frameworkSite() { return frames().site(); }

void frameworkModulePush(const char* path) {
  Frames& f = frames();
  const FrameworkSite* outer = f.site();
  f.push(Kind::kModule, path, internSite(path != nullptr ? path : "?", sourceOf(outer), ""));
}

void frameworkRegionPush(const char* name) {
  Frames& f = frames();
  const FrameworkSite* outer = f.site();
  f.push(Kind::kModule, name, internSite(name != nullptr ? name : "?", sourceOf(outer), ""), true);
}

void frameworkModulePop() { frames().pop(true); }

void frameworkOpBegin(const char* name, std::int64_t node, const char* where) {
  Frames& f = frames();
  const FrameworkSite* site = f.site();
  if (!f.inBackward()) {
    if (where != nullptr) site = internSite(moduleOf(site), where, "");
    // The graph node this op makes: its backward call is attributed to this op, its module and line.
    if (node >= 0 && name != nullptr) nodeSites().set(node, internSite(moduleOf(site), sourceOf(site), name));
  }
  f.push(Kind::kOp, name, site);
}

void frameworkBackwardBegin(const char* name, std::int64_t node) {
  Frames& f = frames();
  const FrameworkSite* forward = node >= 0 && name != nullptr ? nodeSites().get(node) : nullptr;
  if (forward != nullptr) f.adopt(forward);
  f.push(Kind::kBackward, name, forward != nullptr ? forward : f.site());
}

void frameworkOpPop() { frames().pop(false); }

}  // namespace opscope::hook

// opscope.h: the framework op a program is inside (torch_mlu: each PyTorch op and autograd node).
extern "C" OPSCOPE_EXPORT void opscope_hook_framework_op_push(const char* name) {
  opscope::hook::frameworkOpBegin(name, -1, nullptr);
}

extern "C" OPSCOPE_EXPORT void opscope_hook_framework_op_begin(const char* name, long long node,
                                                               const char* where) {
  opscope::hook::frameworkOpBegin(name, node, where);
}

extern "C" OPSCOPE_EXPORT void opscope_hook_framework_backward_begin(const char* name, long long node) {
  opscope::hook::frameworkBackwardBegin(name, node);
}

extern "C" OPSCOPE_EXPORT void opscope_hook_framework_op_pop(void) { opscope::hook::frameworkOpPop(); }

extern "C" OPSCOPE_EXPORT void opscope_hook_framework_module_push(const char* path) {
  opscope::hook::frameworkModulePush(path);
}

extern "C" OPSCOPE_EXPORT void opscope_hook_framework_region_push(const char* name) {
  opscope::hook::frameworkRegionPush(name);
}

extern "C" OPSCOPE_EXPORT void opscope_hook_framework_module_pop(void) {
  opscope::hook::frameworkModulePop();
}

// opscope.h's opscope_program_frame is opscope::ProgramFrame's three fields, in the same order.
extern "C" OPSCOPE_EXPORT void opscope_hook_framework_stack_source(int (*source)(opscope::ProgramFrame*,
                                                                                 int)) {
  opscope::setProgramStackSource(source);
}
