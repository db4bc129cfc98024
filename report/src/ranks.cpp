#include <opscope/gunzip.h>
#include <opscope/op_call.h>
#include <opscope/private_file.h>
#include <opscope/report/ranks.h>
#include <opscope/report/report.h>
#include <opscope/results/format_version.h>
#include <opscope/results/run_file.h>
#include <opscope/results/run_folder.h>
#include <opscope/results/trace_file.h>
#include <opscope/text.h>

#include <opscope/results/json_input.h>
#include <opscope/results/trace_reader.h>
#include "template.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

namespace opscope::report {

namespace fs = std::filesystem;
using nlohmann::json;
using results::integer;
using results::rankDirectories;
using results::RankDirectory;
using results::readTrace;
using results::text;

namespace {

using results::kDevicePidBase;
constexpr long kDevicesPerRank = 256;  // the merged trace's device processes: base + rank * 256 + d

std::optional<double> number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// A time or duration in µs that a trace can hold: finite, from 0 to about 30 years (anything else is
// someone else's nonsense, not a measurement).
std::optional<double> micros(const json& j, const char* key) {
  const auto v = number(j, key);
  if (!v || !(*v >= 0 && *v <= 1e15)) return std::nullopt;
  return v;
}

// A rank's trace files in order: trace.json (or .json.gz, or either unfinished), then its segments
// trace.1.json, trace.2.json...
std::vector<fs::path> traceFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (int segment = 0; segment < 100000; ++segment) {
    const std::string base = segment == 0 ? "trace" : fmt::format("trace.{}", segment);
    fs::path found;
    // (Unfinished: a rank killed before its profiler completed the file; read as far as it goes.)
    for (const char* ext : {".json.gz.tmp", ".json.tmp", ".json.gz", ".json"}) {
      if (fs::is_regular_file(dir / (base + ext), ec)) found = dir / (base + ext);
    }
    if (found.empty()) break;
    files.push_back(found);
  }
  return files;
}

// Which transfer a collective span is, the same on every rank that took part: communicator, collective and
// sequence number (send and recv: the pair, sender first).
std::string collectiveKey(const json& args, int rank) {
  const auto comm = integer(args, "comm"), seq = integer(args, "seq");
  const Collective what = parseCollective(text(args, "collective"));
  if (!comm || !seq || what == Collective::kCount) return {};
  if (isPointToPoint(what)) {
    const auto peer = integer(args, "peer");
    if (!peer) return {};
    const bool send = what == Collective::kSend;
    const std::int64_t from = send ? rank : *peer, to = send ? *peer : rank;
    return fmt::format("{} {}->{} #{} comm {}", "send/recv", from, to, *seq, *comm);
  }
  return fmt::format("{} #{} comm {}", collectiveName(what), *seq, *comm);
}

struct DeviceSpan {
  double ts = 0, dur = 0;
  std::int64_t pid = 0, tid = 0;  // in the rank's own trace
};

// What the first reading of a rank's trace finds.
struct RankTrace {
  std::vector<fs::path> files;
  std::optional<std::int64_t> origin_ns;
  std::string host;
  std::unordered_map<std::int64_t, std::string> key_of_correlation;  // host collective spans
  std::map<std::string, DeviceSpan> collectives;                     // key -> its device span
  std::map<std::int64_t, double> step_us;                            // ProfilerStep#N -> duration
  std::size_t collective_calls = 0;
  double collective_device_us = 0;
};

RankTrace scanTrace(const fs::path& dir, int rank, std::vector<std::string>& warnings) {
  RankTrace t;
  t.files = traceFiles(dir);
  std::vector<std::pair<std::int64_t, DeviceSpan>> device;  // correlation -> span
  for (const fs::path& file : t.files) {
    try {
      const std::size_t bad = readTrace(
          file,
          [&](json& e) {
            const std::string ph = text(e, "ph"), cat = text(e, "cat");
            if (ph != "X") return;
            const json& args = e.contains("args") ? e["args"] : json();
            if (cat == "user_annotation" && text(e, "name").starts_with("ProfilerStep#")) {
              const auto step = integer(args, "step");
              const auto dur = micros(e, "dur");
              if (step && dur) t.step_us[*step] = *dur;
            } else if (cat == "collective") {
              const auto pid = integer(e, "pid");
              const auto correlation = integer(args, "correlation");
              if (!pid || !correlation) return;
              if (*pid >= kDevicePidBase) {
                const auto ts = micros(e, "ts"), dur = micros(e, "dur");
                const auto tid = integer(e, "tid");
                if (ts && dur && tid) {
                  device.push_back({*correlation, {*ts, *dur, *pid, *tid}});
                  t.collective_device_us += *dur;
                }
              } else if (std::string key = collectiveKey(args, rank); !key.empty()) {
                t.key_of_correlation[*correlation] = std::move(key);
                ++t.collective_calls;
              }
            }
          },
          [&](const json& other) {
            // (A clock reading is never negative: two of them subtract without overflow.)
            if (const auto origin = integer(other, "origin_monotonic_ns"); origin && *origin >= 0)
              t.origin_ns = *origin;
            if (std::string host = text(other, "host"); !host.empty()) t.host = std::move(host);
          });
      if (bad > 0)
        warnings.push_back(
            fmt::format("rank {}: {}: {} malformed events skipped", rank, file.filename().string(), bad));
    } catch (const std::exception& e) {
      warnings.push_back(fmt::format("rank {}: {}", rank, e.what()));
    }
  }
  for (const auto& [correlation, span] : device) {
    const auto it = t.key_of_correlation.find(correlation);
    if (it != t.key_of_correlation.end()) t.collectives.emplace(it->second, span);
  }
  return t;
}

// The ranks' clocks: the shift (µs) that puts each rank's trace times on one clock, and how it was found
// (empty `shift` entries stay 0 when they cannot be aligned: `aligned` false). One host: every trace's ts 0
// is a CLOCK_MONOTONIC instant of that host. Else: the end of the first collective all ranks ran (they
// leave it together, to its latency).
struct Clocks {
  std::vector<double> shift_us;
  std::string clock;
  bool aligned = true;
};

Clocks clocksOf(const std::vector<RankTrace>& traces) {
  Clocks c;
  c.shift_us.assign(traces.size(), 0.0);
  std::vector<double>& shift_us = c.shift_us;
  std::string& clock = c.clock;
  const bool one_host = std::all_of(traces.begin(), traces.end(), [&](const RankTrace& t) {
    return t.origin_ns && !t.host.empty() && t.host == traces[0].host;
  });
  if (one_host) {
    std::int64_t first = *traces[0].origin_ns;
    for (const auto& t : traces) first = std::min(first, *t.origin_ns);
    for (std::size_t i = 0; i < traces.size(); ++i)
      shift_us[i] = static_cast<double>(*traces[i].origin_ns - first) / 1000.0;
    clock = fmt::format("one host ({}): each rank's CLOCK_MONOTONIC origin", traces[0].host);
  } else {
    std::optional<std::string> shared;
    double earliest = 0;
    for (const auto& entry : traces[0].collectives) {
      const std::string& key = entry.first;  // (not a structured binding: clang 14 cannot capture one)
      const DeviceSpan& span = entry.second;
      const bool everywhere = std::all_of(traces.begin(), traces.end(),
                                          [&](const RankTrace& t) { return t.collectives.contains(key); });
      if (everywhere && (!shared || span.ts < earliest)) {
        shared = key;
        earliest = span.ts;
      }
    }
    if (shared) {
      const DeviceSpan& ref = traces[0].collectives.at(*shared);
      double lowest = 0;
      for (std::size_t i = 0; i < traces.size(); ++i) {
        const DeviceSpan& s = traces[i].collectives.at(*shared);
        shift_us[i] = (ref.ts + ref.dur) - (s.ts + s.dur);
        lowest = std::min(lowest, shift_us[i]);
      }
      for (double& s : shift_us) s -= lowest;
      clock = fmt::format("several hosts: aligned on the end of {}", *shared);
    } else {
      clock = "not aligned (no common host clock and no collective all ranks ran)";
      c.aligned = false;
    }
  }
  return c;
}

// The straggler: over the collectives two or more ranks ran (traces[i] is ranks[i]'s), on one clock, each
// rank's device span starts when it arrives and cannot finish before the last rank arrives. A rank waits
// (its span's time before the last arrival, at most the span) for the latest; the latest is charged the
// longest of those waits. Null when the clocks cannot be aligned or no collective was run by two ranks.
json stragglerOf(const std::vector<RankTrace>& traces, const std::vector<RankDirectory>& ranks,
                 const Clocks& clocks) {
  if (!clocks.aligned) return nullptr;
  std::map<std::string, std::vector<std::size_t>> by_key;  // key -> the traces that hold it
  for (std::size_t i = 0; i < traces.size(); ++i)
    for (const auto& entry : traces[i].collectives) by_key[entry.first].push_back(i);
  std::vector<double> waited_us(traces.size(), 0.0), charged_us(traces.size(), 0.0);
  std::vector<std::size_t> last_count(traces.size(), 0);
  std::size_t collectives = 0;
  for (const auto& entry : by_key) {
    const std::string& key = entry.first;  // (not a structured binding: clang 14 cannot capture one)
    const std::vector<std::size_t>& holders = entry.second;
    if (holders.size() < 2) continue;
    ++collectives;
    std::size_t last = holders[0];
    auto arrival = [&](std::size_t i) { return traces[i].collectives.at(key).ts + clocks.shift_us[i]; };
    for (std::size_t i : holders)
      if (arrival(i) > arrival(last)) last = i;
    double longest = 0;
    for (std::size_t i : holders) {
      const double wait = std::clamp(arrival(last) - arrival(i), 0.0, traces[i].collectives.at(key).dur);
      waited_us[i] += wait;
      longest = std::max(longest, wait);
    }
    ++last_count[last];
    charged_us[last] += longest;
  }
  if (collectives == 0) return nullptr;
  std::size_t worst = 0;
  for (std::size_t i = 1; i < traces.size(); ++i)
    if (charged_us[i] > charged_us[worst]) worst = i;
  json per_rank = json::array();
  for (std::size_t i = 0; i < traces.size(); ++i) {
    per_rank.push_back({{"rank", ranks[i].rank},
                        {"waited_ms", std::round(waited_us[i]) / 1000.0},
                        {"last", last_count[i]},
                        {"others_waited_ms", std::round(charged_us[i]) / 1000.0}});
  }
  return {{"rank", ranks[worst].rank}, {"collectives", collectives},
          {"last", last_count[worst]}, {"others_waited_ms", std::round(charged_us[worst]) / 1000.0},
          {"ranks", per_rank},         {"clock", clocks.clock}};
}

// The merged trace: each rank's events with its processes renumbered and its times shifted onto one
// clock, flow ids renumbered so that no two ranks' flows meet, then the cross-rank flows.
json writeMergedTrace(const fs::path& folder, const std::vector<RankDirectory>& ranks,
                      std::vector<RankTrace>& traces, const Clocks& clocks,
                      std::vector<std::string>& warnings) {
  if (!clocks.aligned) warnings.push_back("merged trace: the ranks' clocks could not be aligned");
  const std::vector<double>& shift_us = clocks.shift_us;
  const std::string& clock = clocks.clock;

  std::string out = "{\"traceEvents\":[\n";
  bool first_event = true;
  std::size_t events = 0;
  auto emit = [&](const json& e) {
    if (!first_event) out += ",\n";
    first_event = false;
    out += e.dump(-1, ' ', false, json::error_handler_t::replace);
    ++events;
  };
  std::uint64_t next_flow = 1;
  std::set<std::int64_t> host_pids;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int rank = ranks[i].rank;
    std::unordered_map<std::uint64_t, std::uint64_t> flow_ids;
    std::map<std::int64_t, std::int64_t> pids;
    auto pidFor = [&](std::int64_t pid) -> std::optional<std::int64_t> {
      if (const auto it = pids.find(pid); it != pids.end()) return it->second;
      std::int64_t to;
      if (pid >= kDevicePidBase) {
        const std::int64_t device = pid - kDevicePidBase;
        if (device >= kDevicesPerRank) return std::nullopt;
        to = kDevicePidBase + static_cast<std::int64_t>(rank) * kDevicesPerRank + device;
      } else {
        // Another rank (on another host) had that pid: moved above every device process (real pids are
        // below 2^22, device processes from 2^22 to 2^22 + 256 ranks), still a 32-bit number.
        to = pid;
        while (host_pids.contains(to)) to += std::int64_t{1} << 29;
        host_pids.insert(to);
      }
      pids[pid] = to;
      return to;
    };
    for (const fs::path& file : traces[i].files) {
      try {
        readTrace(
            file,
            [&](json& e) {
              const auto pid = integer(e, "pid");
              if (pid) {
                const auto to = pidFor(*pid);
                if (!to) return;
                e["pid"] = *to;
              }
              if (const auto ts = number(e, "ts")) e["ts"] = *ts + shift_us[i];
              const std::string ph = text(e, "ph");
              if ((ph == "s" || ph == "t" || ph == "f") && e.contains("id")) {
                const auto id = integer(e, "id");
                if (!id) return;
                auto [it, added] = flow_ids.try_emplace(static_cast<std::uint64_t>(*id), next_flow);
                if (added) ++next_flow;
                e["id"] = it->second;
              }
              if (ph == "M" && text(e, "name") == "process_sort_index" && pid) {
                // Ranks in order, each rank's host before its devices.
                const std::int64_t local = *pid >= kDevicePidBase ? 1 + (*pid - kDevicePidBase) : 0;
                e["args"] = {{"sort_index", static_cast<std::int64_t>(rank) * (kDevicesPerRank + 1) + local}};
              }
              emit(e);
            },
            [](const json&) {});
      } catch (const std::exception& e) {
        warnings.push_back(fmt::format("merged trace: rank {}: {}", rank, e.what()));
      }
    }
  }
  // Each collective joined across its ranks: a flow from each rank's device span to the next rank's.
  std::map<std::string, std::vector<std::pair<std::size_t, DeviceSpan>>> by_key;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (const auto& [key, span] : traces[i].collectives) by_key[key].push_back({i, span});
  }
  std::size_t flows = 0;
  for (const auto& [key, spans] : by_key) {
    for (std::size_t k = 0; k + 1 < spans.size(); ++k) {
      // From the rank whose span began first to the other: the arrow points forward in time.
      const bool in_order = spans[k].second.ts + shift_us[spans[k].first] <=
                            spans[k + 1].second.ts + shift_us[spans[k + 1].first];
      const auto& [a, sa] = in_order ? spans[k] : spans[k + 1];
      const auto& [b, sb] = in_order ? spans[k + 1] : spans[k];
      const auto devicePid = [&](std::size_t i, const DeviceSpan& d) {
        return kDevicePidBase + static_cast<std::int64_t>(ranks[i].rank) * kDevicesPerRank +
               (d.pid - kDevicePidBase);
      };
      if (sa.pid - kDevicePidBase >= kDevicesPerRank || sb.pid - kDevicePidBase >= kDevicesPerRank) continue;
      const std::uint64_t id = next_flow++;
      // Bound to the two device spans (each flow event at its span's start, on its track).
      emit({{"ph", "s"},
            {"cat", "collective"},
            {"name", key},
            {"id", id},
            {"pid", devicePid(a, sa)},
            {"tid", sa.tid},
            {"ts", sa.ts + shift_us[a]}});
      emit({{"ph", "f"},
            {"bp", "e"},
            {"cat", "collective"},
            {"name", key},
            {"id", id},
            {"pid", devicePid(b, sb)},
            {"tid", sb.tid},
            {"ts", sb.ts + shift_us[b]}});
      ++flows;
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":";
  out += json({{"tool", "opscope"},
               {results::kFormatVersionKey, results::kTraceFormatVersion},
               {"merged_ranks", ranks.size()},
               {"clock", clock}})
             .dump();
  out += "}\n";
  const fs::path path = folder / "trace.json";
  if (std::string error = writePrivateFile(path.string(), out); !error.empty()) warnings.push_back(error);
  return {{"file", path.string()},
          {"events", events},
          {"ranks", ranks.size()},
          {"flows", flows},
          {"clock", clock}};
}

// The steps of loadRanks(), in the order it takes them.

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char iso[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return iso;
}

// One directory per rank: of two directories of one rank, two runs share the folder (a job id reused) and
// the newest is shown. `entries` is in rank order, the newer directory of a rank after the older.
std::vector<RankDirectory> newestPerRank(std::vector<RankDirectory> entries,
                                         std::vector<std::string>& warnings) {
  std::vector<RankDirectory> ranks;
  for (auto& e : entries) {
    if (!ranks.empty() && ranks.back().rank == e.rank) {
      warnings.push_back(fmt::format("rank {} has more than one directory ({} and {}): the newest is shown",
                                     e.rank, ranks.back().dir.filename().string(),
                                     e.dir.filename().string()));
      ranks.back() = std::move(e);
    } else {
      ranks.push_back(std::move(e));
    }
  }
  return ranks;
}

// The ranks below `world` that left no directory (`ranks` in rank order).
json missingRanks(const std::vector<RankDirectory>& ranks, std::int64_t world) {
  json missing = json::array();
  std::size_t k = 0;
  for (std::int64_t r = 0; r < world; ++r) {
    while (k < ranks.size() && ranks[k].rank < r) ++k;
    if (k >= ranks.size() || ranks[k].rank != r) missing.push_back(r);
  }
  return missing;
}

// A rank's row of the table: its run's figures (its model, loaded as the report loads one run; its page
// written beside it when `write_page`), its trace's.
json rankRow(const RankDirectory& e, const RankTrace& t, bool write_page,
             std::vector<std::string>& warnings) {
  json row = {{"rank", e.rank},
              {"pid", e.run.value("pid", json())},
              {"dir", e.dir.filename().string()},
              {"ended", e.run.value("ended", json())},
              {"duration_s", e.run.value("duration_s", json())}};
  for (const char* key : {"ops_calls", "device_ms", "host_ms", "busy_ms", "idle_ms", "host_bound_ms",
                          "peak_bytes", "accuracy_failed", "leaked_bytes", "memory_errors", "fallback_ops",
                          "overflow_ops", "collective_mismatches"})
    row[key] = nullptr;
  try {
    const json m = loadRun(e.dir);
    if (m["ops"].is_object() && m["ops"].contains("unreadable")) {
      row["ops_calls"] = row["device_ms"] = row["host_ms"] = "unknown";  // (a warning says why)
    } else if (m["ops"].is_object()) {
      row["ops_calls"] = m["ops"].value("calls", json());
      row["device_ms"] = m["ops"].value("device_ms", json());
      row["host_ms"] = m["ops"].value("host_ms", json());
      // Where its device time went (summed over its devices).
      if (const json& d = m["ops"].value("device_time", json()); d.is_object()) {
        double busy = 0, idle = 0, host_bound = 0;
        for (const json& dev : d.value("devices", json::array())) {
          busy += dev.value("busy_ms", 0.0);
          idle += dev.value("idle_ms", 0.0);
          const json& i = dev.value("idle", json::object());
          host_bound += i.value("host_bound_ms", 0.0) + i.value("host_copy_ms", 0.0) +
                        i.value("host_collective_ms", 0.0);
        }
        row["busy_ms"] = busy;
        row["idle_ms"] = idle;
        row["host_bound_ms"] = host_bound;
      }
    }
    if (m["memory"].is_object() && m["memory"].contains("unreadable")) {
      row["peak_bytes"] = row["leaked_bytes"] = row["memory_errors"] = "unknown";  // (a warning says why)
    } else if (m["memory"].is_object()) {
      std::int64_t peak = 0;
      for (const json& p : m["memory"].value("peaks", json::array()))
        peak = std::max(peak, integer(p, "bytes").value_or(0));
      row["peak_bytes"] = peak;
      row["leaked_bytes"] = m["memory"].value("leaked_bytes", json());
      row["memory_errors"] = m["memory"].value("errors_total", json());
    }
    if (m["accuracy"].is_object()) row["accuracy_failed"] = m["accuracy"].value("ops_failed", json());
    if (m["fallback"].is_object()) row["fallback_ops"] = m["fallback"].value("ops", json::array()).size();
    if (m["overflow"].is_object()) row["overflow_ops"] = m["overflow"].value("ops", json());
    for (const json& w : m["warnings"])
      if (w.is_string()) warnings.push_back(fmt::format("rank {}: {}", e.rank, w.get<std::string>()));
    if (write_page) {
      if (std::string error = writePrivateFile((e.dir / "report.html").string(), renderHtml(m));
          !error.empty())
        warnings.push_back(error);
    }
  } catch (const std::exception& ex) {
    warnings.push_back(fmt::format("rank {}: {}", e.rank, ex.what()));
  }
  // (From the trace: unknown without one.)
  const bool traced = !t.files.empty();
  row["collectives"] = traced ? json(t.collective_calls) : json();
  row["collective_device_ms"] = traced ? json(t.collective_device_us / 1000.0) : json();
  row["steps"] = traced ? json(t.step_us.size()) : json();
  return row;
}

// Steps: each rank's ProfilerStep#N, and the slowest rank of each (null without steps). traces[i] is
// ranks[i]'s.
json stepsOf(const std::vector<RankTrace>& traces, const std::vector<RankDirectory>& ranks) {
  std::set<std::int64_t> step_numbers;
  for (const auto& t : traces)
    for (const auto& [n, us] : t.step_us) step_numbers.insert(n);
  if (step_numbers.empty()) return nullptr;
  json step_rows = json::array();
  std::map<int, std::int64_t> slowest_counts;
  for (std::int64_t n : step_numbers) {
    json ms = json::array();
    int slowest = -1;
    double slow = 0, fast = 0;
    for (std::size_t i = 0; i < traces.size(); ++i) {
      const auto it = traces[i].step_us.find(n);
      if (it == traces[i].step_us.end()) {
        ms.push_back(nullptr);
        continue;
      }
      const double v = it->second / 1000.0;
      ms.push_back(v);
      if (slowest < 0 || v > slow) {
        slowest = ranks[i].rank;
        slow = v;
      }
      if (slowest < 0 || fast == 0 || v < fast) fast = v;
    }
    ++slowest_counts[slowest];
    step_rows.push_back(
        {{"step", n}, {"ms", ms}, {"slowest_rank", slowest}, {"slowest_ms", slow}, {"fastest_ms", fast}});
  }
  json counts = json::object();
  for (const auto& [r, c] : slowest_counts) counts[std::to_string(r)] = c;
  return {{"count", step_rows.size()}, {"rows", step_rows}, {"slowest_counts", counts}};
}

}  // namespace

