// Where a profiled run's device time went (device_time.h; docs/profiler.md defines each figure).
#include "device_time.h"

#include <opscope/results/trace_file.h>
#include <opscope/results/trace_reader.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

using nlohmann::json;

namespace opscope::report {

namespace {

using results::kDevicePidBase;

// Two instants closer than this are one: the trace's times are whole nanoseconds, rounded once more where
// a span would otherwise overlap the next (docs/profiler.md).
constexpr double kTolUs = 0.002;
// A call that is not known to wait for the device is taken to have waited for a device task when it ran
// at least this long and ended within kWakeUs (or 5 % of its length) of the task's end.
constexpr double kLongCallUs = 200.0;
constexpr double kWakeUs = 20.0;
// Names of host pieces that are no span of the trace.
constexpr std::string_view kProgramCode = "(program code outside traced calls)";
constexpr std::string_view kLaunch = "(launch: the call had asked, the task had not started)";
constexpr std::string_view kQueueGap = "(between two tasks of the queue)";
// Their ids among the names of the path's pieces (a name of the trace is its index, 0 and up).
constexpr std::int64_t kProgramCodeId = -1, kLaunchId = -2, kQueueGapId = -3;

enum class Kind : std::uint8_t { kCompute, kCopy, kCollective, kWait, kNotifier, kOther };
constexpr std::size_t kKinds = 6;
enum class HostCat : std::uint8_t { kCall, kCopy, kCollective, kFrame };

struct Task {
  double ts = 0, end = 0;
  std::uint32_t name = 0;
  std::uint32_t queue = 0;  // index into Trace::queues
  Kind kind = Kind::kOther;
  std::uint8_t key_type = 0;  // 0: none, 1: args.seq (an op call), 2: args.correlation (a runtime call)
  std::uint64_t key = 0;
  std::int64_t call = -1;  // the host call that enqueued it, when known
};

struct HostSpan {
  double ts = 0, end = 0;
  std::uint32_t name = 0;
  std::uint32_t thread = 0;
  HostCat cat = HostCat::kFrame;
  bool call = false;  // a library call (op or runtime call), not a framework's frame
  std::uint8_t key_type = 0;
  std::uint64_t key = 0;
};

struct Step {
  std::int64_t n = 0;
  double ts = 0, end = 0;
  std::uint32_t thread = 0;
};

// A stretch of a host thread's time and the innermost span over it (-1: none).
struct Segment {
  double t0, t1;
  std::int64_t span;
};

struct Thread {
  std::vector<std::uint32_t> calls;  // library calls by start
  std::vector<Segment> segments;     // by start, not overlapping
};

struct Queue {
  long device = 0, id = 0;
  std::vector<std::uint32_t> tasks;  // by start
  double longest = 0;                // its longest task
};

struct Trace {
  std::vector<std::string> names;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view v) const { return std::hash<std::string_view>{}(v); }
  };
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> name_index;
  std::vector<Task> tasks;
  std::vector<HostSpan> spans;
  std::vector<Step> steps;
  std::vector<Queue> queues;
  std::map<std::pair<long, long>, std::uint32_t> queue_index;   // (device, queue id)
  std::map<std::pair<long, long>, std::uint32_t> thread_index;  // (pid, tid)
  std::vector<Thread> threads;
  std::map<long, std::vector<std::uint32_t>> device_tasks;  // device -> tasks by start
  std::map<long, double> device_longest;                    // device -> its longest task
  std::vector<std::uint32_t> by_end;                        // every task by end
  bool truncated = false;

