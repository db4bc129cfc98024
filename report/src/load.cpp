// Reads a result directory into the report's model (report.h describes it).
#include "device_time.h"

#include <opscope/gunzip.h>
#include <opscope/report/report.h>
#include <opscope/results/format_version.h>
#include <opscope/results/memcheck_file.h>
#include <opscope/results/run_file.h>
#include <opscope/results/trace_file.h>
#include <opscope/rundb/recover.h>
#include <opscope/text.h>

#include <opscope/results/capture_db.h>
#include <opscope/results/csv.h>
#include <opscope/results/json_input.h>
#include <opscope/results/trace_reader.h>

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

namespace fs = std::filesystem;
using nlohmann::json;

namespace opscope::report {

using results::CaptureDb;
using results::checkReadable;
using results::CsvReader;
using results::integer;
using results::readJsonFile;
using results::readTrace;
using results::TraceCallbacks;

namespace {

using results::kDevicePidBase;

double number(const std::string& s) {
  if (s.empty()) return 0;
  try {
    return std::stod(s);
  } catch (const std::exception&) {
    return 0;  // "nan", "inf" are read by stod; anything else is not a number
  }
}

std::int64_t integer(const std::string& s) {
  try {
    return s.empty() ? 0 : std::stoll(s);
  } catch (const std::exception&) {
    return 0;
  }
}

// Size limits of the JSON files read whole (what opscope writes is far below them; its traces are read a
// line at a time, without a limit): their contracts'.
constexpr std::uintmax_t kMaxRunJsonBytes = results::kMaxRunFileBytes;
constexpr std::uintmax_t kMaxMemcheckJsonBytes = results::kMaxMemcheckFileBytes;

// The files of a run: which exist decide which tools were on when run.json does not say.
struct Files {
  fs::path dir;
  const Limits* limits;
  bool has(const char* name) const { return fs::exists(dir / name); }
  // The path of a file about to be read, said to the progress callback when it is large.
  fs::path reading(const std::string& name) const {
    const fs::path path = dir / name;
    checkReadable(path, UINTMAX_MAX);  // traces and CSVs are read a line at a time: no size limit
    std::error_code ec;
    const std::uintmax_t bytes = fs::file_size(path, ec);
    if (!ec && bytes > (64u << 20) && limits->progress) limits->progress(name, bytes);
    return path;
  }
  std::vector<std::string> traces() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      // trace.json, its segments, trace_step<N>.json, compressed or not; one the profiler did not finish
      // (the program was killed with SIGKILL) is still under its temporary name: read as far as it goes.
      if (results::isTraceFile(name)) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    // A killed run's trace repaired beside it (trace-check --repair): the repaired one only.
    const std::set<std::string> all(names.begin(), names.end());
    std::erase_if(names, [&](const std::string& name) {
      return results::finishedName(name) != name && all.count(std::string(results::finishedName(name))) != 0;
    });
    return names;
  }
};

// --- run --------------------------------------------------------------------------------------------------

// Tools run.json may name besides the ones the report knows, and how much of their findings it shows; the
// framework's ops that fell back to the CPU: rows and name length shown at most (as the hook writes).
using results::kMaxFindingBytes;
using results::kMaxFrameworkFallbacks;
using results::kMaxFrameworkOpName;
using results::kMaxToolName;
using results::kMaxTools;

// run.json's members into `run` and `tools`, each only when it has the type it should (a hand-edited or
// damaged file says so once); returns its findings. Without run.json, what the other files say of the run.
json readRunFile(const Files& files, json& run, json& tools, std::vector<std::string>& warnings) {
  json findings = json::object();
  if (files.has("run.json")) {
    try {
      const json r = readJsonFile(files.dir / "run.json", kMaxRunJsonBytes);
      if (const std::string e = results::formatVersionError("run.json", r, results::kRunFormatVersion);
          !e.empty())
        throw std::runtime_error(e + "; the run's details are left out");
      // Each member only when it has the type it should (a hand-edited or damaged file says so once).
      bool odd = !r.is_object();
      auto take = [&](const char* key, json::value_t type) {
        if (!r.is_object() || !r.contains(key) || r[key].is_null()) return;
        const bool number = type == json::value_t::number_integer || type == json::value_t::number_float;
        if (number ? r[key].is_number() : r[key].type() == type) {
          run[key] = r[key];
        } else {
          odd = true;
        }
      };
      for (const char* key : {"command", "start_time", "ended", "version"}) take(key, json::value_t::string);
      for (const char* key : {"pid", "rank", "duration_s"}) take(key, json::value_t::number_integer);
      take("options", json::value_t::object);
      if (r.is_object() && r.contains("tools") && r["tools"].is_object()) {
        // The tools this report knows, and any other a newer hook ran (bounded: a hostile file cannot
        // make the page long).
        for (const auto& [name, on] : r["tools"].items()) {
          if (!on.is_boolean()) continue;
          if (tools.contains(name) || (tools.size() < kMaxTools && name.size() <= kMaxToolName))
            tools[name] = on;
        }
      }
      // The result writes that failed during the run (a full disk): each said, so that no section is read
      // as whole when its file is missing or cut short.
      std::vector<std::string> write_errors;
      if (r.is_object() && r.contains("write_errors")) {
        if (!r["write_errors"].is_array()) odd = true;
        for (const auto& e : r["write_errors"].is_array() ? r["write_errors"] : json::array()) {
          if (!e.is_string()) {
            odd = true;
          } else if (write_errors.size() < 64) {
            write_errors.push_back("the run could not write all its results: " +
                                   e.get<std::string>().substr(0, 1000));
          }
        }
      }
      if (odd) warnings.push_back("run.json: some members are not what opscope writes; they are left out");
      warnings.insert(warnings.end(), write_errors.begin(), write_errors.end());
      if (r.is_object() && r.contains("findings") && r["findings"].is_object()) findings = r["findings"];
      if (run["ended"].is_null()) {
        warnings.push_back(
            "run.json: the run did not end normally (killed, or still running): some results may be missing");
      }
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
    }
  } else {
    // An older result directory, or one whose run.json was lost: what the other files say of the run.
    warnings.push_back("run.json: missing; the run's details are taken from the other files");
    if (files.has("memcheck.json")) {
      try {
        const json j = readJsonFile(files.dir / "memcheck.json", kMaxMemcheckJsonBytes);
        if (j.contains("command")) run["command"] = j["command"];
        if (j.contains("pid")) run["pid"] = j["pid"];
      } catch (const std::exception&) {
        // said by the memory section, which reads it again
      }
    }
  }
  return findings;
}

// The findings as the hook writes them: fallback {ops: [{op, forced, automatic}]}, overflow {ops, first?}.
void loadToolFindings(const json& findings, const json& tools, json& model,
                      std::vector<std::string>& warnings) {
  model["fallback"] = nullptr;
  model["overflow"] = nullptr;
  if (const auto fb = findings.find("fallback"); fb != findings.end()) {
    if (fb->is_object() && fb->contains("ops") && (*fb)["ops"].is_array()) {
      model["fallback"] = *fb;
    } else {
      warnings.push_back("run.json: findings.fallback is not {\"ops\": [...]}; left out");
    }
  }
  if (const auto ov = findings.find("overflow check"); ov != findings.end()) {
    if (ov->is_object()) {
      model["overflow"] = *ov;
    } else {
      warnings.push_back("run.json: findings[\"overflow check\"] is not an object; left out");
    }
  }
  if (tools.value("fallback", false) && model["fallback"].is_null())
    model["fallback"] = {{"ops", json::array()}};
}

// The framework's own CPU fallback (opscope_framework_fallback: torch_mlu's): {ops: [{op, calls}],
// other_calls}; rows that are not that are left out, and said. Null when the run has none.
json frameworkFallbackOf(const json& findings, std::vector<std::string>& warnings) {
  const auto ff = findings.find("framework fallback");
  if (ff == findings.end()) return nullptr;
  json ops = json::array();
  bool odd = !ff->is_object() || !ff->contains("ops") || !(*ff)["ops"].is_array();
  for (const json& row : odd ? json::array() : (*ff)["ops"]) {
    if (!row.is_object() || !row.contains("op") || !row["op"].is_string() || !row.contains("calls") ||
        !row["calls"].is_number_unsigned() || ops.size() >= kMaxFrameworkFallbacks) {
      odd = true;
      continue;
    }
    ops.push_back(
        {{"op", row["op"].get<std::string>().substr(0, kMaxFrameworkOpName)}, {"calls", row["calls"]}});
  }
  const json other = ff->is_object() ? ff->value("other_calls", json(0)) : json(0);
  const json section = {{"ops", ops}, {"other_calls", other.is_number_unsigned() ? other : json(0)}};
  if (odd)
    warnings.push_back(
        "run.json: some of findings[\"framework fallback\"] is not {\"ops\": [{\"op\", \"calls\"}]}; left "
        "out");
  return section;
}

// The program's regions (opscope.compare() and the others): {regions: [{label, tool, opened, calls,
// taken}], other_regions}; rows that are not that are left out, and said. Null when the run has none.
json regionsOf(const json& findings, std::vector<std::string>& warnings) {
  const auto rg = findings.find("regions");
  if (rg == findings.end()) return nullptr;
  json rows = json::array();
  bool odd = !rg->is_object() || !rg->contains("regions") || !(*rg)["regions"].is_array();
  for (const json& row : odd ? json::array() : (*rg)["regions"]) {
    const bool ok = row.is_object() && row.contains("label") && row["label"].is_string() &&
                    row.contains("tool") && row["tool"].is_string() && rows.size() < kMaxFrameworkFallbacks;
    bool counts = ok;
    for (const char* key : {"opened", "calls", "taken"})
      counts = counts && row.contains(key) && row[key].is_number_unsigned();
    if (!counts) {
      odd = true;
      continue;
    }
    rows.push_back({{"label", row["label"].get<std::string>().substr(0, kMaxFrameworkOpName)},
                    {"tool", row["tool"].get<std::string>().substr(0, kMaxToolName)},
                    {"opened", row["opened"]},
                    {"calls", row["calls"]},
                    {"taken", row["taken"]}});
  }
  const json other = rg->is_object() ? rg->value("other_regions", json(0)) : json(0);
  const json section = {{"regions", rows}, {"other_regions", other.is_number_unsigned() ? other : json(0)}};
  if (odd)
    warnings.push_back(
        "run.json: some of findings.regions is not {\"regions\": [{\"label\", \"tool\", "
        "\"opened\", \"calls\", \"taken\"}]}; left out");
  return section;
}

// The dtype cast (OP_DTYPE_CAST): {ops: [{op, from, to, calls}]}, the rows that are that (bounded, names
// cut short); null when the run has none.
json dtypeCastOf(const json& findings, std::vector<std::string>& warnings) {
  const auto dc = findings.find("dtype cast");
  if (dc == findings.end()) return nullptr;
  json ops = json::array();
  bool odd = !dc->is_object() || !dc->contains("ops") || !(*dc)["ops"].is_array();
  for (const json& row : odd ? json::array() : (*dc)["ops"]) {
    bool ok = row.is_object() && row.contains("calls") && row["calls"].is_number_unsigned() &&
              ops.size() < kMaxFrameworkFallbacks;
    for (const char* key : {"op", "from", "to"}) ok = ok && row.contains(key) && row[key].is_string();
    if (!ok) {
      odd = true;
      continue;
    }
    ops.push_back({{"op", row["op"].get<std::string>().substr(0, kMaxFrameworkOpName)},
                   {"from", row["from"].get<std::string>().substr(0, kMaxToolName)},
                   {"to", row["to"].get<std::string>().substr(0, kMaxToolName)},
                   {"calls", row["calls"]}});
  }
  if (odd)
    warnings.push_back(
        "run.json: some of findings[\"dtype cast\"] is not {\"ops\": [{\"op\", \"from\", \"to\", "
        "\"calls\"}]}; left out");
  return {{"ops", ops}};
}

// The perturbation check (OP_PERTURB): {checked, runs, flagged, first}; null when the run has none.
json perturbOf(const json& findings, std::vector<std::string>& warnings) {
  const auto pc = findings.find("perturbation check");
  if (pc == findings.end()) return nullptr;
  bool ok = pc->is_object();
  for (const char* key : {"checked", "runs", "flagged"})
    ok = ok && pc->contains(key) && (*pc)[key].is_number_unsigned();
  if (!ok) {
    warnings.push_back(
        "run.json: findings[\"perturbation check\"] is not {\"checked\", \"runs\", \"flagged\"}; left out");
    return nullptr;
  }
  json section = {{"checked", (*pc)["checked"]}, {"runs", (*pc)["runs"]}, {"flagged", (*pc)["flagged"]}};
  if (const auto first = pc->find("first"); first != pc->end() && first->is_string())
    section["first"] = first->get<std::string>().substr(0, kMaxFrameworkOpName);
  return section;
}

// What compare and capture sampled (OP_AUTOCOMPARE_SAMPLE, OP_CAPTURE_SAMPLE): {"compare": {sample, what,
// taken, skipped, steps[, signatures]}, "capture": ...}, the tools that sampled; null when neither did.
json samplingOf(const json& findings, std::vector<std::string>& warnings) {
  json section = json::object();
  for (const auto& [tool, key] : {std::pair{"autocompare", "compare"}, {"capture", "capture"}}) {
    const auto f = findings.find(tool);
    if (f == findings.end() || !f->is_object() || !f->contains("sampled")) continue;
    const json& s = (*f)["sampled"];
    bool ok = s.is_object();
    for (const char* n : {"taken", "skipped", "steps"}) ok = ok && s.contains(n) && s[n].is_number_unsigned();
    for (const char* n : {"sample", "what"}) ok = ok && s.contains(n) && s[n].is_string();
    if (!ok) {
      warnings.push_back(fmt::format(
          "run.json: findings[\"{}\"].sampled is not {{\"sample\", \"what\", \"taken\", \"skipped\", "
          "\"steps\"}}; left out",
          tool));
      continue;
    }
    json row = {{"sample", s["sample"].get<std::string>().substr(0, kMaxFrameworkOpName)},
                {"what", s["what"].get<std::string>().substr(0, kMaxFrameworkOpName)},
                {"taken", s["taken"]},
                {"skipped", s["skipped"]},
                {"steps", s["steps"]}};
    if (s.contains("signatures") && s["signatures"].is_number_unsigned()) row["signatures"] = s["signatures"];
    section[key] = row;
  }
  return section.empty() ? json() : section;
}

// The findings of tools this report has no section for, shown as they are (a new tool needs no report
// change to be seen): each a JSON value of bounded size.
json otherFindingsOf(const json& findings, std::vector<std::string>& warnings) {
  json other = json::object();
  for (const auto& [name, found] : findings.items()) {
    if (name == "fallback" || name == "overflow check" || name == "framework fallback" || name == "regions" ||
        found.is_null())
      continue;
    // What compare and capture sampled has its place (samplingOf); the rest of their findings are shown.
    json value = found;
    if ((name == "autocompare" || name == "capture") && value.is_object()) {
      value.erase("sampled");
      if (value.empty()) continue;
    }
    if (name.size() > kMaxToolName) {
      warnings.push_back(
          fmt::format("run.json: findings under a name over {} characters; left out", kMaxToolName));
      continue;
    }
    if (other.size() >= kMaxTools) {
      warnings.push_back(
          fmt::format("run.json: findings of more than {} tools; the rest are left out", kMaxTools));
      break;
    }
    std::string text = value.dump(1, ' ', false, json::error_handler_t::replace);
    if (text.size() > kMaxFindingBytes) {
      warnings.push_back(fmt::format("run.json: the findings of {} are over {} KiB; left out",
                                     name.substr(0, kMaxToolName), kMaxFindingBytes / 1024));
      continue;
    }
    other[name] = std::move(text);
  }
  return other;
}

void loadRunSection(const Files& files, json& model, std::vector<std::string>& warnings) {
  json run = {{"command", ""},         {"pid", nullptr},   {"rank", -1},         {"start_time", nullptr},
              {"duration_s", nullptr}, {"ended", nullptr}, {"version", nullptr}, {"options", json::object()}};
  json tools = {{"capture", files.has("capture.db")},
                {"compare", files.has("autocompare.csv")},
                {"profile", files.has("time_measure.csv")},
                {"memcheck", files.has("memcheck.json")},
                {"fallback", false},
                {"overflow", false}};
  const json findings = readRunFile(files, run, tools, warnings);
  model["run"] = run;
  model["tools"] = tools;
  loadToolFindings(findings, tools, model, warnings);
  model["framework_fallback"] = frameworkFallbackOf(findings, warnings);
  model["regions"] = regionsOf(findings, warnings);
  model["dtype_cast"] = dtypeCastOf(findings, warnings);
  model["perturb"] = perturbOf(findings, warnings);
  model["sampling"] = samplingOf(findings, warnings);
  model["other_findings"] = otherFindingsOf(findings, warnings);
}

// --- ops (profiler) ---------------------------------------------------------------------------------------

struct Span {
  double ts, dur;
  std::uint32_t name;
  std::uint32_t track;
};

// Per op, from a trace's op spans: what time_measure.csv would have said (for a run killed before writing
// it).
struct OpTotals {
  std::uint64_t calls = 0;  // host spans
  double host_ms = 0, device_ms = 0, device_max_ms = 0;
};

// Device spans, memory counters and device track names of one trace, and (op_totals not null) its op totals.
// Our writer puts one event per line; any other trace is parsed whole.

void readDeviceSpans(const fs::path& path, std::vector<Span>& spans,
                     std::map<std::pair<long, long>, std::uint32_t>& tracks,
                     std::unordered_map<std::string, std::uint32_t>& names,
                     std::vector<std::string>& name_list,
                     std::map<std::string, std::vector<std::pair<double, double>>>& counters,
                     std::map<std::pair<long, long>, std::string>& track_names,
                     std::map<std::string, OpTotals>* op_totals, DeviceTimeReader& device_time) {
  std::size_t bad = 0;  // events that are not JSON, or whose members have the wrong types
  // The device time analysis takes every event too: in the line format it reads each line itself and asks
  // for the few it cannot (pending: the line about to be parsed is one of them); a trace parsed whole is
  // handed over event by event.
  bool line_format = false, pending = false;
  // A member of the type it should have, or nothing.
  auto numberOf = [](const json& e, const char* key) -> std::optional<double> {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  // An id (pid, tid) as a whole number; 0 when missing, and nothing when it is not one a long can hold (a
  // double out of that range converted to long is undefined behaviour: found by fuzz_result_json).
  auto idOf = [&](const json& e, const char* key) -> std::optional<long> {
    const std::optional<double> v = numberOf(e, key);
    if (!v) return 0L;
    if (!(*v >= -9.0e18 && *v <= 9.0e18)) return std::nullopt;  // NaN fails both
    return static_cast<long>(*v);
  };
  auto stringOf = [](const json& e, const char* key) -> std::string {
    const auto it = e.find(key);
    return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto take = [&](const json& e) {
    if (!line_format || pending) device_time.event(e);
    pending = false;
    if (!e.is_object()) {
      ++bad;
      return;
    }
    const std::string ph = stringOf(e, "ph");
    const std::optional<long> pid_or = idOf(e, "pid");
    if (!pid_or) {
      ++bad;
      return;
    }
    const long pid = *pid_or;
    const std::string cat = stringOf(e, "cat");
    if (op_totals != nullptr && ph == "X" && (cat == "mlu_op" || cat == "fallback")) {
      const auto dur = numberOf(e, "dur");
      if (!dur) {
        ++bad;
        return;
      }
      OpTotals& t = (*op_totals)[stringOf(e, "name")];
      if (pid < kDevicePidBase) {
        ++t.calls;
        t.host_ms += *dur / 1000.0;
      } else {
        t.device_ms += *dur / 1000.0;
        t.device_max_ms = std::max(t.device_max_ms, *dur / 1000.0);
      }
    }
    if (ph == "M" && pid >= kDevicePidBase && stringOf(e, "name") == "thread_name" && e.contains("args") &&
        e["args"].is_object()) {
      const std::optional<long> tid_or = idOf(e, "tid");
      std::string name = stringOf(e["args"], "name");
      if (tid_or && !name.empty() && name.size() <= 64) track_names[{pid, *tid_or}] = std::move(name);
      return;
    }
    if (ph == "X" && pid >= kDevicePidBase) {
      const auto ts = numberOf(e, "ts"), dur = numberOf(e, "dur");
      const std::optional<long> tid_or = idOf(e, "tid");
      if (!ts || !dur || !tid_or) {
        ++bad;
        return;
      }
      const long tid = *tid_or;
      const auto [track, inserted] =
          tracks.try_emplace({pid, tid}, static_cast<std::uint32_t>(tracks.size()));
      (void)inserted;
      std::string name = stringOf(e, "name");
      if (name.empty()) name.push_back('?');  // missing, not a string, or empty
      auto [it, added] = names.try_emplace(name, static_cast<std::uint32_t>(name_list.size()));
      if (added) name_list.push_back(name);
      spans.push_back({*ts, *dur, it->second, track->second});
    } else if (ph == "C" && stringOf(e, "name") == "device memory" && e.contains("args") &&
               e["args"].is_object()) {
      const auto ts = numberOf(e, "ts"), bytes = numberOf(e["args"], "bytes");
      if (!ts || !bytes) {
        ++bad;
        return;
      }
      counters[fmt::format("MLU {}", pid - kDevicePidBase)].emplace_back(*ts / 1000.0, *bytes);
    }
  };
  // Most lines of the profiler's are host spans and flows: skipped before parsing (a run of a million ops
  // has millions). Host spans only for the op totals, and only op spans among them.
  auto wanted = [&](std::string_view line) {
    line_format = true;
    pending = device_time.line(line);
    if (pending) return true;
    const auto ph = line.find("\"ph\":\"");
    if (ph == std::string_view::npos || ph + 6 >= line.size()) return false;
    const char phase = line[ph + 6];
    if (phase != 'X' && phase != 'C' && phase != 'M') return false;
    const bool host_op = op_totals != nullptr && phase == 'X' &&
                         (line.find("\"cat\":\"mlu_op\"") != std::string_view::npos ||
                          line.find("\"cat\":\"fallback\"") != std::string_view::npos);
    if (phase == 'X' && !host_op) {
      const auto pid_at = line.find("\"pid\":");
      long pid = 0;
      if (pid_at != std::string_view::npos)
        std::from_chars(line.data() + pid_at + 6, line.data() + line.size(), pid);
      if (pid < kDevicePidBase) return false;
    }
    return true;
  };
  bad += readTrace(path, TraceCallbacks{[&](json& e) { take(e); }, {}, wanted});
  if (bad > 0)
    throw std::runtime_error(fmt::format("{}: {} malformed events skipped", path.filename().string(), bad));
}

// Thins a series to about `limit` points, keeping each bucket's lowest and highest value (so peaks stay).
json thinSeries(const std::vector<std::pair<double, double>>& points, std::size_t limit) {
  json out = json::array();
  if (points.size() <= limit || limit < 4) {
    for (const auto& [t, v] : points) out.push_back({t, v});
    return out;
  }
  const std::size_t buckets = limit / 2;
  const double per = static_cast<double>(points.size()) / static_cast<double>(buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    const auto begin = static_cast<std::size_t>(static_cast<double>(b) * per);
    const auto end = std::min(points.size(), static_cast<std::size_t>(static_cast<double>(b + 1) * per));
    if (begin >= end) continue;
    std::size_t lo = begin, hi = begin;
    for (std::size_t i = begin; i < end; ++i) {
      if (points[i].second < points[lo].second) lo = i;
      if (points[i].second > points[hi].second) hi = i;
    }
    for (std::size_t i : {std::min(lo, hi), std::max(lo, hi)}) {
      out.push_back({points[i].first, points[i].second});
      if (lo == hi) break;
    }
  }
  return out;
}

// An op's figures, or one input signature's of it: calls, and the device and host time of the calls after
// warm-up (warm-up is the first call of each op and input shapes: it pays for first-touch memory, thread
// start and caches, so that one slow first call does not make an op look slow).
struct OpLine {
  std::uint64_t calls = 0;  // all, warm-up included
  std::uint64_t warmup_calls = 0;
  double device_ms = 0, device_max_ms = 0, host_ms = 0;  // after warm-up
  double warmup_device_ms = 0, warmup_host_ms = 0;
  void add(const OpLine& o) {
    calls += o.calls;
    warmup_calls += o.warmup_calls;
    device_ms += o.device_ms;
    device_max_ms = std::max(device_max_ms, o.device_max_ms);
    host_ms += o.host_ms;
    warmup_device_ms += o.warmup_device_ms;
    warmup_host_ms += o.warmup_host_ms;
  }
  json toJson(double device_total) const {
    const std::uint64_t steady = calls - warmup_calls;
    return {{"calls", calls},
            {"warmup_calls", warmup_calls},
            {"device_total_ms", device_ms},
            {"device_mean_ms", steady > 0 ? device_ms / static_cast<double>(steady) : 0.0},
            {"device_max_ms", device_max_ms},
            {"host_total_ms", host_ms},
            {"host_mean_ms", steady > 0 ? host_ms / static_cast<double>(steady) : 0.0},
            {"warmup_device_ms", warmup_device_ms},
            {"warmup_host_ms", warmup_host_ms},
            {"share", device_total > 0 ? 100.0 * device_ms / device_total : 0.0}};
  }
};

// Input signatures told apart per op, over all ops: past this, a new signature's calls count under
// kOtherShapes (a hostile time_measure.csv of a million distinct shapes would otherwise fill memory).
constexpr std::size_t kMaxSignatures = 100000;
constexpr const char* kOtherShapes = "(other shapes)";
constexpr const char* kOtherNames = "(other names)";

// A row of the views by framework op and by module: the library calls made in it.
struct ViewLine {
  std::uint64_t calls = 0;
  double device_ms = 0;
  double host_ms = 0;
};
constexpr std::size_t kMaxShapesText = 1024;

void loadOps(const Files& files, const Limits& limits, json& model, std::vector<std::string>& warnings,
             std::map<std::string, std::vector<std::pair<double, double>>>& counters) {
  std::map<std::string, std::map<std::string, OpLine>> ops;  // name -> input shapes -> figures
  std::map<std::string, ViewLine> by_framework_op, by_module;
  std::uint64_t calls = 0;
  json section = {{"calls", 0},
                  {"device_ms", 0.0},
                  {"host_ms", 0.0},
                  {"table", json::array()},
                  {"traces", files.traces()},
                  {"timeline", nullptr}};
  // The trace(s): the timeline of the device queues, and the op totals when time_measure.csv is missing
  // (a run killed before writing it).
  std::vector<Span> spans;
  std::map<std::pair<long, long>, std::uint32_t> tracks;
  std::map<std::pair<long, long>, std::string> track_names;
  std::unordered_map<std::string, std::uint32_t> names;
  std::vector<std::string> name_list;
  std::map<std::string, OpTotals> op_totals;
  const bool has_csv = files.has("time_measure.csv");
  DeviceTimeReader device_time;
  std::string trace_error;  // why the last trace that could not be read could not be
  std::size_t traces_read = 0;
  for (const json& trace : section["traces"]) {
    if (trace.get<std::string>().ends_with(".tmp")) {
      warnings.push_back(
          fmt::format("{}: the trace was not finished (the program was killed, or a write failed); read as "
                      "far as it goes",
                      trace.get<std::string>()));
    }
    try {
      readDeviceSpans(files.reading(trace.get<std::string>()), spans, tracks, names, name_list, counters,
                      track_names, has_csv ? nullptr : &op_totals, device_time);
      ++traces_read;
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
      trace_error = e.what();
    }
  }
  if (has_csv) {
    try {
      CsvReader csv(files.reading("time_measure.csv"), {"name", "host_ms", "device_ms"});
      const std::size_t name = csv.column("name"), host = csv.column("host_ms"),
                        device = csv.column("device_ms");
      const std::optional<std::size_t> shapes = csv.optionalColumn("shapes");
      const std::optional<std::size_t> framework = csv.optionalColumn("framework_op");
      const std::optional<std::size_t> module = csv.optionalColumn("module");
      std::size_t signatures = 0;
      // Rows are in call order (the profiler writes them by seq): the first row of a signature is its
      // warm-up call.
      csv.forEach([&](const std::vector<std::string>& f) {
        auto& by_shapes = ops[f[name]];
        // At most kMaxShapesText bytes of it (a hostile file's field may be huge).
        const std::string signature = shapes ? f[*shapes].substr(0, kMaxShapesText) : std::string();
        auto it = by_shapes.find(signature);
        if (it == by_shapes.end()) {
          const bool room = signatures < kMaxSignatures;
          signatures += room;
          it = by_shapes.try_emplace(room ? signature : kOtherShapes).first;
        }
        OpLine& l = it->second;
        const double d = number(f[device]), h = number(f[host]);
        // The program's views (a framework's: PyTorch ops, modules), bounded as the signatures are.
        auto addTo = [&](std::map<std::string, ViewLine>& view, const std::optional<std::size_t>& column) {
          if (!column || f[*column].empty()) return;
          std::string key = f[*column].substr(0, kMaxShapesText);
          auto v = view.find(key);
          if (v == view.end()) v = view.try_emplace(view.size() < kMaxSignatures ? key : kOtherNames).first;
          ++v->second.calls;
          v->second.device_ms += d;
          v->second.host_ms += h;
        };
        addTo(by_framework_op, framework);
        addTo(by_module, module);
        ++calls;
        if (l.calls++ == 0 && it->first != kOtherShapes) {
          ++l.warmup_calls;
          l.warmup_device_ms += d;
          l.warmup_host_ms += h;
        } else {
          l.device_ms += d;
          l.device_max_ms = std::max(l.device_max_ms, d);
          l.host_ms += h;
        }
      });
      if (csv.malformed() > 0)
        warnings.push_back(fmt::format("time_measure.csv: {} malformed rows skipped", csv.malformed()));
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
      section["unreadable"] = e.what();  // the figures are unknown, not zero
    }
  } else if (!op_totals.empty()) {
    for (const auto& [name, t] : op_totals) {
      OpLine& l = ops[name][""];  // the trace's spans give no warm-up split here
      l.calls = t.calls;
      l.device_ms = t.device_ms;
      l.device_max_ms = t.device_max_ms;
      l.host_ms = t.host_ms;
      calls += t.calls;
    }
    warnings.push_back(
        "time_measure.csv: missing (the run did not finish); the op table is made from the op "
        "spans in the trace");
    section["from_trace"] = true;
  } else {
    warnings.push_back("time_measure.csv: missing");
    // Neither the table nor a trace that could be read: how many ops ran, and how long, is unknown (a
    // trace read to its end without an op span is a run that made none).
    if (traces_read == 0) {
      section["unreadable"] =
          trace_error.empty()
              ? std::string("time_measure.csv and the trace are missing")
              : fmt::format("time_measure.csv is missing and the trace cannot be read: {}", trace_error);
    }
  }
  // Sorted by device time after warm-up, then by warm-up device time (an op called once is all warm-up).
  auto slower = [](const auto& a, const auto& b) {
    if (a.second.device_ms != b.second.device_ms) return a.second.device_ms > b.second.device_ms;
    if (a.second.warmup_device_ms != b.second.warmup_device_ms)
      return a.second.warmup_device_ms > b.second.warmup_device_ms;
    return a.first < b.first;
  };
  OpLine all;
  std::vector<std::pair<std::string, OpLine>> lines;
  for (const auto& [name, by_shapes] : ops) {
    OpLine l;
    for (const auto& [shapes, s] : by_shapes) l.add(s);
    all.add(l);
    lines.emplace_back(name, l);
  }
  std::sort(lines.begin(), lines.end(), slower);
  for (const auto& [name, l] : lines) {
    json row = l.toJson(all.device_ms);
    row["name"] = name;
    // Per input signature (PyTorch's group_by_input_shape), slowest first, when the op had more than one.
    const auto& by_shapes = ops[name];
    if (by_shapes.size() > 1 || (by_shapes.size() == 1 && !by_shapes.begin()->first.empty())) {
      std::vector<std::pair<std::string, OpLine>> shapes(by_shapes.begin(), by_shapes.end());
      std::sort(shapes.begin(), shapes.end(), slower);
      json list = json::array();
      OpLine rest;
      std::size_t rest_count = 0;
      for (const auto& [signature, s] : shapes) {
        if (list.size() < limits.shapes_per_op) {
          json entry = s.toJson(all.device_ms);
          entry["shapes"] = signature;
          list.push_back(std::move(entry));
        } else {
          rest.add(s);
          ++rest_count;
        }
      }
      if (rest_count > 0) {
        json entry = rest.toJson(all.device_ms);
        entry["shapes"] = fmt::format("({} more input shapes)", rest_count);
        list.push_back(std::move(entry));
      }
      row["shapes"] = std::move(list);
      row["shape_count"] = shapes.size();
    }
    section["table"].push_back(std::move(row));
  }
  // By the program's framework op (the outermost around each call) and by module, most device time first.
  const double device_all = all.device_ms + all.warmup_device_ms;
  for (const auto& [key, view] :
       {std::pair{"by_framework_op", &by_framework_op}, {"by_module", &by_module}}) {
    std::vector<std::pair<std::string, ViewLine>> rows(view->begin(), view->end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return a.second.device_ms != b.second.device_ms ? a.second.device_ms > b.second.device_ms
                                                      : a.first < b.first;
    });
    json list = json::array();
    for (const auto& [name, v] : rows) {
      if (list.size() == limits.view_rows) break;
      list.push_back({{"name", name},
                      {"calls", v.calls},
                      {"device_ms", v.device_ms},
                      {"host_ms", v.host_ms},
                      {"share", device_all > 0 ? 100.0 * v.device_ms / device_all : 0.0}});
    }
    section[key] = std::move(list);
    section[std::string(key) + "_total"] = rows.size();
  }
  section["calls"] = calls;
  section["device_ms"] = all.device_ms + all.warmup_device_ms;
  section["host_ms"] = all.host_ms + all.warmup_host_ms;
  section["warmup"] = {
      {"calls", all.warmup_calls}, {"device_ms", all.warmup_device_ms}, {"host_ms", all.warmup_host_ms}};

  if (!spans.empty() || !tracks.empty()) {
    const std::size_t total = spans.size();
    if (spans.size() > limits.timeline_spans) {
      // The longest spans are the ones an overview can show.
      std::nth_element(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(limits.timeline_spans),
                       spans.end(), [](const Span& a, const Span& b) { return a.dur > b.dur; });
      spans.resize(limits.timeline_spans);
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ts < b.ts; });
    double start = spans.empty() ? 0 : spans.front().ts, end = start;
    for (const Span& s : spans) end = std::max(end, s.ts + s.dur);
    json track_list = json::array();
    std::vector<std::uint32_t> index(tracks.size());
    for (const auto& [key, i] : tracks) {
      index[i] = static_cast<std::uint32_t>(track_list.size());
      const auto named = track_names.find(key);  // "queue 7", "opscope memcheck"
      track_list.push_back(
          {{"name",
            fmt::format("MLU {} {}", key.first - kDevicePidBase,
                        named != track_names.end() ? named->second : fmt::format("queue {}", key.second))},
           {"spans", json::array()}});
    }
    for (const Span& s : spans) track_list[index[s.track]]["spans"].push_back({s.ts, s.dur, s.name});
    section["timeline"] = {{"start_us", start},           {"end_us", end},      {"spans_total", total},
                           {"spans_shown", spans.size()}, {"names", name_list}, {"tracks", track_list}};
  }
  // Where the device time went: busy and idle by cause, the critical path of each step (device_time.h).
  section["device_time"] = device_time.finish(warnings);
  model["ops"] = section;
}

// --- accuracy (auto-compare) ------------------------------------------------------------------------------

// What the run database kept of the calls auto-compare failed, by seq: each captured op's op_id, for the
// op-replay command of a failure, the program's framework op it ran in (capture.db schema 3:
// ops.framework_op; an older file has none) and where the program called it (schema 4).
struct FailedCalls {
  std::unordered_map<std::uint64_t, std::int64_t> op_ids;
  std::unordered_map<std::uint64_t, std::string> framework_ops;
  std::unordered_map<std::uint64_t, std::string> sites;
};

FailedCalls failedCallsOf(const Files& files, std::vector<std::string>& warnings) {
  FailedCalls out;
  auto& op_ids = out.op_ids;
  auto& framework_ops = out.framework_ops;
  auto& sites = out.sites;
  if (files.has("capture.db")) {
    try {
      CaptureDb db(files.dir / "capture.db");
      const auto failing = [&](const char* columns) {
        return fmt::format(
            "SELECT {} FROM ops WHERE op_id IN (SELECT op_id FROM compare_results WHERE verdict != 'pass')",
            columns);
      };
      // Untrusted text, shown as text only, and at most 1,000 characters of it.
      const auto text = [](sqlite3_stmt* s, int column) {
        const unsigned char* t = sqlite3_column_text(s, column);
        return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t)).substr(0, 1000);
      };
      try {
        db.query(
            "SELECT o.seq, s.module, s.source, s.forward_op FROM ops o JOIN sites s ON s.site_id = "
            "o.site_id WHERE o.op_id IN (SELECT op_id FROM compare_results WHERE verdict != 'pass')",
            [&](sqlite3_stmt* s) {
              sites[static_cast<std::uint64_t>(sqlite3_column_int64(s, 0))] =
                  siteText(text(s, 1), text(s, 2), text(s, 3)).substr(0, 1000);
            });
      } catch (const std::exception&) {  // a capture.db of schema 3 or before has no sites
        sites.clear();
      }
      try {
        db.query(failing("seq, op_id, framework_op"), [&](sqlite3_stmt* s) {
          const auto seq = static_cast<std::uint64_t>(sqlite3_column_int64(s, 0));
          op_ids[seq] = sqlite3_column_int64(s, 1);
          // Untrusted text, shown as text only, and at most 1,000 characters of it.
          if (const unsigned char* text = sqlite3_column_text(s, 2); text != nullptr)
            framework_ops[seq] = std::string(reinterpret_cast<const char*>(text)).substr(0, 1000);
        });
      } catch (const std::exception&) {  // a capture.db of schema 1 or 2
        op_ids.clear();
        db.query(failing("seq, op_id"), [&](sqlite3_stmt* s) {
          op_ids[static_cast<std::uint64_t>(sqlite3_column_int64(s, 0))] = sqlite3_column_int64(s, 1);
        });
      }
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
    }
  }
  return out;
}

