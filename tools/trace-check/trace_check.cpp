// trace_check.cpp — the rules of trace_check.h. One pass over traceEvents checks each event on its own and
// collects the slices, B/E events and flow events per (pid, tid) thread; the passes after it check what
// needs the whole trace: B/E balance, slice nesting and flow binding.
#include "trace_check.h"

#include <opscope/gunzip.h>
#include <opscope/results/format_version.h>
#include <opscope/results/trace_file.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

namespace opscope::tracecheck {
namespace {

using nlohmann::json;

using TrackKey = std::pair<std::int64_t, std::int64_t>;  // (pid, tid)

// Every phase letter of the Trace Event Format.
constexpr std::string_view kKnownPhases = "BEXiICbneSTpFstfPONDMRcVv()";
// Phases placed on a thread, which therefore need a "tid".
constexpr std::string_view kThreadPhases = "XBEiIstf";
// Async phases, which need an "id" (or "id2") to be paired.
constexpr std::string_view kAsyncPhases = "bneSTpF";

constexpr std::int64_t kMaxId = std::numeric_limits<std::uint32_t>::max();

bool contains(std::string_view set, char c) { return set.find(c) != std::string_view::npos; }

// ts and dur in integer nanoseconds, rounded as Perfetto's importer does.
std::int64_t toNs(double us) { return static_cast<std::int64_t>(std::llround(us * 1000.0)); }

// A pid or tid as Perfetto keeps it: an integer that fits in 32 bits without sign.
std::optional<std::int64_t> idField(const json& ev, const char* key) {
  const auto it = ev.find(key);
  if (it == ev.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(kMaxId)) return std::nullopt;
    return static_cast<std::int64_t>(v);
  }
  const auto v = it->get<std::int64_t>();
  if (v < 0 || v > kMaxId) return std::nullopt;
  return v;
}

std::string stringField(const json& ev, const char* key) {
  const auto it = ev.find(key);
  return it != ev.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A value as it appears in the file, shortened when long.
std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

struct Slice {
  std::int64_t ts_ns = 0;
  std::int64_t end_ns = 0;
  double ts = 0;   // as written (µs)
  double end = 0;  // ts + dur (µs)
  std::size_t index = 0;
  std::string cat;
};

struct BeginEnd {
  std::int64_t ts_ns = 0;
  double ts = 0;
  std::size_t index = 0;
  bool begin = false;
  std::string name, cat;
};

struct FlowPoint {
  std::size_t index = 0;
  TrackKey track;
  double ts = 0;
  std::int64_t ts_ns = 0;
  std::string cat;
};

struct Flow {
  std::string description;  // flow id 1 (cat "mlu_op", name "conv2d_forward")
  std::vector<FlowPoint> starts, steps, ends;
};

// The slices of one thread, sorted by start (longer first on ties), with the running maximum of their ends
// so that "is ts inside some slice" is one binary search.
struct TrackSlices {
  std::vector<Slice> sorted;
  std::vector<std::int64_t> max_end_ns;

  bool encloses(std::int64_t ts_ns) const {
    const auto after = std::upper_bound(sorted.begin(), sorted.end(), ts_ns,
                                        [](std::int64_t t, const Slice& s) { return t < s.ts_ns; });
    const auto n = static_cast<std::size_t>(after - sorted.begin());
    return n > 0 && max_end_ns[n - 1] >= ts_ns;
  }

  bool beginsAt(double ts, const std::string& cat) const {
    struct ByStart {
      bool operator()(const Slice& s, std::int64_t t) const { return s.ts_ns < t; }
      bool operator()(std::int64_t t, const Slice& s) const { return t < s.ts_ns; }
    };
    const auto [first, last] = std::equal_range(sorted.begin(), sorted.end(), toNs(ts), ByStart{});
    return std::any_of(first, last, [&](const Slice& s) { return s.ts == ts && s.cat == cat; });
  }
};

class Checker {
 public:
  Checker(const json& events, Report& report) : events_(events), report_(report) {}

  void run() {
    report_.events = events_.size();
    for (std::size_t i = 0; i < events_.size(); ++i) checkEvent(i, events_[i]);
    matchBeginEnd();
    checkNesting();
    checkFlows();
  }

 private:
  void error(std::string message) {
    ++report_.error_count;
    if (report_.errors.size() < kMaxStoredErrors) report_.errors.push_back(std::move(message));
  }

  // event #3 X "conv2d_forward"
  std::string where(std::size_t index) const {
    const json& ev = events_[index];
    if (!ev.is_object()) return fmt::format("event #{}", index);
    std::string text = fmt::format("event #{}", index);
    const auto ph = ev.find("ph");
    if (ph != ev.end() && ph->is_string()) text += " " + ph->get<std::string>();
    const auto name = ev.find("name");
    if (name != ev.end() && name->is_string()) text += " " + shown(*name);
    return text;
  }

  static std::string trackName(const TrackKey& track) {
    return fmt::format("pid {} tid {}", track.first, track.second);
  }

  void checkEvent(std::size_t i, const json& ev) {
    if (!ev.is_object()) {
      error(fmt::format("event #{}: not an object but {}", i, shown(ev)));
      return;
    }
    const std::string at = where(i);

    const auto ph_it = ev.find("ph");
    char ph = 0;
    if (ph_it == ev.end() || !ph_it->is_string()) {
      error(fmt::format("{}: \"ph\" is missing or not a string", at));
    } else {
      const auto text = ph_it->get<std::string>();
      ++report_.by_phase[text];
      if (text.size() != 1 || !contains(kKnownPhases, text[0])) {
        error(fmt::format("{}: unknown phase {}", at, shown(*ph_it)));
      } else {
        ph = text[0];
      }
    }

    const auto name_it = ev.find("name");
    const bool named = name_it != ev.end() && name_it->is_string();
    if (!named) error(fmt::format("{}: \"name\" is missing or not a string", at));

    const auto pid = idField(ev, "pid");
    if (!pid) {
      error(fmt::format("{}: \"pid\" is missing or not an integer in [0, {}]", at, kMaxId));
    }
    if (ph == 0) return;

    // ts: a number for every phase but M; when present, finite and not negative.
    bool ts_ok = false;
    double ts = 0;
    const auto ts_it = ev.find("ts");
    if (ts_it == ev.end()) {
      if (ph != 'M') error(fmt::format("{}: \"ts\" is missing", at));
    } else if (!ts_it->is_number()) {
      if (ph != 'M') error(fmt::format("{}: \"ts\" is not a number but {}", at, shown(*ts_it)));
    } else {
      ts = ts_it->get<double>();
      if (!std::isfinite(ts)) {
        error(fmt::format("{}: \"ts\" is not finite", at));
      } else if (ts < 0) {
        error(fmt::format("{}: \"ts\" is negative ({})", at, ts));
      } else {
        ts_ok = true;
      }
    }

    const std::string name = named ? name_it->get<std::string>() : std::string();
    const bool thread_metadata = ph == 'M' && (name == "thread_name" || name == "thread_sort_index");
    const auto tid = idField(ev, "tid");
    if ((contains(kThreadPhases, ph) || thread_metadata) && !tid) {
      error(fmt::format("{}: \"tid\" is missing or not an integer in [0, {}]", at, kMaxId));
    } else if ((contains(kThreadPhases, ph) || thread_metadata) && *tid == 0 && pid && *pid != 0) {
      // Perfetto reads tid 0 as "no tid" and puts the event on thread pid, merging two threads.
      error(fmt::format("{}: \"tid\" is 0, which Perfetto reads as unset and replaces with the pid ({})", at,
                        *pid));
    }
    // Where the event goes, when its pid, tid and ts say so.
    const bool placed = pid && tid && ts_ok;
    const TrackKey track = placed ? TrackKey{*pid, *tid} : TrackKey{};
    const std::string cat = stringField(ev, "cat");

    switch (ph) {
      case 'X': {
        const auto dur_it = ev.find("dur");
        if (dur_it == ev.end()) {
          error(fmt::format("{}: \"dur\" is missing", at));
        } else if (!dur_it->is_number()) {
          error(fmt::format("{}: \"dur\" is not a number but {}", at, shown(*dur_it)));
        } else if (const double dur = dur_it->get<double>(); !std::isfinite(dur)) {
          error(fmt::format("{}: \"dur\" is not finite", at));
        } else if (dur < 0) {
          error(fmt::format("{}: \"dur\" is negative ({})", at, dur));
        } else if (placed) {
          slices_[track].push_back({toNs(ts), toNs(ts) + toNs(dur), ts, ts + dur, i, cat});
        }
        break;
      }
      case 'B':
      case 'E':
        if (placed) begin_end_[track].push_back({toNs(ts), ts, i, ph == 'B', name, cat});
        break;
      case 'C': {
        const auto args = ev.find("args");
        if (args == ev.end() || !args->is_object()) {
          error(fmt::format("{}: counter \"args\" is missing or not an object", at));
          break;
        }
        for (const auto& [key, value] : args->items()) {
          if (!value.is_number()) {
            error(fmt::format("{}: counter value args.{} is not a number but {}", at, key, shown(value)));
          }
        }
        break;
      }
      case 's':
      case 't':
      case 'f':
        checkFlowEvent(i, ev, at, ph, name, cat, placed, track, ts);
        break;
      case 'M':
        checkMetadata(i, ev, at, name, pid, tid);
        break;
      default:
        if (contains(kAsyncPhases, ph) && !hasId(ev) && !ev.contains("id2")) {
          error(fmt::format("{}: async event has no \"id\" (an integer or a string) or \"id2\"", at));
        }
        break;
    }
  }

  static bool hasId(const json& ev) {
    const auto id = ev.find("id");
    return id != ev.end() && (id->is_number_integer() || id->is_string());
  }

  void checkFlowEvent(std::size_t i, const json& ev, const std::string& at, char ph, const std::string& name,
                      const std::string& cat, bool placed, const TrackKey& track, double ts) {
    const auto bp = ev.find("bp");
    if (bp != ev.end() && *bp != "e") {
      error(fmt::format("{}: \"bp\" is {}, expected \"e\" (bind to the enclosing slice)", at, shown(*bp)));
    }
    if (!hasId(ev)) {
      error(fmt::format("{}: flow event has no \"id\" (an integer or a string)", at));
      return;
    }
    if (!placed) return;
    // Both consumers key a flow by its category, name and id.
    const std::string id = ev.at("id").dump();
    const auto key = std::make_tuple(cat, name, id);
    auto [it, added] = flow_index_.try_emplace(key, flows_.size());
    if (added) {
      flows_.push_back(
          {fmt::format("flow id {} (cat {}, name {})", id, json(cat).dump(), json(name).dump()), {}, {}, {}});
    }
    Flow& flow = flows_[it->second];
    const FlowPoint point{i, track, ts, toNs(ts), cat};
    (ph == 's' ? flow.starts : ph == 't' ? flow.steps : flow.ends).push_back(point);
  }

  void checkMetadata(std::size_t i, const json& ev, const std::string& at, const std::string& name,
                     const std::optional<std::int64_t>& pid, const std::optional<std::int64_t>& tid) {
    const auto args = ev.find("args");
    const auto arg = [&](const char* key) -> const json* {
      if (args == ev.end() || !args->is_object()) return nullptr;
      const auto it = args->find(key);
      return it == args->end() ? nullptr : &*it;
    };
    if (name == "process_name" || name == "thread_name") {
      const json* value = arg("name");
      if (value == nullptr || !value->is_string()) {
        error(fmt::format("{}: \"args.name\" is missing or not a string", at));
      }
      if (name == "process_name" && pid) {
        const auto [it, added] = process_names_.try_emplace(*pid, i);
        if (!added)
          error(fmt::format("{}: a second process_name for pid {} (first: event #{})", at, *pid, it->second));
      }
      if (name == "thread_name" && pid && tid) {
        const auto [it, added] = thread_names_.try_emplace(TrackKey{*pid, *tid}, i);
        if (!added) {
          error(fmt::format("{}: a second thread_name for {} (first: event #{})", at, trackName({*pid, *tid}),
                            it->second));
        }
      }
    } else if (name == "process_sort_index" || name == "thread_sort_index") {
      const json* value = arg("sort_index");
      if (value == nullptr || !value->is_number_integer()) {
        error(fmt::format("{}: \"args.sort_index\" is missing or not an integer", at));
      }
    } else if (name == "process_labels") {
      const json* value = arg("labels");
      if (value == nullptr || !value->is_string()) {
        error(fmt::format("{}: \"args.labels\" is missing or not a string", at));
      }
    } else {
      error(fmt::format(
          "{}: metadata name is not one of process_name, thread_name, process_sort_index, thread_sort_index, "
          "process_labels",
          at));
    }
  }

  // B/E pairs per thread in ts order (file order on ties, as a stable sort keeps it); each pair is a slice.
  void matchBeginEnd() {
    for (auto& [track, list] : begin_end_) {
      std::stable_sort(list.begin(), list.end(),
                       [](const BeginEnd& a, const BeginEnd& b) { return a.ts_ns < b.ts_ns; });
      std::vector<const BeginEnd*> open;
      for (const BeginEnd& e : list) {
        if (e.begin) {
          open.push_back(&e);
          continue;
        }
        if (open.empty()) {
          error(fmt::format("{}: E with no open B on {}", where(e.index), trackName(track)));
          continue;
        }
        const BeginEnd& b = *open.back();
        open.pop_back();
        if (!e.name.empty() && e.name != b.name) {
          error(fmt::format("{}: E closes B of another name ({})", where(e.index), where(b.index)));
        } else if (!e.cat.empty() && !b.cat.empty() && e.cat != b.cat) {
          error(fmt::format("{}: E has cat {} but its B ({}) has cat {}", where(e.index), json(e.cat).dump(),
                            where(b.index), json(b.cat).dump()));
        }
        slices_[track].push_back({b.ts_ns, e.ts_ns, b.ts, e.ts, b.index, b.cat});
      }
      for (const BeginEnd* b : open) {
        error(fmt::format("{}: B never ended (no matching E on {})", where(b->index), trackName(track)));
      }
    }
  }

  // Slices on one thread nest strictly: each lies within the slice open around its start, or starts at or
  // after that slice's end. The first pair that does neither is reported for each thread.
  void checkNesting() {
    for (auto& [track, list] : slices_) {
      if (list.empty()) continue;
      ++report_.tracks;
      report_.slices += list.size();
      std::sort(list.begin(), list.end(), [](const Slice& a, const Slice& b) {
        return std::tie(a.ts_ns, b.end_ns, a.index) < std::tie(b.ts_ns, a.end_ns, b.index);
      });
      std::vector<const Slice*> open;
      for (const Slice& s : list) {
        while (!open.empty() && open.back()->end_ns <= s.ts_ns) open.pop_back();
        if (!open.empty() && s.end_ns > open.back()->end_ns) {
          const Slice& parent = *open.back();
          error(fmt::format("{}: overlaps {} on {}: [{}, {}] starts inside [{}, {}] and ends after it",
                            where(s.index), where(parent.index), trackName(track), s.ts, s.end, parent.ts,
                            parent.end));
          break;
        }
        open.push_back(&s);
      }
      TrackSlices& index = indexed_[track];
      index.sorted = list;
      index.max_end_ns.reserve(list.size());
      std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
      for (const Slice& s : list) {
        max_end = std::max(max_end, s.end_ns);
        index.max_end_ns.push_back(max_end);
      }
    }
  }

  void checkFlowPoint(const Flow& flow, const FlowPoint& p) {
    const auto it = indexed_.find(p.track);
    const TrackSlices* slices = it == indexed_.end() ? nullptr : &it->second;
    if (slices == nullptr || !slices->encloses(p.ts_ns)) {
      error(
          fmt::format("{}: {}: no slice on {} encloses ts {} (Perfetto binds a flow to the enclosing slice)",
                      where(p.index), flow.description, trackName(p.track), p.ts));
    }
    if (slices == nullptr || !slices->beginsAt(p.ts, p.cat)) {
      error(
          fmt::format("{}: {}: no slice on {} begins at ts {} with cat {} (DevTools binds a flow only to a "
                      "slice with the "
                      "same pid, tid, ts and cat)",
                      where(p.index), flow.description, trackName(p.track), p.ts, json(p.cat).dump()));
    }
  }

  void checkFlows() {
    for (const Flow& flow : flows_) {
      const std::size_t first = std::min(flow.starts.empty() ? SIZE_MAX : flow.starts.front().index,
                                         flow.ends.empty() ? SIZE_MAX : flow.ends.front().index);
      const std::string at = first == SIZE_MAX ? where(flow.steps.front().index) : where(first);
      if (flow.starts.size() != 1) {
        error(fmt::format("{}: {} has {} s events (expected exactly one)", at, flow.description,
                          flow.starts.size()));
      }
      if (flow.ends.size() != 1) {
        error(fmt::format("{}: {} has {} f events (expected exactly one)", at, flow.description,
                          flow.ends.size()));
      }
      if (flow.starts.size() == 1 && flow.ends.size() == 1) {
        const FlowPoint& s = flow.starts.front();
        const FlowPoint& f = flow.ends.front();
        if (s.ts > f.ts) {
          error(fmt::format("{}: {}: s at ts {} is after its f at ts {} ({})", where(s.index),
                            flow.description, s.ts, f.ts, where(f.index)));
        } else {
          ++report_.flows;
        }
      }
      for (const FlowPoint& p : flow.starts) checkFlowPoint(flow, p);
      for (const FlowPoint& p : flow.ends) checkFlowPoint(flow, p);
    }
  }

  const json& events_;
  Report& report_;
  std::map<TrackKey, std::vector<Slice>> slices_;
  std::map<TrackKey, std::vector<BeginEnd>> begin_end_;
  std::map<TrackKey, TrackSlices> indexed_;
  std::map<std::tuple<std::string, std::string, std::string>, std::size_t> flow_index_;
  std::vector<Flow> flows_;  // in the order their first event appears
  std::map<std::int64_t, std::size_t> process_names_;
  std::map<TrackKey, std::size_t> thread_names_;
};

void addError(Report& report, std::string message) {
  ++report.error_count;
  if (report.errors.size() < kMaxStoredErrors) report.errors.push_back(std::move(message));
}

}  // namespace

Report check(const json& trace) {
  Report report;
  const json* events = nullptr;
  if (trace.is_array()) {
    events = &trace;
  } else if (trace.is_object()) {
    const auto it = trace.find("traceEvents");
    if (it == trace.end() || !it->is_array()) {
      addError(report, "top level: \"traceEvents\" is missing or not an array");
      return report;
    }
    events = &*it;
    const auto unit = trace.find("displayTimeUnit");
    if (unit != trace.end() && *unit != "ms" && *unit != "ns") {
      addError(report,
               fmt::format("top level: \"displayTimeUnit\" is {}, expected \"ms\" or \"ns\"", shown(*unit)));
    }
    // An opscope trace says its format version (opscope/results/trace_file.h): a newer one is refused.
    if (const auto other = trace.find("otherData"); other != trace.end()) {
      if (const std::string error = opscope::results::formatVersionError(
              "the trace", *other, opscope::results::kTraceFormatVersion);
          !error.empty()) {
        addError(report, "top level: " + error);
        return report;
      }
    }
  } else {
    addError(report, fmt::format("top level: neither an object with a \"traceEvents\" array nor an array of "
                                 "events but {}",
                                 shown(trace)));
    return report;
  }
  Checker(*events, report).run();
  return report;
}

Report checkFile(const std::string& path) {
  std::string text;
  // trace-check is the strict reader: a viewer takes a file only when it is valid JSON as a whole, so it
  // parses the whole text (with the byte where it breaks) where results::readTrace skips a malformed event.
  // Which files are compressed is the contract's rule (OP_TRACE_GZIP, finished or not).
  if (opscope::results::finishedName(path).ends_with(".gz")) {
    try {
      opscope::Gunzipped g = opscope::gunzipFile(path, std::size_t{4} << 30);
      if (g.cut) {
        Report report;
        addError(report,
                 fmt::format("{}: the compressed stream ends early, after {} bytes of text (cut short?)",
                             path, g.text.size()));
        return report;
      }
      text = std::move(g.text);
    } catch (const std::exception& e) {
      Report report;
      addError(report, e.what());
      return report;
    }
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      Report report;
      addError(report, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
      return report;
    }
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) {
      Report report;
      addError(report, fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
      return report;
    }
  }
  try {
    return check(json::parse(text));
  } catch (const json::parse_error& e) {
    Report report;
    // The parser reads one past the last byte when the text stops in the middle of a value.
    if (e.byte > text.size()) {
      addError(report, fmt::format("{}: not valid JSON: it ends early, after {} bytes (truncated?): {}", path,
                                   text.size(), e.what()));
    } else {
      addError(report,
               fmt::format("{}: not valid JSON at byte {} of {}: {}", path, e.byte, text.size(), e.what()));
    }
    return report;
  } catch (const json::exception& e) {
    Report report;
    addError(report, fmt::format("{}: not valid JSON: {}", path, e.what()));
    return report;
  }
}

}  // namespace opscope::tracecheck