  std::uint32_t intern(std::string_view name) {
    if (name.empty()) name = "?";
    if (name.size() > 200) name = name.substr(0, 200);
    if (const auto it = name_index.find(name); it != name_index.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(names.size());
    names.emplace_back(name);
    name_index.emplace(names.back(), id);
    return id;
  }
};

std::optional<double> micros(const json& e, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!(v >= 0 && v <= 1e15)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> whole(const json& e, const char* key) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!(v >= -9.0e18 && v <= 9.0e18)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::string textOf(const json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool isLibraryCall(std::string_view cat) {
  return cat == "mlu_op" || cat == "fallback" || cat == "memcpy" || cat == "memset" || cat == "mlu_runtime" ||
         cat == "collective";
}

// A complete span's fields, as read from the trace.
struct Fields {
  std::string_view cat, name;
  double ts = 0, dur = 0;
  std::int64_t pid = 0, tid = 0;
  std::optional<std::int64_t> seq, correlation, step;
};

// One span into `t`.
void add(Trace& t, const Fields& f, std::size_t limit) {
  if (t.tasks.size() + t.spans.size() >= limit) {
    t.truncated = true;
    return;
  }
  std::uint8_t key_type = 0;
  std::uint64_t key = 0;
  if (f.correlation && *f.correlation >= 0) {
    key_type = 2;
    key = static_cast<std::uint64_t>(*f.correlation);
  } else if (f.seq && *f.seq >= 0 && f.cat != "collective") {
    key_type = 1;
    key = static_cast<std::uint64_t>(*f.seq);
  }
  const std::string_view cat = f.cat, name = f.name;
  if (f.pid >= kDevicePidBase) {
    if (cat == "opscope") return;  // opscope's own work, on tracks of its own (docs/profiler.md)
    const long device = static_cast<long>(f.pid - kDevicePidBase);
    Task task;
    task.ts = f.ts;
    task.end = f.ts + f.dur;
    if (name == "queue_wait")
      task.kind = Kind::kWait;
    else if (name == "notifier")
      task.kind = Kind::kNotifier;
    else if (cat == "collective")
      task.kind = Kind::kCollective;
    else if (cat == "memcpy" || cat == "memset")
      task.kind = Kind::kCopy;
    else if (cat == "mlu_op" || cat == "kernel" || cat == "fallback")
      task.kind = Kind::kCompute;
    task.name = t.intern(name);
    const auto [q, added] = t.queue_index.try_emplace({device, static_cast<long>(f.tid)},
                                                      static_cast<std::uint32_t>(t.queues.size()));
    if (added) t.queues.push_back(Queue{device, static_cast<long>(f.tid), {}});
    task.queue = q->second;
    task.key_type = key_type;
    task.key = key;
    t.tasks.push_back(task);
    return;
  }
  const auto [th, added] = t.thread_index.try_emplace({static_cast<long>(f.pid), static_cast<long>(f.tid)},
                                                      static_cast<std::uint32_t>(t.threads.size()));
  if (added) t.threads.emplace_back();
  if (cat == "user_annotation" && name.starts_with("ProfilerStep#")) {
    t.steps.push_back(
        {f.step.value_or(static_cast<std::int64_t>(t.steps.size())), f.ts, f.ts + f.dur, th->second});
    return;
  }
  HostSpan s;
  s.ts = f.ts;
  s.end = f.ts + f.dur;
  s.name = t.intern(name);
  s.thread = th->second;
  s.call = isLibraryCall(cat);
  s.cat = cat == "memcpy" || cat == "memset" ? HostCat::kCopy
          : cat == "collective"              ? HostCat::kCollective
          : s.call                           ? HostCat::kCall
                                             : HostCat::kFrame;
  s.key_type = s.call ? key_type : 0;
  s.key = key;
  t.spans.push_back(s);
}

bool usable(const Fields& f) {
  return f.ts >= 0 && f.ts <= 1e15 && f.dur >= 0 && f.dur <= 1e15 && f.pid >= -9'000'000'000'000'000'000 &&
         f.pid <= 9'000'000'000'000'000'000;
}

// One parsed event of the trace into `t` (only complete spans matter here).
void take(Trace& t, const json& e, std::size_t limit, std::size_t& bad) {
  if (!e.is_object() || textOf(e, "ph") != "X") return;
  const auto ts = micros(e, "ts"), dur = micros(e, "dur");
  const auto pid = whole(e, "pid"), tid = whole(e, "tid");
  if (!ts || !dur || !pid || !tid) {
    ++bad;
    return;
  }
  const std::string cat = textOf(e, "cat"), name = textOf(e, "name");
  const json empty = json::object();
  const auto args_it = e.find("args");
  const json& args = args_it != e.end() && args_it->is_object() ? *args_it : empty;
  Fields f;
  f.cat = cat;
  f.name = name;
  f.ts = *ts;
  f.dur = *dur;
  f.pid = *pid;
  f.tid = *tid;
  f.seq = whole(args, "seq");
  f.correlation = whole(args, "correlation");
  f.step = whole(args, "step");
  add(t, f, limit);
}

// A line of the profiler's own format read without building a JSON value (a million-op trace has millions
// of them): {"ph":"X","cat":"..","name":"..","pid":N,"tid":N,"ts":F,"dur":F,"args":{...}}. Returns false
// when the line is not that plain (a string with an escape, a member missing or out of its order): then it
// is parsed as JSON.
bool scanLine(std::string_view line, Fields& f, bool& span) {
  span = false;
  std::size_t at = 0;
  // The next member `key` from `at` on (keys in the writer's order), `at` left after it.
  auto member = [&](std::string_view key) {
    const std::size_t k = line.find(key, at);
    if (k == std::string_view::npos) return false;
    at = k + key.size();
    return true;
  };
  auto text = [&](std::string_view key, std::string_view& out) {
    if (!member(key)) return false;
    const std::size_t end = line.find('"', at);
    if (end == std::string_view::npos) return false;
    out = line.substr(at, end - at);
    at = end + 1;
    return out.find('\\') == std::string_view::npos;
  };
  auto number = [&](std::string_view key, auto& out) {
    if (!member(key)) return false;
    const auto r = std::from_chars(line.data() + at, line.data() + line.size(), out);
    if (r.ec != std::errc()) return false;
    at = static_cast<std::size_t>(r.ptr - line.data());
    return true;
  };
  if (!line.starts_with(R"({"ph":")") || line.size() < 8) return false;
  if (line[7] != 'X') return true;  // not a span: nothing here needs it
  at = 8;
  if (!text(R"("cat":")", f.cat) || !text(R"("name":")", f.name)) return false;
  if (!number(R"("pid":)", f.pid) || !number(R"("tid":)", f.tid) || !number(R"("ts":)", f.ts) ||
      !number(R"("dur":)", f.dur))
    return false;
  if (!usable(f)) return false;  // (the JSON reading counts it as malformed)
  if (line.substr(at).starts_with(R"(,"args":{)")) {
    // The args' numbers the analysis needs: an op's seq (after its op_id), a runtime call's or a
    // collective's correlation (first), a step's number. Any other member may hold any text, so each is
    // looked for in the args and taken only when it is a number.
    const std::size_t args = at;
    std::int64_t v = 0;
    if (number(R"("seq":)", v)) f.seq = v;
    at = args;
    if (number(R"("correlation":)", v)) f.correlation = v;
    at = args;
    if (f.cat == "user_annotation" && number(R"("step":)", v)) f.step = v;
  }
  span = true;
  return true;
}

// Orders what was read and links each task to its call.
void index(Trace& t) {
  std::map<std::pair<std::uint8_t, std::uint64_t>, std::uint32_t> call_of;
  std::vector<std::vector<std::uint32_t>> spans_of(t.threads.size());
  for (std::uint32_t i = 0; i < t.spans.size(); ++i) {
    const HostSpan& s = t.spans[i];
    if (s.call) {
      t.threads[s.thread].calls.push_back(i);
      if (s.key_type != 0) call_of.emplace(std::pair{s.key_type, s.key}, i);
    }
    spans_of[s.thread].push_back(i);
  }
  for (std::uint32_t i = 0; i < t.tasks.size(); ++i) {
    Task& task = t.tasks[i];
    if (task.key_type != 0) {
      const auto it = call_of.find({task.key_type, task.key});
      if (it != call_of.end()) task.call = it->second;
    }
    t.queues[task.queue].tasks.push_back(i);
    t.queues[task.queue].longest = std::max(t.queues[task.queue].longest, task.end - task.ts);
    const long device = t.queues[task.queue].device;
    t.device_tasks[device].push_back(i);
    double& longest = t.device_longest[device];
    longest = std::max(longest, task.end - task.ts);
    t.by_end.push_back(i);
  }
  auto byStart = [&](std::uint32_t a, std::uint32_t b) { return t.tasks[a].ts < t.tasks[b].ts; };
  for (Queue& q : t.queues) std::stable_sort(q.tasks.begin(), q.tasks.end(), byStart);
  for (auto& [device, tasks] : t.device_tasks) std::stable_sort(tasks.begin(), tasks.end(), byStart);
  std::stable_sort(t.by_end.begin(), t.by_end.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return t.tasks[a].end < t.tasks[b].end; });
  std::stable_sort(t.steps.begin(), t.steps.end(), [](const Step& a, const Step& b) { return a.ts < b.ts; });
  // Each thread's innermost span over time: spans nest per thread (an outer one first at a tie).
  for (std::size_t th = 0; th < t.threads.size(); ++th) {
    auto& order = spans_of[th];
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const HostSpan &x = t.spans[a], &y = t.spans[b];
      return x.ts != y.ts ? x.ts < y.ts : x.end > y.end;
    });
    std::stable_sort(t.threads[th].calls.begin(), t.threads[th].calls.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return t.spans[a].ts < t.spans[b].ts; });
    std::vector<Segment>& out = t.threads[th].segments;
    std::vector<std::uint32_t> stack;
    double at = -std::numeric_limits<double>::infinity();
    auto emit = [&](double to, std::int64_t span) {
      if (to > at && span >= 0 && std::isfinite(at)) out.push_back({at, to, span});
      at = std::max(at, to);
    };
    auto popUntil = [&](double ts) {
      while (!stack.empty() && t.spans[stack.back()].end <= ts) {
        emit(t.spans[stack.back()].end, stack.back());
        stack.pop_back();
      }
    };
    for (std::uint32_t i : order) {
      popUntil(t.spans[i].ts);
      if (!stack.empty())
        emit(t.spans[i].ts, stack.back());
      else
        at = std::max(at, t.spans[i].ts);
      stack.push_back(i);
    }
    popUntil(std::numeric_limits<double>::infinity());
  }
}