void loadAccuracy(const Files& files, const Limits& limits, json& model, std::vector<std::string>& warnings) {
  if (!files.has("autocompare.csv")) {
    warnings.push_back("autocompare.csv: missing");
    model["accuracy"] = {
        {"ops_compared", 0},        {"tensors", 0},    {"ops_passed", 0},      {"ops_failed", 0},
        {"first_failure", nullptr}, {"rows_total", 0}, {"rows", json::array()}};
    return;
  }
  const FailedCalls failed = failedCallsOf(files, warnings);
  const auto& op_ids = failed.op_ids;
  const auto& framework_ops = failed.framework_ops;
  const auto& sites = failed.sites;
  // The rows kept for the page: failures first, then passes, each in the order the ops ran, at most
  // limits.compare_rows of all. Only those are kept in memory (a run may compare millions of tensors).
  struct Row {
    std::uint64_t seq;
    std::vector<std::string> fields;
  };
  struct Kept {
    std::vector<Row> rows;
    std::uint64_t cutoff = UINT64_MAX;  // once trimmed: rows after this seq cannot be among the first
  };
  Kept failures, passes;
  const std::size_t keep = limits.compare_rows;
  auto add = [keep](Kept& k, std::uint64_t seq, const std::vector<std::string>& fields) {
    if (seq > k.cutoff) return;
    k.rows.push_back({seq, fields});
    if (k.rows.size() >= 2 * keep + 64) {  // trim to the first `keep` by seq now and then
      std::stable_sort(k.rows.begin(), k.rows.end(),
                       [](const Row& a, const Row& b) { return a.seq < b.seq; });
      k.rows.resize(keep);
      k.cutoff = keep > 0 ? k.rows.back().seq : 0;
    }
  };
  std::unordered_map<std::uint64_t, bool> op_pass;  // seq -> every tensor passed
  std::size_t tensors = 0, failed_tensors = 0;
  const std::vector<std::string> numbers = {"max_abs_diff",   "max_rel_diff", "mae",   "cosine",
                                            "mismatch_ratio", "diff1",        "diff2", "diff3",
                                            "atol",           "rtol"};
  const std::vector<std::string> counts = {"dev_nan", "ref_nan", "dev_inf", "ref_inf"};
  // Columns an older autocompare.csv lacks: the op's class and the ULPs (compare/op_class.h, metrics.h).
  std::optional<std::size_t> class_col, max_ulp_col, mean_ulp_col;
  std::map<std::string, std::size_t> col;
  try {
    std::vector<std::string> needed = {"seq", "op", "tensor", "dtype", "shape", "allclose", "verdict"};
    needed.insert(needed.end(), numbers.begin(), numbers.end());
    CsvReader csv(files.reading("autocompare.csv"), needed);
    for (const auto& name : needed) col[name] = csv.column(name);
    for (const auto& name : counts) col[name] = csv.column(name);
    class_col = csv.optionalColumn("op_class");
    max_ulp_col = csv.optionalColumn("max_ulp");
    mean_ulp_col = csv.optionalColumn("mean_ulp");
    const std::size_t seq_col = col["seq"], verdict_col = col["verdict"];
    csv.forEach([&](const std::vector<std::string>& f) {
      const auto seq = static_cast<std::uint64_t>(integer(f[seq_col]));
      const bool pass = f[verdict_col] == "pass";
      ++tensors;
      auto [it, inserted] = op_pass.try_emplace(seq, true);
      it->second = it->second && pass;
      if (!pass) ++failed_tensors;
      add(pass ? passes : failures, seq, f);
    });
    if (csv.malformed() > 0)
      warnings.push_back(fmt::format("autocompare.csv: {} malformed rows skipped", csv.malformed()));
  } catch (const std::exception& e) {
    warnings.push_back(e.what());
  }
  std::size_t passed = 0;
  for (const auto& [seq, pass] : op_pass) passed += pass ? 1 : 0;
  for (Kept* k : {&failures, &passes}) {
    std::stable_sort(k->rows.begin(), k->rows.end(),
                     [](const Row& a, const Row& b) { return a.seq < b.seq; });
  }
  const std::string dir = shellQuote(files.dir.string());
  json list = json::array();
  json first = nullptr;
  for (const Kept* k : {&failures, &passes}) {
    for (const Row& r : k->rows) {
      if (list.size() >= keep) break;
      const auto& f = r.fields;
      const bool pass = k == &passes;
      json j = {{"seq", r.seq},
                {"op", f[col["op"]]},
                {"tensor", f[col["tensor"]]},
                {"dtype", f[col["dtype"]]},
                {"shape", f[col["shape"]]},
                {"verdict", f[col["verdict"]]},
                {"allclose", f[col["allclose"]] == "True"}};
      for (const auto& name : numbers) j[name] = number(f[col[name]]);
      for (const auto& name : counts) j[name] = col[name] < f.size() ? integer(f[col[name]]) : 0;
      j["op_class"] = class_col && *class_col < f.size() ? f[*class_col] : std::string();
      j["max_ulp"] = max_ulp_col && *max_ulp_col < f.size() ? json(number(f[*max_ulp_col])) : json();
      j["mean_ulp"] = mean_ulp_col && *mean_ulp_col < f.size() ? json(number(f[*mean_ulp_col])) : json();
      const auto framework = framework_ops.find(r.seq);
      j["framework_op"] = framework != framework_ops.end() ? framework->second : std::string();
      const auto site = sites.find(r.seq);
      j["site"] = site != sites.end() ? site->second : std::string();
      j["replay"] = nullptr;
      if (!pass) {
        // By the call's number, as the finding names it ("conv2d_backward_filter #34": --seq 34), when the
        // run database kept it.
        if (op_ids.contains(r.seq))
          j["replay"] = fmt::format("op-replay {} --seq {} --acc_check", dir, r.seq);
        if (first.is_null()) {
          first = {{"op", j["op"]},         {"seq", r.seq},
                   {"tensor", j["tensor"]}, {"framework_op", j["framework_op"]},
                   {"site", j["site"]},     {"replay", j["replay"]}};
        }
      }
      list.push_back(std::move(j));
    }
  }
  model["accuracy"] = {{"ops_compared", op_pass.size()},
                       {"tensors", tensors},
                       {"tensors_failed", failed_tensors},
                       {"ops_passed", passed},
                       {"ops_failed", op_pass.size() - passed},
                       {"first_failure", first},
                       {"rows_total", tensors},
                       {"rows", list}};
}