json loadRanks(const fs::path& dir, bool write_trace) {
  std::vector<std::string> warnings;
  std::vector<RankDirectory> entries = rankDirectories(dir, &warnings);
  if (entries.empty())
    throw ReportError(
        fmt::format("{}: no rank's result directory in it (a run folder holds "
                    "<stamp>-rank<R>-<pid>-XXXXXX directories, each with its run.json)",
                    dir.string()));
  json model;
  model["folder"] = dir.string();
  model["opscope_version"] = OPSCOPE_VERSION;
  model["generated"] = utcNow();
  const std::vector<RankDirectory> ranks = newestPerRank(std::move(entries), warnings);
  std::int64_t world = static_cast<std::int64_t>(ranks.back().rank) + 1;
  for (const auto& r : ranks) world = std::max(world, integer(r.run, "world_size").value_or(0));
  world = std::min<std::int64_t>(world, 1 << 20);
  model["world_size"] = world;
  const json missing = missingRanks(ranks, world);
  if (!missing.empty())
    warnings.push_back(fmt::format("{} rank(s) of {} left no directory", missing.size(), world));
  model["missing_ranks"] = missing;

  std::vector<RankTrace> traces;
  json rows = json::array();
  for (const RankDirectory& e : ranks) {
    traces.push_back(scanTrace(e.dir, e.rank, warnings));
    rows.push_back(rankRow(e, traces.back(), write_trace, warnings));
  }
  model["ranks"] = rows;
  model["steps"] = stepsOf(traces, ranks);
  const Clocks clocks = clocksOf(traces);
  model["straggler"] = stragglerOf(traces, ranks, clocks);
  if (model["straggler"].is_object()) {  // each rank's wait in collectives, in its row
    const json& per_rank = model["straggler"]["ranks"];
    for (std::size_t i = 0; i < per_rank.size() && i < model["ranks"].size(); ++i)
      model["ranks"][i]["collective_wait_ms"] = per_rank[i]["waited_ms"];
  }
  // The analyses of the folder (analysis/) are added by the caller: addAnalyses.
  model["collectives_check"] = nullptr;
  model["flight_recorder"] = nullptr;
  const bool any_trace =
      std::any_of(traces.begin(), traces.end(), [](const RankTrace& t) { return !t.files.empty(); });
  model["trace"] = write_trace && any_trace ? writeMergedTrace(dir, ranks, traces, clocks, warnings) : json();
  model["warnings"] = warnings;
  return model;
}