using Interval = std::pair<double, double>;

std::vector<Interval> unite(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = std::max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

double length(const std::vector<Interval>& v) {
  double sum = 0;
  for (const auto& [a, b] : v) sum += b - a;
  return sum;
}

double overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double sum = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) sum += hi - lo;
    (a[i].second < b[j].second ? i : j)++;
  }
  return sum;
}

// What a device or a queue did over windows of time, in µs.
struct Figures {
  double window = 0, busy = 0, compute = 0, copy = 0, collective = 0, other = 0;
  double compute_and_copy = 0, compute_and_collective = 0;
  double host_bound = 0, host_copy = 0, host_collective = 0, notifier = 0, queued = 0;
  std::map<std::int64_t, double> host_names;  // name index (kProgramCodeId: none) -> µs of idle time
  std::size_t tasks = 0;
};

class Analysis {
 public:
  explicit Analysis(const Trace& t) : t_(t) {}

  // The tasks `order` (by start; `longest` the longest of them) over [w0, w1), into `f`. `thread`: the host
  // thread to look at when the task that ended an idle stretch has no known call.
  void account(const std::vector<std::uint32_t>& order, double longest, double w0, double w1,
               std::uint32_t thread, Figures& f) const {
    if (!(w1 > w0)) return;
    f.window += w1 - w0;
    std::array<std::vector<Interval>, kKinds> by_kind;  // (notifiers, of no length, stay empty)
    auto first = std::lower_bound(order.begin(), order.end(), w0 - longest - kTolUs,
                                  [&](std::uint32_t i, double ts) { return t_.tasks[i].ts < ts; });
    for (auto it = first; it != order.end() && t_.tasks[*it].ts < w1; ++it) {
      const Task& task = t_.tasks[*it];
      const Interval in{std::max(task.ts, w0), std::min(task.end, w1)};
      if (in.second <= in.first && task.kind != Kind::kNotifier) continue;
      if (task.ts >= w0) ++f.tasks;
      if (task.kind != Kind::kNotifier) by_kind[static_cast<std::size_t>(task.kind)].push_back(in);
    }
    for (auto& v : by_kind) v = unite(std::move(v));
    const auto& compute = by_kind[static_cast<std::size_t>(Kind::kCompute)];
    const auto& copy = by_kind[static_cast<std::size_t>(Kind::kCopy)];
    const auto& collective = by_kind[static_cast<std::size_t>(Kind::kCollective)];
    const auto& other = by_kind[static_cast<std::size_t>(Kind::kOther)];
    const auto& waits = by_kind[static_cast<std::size_t>(Kind::kWait)];
    f.compute += length(compute);
    f.copy += length(copy);
    f.collective += length(collective);
    f.other += length(other);
    f.compute_and_copy += overlap(compute, copy);
    f.compute_and_collective += overlap(compute, collective);
    std::vector<Interval> busy = compute;
    busy.insert(busy.end(), copy.begin(), copy.end());
    busy.insert(busy.end(), collective.begin(), collective.end());
    busy.insert(busy.end(), other.begin(), other.end());
    busy = unite(std::move(busy));
    const double busy_us = length(busy);
    f.busy += busy_us;
    std::vector<Interval> occupied = busy;
    occupied.insert(occupied.end(), waits.begin(), waits.end());
    occupied = unite(std::move(occupied));
    f.notifier += length(occupied) - busy_us;
    // The idle stretches: each ended by the next task to start (or by the window's end).
    double at = w0;
    auto gap = [&](double a, double b) {
      if (b - a <= kTolUs) return;
      const auto next = std::lower_bound(order.begin(), order.end(), b - kTolUs,
                                         [&](std::uint32_t i, double ts) { return t_.tasks[i].ts < ts; });
      double asked = b;
      std::uint32_t on = thread;
      if (next != order.end() && t_.tasks[*next].call >= 0) {
        const HostSpan& call = t_.spans[static_cast<std::size_t>(t_.tasks[*next].call)];
        asked = std::clamp(call.ts, a, b);
        on = call.thread;
      }
      f.queued += b - asked;
      hostOver(on, a, asked, f);
    };
    for (const auto& [a, b] : occupied) {
      gap(at, a);
      at = std::max(at, b);
    }
    gap(at, w1);
  }