// --- memory (memcheck) ------------------------------------------------------------------------------------

// memcheck.json's steps (or piece_steps): [{step, place, peak, end}], untrusted. Per place: how many steps,
// what was in use at the end of the first and of the last, the highest peak and its step, and rows for the
// steps worth reading (the first two, the last, the highest peak, and the largest growths of what a step
// ends with), at most kStepRows, by step.
json stepsOf(const json& marks, bool& odd) {
  constexpr std::size_t kStepRows = 12;
  struct Row {
    std::uint64_t step, peak, end;
    std::int64_t growth;
  };
  std::map<std::string, std::vector<Row>> by_place;
  for (const json& mk : marks) {
    if (!mk.is_object() || !mk.contains("place") || !mk["place"].is_string()) {
      odd = true;
      continue;
    }
    std::uint64_t v[3];
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      const char* key = i == 0 ? "step" : i == 1 ? "peak" : "end";
      ok = ok && mk.contains(key) && mk[key].is_number_unsigned();
      v[i] = ok ? mk[key].get<std::uint64_t>() : 0;
    }
    const std::string place = mk["place"].get<std::string>().substr(0, 256);
    if (!ok || (!by_place.contains(place) && by_place.size() >= 64)) {  // (memcheck has a place a device)
      odd = true;
      continue;
    }
    auto& rows = by_place[place];
    const std::int64_t growth =
        rows.empty() ? 0 : static_cast<std::int64_t>(v[2]) - static_cast<std::int64_t>(rows.back().end);
    rows.push_back({v[0], v[1], v[2], growth});
  }
  json out = json::array();
  for (const auto& entry : by_place) {
    const std::string& place = entry.first;
    const std::vector<Row>& rows = entry.second;  // (not a structured binding: the lambdas below use it)
    if (rows.empty()) continue;
    std::size_t top = 0;
    for (std::size_t i = 1; i < rows.size(); ++i) {
      if (rows[i].peak > rows[top].peak) top = i;
    }
    std::set<std::size_t> keep = {0, rows.size() - 1, top};
    if (rows.size() > 1) keep.insert(1);
    std::vector<std::size_t> by_growth(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) by_growth[i] = i;
    std::stable_sort(by_growth.begin(), by_growth.end(), [&](std::size_t a, std::size_t b) {
      return std::llabs(rows[a].growth) > std::llabs(rows[b].growth);
    });
    for (std::size_t i : by_growth) {
      if (keep.size() >= kStepRows || rows[i].growth == 0) break;
      keep.insert(i);
    }
    json list = json::array();
    for (std::size_t i : keep) {
      list.push_back(
          {{"step", rows[i].step}, {"peak", rows[i].peak}, {"end", rows[i].end}, {"growth", rows[i].growth}});
    }
    out.push_back(
        {{"place", place},
         {"steps", rows.size()},
         {"first_end", rows.front().end},
         {"last_end", rows.back().end},
         {"growth", static_cast<std::int64_t>(rows.back().end) - static_cast<std::int64_t>(rows.front().end)},
         {"max_peak", rows[top].peak},
         {"max_peak_step", rows[top].step},
         {"rows", std::move(list)}});
  }
  return out;
}