void addAnalyses(json& model, const FolderAnalyses& analyses) {
  json& warnings = model["warnings"];
  if (!warnings.is_array()) warnings = json::array();
  for (const std::string& w : analyses.warnings) warnings.push_back(w);
  model["collectives_check"] = analyses.collectives_check;
  if (const json& check = analyses.collectives_check; check.is_object()) {
    for (const json& error : check.value("errors", json::array()))
      if (error.is_string())
        warnings.push_back(fmt::format("collectives check: {}", error.get<std::string>()));
    // Each rank's row: the transfers it captured, and those whose result on it did not check out.
    std::map<std::int64_t, std::set<std::string>> bad;
    for (const json& x : check.value("mismatches", json::array()))
      bad[x.value("rank", std::int64_t{-1})].insert(x.value("comm", "") + "/" + x.value("collective", "") +
                                                    "/" + std::to_string(x.value("seq", std::int64_t{0})));
    for (json& row : model["ranks"]) {
      const auto it = bad.find(row.value("rank", std::int64_t{-1}));
      row["collective_mismatches"] = it == bad.end() ? 0 : it->second.size();
    }
  }
  model["flight_recorder"] = nullptr;
  if (const json& a = analyses.flight_recorder; a.is_object())
    model["flight_recorder"] = {{"dumps", a.value("dumps", json::array())},
                                {"missing", a.value("missing", json::array())},
                                {"verdict", a.value("verdict", json::array())}};
}