  // Calls fn(µs, span) for the pieces of [a, b) on the host thread, each with the innermost span over it
  // (-1: none, the program's own code).
  template <typename Fn>
  void forEachPiece(std::uint32_t thread, double a, double b, Fn&& fn) const {
    if (b <= a) return;
    double at = a;
    auto add = [&](double to, std::int64_t span) {
      if (to > at) fn(to - at, span);
      at = std::max(at, to);
    };
    if (thread < t_.threads.size()) {
      const auto& segs = t_.threads[thread].segments;
      auto it = std::upper_bound(segs.begin(), segs.end(), a,
                                 [](double x, const Segment& seg) { return x < seg.t1; });
      for (; it != segs.end() && it->t0 < b; ++it) {
        add(std::min(it->t0, b), -1);
        add(std::min(it->t1, b), it->span);
      }
    }
    add(b, -1);
  }

  // The host thread's innermost spans over [a, b), as idle time of the device by their cause.
  void hostOver(std::uint32_t thread, double a, double b, Figures& f) const {
    forEachPiece(thread, a, b, [&](double us, std::int64_t span) {
      const HostSpan* s = span >= 0 ? &t_.spans[static_cast<std::size_t>(span)] : nullptr;
      const HostCat cat = s != nullptr ? s->cat : HostCat::kFrame;
      (cat == HostCat::kCopy         ? f.host_copy
       : cat == HostCat::kCollective ? f.host_collective
                                     : f.host_bound) += us;
      f.host_names[s != nullptr ? static_cast<std::int64_t>(s->name) : kProgramCodeId] += us;
    });
  }