// memory_snapshot.json (memcheck at an mlurtMalloc that found no room), untrusted: each member only when it
// has the shape memcheck writes, the live sites at most limits.leak_sites; null when it cannot be read.
json loadOomSnapshot(const Files& files, const Limits& limits, std::vector<std::string>& warnings) {
  const std::string name(results::kMemorySnapshotFile);
  try {
    const json s = readJsonFile(files.dir / name, kMaxMemcheckJsonBytes);
    if (const std::string e = results::formatVersionError(name, s, results::kMemorySnapshotFormatVersion);
        !e.empty())
      throw std::runtime_error(e);
    if (!s.is_object()) throw std::runtime_error(name + ": not an object");
    bool odd = false;
    auto counts = [&](const json& from, std::initializer_list<const char*> keys) {
      json out = json::object();
      for (const char* key : keys) {
        if (from.is_object() && from.contains(key) && from[key].is_number_unsigned()) {
          out[key] = from[key];
        } else {
          odd = true;
        }
      }
      return out;
    };
    auto frames = [&](const json& stack) {
      if (stack.is_array() &&
          std::all_of(stack.begin(), stack.end(), [](const json& f) { return f.is_object(); }))
        return stack;
      odd = true;
      return json::array();
    };
    const json& request = s.contains("failed_request") ? s["failed_request"] : json();
    json oom = {
        {"failed_request", counts(request, {"bytes"})},
        {"live_summary", counts(s.value("live_summary", json()), {"bytes", "allocations", "sites"})},
        {"program_allocator", counts(s.value("program_allocator", json()),
                                     {"segments", "segment_bytes", "pieces", "piece_bytes", "free_bytes"})},
        {"live", json::array()}};
    if (s.contains("failures") && s["failures"].is_number_unsigned()) oom["failures"] = s["failures"];
    if (request.is_object() && request.contains("place") && request["place"].is_string())
      oom["failed_request"]["place"] = request["place"];
    oom["failed_request"]["stack"] = frames(request.is_object() ? request.value("stack", json()) : json());
    if (s.contains("live") && s["live"].is_array()) {
      for (const json& site : s["live"]) {
        if (!site.is_object() || !site.contains("bytes") || !site["bytes"].is_number_unsigned()) {
          odd = true;
          continue;
        }
        if (oom["live"].size() >= limits.leak_sites) break;
        json entry = counts(site, {"bytes", "allocations"});
        if (site.contains("place") && site["place"].is_string()) entry["place"] = site["place"];
        entry["stack"] = frames(site.value("stack", json()));
        oom["live"].push_back(std::move(entry));
      }
    } else {
      odd = true;
    }
    if (odd) warnings.push_back(name + ": some members are not what memcheck writes; they are left out");
    return oom;
  } catch (const std::exception& e) {
    warnings.push_back(e.what());
    return nullptr;
  }
}