namespace {

std::string cell(const json& v, const char* format = "{}") {
  if (v.is_null()) return "–";
  if (v.is_number_float()) return fmt::format(fmt::runtime(format), v.get<double>());
  if (v.is_number()) return fmt::format("{}", v.get<std::int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string bytesCell(const json& v) {
  if (v.is_string()) return v.get<std::string>();  // "unknown"
  return v.is_number()
             ? humanBytes(static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.get<std::int64_t>())))
             : std::string("–");
}

// The findings of a row, in words ("" when none).
std::string findings(const json& r) {
  std::vector<std::string> out;
  const auto count = [&](const char* key) { return r[key].is_number() ? r[key].get<std::int64_t>() : 0; };
  if (count("accuracy_failed") > 0)
    out.push_back(fmt::format("{} op(s) failed auto-compare", count("accuracy_failed")));
  if (count("memory_errors") > 0) out.push_back(fmt::format("{} memory error(s)", count("memory_errors")));
  if (count("leaked_bytes") > 0)
    out.push_back(fmt::format("{} leaked", humanBytes(static_cast<std::uint64_t>(count("leaked_bytes")))));
  if (count("fallback_ops") > 0) out.push_back(fmt::format("{} op(s) fell back", count("fallback_ops")));
  if (count("overflow_ops") > 0) out.push_back(fmt::format("{} op(s) made NaN/Inf", count("overflow_ops")));
  if (count("collective_mismatches") > 0)
    out.push_back(
        fmt::format("{} collective transfer(s) mismatching across ranks", count("collective_mismatches")));
  if (r["ended"].is_string() && r["ended"].get<std::string>() != "exit")
    out.push_back(fmt::format("ended by {}", r["ended"].get<std::string>()));
  if (r["ended"].is_null()) out.push_back("did not finish (no end in run.json)");
  std::string s;
  for (const auto& f : out) s += (s.empty() ? "" : "; ") + f;
  return s;
}

}  // namespace