  // The critical path of [s, e) ending on `thread`: the pieces by (where, name), in µs. where: 0 device,
  // 1 host, 2 latency between the two.
  // The walk starts on `thread` at e, or (last_task >= 0) at the end e of that device task: the step's last
  // task, when the device finished the step's work after the host had ended it.
  std::map<std::pair<int, std::int64_t>, double> criticalPath(double s, double e, std::uint32_t thread,
                                                              std::int64_t last_task = -1) const {
    std::map<std::pair<int, std::int64_t>, double> pieces;
    auto add = [&](int where, std::int64_t name, double us) {
      if (us > 0) pieces[{where, name}] += us;
    };
    auto hostCode = [&](std::uint32_t th, double a, double b) {  // host time outside calls, by its frames
      forEachPiece(th, std::max(a, s), b, [&](double us, std::int64_t span) {
        add(1,
            span >= 0 ? static_cast<std::int64_t>(t_.spans[static_cast<std::size_t>(span)].name)
                      : kProgramCodeId,
            us);
      });
    };
    enum class Where { kHost, kDevice } where = last_task >= 0 ? Where::kDevice : Where::kHost;
    double t = e;
    std::uint32_t th = thread;
    std::int64_t task = last_task;
    std::unordered_set<std::int64_t> seen;
    const std::size_t cap = 4 * (t_.tasks.size() + t_.spans.size()) + 16;
    for (std::size_t step = 0; step < cap && t > s + kTolUs; ++step) {
      if (where == Where::kHost) {
        if (th >= t_.threads.size()) break;
        const auto& calls = t_.threads[th].calls;
        auto it = std::lower_bound(calls.begin(), calls.end(), t - kTolUs,
                                   [&](std::uint32_t i, double v) { return t_.spans[i].ts < v; });
        if (it == calls.begin()) {
          hostCode(th, s, t);
          break;
        }
        const HostSpan& c = t_.spans[*std::prev(it)];
        if (c.end < t - kTolUs) {
          hostCode(th, c.end, t);
          t = c.end;
          continue;
        }
        const std::int64_t waited = waitedFor(c, t, seen);
        if (waited >= 0) {
          const Task& d = t_.tasks[static_cast<std::size_t>(waited)];
          add(1, c.name, t - std::max(d.end, s));
          t = d.end;
          where = Where::kDevice;
          task = waited;
          continue;
        }
        add(1, c.name, t - std::max(c.ts, s));
        t = c.ts;
        continue;
      }
      // On the device, at the end of `task` (or inside it).
      seen.insert(task);
      const Task& d = t_.tasks[static_cast<std::size_t>(task)];
      if (d.kind == Kind::kWait) {
        const std::int64_t n = notifierFor(d, seen);
        if (n >= 0) {
          add(2, kQueueGapId, t - t_.tasks[static_cast<std::size_t>(n)].end);
          t = std::min(t, t_.tasks[static_cast<std::size_t>(n)].end);
          task = n;
          continue;
        }
      }
      add(0, d.name, t - std::max(d.ts, s));
      t = std::min(t, d.ts);
      if (t <= s + kTolUs) break;
      const Queue& q = t_.queues[d.queue];
      const auto pos = std::lower_bound(q.tasks.begin(), q.tasks.end(), static_cast<std::uint32_t>(task),
                                        [&](std::uint32_t a, std::uint32_t b) {
                                          return t_.tasks[a].ts < t_.tasks[b].ts ||
                                                 (t_.tasks[a].ts == t_.tasks[b].ts && a < b);
                                        });
      std::int64_t prev = -1;
      for (auto p = pos; p != q.tasks.begin();) {
        --p;
        if (*p != task && !seen.contains(*p) && t_.tasks[*p].end <= d.ts + kTolUs) {
          prev = *p;
          break;
        }
      }
      // A task of another queue of the device that ended later than the queue's own previous one, right
      // when this one started: the device was busy with it.
      if (const std::int64_t other = busyBefore(d, seen);
          other >= 0 && (prev < 0 || t_.tasks[static_cast<std::size_t>(other)].end >
                                         t_.tasks[static_cast<std::size_t>(prev)].end + kTolUs))
        prev = other;
      const double asked = d.call >= 0 ? t_.spans[static_cast<std::size_t>(d.call)].ts
                                       : -std::numeric_limits<double>::infinity();
      if (prev >= 0 && t_.tasks[static_cast<std::size_t>(prev)].end >= asked - kTolUs) {
        const double end = t_.tasks[static_cast<std::size_t>(prev)].end;
        add(2, kQueueGapId, t - std::max(end, s));
        t = std::min(t, end);
        task = prev;
      } else if (d.call >= 0) {
        const HostSpan& call = t_.spans[static_cast<std::size_t>(d.call)];
        const double back = std::min(t, call.end);
        add(2, kLaunchId, t - std::max(back, s));
        t = back;
        th = call.thread;
        where = Where::kHost;
      } else if (prev >= 0) {
        const double end = t_.tasks[static_cast<std::size_t>(prev)].end;
        add(2, kQueueGapId, t - std::max(end, s));
        t = std::min(t, end);
        task = prev;
      } else {
        where = Where::kHost;
        th = thread;
      }
    }
    return pieces;
  }