void loadMemory(const Files& files, const Limits& limits, json& model, std::vector<std::string>& warnings,
                const std::map<std::string, std::vector<std::pair<double, double>>>& counters) {
  json section = {{"leaked_bytes", 0},      {"leaked_allocations", 0}, {"leak_sites", 0},
                  {"errors_total", 0},      {"peaks", json::array()},  {"series", json::array()},
                  {"leaks", json::array()}, {"errors", json::array()}};
  try {
    const json m = readJsonFile(files.dir / "memcheck.json", kMaxMemcheckJsonBytes);
    if (const std::string e =
            results::formatVersionError("memcheck.json", m, results::kMemcheckFormatVersion);
        !e.empty())
      throw std::runtime_error(e);
    // Each member only when it has the shape memcheck writes (a damaged or hand-edited file says so once).
    bool odd = !m.is_object();
    const json& s = m.is_object() && m.contains("summary") ? m["summary"] : json();
    for (const auto& [from, to] : {std::pair{"leaked_bytes", "leaked_bytes"},
                                   {"leaked_allocations", "leaked_allocations"},
                                   {"leak_sites", "leak_sites"},
                                   {"errors", "errors_total"}}) {
      if (s.is_object() && s.contains(from) && s[from].is_number_unsigned()) {
        section[to] = s[from];
      } else {
        odd = true;
      }
    }
    // Entries are objects, and so is every frame of their backtraces.
    auto wellFormed = [](const json& entry) {
      if (!entry.is_object()) return false;
      for (const char* stack : {"stack", "free_stack", "allocation_stack"}) {
        if (!entry.contains(stack)) continue;
        const json& frames = entry[stack];
        if (!frames.is_array() || !std::all_of(frames.begin(), frames.end(), [](const json& f) {
              return f.is_object() && (!f.contains("inlined") || f["inlined"].is_boolean());
            })) {
          return false;
        }
      }
      return true;
    };
    for (const char* key : {"peaks", "leaks", "errors"}) {
      if (!m.is_object() || !m.contains(key)) continue;
      if (!m[key].is_array()) {
        odd = true;
        continue;
      }
      json list = json::array();
      for (const json& entry : m[key]) {
        if (!wellFormed(entry)) {
          odd = true;
        } else if (list.size() < limits.leak_sites) {
          list.push_back(entry);
        }
      }
      section[key] = list;
    }
    // The peak of a program allocator's pieces (PyTorch's tensors under torch_mlu), with the bytes each
    // module (or line outside every module) held then, the most first.
    if (m.is_object() && m.contains("piece_peaks")) {
      json list = json::array();
      if (!m["piece_peaks"].is_array()) odd = true;
      for (const json& pk : m["piece_peaks"].is_array() ? m["piece_peaks"] : json::array()) {
        if (!pk.is_object() || !pk.contains("bytes") || !pk["bytes"].is_number_unsigned() ||
            !pk.contains("place") || !pk["place"].is_string()) {
          odd = true;
          continue;
        }
        json entry = {{"place", pk["place"]}, {"bytes", pk["bytes"]}, {"modules", json::array()}};
        for (const char* key : {"op_seq", "op", "site"}) {
          if (pk.contains(key) && (pk[key].is_string() || pk[key].is_number_unsigned())) entry[key] = pk[key];
        }
        for (const json& mod : pk.value("modules", json::array())) {
          if (mod.is_object() && mod.contains("module") && mod["module"].is_string() &&
              mod.contains("bytes") && mod["bytes"].is_number_unsigned()) {
            if (entry["modules"].size() < 64)
              entry["modules"].push_back({{"module", mod["module"]}, {"bytes", mod["bytes"]}});
          } else {
            odd = true;
          }
        }
        if (list.size() < 64) list.push_back(std::move(entry));
      }
      section["piece_peaks"] = std::move(list);
    }
    // Per step (the steps the program marked): per place, the peak and growth over the run, and the steps
    // that stand out (the first and last, the largest growths, the highest peak), at most kStepRows of them.
    for (const char* key : {"steps", "piece_steps"}) {
      if (!m.is_object() || !m.contains(key)) continue;
      if (!m[key].is_array()) {
        odd = true;
        continue;
      }
      section[key] = stepsOf(m[key], odd);
    }
    // What a program that declared its end still held then (not leaks): memcheck.json of this version.
    for (const char* key : {"held_bytes", "held_allocations", "held_sites"}) {
      if (s.is_object() && s.contains(key) && s[key].is_number_unsigned()) section[key] = s[key];
    }
    if (odd)
      warnings.push_back("memcheck.json: some members are not what memcheck writes; they are left out");
  } catch (const std::exception& e) {
    // Missing or unreadable: the verdict is unknown, never "no leaks".
    warnings.push_back(e.what());
    section["unreadable"] = e.what();
  }
  // Memory in use over the run: memcheck's timeline, or else the profiler's counter.
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  if (files.has("memcheck_timeline.csv")) {
    try {
      CsvReader csv(files.reading("memcheck_timeline.csv"), {"time_ms", "place", "bytes"});
      const std::size_t t = csv.column("time_ms"), place = csv.column("place"), bytes = csv.column("bytes");
      csv.forEach([&](const std::vector<std::string>& f) {
        series[f[place]].emplace_back(number(f[t]), number(f[bytes]));
      });
    } catch (const std::exception& e) {
      warnings.push_back(e.what());
    }
  }
  if (series.empty()) series = counters;
  for (const auto& [place, points] : series) {
    section["series"].push_back({{"place", place}, {"points", thinSeries(points, limits.memory_points)}});
  }
  if (files.has(results::kMemorySnapshotFile.data()))
    section["oom"] = loadOomSnapshot(files, limits, warnings);
  model["memory"] = section;
}