namespace {

// The missing ranks as text of bounded length: runs of consecutive ranks as ranges ("2-1048575"), at most 32
// runs, then how many ranks more (a world size of 10^9 with two ranks reporting is one line, not 7 MB).
std::string missingRanks(const json& missing) {
  std::string out;
  std::size_t runs = 0, i = 0, rest = 0;
  const std::size_t n = missing.is_array() ? missing.size() : 0;
  while (i < n) {
    const std::int64_t first = missing[i].get<std::int64_t>();
    std::size_t j = i;
    while (j + 1 < n && missing[j + 1].get<std::int64_t>() == missing[j].get<std::int64_t>() + 1) ++j;
    if (runs < 32) {
      out += (out.empty() ? "" : ",") +
             (j == i ? std::to_string(first) : fmt::format("{}-{}", first, missing[j].get<std::int64_t>()));
    } else {
      rest += j - i + 1;
    }
    ++runs;
    i = j + 1;
  }
  if (rest > 0) out += fmt::format(",… and {} more", rest);
  return out;
}

}  // namespace

std::string renderRanksSummary(const json& m) {
  std::string out;
  auto it = std::back_inserter(out);
  fmt::format_to(it, "opscope ranks: {} ({} of {} rank(s))\n", m.value("folder", ""), m["ranks"].size(),
                 cell(m["world_size"]));
  if (!m["missing_ranks"].empty())
    fmt::format_to(it, "missing ranks: {}\n", missingRanks(m["missing_ranks"]));
  fmt::format_to(it, "{:>5} {:>8} {:>10} {:>12} {:>10} {:>10} {:>11} {:>12} {:>10} {:>6} {:>12}  {}\n",
                 "rank", "pid", "op calls", "device ms", "busy ms", "idle ms", "host-bound", "collectives",
                 "waiting", "steps", "memory peak", "findings");
  for (const json& r : m["ranks"]) {
    const std::string f = findings(r);
    fmt::format_to(it, "{:>5} {:>8} {:>10} {:>12} {:>10} {:>10} {:>11} {:>12} {:>10} {:>6} {:>12}  {}\n",
                   cell(r["rank"]), cell(r["pid"]), cell(r["ops_calls"]), cell(r["device_ms"], "{:.1f}"),
                   cell(r.value("busy_ms", json()), "{:.1f}"), cell(r.value("idle_ms", json()), "{:.1f}"),
                   cell(r.value("host_bound_ms", json()), "{:.1f}"), cell(r["collectives"]),
                   cell(r.value("collective_wait_ms", json()), "{:.1f}"), cell(r["steps"]),
                   bytesCell(r["peak_bytes"]), f.empty() ? "none" : f);
  }
  fmt::format_to(
      it,
      "  (busy, idle: the device's time in the rank's run; host-bound: idle while the host had not "
      "asked for the next task; waiting: its collectives' time waiting for the last rank to "
      "arrive)\n");
  if (const json& st = m.value("straggler", json()); st.is_object()) {
    fmt::format_to(
        it,
        "straggler: rank {}: the last to arrive at {} of {} collectives; the other ranks waited {:.1f} "
        "ms for it in all\n",
        cell(st["rank"]), cell(st["last"]), cell(st["collectives"]), st.value("others_waited_ms", 0.0));
  }
  if (m["steps"].is_object()) {
    const json& s = m["steps"];
    std::string counts;
    for (const auto& [rank, n] : s["slowest_counts"].items())
      counts += fmt::format("{}rank {}: {}", counts.empty() ? "" : ", ", rank, n.get<std::int64_t>());
    fmt::format_to(it, "steps: {}; the slowest rank of each step: {}\n", cell(s["count"]), counts);
    std::size_t shown = 0;
    for (const json& row : s["rows"]) {
      if (++shown > 20) {
        fmt::format_to(it, "  ... {} more step(s) in the report\n", s["rows"].size() - 20);
        break;
      }
      fmt::format_to(it, "  step {:>5}: slowest rank {} {:.2f} ms, fastest {:.2f} ms\n", cell(row["step"]),
                     cell(row["slowest_rank"]), row.value("slowest_ms", 0.0), row.value("fastest_ms", 0.0));
    }
  }
  if (const json& c = m["collectives_check"]; c.is_object() && c.contains("transfers")) {
    fmt::format_to(
        it,
        "collectives checked across ranks (capture.db of ranks {}): {} transfers, {} checked ({} by "
        "contents, {} by statistics), {} mismatching\n",
        c["ranks_with_collectives"].dump(), cell(c["transfers"]), cell(c["checked"]), cell(c["by_contents"]),
        cell(c["by_statistics"]), cell(c["mismatching"]));
    for (const auto& [reason, n] : c["not_checked"].items())
      fmt::format_to(it, "  not checked: {} {}\n", cell(n), reason);
    for (const json& x : c["mismatches"])
      fmt::format_to(it, "  MISMATCH comm {} {} #{} rank {}: {}\n", cell(x["comm"]), cell(x["collective"]),
                     cell(x["seq"]), cell(x["rank"]), cell(x["what"]));
    if (c.value("mismatches_left_out", 0) > 0)
      fmt::format_to(it, "  ... and {} more mismatch(es)\n", cell(c["mismatches_left_out"]));
  }
  if (const json& f = m["flight_recorder"]; f.is_object()) {
    fmt::format_to(
        it, "flight recorder: dumps of ranks {}{}\n", f["dumps"].dump(),
        f["verdict"].empty() ? ": no hang, failure or mismatch" : " (opscope analyze FOLDER for details):");
    for (const json& v : f["verdict"]) fmt::format_to(it, "  {}\n", v.get<std::string>());
  }
  if (m["trace"].is_object()) {
    fmt::format_to(it, "merged trace: {} ({} events, {} collective flows across ranks; clocks: {})\n",
                   m["trace"].value("file", ""), cell(m["trace"]["events"]), cell(m["trace"]["flows"]),
                   m["trace"].value("clock", ""));
  }
  for (const json& w : m["warnings"])
    fmt::format_to(it, "warning: {}\n", w.is_string() ? w.get<std::string>() : w.dump());
  return out;
}