  std::string nameText(std::int64_t id) const {
    if (id >= 0) return t_.names[static_cast<std::size_t>(id)];
    return std::string(id == kLaunchId ? kLaunch : id == kQueueGapId ? kQueueGap : kProgramCode);
  }

 private:
  // The device task a host call waited for before it returned at `t`: the task that ended last within the
  // call, when the call is one that waits (a blocking copy, a sync, a free) or ran long and returned right
  // after that task ended. -1: the call did not wait.
  std::int64_t waitedFor(const HostSpan& c, double t, const std::unordered_set<std::int64_t>& seen) const {
    const std::string& name = t_.names[c.name];
    static constexpr std::string_view kWaiting[] = {
        "mlurtMemcpy",       "mlurtMemset",  "mlurtQueueSync", "mlurtFree", "mlurtDeviceSynchronize",
        "mlurtNotifierSync", "mlurtHostFree"};
    const bool waits = std::find(std::begin(kWaiting), std::end(kWaiting), name) != std::end(kWaiting);
    const double length = t - c.ts;
    if (!waits && length < kLongCallUs) return -1;
    auto it = std::upper_bound(t_.by_end.begin(), t_.by_end.end(), t + kTolUs,
                               [&](double v, std::uint32_t i) { return v < t_.tasks[i].end; });
    while (it != t_.by_end.begin()) {
      --it;
      const Task& d = t_.tasks[*it];
      if (d.end <= c.ts) return -1;
      if (seen.contains(*it)) continue;
      if (!waits && t - d.end > std::max(kWakeUs, 0.05 * length)) return -1;
      return *it;
    }
    return -1;
  }

  // The task of the device, on any queue, that ended last at or before `d` started (within kWakeUs of its
  // start; -1: none).
  std::int64_t busyBefore(const Task& d, const std::unordered_set<std::int64_t>& seen) const {
    auto it = std::upper_bound(t_.by_end.begin(), t_.by_end.end(), d.ts + kTolUs,
                               [&](double v, std::uint32_t i) { return v < t_.tasks[i].end; });
    const long device = t_.queues[d.queue].device;
    while (it != t_.by_end.begin()) {
      --it;
      const Task& x = t_.tasks[*it];
      if (x.end < d.ts - kWakeUs) return -1;
      if (t_.queues[x.queue].device == device && x.kind != Kind::kNotifier && &x != &d && !seen.contains(*it))
        return *it;
    }
    return -1;
  }

  // The notifier task, on another queue of the device, whose completion ended a queue's wait: the one that
  // completed last within the wait (-1: none).
  std::int64_t notifierFor(const Task& wait, const std::unordered_set<std::int64_t>& seen) const {
    const long device = t_.queues[wait.queue].device;
    auto it = std::upper_bound(t_.by_end.begin(), t_.by_end.end(), wait.end + kTolUs,
                               [&](double v, std::uint32_t i) { return v < t_.tasks[i].end; });
    while (it != t_.by_end.begin()) {
      --it;
      const Task& n = t_.tasks[*it];
      if (n.end < wait.ts - kTolUs) return -1;
      if (n.kind == Kind::kNotifier && n.queue != wait.queue && t_.queues[n.queue].device == device &&
          !seen.contains(*it))
        return *it;
    }
    return -1;
  }

  const Trace& t_;
};

double ms(double us) { return std::round(us) / 1000.0; }