// --- capture ----------------------------------------------------------------------------------------------

void loadCapture(const Files& files, json& model, std::vector<std::string>& warnings) {
  json section = {{"ops", 0},
                  {"tensors", 0},
                  {"bytes", 0},
                  {"stored_bytes", 0},
                  {"db", "capture.db"},
                  {"list_command", fmt::format("op-replay {} --list", shellQuote(files.dir.string()))}};
  try {
    if (!files.has("capture.db")) throw std::runtime_error("capture.db: missing");
    CaptureDb db(files.dir / "capture.db");
    db.query("SELECT count(*) FROM ops WHERE captured = 1",
             [&](sqlite3_stmt* s) { section["ops"] = sqlite3_column_int64(s, 0); });
    // tensor_refs, not the `tensors` view: only tables are read from an untrusted file.
    db.query("SELECT count(*), coalesce(sum(nbytes), 0) FROM tensor_refs", [&](sqlite3_stmt* s) {
      section["tensors"] = sqlite3_column_int64(s, 0);
      section["bytes"] = sqlite3_column_int64(s, 1);
    });
    db.query("SELECT coalesce(sum(length(data)), 0) FROM blobs",
             [&](sqlite3_stmt* s) { section["stored_bytes"] = sqlite3_column_int64(s, 0); });
    // OP_CAPTURE_MODE=stats (a capture.db older than it has no tensor_stats).
    bool has_stats = false;
    db.query("SELECT count(*) FROM sqlite_master WHERE name = 'tensor_stats' AND type = 'table'",
             [&](sqlite3_stmt* s) { has_stats = sqlite3_column_int64(s, 0) > 0; });
    if (has_stats) {
      json stats = {{"calls", 0}, {"tensors", 0}, {"first_nan", nullptr}};
      db.query("SELECT count(DISTINCT op_id), count(*) FROM tensor_stats", [&](sqlite3_stmt* s) {
        stats["calls"] = sqlite3_column_int64(s, 0);
        stats["tensors"] = sqlite3_column_int64(s, 1);
      });
      // The first call whose outputs hold a NaN or an Inf that its inputs did not hold and no scalar argument
      // asked for (a fill with -inf, as an attention mask), and the op-replay command when it was kept whole.
      db.query(
          "SELECT o.seq, o.name, o.op_id, o.captured FROM tensor_stats s JOIN ops o ON o.op_id = s.op_id "
          "WHERE s.role = 'output' AND (s.nan > 0 OR s.inf > 0) AND NOT EXISTS (SELECT 1 FROM tensor_stats i "
          "WHERE i.op_id = o.op_id AND i.role = 'input' AND (i.nan > 0 OR i.inf > 0)) AND NOT EXISTS (SELECT "
          "1 "
          "FROM scalars c WHERE c.op_id = o.op_id AND lower(c.value) IN ('inf', '-inf', '+inf', 'nan', "
          "'-nan')) "
          "ORDER BY o.seq LIMIT 1",
          [&](sqlite3_stmt* s) {
            const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
            json first = {{"seq", sqlite3_column_int64(s, 0)}, {"op", name != nullptr ? name : "?"}};
            if (sqlite3_column_int64(s, 3) != 0) {
              first["replay"] = fmt::format("op-replay {} --seq {} --acc_check",
                                            shellQuote(files.dir.string()), sqlite3_column_int64(s, 0));
            }
            stats["first_nan"] = std::move(first);
          });
      if (stats["calls"].get<std::int64_t>() > 0) section["stats"] = std::move(stats);
    }
  } catch (const std::exception& e) {
    warnings.push_back(e.what());
  }
  model["capture"] = section;
}