namespace {

// The page's head, navigation and title.
void ranksPageHead(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  fmt::format_to(
      it,
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" "
      "content=\"width=device-width, initial-scale=1\">\n<title>opscope: {} ranks</title>\n{}\n</head>\n"
      "<body>\n<nav id=\"nav\"><div class=\"in\"><span class=\"brand\">opscope ranks</span><a "
      "href=\"#ranks\">Ranks</a><a href=\"#steps\">Steps</a><a href=\"#collectives\">Collectives</a><a "
      "href=\"#recorder\">Recorder</a><a "
      "href=\"#trace\">Trace</a></div></nav>\n"
      "<main>\n<header><h1>One view of {} rank(s)</h1>\n<p class=\"sub\"><code>{}</code> · generated {}"
      "</p></header>\n",
      m["ranks"].size(), reportStyle(), m["ranks"].size(), escapeHtml(m.value("folder", "")),
      escapeHtml(m.value("generated", "")));
}

// Ranks: a row per rank with its figures and findings.
void ranksSection(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  const bool missing = !m["missing_ranks"].empty();
  std::size_t with_findings = 0;
  for (const json& r : m["ranks"]) with_findings += findings(r).empty() ? 0 : 1;
  fmt::format_to(
      it,
      "<section id=\"ranks\"><h2>Ranks</h2>\n<div class=\"banner {}\"><div class=\"headline\">{} of {} "
      "rank(s) reported{}; {} with findings</div></div>\n",
      missing || with_findings > 0 ? "warn" : "good", m["ranks"].size(), escapeHtml(cell(m["world_size"])),
      missing ? escapeHtml(", missing " + missingRanks(m["missing_ranks"])) : std::string(), with_findings);
  out +=
      "<div class=\"scroll\"><table><thead><tr><th>rank</th><th>pid</th><th>op calls</th><th>device ms</th>"
      "<th>host ms</th><th>device busy ms</th><th>idle ms</th><th>host-bound ms</th><th>collectives</th>"
      "<th>collective device ms</th><th>waiting for the last rank ms</th><th>steps</th><th>memory peak</th>"
      "<th>findings</th><th>report</th></tr></thead><tbody>\n";
  for (const json& r : m["ranks"]) {
    const std::string f = findings(r);
    fmt::format_to(
        it,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}"
        "</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td><a "
        "href=\"{}/report.html\">{}</a></td></tr>\n",
        escapeHtml(cell(r["rank"])), escapeHtml(cell(r["pid"])), escapeHtml(cell(r["ops_calls"])),
        escapeHtml(cell(r["device_ms"], "{:.1f}")), escapeHtml(cell(r["host_ms"], "{:.1f}")),
        escapeHtml(cell(r.value("busy_ms", json()), "{:.1f}")),
        escapeHtml(cell(r.value("idle_ms", json()), "{:.1f}")),
        escapeHtml(cell(r.value("host_bound_ms", json()), "{:.1f}")), escapeHtml(cell(r["collectives"])),
        escapeHtml(cell(r["collective_device_ms"], "{:.1f}")),
        escapeHtml(cell(r.value("collective_wait_ms", json()), "{:.1f}")), escapeHtml(cell(r["steps"])),
        escapeHtml(bytesCell(r["peak_bytes"])), f.empty() ? "good" : "bad",
        escapeHtml(f.empty() ? "none" : f), escapeHtml(r.value("dir", "")), escapeHtml(r.value("dir", "")));
  }
  out += "</tbody></table></div>\n";
  out +=
      "<p class=\"note\">Device busy and idle: over each rank's run (its report splits idle time by cause); "
      "host-bound: idle while the host had not asked for the next task; waiting for the last rank: the time "
      "its collectives spent before the last rank arrived, on the ranks' aligned clocks.</p>\n";
  if (const json& st = m.value("straggler", json()); st.is_object()) {
    fmt::format_to(
        it,
        "<div class=\"banner {}\" id=\"straggler\"><div class=\"headline\">Straggler: rank {}</div>"
        "<div>the last to arrive at {} of {} collectives; the other ranks waited {:.1f} ms for it in "
        "all</div></div>\n",
        st.value("others_waited_ms", 0.0) > 0 ? "warn" : "good", escapeHtml(cell(st["rank"])),
        escapeHtml(cell(st["last"])), escapeHtml(cell(st["collectives"])), st.value("others_waited_ms", 0.0));
  }
  out += "</section>\n";
}