json figuresJson(const Figures& f, const Analysis& a, std::size_t top) {
  const double idle = std::max(0.0, f.window - f.busy);
  std::vector<std::pair<double, std::int64_t>> names;
  for (const auto& [name, us] : f.host_names) names.emplace_back(us, name);
  std::sort(names.begin(), names.end(), std::greater<>());
  json host = json::array();
  for (std::size_t i = 0; i < names.size() && i < top; ++i)
    host.push_back({{"name", a.nameText(names[i].second)}, {"ms", ms(names[i].first)}});
  return {{"window_ms", ms(f.window)},
          {"tasks", f.tasks},
          {"busy_ms", ms(f.busy)},
          {"compute_ms", ms(f.compute)},
          {"copy_ms", ms(f.copy)},
          {"collective_ms", ms(f.collective)},
          {"other_ms", ms(f.other)},
          {"compute_and_copy_ms", ms(f.compute_and_copy)},
          {"compute_and_collective_ms", ms(f.compute_and_collective)},
          {"idle_ms", ms(idle)},
          {"idle",
           {{"host_bound_ms", ms(f.host_bound)},
            {"host_copy_ms", ms(f.host_copy)},
            {"host_collective_ms", ms(f.host_collective)},
            {"notifier_ms", ms(f.notifier)},
            {"queued_ms", ms(f.queued)}}},
          {"host_in_idle", host}};
}

json topPieces(const std::map<std::pair<int, std::int64_t>, double>& pieces, double length_us,
               const Analysis& a, std::size_t top) {
  std::vector<std::pair<double, std::pair<int, std::int64_t>>> order;
  for (const auto& [key, us] : pieces) order.emplace_back(us, key);
  std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  json rows = json::array();
  static constexpr const char* kWhere[] = {"device", "host", "latency"};
  for (std::size_t i = 0; i < order.size() && i < top; ++i) {
    rows.push_back({{"name", a.nameText(order[i].second.second)},
                    {"where", kWhere[order[i].second.first]},
                    {"ms", ms(order[i].first)},
                    {"share", length_us > 0 ? std::round(1000.0 * order[i].first / length_us) / 10.0 : 0.0}});
  }
  return rows;
}

}  // namespace

struct DeviceTimeReader::State {
  DeviceTimeLimits limits;
  Trace trace;
  std::size_t bad = 0;
};

DeviceTimeReader::DeviceTimeReader(const DeviceTimeLimits& limits) : state_(std::make_unique<State>()) {
  state_->limits = limits;
}
DeviceTimeReader::~DeviceTimeReader() = default;

bool DeviceTimeReader::line(std::string_view line) {
  Fields f;
  bool span = false;
  if (!scanLine(line, f, span)) return true;
  if (span) add(state_->trace, f, state_->limits.max_spans);
  return false;
}

void DeviceTimeReader::event(const json& e) { take(state_->trace, e, state_->limits.max_spans, state_->bad); }