std::string nowIso() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace

// --- what next
// ----------------------------------------------------------------------------------------------

// The first frame with a source line (the program's, below the runtime's), or the first frame, as
// frameText gives it; empty without frames.
std::string siteOf(const json& stack) {
  if (!stack.is_array() || stack.empty()) return {};
  const json* best = &stack[0];
  for (const json& f : stack) {
    if (f.is_object() && f.contains("file") && f["file"].is_string()) {
      best = &f;
      break;
    }
  }
  return frameText(*best);
}

// Whether a name from the result files may go into a suggested shell command as it is.
bool plainName(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

// One suggestion per finding (model["next"], report.h): what to run or where to look.
json nextSteps(const json& model) {
  json next = json::array();
  auto add = [&](const char* about, std::string text, const std::string& command, const std::string& site) {
    json step = {{"about", about}, {"text", std::move(text)}};
    if (!command.empty()) step["command"] = command;
    if (!site.empty()) step["site"] = site;
    next.push_back(std::move(step));
  };
  const std::string dir = shellQuote(model.value("dir", std::string()));
  const json& run = model["run"];
  const std::string command = run.is_object() && run.contains("command") && run["command"].is_string()
                                  ? run["command"].get<std::string>()
                                  : std::string();
  const std::string program = command.empty() ? "PROGRAM" : command;
  if (const json& acc = model["accuracy"]; acc.is_object()) {
    for (const json& r : acc.value("rows", json::array())) {
      if (r.is_object() && r.contains("replay") && r["replay"].is_string()) {
        add("accuracy", "Reproduce the first failing op on its captured inputs, against the CPU reference:",
            r["replay"].get<std::string>(), "");
        break;
      }
    }
  }
  if (const json& cap = model["capture"];
      cap.is_object() && cap.contains("stats") && cap["stats"]["first_nan"].is_object()) {
    const json& first = cap["stats"]["first_nan"];
    const std::string where =
        fmt::format("{} #{}", first.value("op", std::string("?")), first.value("seq", 0));
    if (first.contains("replay")) {
      add("accuracy",
          fmt::format("The first call whose outputs hold a NaN or an Inf is {}; it was kept whole: re-run it",
                      where),
          first["replay"].get<std::string>(), "");
    } else {
      add("accuracy", fmt::format("The first call whose outputs hold a NaN or an Inf is {}", where), "", "");
    }
  }
  if (const json& ops = model["ops"]; ops.is_object() && !ops["table"].empty()) {
    const json& top = ops["table"][0];
    const std::string name = top.value("name", std::string());
    std::string others;
    for (const json& t : ops.value("alongside", json::array())) {
      if (!t.is_string()) continue;
      others += (others.empty() ? "" : ", ") + t.get<std::string>();
    }
    if (!others.empty()) {
      add("speed",
          fmt::format("These timings were taken while {} ran: their work around each op slows the device and "
                      "the host, so the ops' own speed is not what the table shows. Time them under the "
                      "profiler alone:",
                      others),
          "opscope run --profile -- " + program, "");
    } else if (plainName(name)) {
      std::string shapes;
      if (top.contains("shapes") && top["shapes"].is_array() && !top["shapes"].empty() &&
          top["shapes"][0].is_object())
        shapes = top["shapes"][0].value("shapes", std::string());
      const std::string what = fmt::format("The slowest op is {}{}.", name,
                                           shapes.empty() ? "" : " (slowest inputs: " + shapes + ")");
      if (model["capture"].is_object()) {
        add("speed", what + " Time its captured calls apart, on the device queue:",
            fmt::format("op-replay {} --name {} --run_times 20 --sync_time_measure", dir, name), "");
      } else {
        add("speed",
            what +
                " Capture it, then time its calls apart with op-replay (--run_times, --sync_time_measure):",
            fmt::format("opscope run --capture='^{}$' -- {}", name, program), "");
      }
    }
  }
  if (const json& mem = model["memory"]; mem.is_object() && !mem.contains("unreadable")) {
    const json& leaks = mem.value("leaks", json::array());
    // memcheck.json's entries as it was read (untrusted: members may have any type).
    auto count = [](const json& j, const char* key) -> std::uint64_t {
      return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<std::uint64_t>() : 0;
    };
    auto member = [](const json& j, const char* key) -> const json& {
      static const json kNull;
      return j.contains(key) ? j[key] : kNull;
    };
    const char* kNoStack = "(no backtrace: MEM_CHECK_ENABLE_BACKTRACE=1 records them)";
    const json* largest = nullptr;
    for (const json& l : leaks) {
      if (l.is_object() && (largest == nullptr || count(l, "bytes") > count(*largest, "bytes"))) largest = &l;
    }
    if (largest != nullptr) {
      const std::string site = siteOf(member(*largest, "stack"));
      add("memory",
          fmt::format("The largest leak ({} in {} allocations) was allocated at:",
                      humanBytes(count(*largest, "bytes")), count(*largest, "allocations")),
          "", site.empty() ? kNoStack : site);
    }
    for (const json& e : mem.value("errors", json::array())) {
      if (!e.is_object()) continue;
      const std::string site = siteOf(member(e, "stack"));
      const json& kind = member(e, "kind");
      add("memory",
          fmt::format("The first memory error ({}) is at:",
                      kind.is_string() ? kind.get<std::string>() : "error"),
          "", site.empty() ? kNoStack : site);
      break;
    }
  }
  return next;
}

json loadRun(const fs::path& given, const Limits& limits) {
  std::error_code ec;
  if (!fs::is_directory(given, ec)) throw ReportError(fmt::format("{}: not a directory", given.string()));
  fs::path dir = fs::absolute(given).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "DIR/" names DIR
  const Files files{dir, &limits};
  static constexpr const char* kKnown[] = {"run.json",         "capture.db", "autocompare.csv",
                                           "time_measure.csv", "trace.json", "memcheck.json"};
  if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* f) { return files.has(f); }) &&
      files.traces().empty()) {
    throw ReportError(
        fmt::format("{}: not an opscope result directory (none of run.json, capture.db, autocompare.csv, "
                    "time_measure.csv, "
                    "trace.json, memcheck.json is there)",
                    dir.string()));
  }
  json model;
  std::vector<std::string> warnings;
  model["dir"] = dir.string();
  model["generated"] = nowIso();
  model["opscope_version"] = OPSCOPE_VERSION;
  loadRunSection(files, model, warnings);
  const json& tools = model["tools"];
  std::map<std::string, std::vector<std::pair<double, double>>> counters;
  model["ops"] = nullptr;
  model["accuracy"] = nullptr;
  model["memory"] = nullptr;
  model["capture"] = nullptr;
  if (tools.value("profile", false)) loadOps(files, limits, model, warnings, counters);
  if (tools.value("compare", false)) loadAccuracy(files, limits, model, warnings);
  if (tools.value("memcheck", false)) loadMemory(files, limits, model, warnings, counters);
  // Without memcheck, the out-of-memory snapshot alone (OP_OOM_SNAPSHOT, on in `opscope run`).
  model["oom"] = nullptr;
  if (!tools.value("memcheck", false) && files.has(results::kMemorySnapshotFile.data()))
    model["oom"] = loadOomSnapshot(files, limits, warnings);
  if (tools.value("capture", false)) loadCapture(files, model, warnings);
  if (model["ops"].is_object()) {
    // The tools that ran beside the profiler: their work on each op (copies, references, checks, red
    // zones) is left out of the op spans but still slows the device and the host around them.
    json alongside = json::array();
    for (const char* tool : {"capture", "compare", "memcheck", "fallback", "overflow"}) {
      if (tools.value(tool, false)) alongside.push_back(tool);
    }
    model["ops"]["alongside"] = std::move(alongside);
  }
  model["next"] = nextSteps(model);
  model["warnings"] = warnings;
  return model;
}

}  // namespace opscope::report