// Steps: the slowest rank of each.
void stepsSection(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  out += "<section id=\"steps\"><h2>Steps: the slowest rank of each</h2>\n";
  if (!m["steps"].is_object()) {
    out +=
        "<p>No steps: the ranks were not profiled (--profile), or the program does not call "
        "opscope_step().</p>\n";
  } else {
    const json& s = m["steps"];
    out += "<div class=\"tiles\">";
    for (const auto& [rank, n] : s["slowest_counts"].items())
      fmt::format_to(
          it,
          "<div class=\"tile\"><div class=\"v\">{}</div><div class=\"l\">steps where rank {} was the "
          "slowest</div></div>",
          n.get<std::int64_t>(), escapeHtml(rank));
    out +=
        "</div>\n<table><thead><tr><th>step</th><th>slowest rank</th><th>slowest ms</th><th>fastest ms</th>"
        "<th>spread</th></tr></thead><tbody>\n";
    std::size_t shown = 0;
    for (const json& row : s["rows"]) {
      if (++shown > 1000) break;
      const double slow = row.value("slowest_ms", 0.0), fast = row.value("fastest_ms", 0.0);
      fmt::format_to(it, "<tr><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.1f}%</td></tr>\n",
                     escapeHtml(cell(row["step"])), escapeHtml(cell(row["slowest_rank"])), slow, fast,
                     fast > 0 ? 100.0 * (slow - fast) / fast : 0.0);
    }
    out += "</tbody></table>\n";
  }
  out += "</section>\n";
}