json DeviceTimeReader::finish(std::vector<std::string>& warnings) {
  Trace& t = state_->trace;
  const DeviceTimeLimits& limits = state_->limits;
  if (t.tasks.empty()) return nullptr;
  if (t.truncated)
    warnings.push_back(
        fmt::format("device time: the trace holds more than {} spans; the first {} are analysed",
                    limits.max_spans, limits.max_spans));
  // (Malformed events are counted and said by the op section's reading of the same lines.)
  index(t);
  const Analysis a(t);

  // The run: from its first span (or step) to its last, on the thread that made the most calls.
  Step run{-1, std::numeric_limits<double>::infinity(), 0, 0};
  {
    std::map<std::uint32_t, std::size_t> calls_per_thread;
    for (const Task& x : t.tasks) {
      run.ts = std::min(run.ts, x.ts);
      run.end = std::max(run.end, x.end);
    }
    for (const Step& s : t.steps) {
      run.ts = std::min(run.ts, s.ts);
      run.end = std::max(run.end, s.end);
    }
    for (const HostSpan& s : t.spans) {
      run.ts = std::min(run.ts, s.ts);
      run.end = std::max(run.end, s.end);
      if (s.call) ++calls_per_thread[s.thread];
    }
    std::size_t most = 0;
    for (const auto& [th, n] : calls_per_thread) {
      if (n > most) {
        most = n;
        run.thread = th;
      }
    }
  }
  // The devices' and queues' figures cover the run; the critical path is drawn per marked step, or over the
  // run when no step is marked.
  const bool stepped = !t.steps.empty();
  const std::vector<Step> windows = stepped ? t.steps : std::vector<Step>{run};
  std::map<long, Figures> per_device;
  std::vector<Figures> per_queue(t.queues.size());
  std::map<std::pair<int, std::int64_t>, double> path_all;
  double path_length = 0;
  json step_rows = json::array();
  struct StepPath {
    double us;
    std::size_t row;
  };
  std::vector<StepPath> lengths;
  json slowest;
  double slowest_us = -1;
  for (const auto& [device, order] : t.device_tasks)
    a.account(order, t.device_longest.at(device), run.ts, run.end, run.thread, per_device[device]);
  for (std::size_t q = 0; q < t.queues.size(); ++q)
    a.account(t.queues[q].tasks, t.queues[q].longest, run.ts, run.end, run.thread, per_queue[q]);
  // The tasks by when the host asked for them (their call's start): a step's work is what it asked for.
  std::vector<std::pair<double, std::uint32_t>> asked;
  for (std::uint32_t i = 0; i < t.tasks.size(); ++i)
    if (t.tasks[i].call >= 0) asked.emplace_back(t.spans[static_cast<std::size_t>(t.tasks[i].call)].ts, i);
  std::sort(asked.begin(), asked.end());
  double previous_end = -std::numeric_limits<double>::infinity();
  for (const Step& w : windows) {
    // The step ends when its work does: on the host, or on the device when a task it asked for ended later
    // (a program that does not wait for the device each step); it starts when the step before ended, if that
    // was later than its own start (the device still ran the work of the steps before). So the steps do not
    // overlap, and a program that keeps the device busy has steps as long as their device work.
    std::int64_t last_task = -1;
    double end = w.end;
    for (auto it = std::lower_bound(asked.begin(), asked.end(), std::pair{w.ts, std::uint32_t{0}});
         it != asked.end() && it->first < w.end; ++it) {
      if (t.tasks[it->second].end > end + kTolUs) {
        end = t.tasks[it->second].end;
        last_task = it->second;
      }
    }
    const double start = std::min(std::max(w.ts, previous_end), end);
    previous_end = end;
    Figures step_figures;
    for (const auto& [device, order] : t.device_tasks)
      a.account(order, t.device_longest.at(device), start, end, w.thread, step_figures);
    const auto pieces = a.criticalPath(start, end, w.thread, last_task);
    const double len = end - start;
    double on_device = 0, on_host = 0, latency = 0;
    for (const auto& [key, us] : pieces) {
      (key.first == 0 ? on_device : key.first == 1 ? on_host : latency) += us;
      path_all[key] += us;
    }
    path_length += len;
    const json top = topPieces(pieces, len, a, 3);
    json row = {{"step", w.n},
                {"ms", ms(len)},
                {"busy_ms", ms(step_figures.busy)},
                {"idle_ms", ms(std::max(0.0, step_figures.window - step_figures.busy))},
                {"host_bound_ms",
                 ms(step_figures.host_bound + step_figures.host_copy + step_figures.host_collective)},
                {"path_device_ms", ms(on_device)},
                {"path_host_ms", ms(on_host)},
                {"path_latency_ms", ms(latency)},
                {"top", top}};
    if (len > slowest_us) {
      slowest_us = len;
      slowest = {{"step", w.n}, {"ms", ms(len)}, {"top", topPieces(pieces, len, a, limits.top)}};
    }
    lengths.push_back({len, step_rows.size()});
    step_rows.push_back(std::move(row));
  }
  // Too many steps: the slowest ones, in step order.
  if (step_rows.size() > limits.step_rows) {
    std::sort(lengths.begin(), lengths.end(),
              [](const StepPath& x, const StepPath& y) { return x.us > y.us; });
    lengths.resize(limits.step_rows);
    std::sort(lengths.begin(), lengths.end(),
              [](const StepPath& x, const StepPath& y) { return x.row < y.row; });
    json kept = json::array();
    for (const StepPath& l : lengths) kept.push_back(step_rows[l.row]);
    step_rows = std::move(kept);
  }
  double on_device = 0, on_host = 0, latency = 0;
  for (const auto& [key, us] : path_all)
    (key.first == 0 ? on_device : key.first == 1 ? on_host : latency) += us;

  json devices = json::array();
  for (const auto& [device, f] : per_device) {
    json d = figuresJson(f, a, limits.top);
    d["device"] = device;
    json queues = json::array();
    for (std::size_t q = 0; q < t.queues.size(); ++q) {
      if (t.queues[q].device != device || per_queue[q].tasks == 0) continue;
      json row = figuresJson(per_queue[q], a, limits.top);
      row["queue"] = t.queues[q].id;
      queues.push_back(std::move(row));
    }
    d["queues"] = std::move(queues);
    devices.push_back(std::move(d));
  }
  return {{"run_ms", ms(run.end - run.ts)},
          {"steps", stepped ? json(windows.size()) : json(nullptr)},
          {"steps_ms", stepped ? json(ms(path_length)) : json(nullptr)},
          {"devices", devices},
          {"critical_path",
           {{"ms", ms(path_length)},
            {"device_ms", ms(on_device)},
            {"host_ms", ms(on_host)},
            {"latency_ms", ms(latency)},
            {"top", topPieces(path_all, path_length, a, limits.top)}}},
          {"slowest_step", slowest},
          {"step_rows", step_rows},
          {"step_rows_total", windows.size()}};
}

}  // namespace opscope::report