// Collectives checked across ranks (from their capture.db).
void collectivesSection(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  out += "<section id=\"collectives\"><h2>Collectives checked across ranks</h2>\n";
  if (const json& c = m["collectives_check"]; c.is_object() && c.contains("transfers")) {
    const std::int64_t bad = c.value("mismatching", std::int64_t{0});
    fmt::format_to(
        it,
        "<div class=\"banner {}\"><div class=\"headline\">{} of {} transfer(s) checked, {} mismatching</div>"
        "<div>From the capture.db of ranks {}: what each rank received against the reduction (in float64) or "
        "the copy of what the ranks sent; {} by contents, {} by statistics (checksums and NaN counts: a "
        "statistics-only capture).</div>"
        "</div>\n",
        bad > 0 ? "bad" : "good", escapeHtml(cell(c["checked"])), escapeHtml(cell(c["transfers"])), bad,
        escapeHtml(c["ranks_with_collectives"].dump()), escapeHtml(cell(c["by_contents"])),
        escapeHtml(cell(c["by_statistics"])));
    if (!c["mismatches"].empty()) {
      out +=
          "<table><thead><tr><th>comm</th><th>collective</th><th>seq</th><th>rank</th><th>what</th></tr>"
          "</thead><tbody>\n";
      for (const json& x : c["mismatches"])
        fmt::format_to(it, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"bad\">{}</td></tr>\n",
                       escapeHtml(cell(x["comm"])), escapeHtml(cell(x["collective"])),
                       escapeHtml(cell(x["seq"])), escapeHtml(cell(x["rank"])), escapeHtml(cell(x["what"])));
      out += "</tbody></table>\n";
      if (c.value("mismatches_left_out", 0) > 0)
        fmt::format_to(it, "<p>… and {} more.</p>\n", escapeHtml(cell(c["mismatches_left_out"])));
    }
    if (!c["not_checked"].empty()) {
      out += "<p>Not checked:</p><ul>\n";
      for (const auto& [reason, n] : c["not_checked"].items())
        fmt::format_to(it, "<li>{} {}</li>\n", escapeHtml(cell(n)), escapeHtml(reason));
      out += "</ul>\n";
    }
  } else {
    out += "<p>No rank captured its collectives: run with --capture.</p>\n";
  }
  out += "</section>\n";
}

// Flight recorder: the dumps read together.
void recorderSection(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  out += "<section id=\"recorder\"><h2>Flight recorder</h2>\n";
  if (const json& f = m["flight_recorder"]; f.is_object()) {
    fmt::format_to(it,
                   "<div class=\"banner {}\"><div class=\"headline\">{}</div><div>The dumps of ranks {} read "
                   "together (<code>opscope analyze FOLDER</code> prints the details).</div></div>\n",
                   f["verdict"].empty() ? "good" : "bad",
                   f["verdict"].empty() ? "No hang, failure or mismatch in the dumps"
                                        : escapeHtml(fmt::format("{} finding(s)", f["verdict"].size())),
                   escapeHtml(f["dumps"].dump()));
    if (!f["verdict"].empty()) {
      out += "<ul>\n";
      for (const json& v : f["verdict"])
        fmt::format_to(it, "<li>{}</li>\n", escapeHtml(v.get<std::string>()));
      out += "</ul>\n";
    }
  } else {
    out += "<p>No rank wrote a flight recorder dump (OP_FLIGHT_RECORDER=0, or no collectives).</p>\n";
  }
  out += "</section>\n";
}

// The merged trace.
void traceSection(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  out += "<section id=\"trace\"><h2>Merged trace</h2>\n";
  if (m["trace"].is_object()) {
    fmt::format_to(
        it,
        "<p><code>{}</code>: {} events, a process per rank's host and device, {} collective flow(s) "
        "joining the ranks' transfers. Clocks: {}. Open it in chrome://tracing or ui.perfetto.dev.</p>\n",
        escapeHtml(m["trace"].value("file", "")), escapeHtml(cell(m["trace"]["events"])),
        escapeHtml(cell(m["trace"]["flows"])), escapeHtml(m["trace"].value("clock", "")));
  } else {
    out += "<p>No trace: run with --profile.</p>\n";
  }
  out += "</section>\n";
}

// Warnings, when there are any.
void warningsSection(const json& m, std::string& out) {
  auto it = std::back_inserter(out);
  if (!m["warnings"].empty()) {
    out += "<section id=\"warnings\"><h2>Warnings</h2><ul>\n";
    for (const json& w : m["warnings"])
      fmt::format_to(it, "<li>{}</li>\n", escapeHtml(w.is_string() ? w.get<std::string>() : w.dump()));
    out += "</ul></section>\n";
  }
}

}  // namespace

std::string renderRanksHtml(const json& m) {
  std::string out;
  for (const auto section : {ranksPageHead, ranksSection, stepsSection, collectivesSection, recorderSection,
                             traceSection, warningsSection})
    section(m, out);
  out += "</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace opscope::report
