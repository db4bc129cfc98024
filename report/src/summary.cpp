// The report's findings as plain text (opscope summary DIR).
#include <opscope/report/report.h>
#include <opscope/results/run_file.h>
#include <opscope/text.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

using nlohmann::json;

namespace opscope::report {

namespace fs = std::filesystem;
namespace {

// A member of an object, or null when it is not there (the model may come from a damaged directory).
const json& at(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// A count from the model: 0 unless a whole number >= 0 (a float member of a hand-made file, 1e300 say,
// converted to an integer would be undefined behaviour).
std::uint64_t count(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0;
  const json& v = j[key];
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer())
    return v.get<std::int64_t>() > 0 ? static_cast<std::uint64_t>(v.get<std::int64_t>()) : 0;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return d >= 0 && d < 1.8e19 ? static_cast<std::uint64_t>(d) : 0;  // NaN fails both
  }
  return 0;
}

double real(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0;
}

std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

void notEnabled(std::string& out, const char* what, const char* how) {
  out += fmt::format("{}: not enabled for this run ({})\n", what, how);
}

// The run: its command, pid and rank, times, its end, the tools that were on and the warnings.
void renderRun(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  const json& run = at(model, "run");
  fmt::format_to(it, "opscope summary of {}\n", str(model, "dir"));
  std::string when = str(run, "start_time");
  if (run.contains("duration_s") && at(run, "duration_s").is_number()) {
    when += fmt::format(", {:.1f} s", at(run, "duration_s").get<double>());
  }
  fmt::format_to(
      it, "run: {} (pid {}{}), started {}, ended: {}\n", str(run, "command"),
      at(run, "pid").is_number_integer() ? std::to_string(at(run, "pid").get<std::int64_t>()) : "?",
      at(run, "rank").is_number_integer() && at(run, "rank").get<std::int64_t>() >= 0
          ? fmt::format(", rank {}", at(run, "rank").get<std::int64_t>())
          : "",
      when,
      run.contains("ended") && at(run, "ended").is_string() ? at(run, "ended").get<std::string>()
                                                            : "unknown");
  std::string on, off;
  for (const auto& [name, enabled] : at(model, "tools").items()) {
    std::string& list = enabled.get<bool>() ? on : off;
    if (!list.empty()) list += ", ";
    list += name;
  }
  fmt::format_to(it, "tools: {}{}\n", on.empty() ? "none" : on, off.empty() ? "" : " (off: " + off + ")");
  for (const json& w : at(model, "warnings")) fmt::format_to(it, "warning: {}\n", w.get<std::string>());
}

// The ops by device time, the first 15, with the slowest input shapes of the first five.
void renderOpTable(const json& ops, std::string& out) {
  auto it = std::back_inserter(out);
  const json& table = at(ops, "table");
  if (!table.empty()) {
    fmt::format_to(it, "  {:<34} {:>8} {:>14} {:>12} {:>12} {:>12} {:>8} {:>12}\n", "Name", "Calls",
                   "Device ms", "Mean ms", "Max ms", "Host ms", "Share", "Warm-up ms");
  }
  std::size_t shown = 0;
  for (const json& l : table) {
    if (shown++ == 15) {
      fmt::format_to(it, "  ... {} more ops (all in summary.txt)\n", table.size() - 15);
      break;
    }
    fmt::format_to(it, "  {:<34} {:>8} {:>14.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>7.2f}% {:>12.3f}\n",
                   str(l, "name"), count(l, "calls"), real(l, "device_total_ms"), real(l, "device_mean_ms"),
                   real(l, "device_max_ms"), real(l, "host_total_ms"), real(l, "share"),
                   real(l, "warmup_device_ms"));
    // The slowest ops by input shapes, when they had more than one (the page lists them all).
    const json& shapes = at(l, "shapes");
    if (shown <= 5 && shapes.is_array() && shapes.size() > 1) {
      std::size_t listed = 0;
      for (const json& s : shapes) {
        if (listed++ == 3) {
          fmt::format_to(it, "    - ... {} input shapes in all (report.html lists them)\n",
                         count(l, "shape_count"));
          break;
        }
        fmt::format_to(it, "    - {} calls, {:.3f} ms after warm-up (mean {:.3f} ms): {}\n",
                       count(s, "calls"), real(s, "device_total_ms"), real(s, "device_mean_ms"),
                       str(s, "shapes"));
      }
    }
  }
}

// The program's views (a framework's: PyTorch ops, modules), the ten with most device time each.
void renderProgramViews(const json& ops, std::string& out) {
  auto it = std::back_inserter(out);
  for (const auto& [key, title] :
       {std::pair{"by_framework_op", "By framework op"}, {"by_module", "By module"}}) {
    const json& view = at(ops, key);
    if (!view.is_array() || view.empty()) continue;
    fmt::format_to(it, "  {} (the library calls made in it):\n    {:<44} {:>8} {:>14} {:>12} {:>8}\n", title,
                   "Name", "Calls", "Device ms", "Host ms", "Share");
    std::size_t listed = 0;
    for (const json& v : view) {
      if (listed++ == 10) {
        fmt::format_to(it, "    ... {} in all (report.html)\n",
                       count(ops, (std::string(key) + "_total").c_str()));
        break;
      }
      fmt::format_to(it, "    {:<44} {:>8} {:>14.3f} {:>12.3f} {:>7.2f}%\n",
                     printable(str(v, "name")).substr(0, 44), count(v, "calls"), real(v, "device_ms"),
                     real(v, "host_ms"), real(v, "share"));
    }
  }
}

// Where the device time went (ops.device_time): busy and idle per device and queue, idle by cause, and the
// critical path of the steps. Parts that are zero are left out of a line.
void renderDeviceTime(const json& d, std::string& out) {
  if (!d.is_object()) return;
  auto it = std::back_inserter(out);
  auto pct = [](double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; };
  auto parts = [](std::initializer_list<std::pair<const char*, double>> list) {
    std::string s;
    for (const auto& [label, ms] : list) {
      if (ms >= 0.0005) s += fmt::format("{}{} {:.1f} ms", s.empty() ? "" : ", ", label, ms);
    }
    return s.empty() ? std::string("none") : s;
  };
  fmt::format_to(it, "  Where the device time went (the run: {:.1f} ms):\n", real(d, "run_ms"));
  auto figures = [&](const json& f, const std::string& label, const char* indent) {
    const double window = real(f, "window_ms"), busy = real(f, "busy_ms"), idle = real(f, "idle_ms");
    const json& i = at(f, "idle");
    fmt::format_to(it, "{}{}: busy {:.1f} ms ({:.1f}%): {}\n", indent, label, busy, pct(busy, window),
                   parts({{"kernels", real(f, "compute_ms")},
                          {"copies", real(f, "copy_ms")},
                          {"collectives", real(f, "collective_ms")},
                          {"other tasks", real(f, "other_ms")},
                          {"of them kernels overlapping copies", real(f, "compute_and_copy_ms")},
                          {"kernels overlapping collectives", real(f, "compute_and_collective_ms")}}));
    fmt::format_to(it, "{}{:{}}  idle {:.1f} ms ({:.1f}%): {}\n", indent, "", label.size(), idle,
                   pct(idle, window),
                   parts({{"host-bound (the host had not asked for the next task)", real(i, "host_bound_ms")},
                          {"the host in a copy", real(i, "host_copy_ms")},
                          {"the host in a collective", real(i, "host_collective_ms")},
                          {"waiting on a notifier or another queue", real(i, "notifier_ms")},
                          {"asked, not yet started", real(i, "queued_ms")}}));
    std::string host;
    for (const json& h : at(f, "host_in_idle"))
      if (real(h, "ms") >= 0.05)
        host +=
            fmt::format("{}{} {:.1f} ms", host.empty() ? "" : ", ", printable(str(h, "name")), real(h, "ms"));
    if (!host.empty())
      fmt::format_to(it, "{}{:{}}  the host meanwhile: {}\n", indent, "", label.size(), host);
  };
  for (const json& dev : at(d, "devices")) {
    figures(dev, fmt::format("MLU {}", count(dev, "device")), "    ");
    const json& queues = at(dev, "queues");
    if (queues.size() > 1) {
      for (const json& q : queues) figures(q, fmt::format("queue {}", count(q, "queue")), "      ");
    }
  }
  const json& path = at(d, "critical_path");
  const double len = real(path, "ms");
  const bool stepped = at(d, "steps").is_number();
  fmt::format_to(it,
                 "  Critical path of {} ({:.1f} ms): device {:.1f} ms ({:.1f}%), host {:.1f} ms ({:.1f}%), "
                 "launch and queue latency {:.1f} ms\n",
                 stepped ? fmt::format("the {} step{}", count(d, "steps"), count(d, "steps") == 1 ? "" : "s")
                         : std::string("the run"),
                 len, real(path, "device_ms"), pct(real(path, "device_ms"), len), real(path, "host_ms"),
                 pct(real(path, "host_ms"), len), real(path, "latency_ms"));
  for (const json& p : at(path, "top")) {
    fmt::format_to(it, "    {:<44} {:<8} {:>12.3f} ms {:>6.1f}%\n", printable(str(p, "name")),
                   str(p, "where"), real(p, "ms"), real(p, "share"));
  }
  if (const json& slow = at(d, "slowest_step"); stepped && slow.is_object()) {
    std::string top;
    std::size_t n = 0;
    for (const json& p : at(slow, "top")) {
      if (++n > 3) break;
      top += fmt::format("{}{} ({}) {:.1f} ms", top.empty() ? "" : ", ", printable(str(p, "name")),
                         str(p, "where"), real(p, "ms"));
    }
    fmt::format_to(it, "    slowest step: step {}, {:.1f} ms: {}\n",
                   at(slow, "step").is_number() ? at(slow, "step").dump() : "?", real(slow, "ms"), top);
  }
}

// Ops (profiler): the table of ops by device time, their slowest input shapes and the program's views.
void renderOps(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  if (const json& ops = at(model, "ops"); ops.is_object() && ops.contains("unreadable")) {
    fmt::format_to(it, "Ops (profiler): unknown: {}\n", str(ops, "unreadable"));
  } else if (ops.is_object()) {
    fmt::format_to(it,
                   "Ops (profiler): {} op calls, {:.3f} ms device time, {:.3f} ms host time in op calls\n",
                   count(ops, "calls"), real(ops, "device_ms"), real(ops, "host_ms"));
    std::string others;
    for (const json& t : at(ops, "alongside")) {
      if (t.is_string()) others += (others.empty() ? "" : ", ") + t.get<std::string>();
    }
    if (!others.empty()) {
      fmt::format_to(it,
                     "  caveat: timed while {} ran; their work slows the device and the host around each op, "
                     "so these are not the ops' own speeds (see Verdict)\n",
                     others);
    }
    if (const json& w = at(ops, "warmup"); count(w, "calls") > 0) {
      fmt::format_to(
          it,
          "  warm-up: the first call of each op and input shapes ({} calls, {:.3f} ms device time) is "
          "left out of the figures below; it is the Warm-up column\n",
          count(w, "calls"), real(w, "device_ms"));
    }
    renderOpTable(ops, out);
    renderProgramViews(ops, out);
    renderDeviceTime(at(ops, "device_time"), out);
    for (const json& t : at(ops, "traces")) {
      fmt::format_to(it, "  timeline: {}/{} (open it in https://ui.perfetto.dev or chrome://tracing)\n",
                     str(model, "dir"), t.get<std::string>());
    }
  } else {
    notEnabled(out, "Ops (profiler)", "opscope run --profile");
  }
}

// What a tool sampled (OP_AUTOCOMPARE_SAMPLE, OP_CAPTURE_SAMPLE): which calls it took and how many it left.
void renderSampling(const json& s, const char* variable, const char* verb, std::string& out) {
  if (!s.is_object()) return;
  fmt::format_to(std::back_inserter(out), "  sampled ({}={}): {}; {} calls {}, {} not{}, over {} steps\n",
                 variable, printable(str(s, "sample")), printable(str(s, "what")), count(s, "taken"), verb,
                 count(s, "skipped"),
                 at(s, "signatures").is_number() ? fmt::format(" ({} op signatures)", count(s, "signatures"))
                                                 : std::string(),
                 count(s, "steps"));
}

// Accuracy (auto-compare): the counts and the first failures.
void renderAccuracy(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  if (const json& acc = at(model, "accuracy"); acc.is_object()) {
    fmt::format_to(it, "Accuracy (auto-compare): {} ops compared ({} tensors): {} passed, {} failed\n",
                   count(acc, "ops_compared"), count(acc, "tensors"), count(acc, "ops_passed"),
                   count(acc, "ops_failed"));
    if (const json& first = at(acc, "first_failure"); first.is_object()) {
      fmt::format_to(it, "  first failing op: {} #{} ({})\n", str(first, "op"), count(first, "seq"),
                     str(first, "tensor"));
      if (const std::string site = str(first, "site"); !site.empty())
        fmt::format_to(it, "    in {}\n", printable(site));
      if (const std::string framework = str(first, "framework_op"); !framework.empty())
        fmt::format_to(it, "    in the program's op: {}\n", printable(framework));

      fmt::format_to(it, "  {:>8} {:<28} {:<20} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "seq", "op", "tensor",
                     "max_abs_diff", "max_rel_diff", "mismatch", "cosine", "max_ulp");
      std::size_t shown = 0;
      std::string replay;
      for (const json& r : at(acc, "rows")) {
        if (str(r, "verdict") == "pass") break;
        if (replay.empty()) replay = str(r, "replay");
        if (shown++ == 10) {
          fmt::format_to(it, "  ... (every failure is in autocompare.csv)\n");
          break;
        }
        // max_ulp: "-" from an autocompare.csv older than the ULPs.
        fmt::format_to(it, "  {:>8} {:<28} {:<20} {:>12.4g} {:>12.4g} {:>12.4g} {:>10.6f} {:>10}\n",
                       count(r, "seq"), str(r, "op"), str(r, "tensor"), real(r, "max_abs_diff"),
                       real(r, "max_rel_diff"), real(r, "mismatch_ratio"), real(r, "cosine"),
                       at(r, "max_ulp").is_number() ? fmt::format("{:.4g}", real(r, "max_ulp")) : "-");
      }
      if (!replay.empty()) fmt::format_to(it, "  reproduce the first: {}\n", replay);
    }
    renderSampling(at(at(model, "sampling"), "compare"), "OP_AUTOCOMPARE_SAMPLE", "compared", out);
  } else {
    notEnabled(out, "Accuracy (auto-compare)", "opscope run --compare");
  }
}

// What ran on the CPU or was checked beside the ops: fallbacks (ours and the framework's), the
// program's regions and the overflow check.
void renderCpuWork(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  if (const json& fb = at(model, "fallback"); fb.is_object()) {
    const json& ops = at(fb, "ops");
    fmt::format_to(it, "Fallbacks: {} ops ran on the CPU\n", ops.size());
    for (const json& o : ops) {
      fmt::format_to(it, "  {:<34} {:>8} forced {:>8} automatic\n", str(o, "op"), count(o, "forced"),
                     count(o, "automatic"));
    }
  } else {
    notEnabled(out, "Fallbacks", "opscope run --fallback=LIST");
  }
  if (const json& ff = at(model, "framework_fallback"); ff.is_object()) {
    const json& ops = at(ff, "ops");
    std::uint64_t calls = count(ff, "other_calls");
    for (const json& o : ops) calls += count(o, "calls");
    fmt::format_to(it, "Framework ops on the CPU (the framework's own fallback): {} ops, {} calls\n",
                   ops.size(), calls);
    for (const json& o : ops) fmt::format_to(it, "  {:<34} {:>8} calls\n", str(o, "op"), count(o, "calls"));
  }
  if (const json& rg = at(model, "regions"); rg.is_object()) {
    const json& rows = at(rg, "regions");
    fmt::format_to(it, "Regions of the program (opscope.compare() and the others): {}\n", rows.size());
    fmt::format_to(it, "  {:<24} {:<16} {:>7} {:>9} {:>9}\n", "region", "tool", "opened", "calls", "taken");
    for (const json& r : rows) {
      fmt::format_to(it, "  {:<24} {:<16} {:>7} {:>9} {:>9}\n", str(r, "label"), str(r, "tool"),
                     count(r, "opened"), count(r, "calls"), count(r, "taken"));
    }
    if (count(rg, "other_regions") > 0)
      fmt::format_to(it, "  and {} regions past the first {} labels\n", count(rg, "other_regions"),
                     results::kMaxRegionLabels);
  }
  if (const json& ov = at(model, "overflow"); ov.is_object()) {
    fmt::format_to(it, "Overflow: {} op calls produced NaN/Inf from finite inputs\n", count(ov, "ops"));
    if (const json& first = at(ov, "first"); first.is_object()) {
      fmt::format_to(it, "  first: {} #{}\n", str(first, "op"), count(first, "seq"));
    }
  } else {
    notEnabled(out, "Overflow", "OP_OVERFLOW_CHECK=1");
  }
}

// The checks beside auto-compare: the dtype cast and the perturbation check, each when it ran.
void renderAccuracyChecks(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  if (const json& dc = at(model, "dtype_cast"); dc.is_object()) {
    const json& ops = at(dc, "ops");
    fmt::format_to(it, "Dtype cast (OP_DTYPE_CAST): {} op{} ran on the device in a wider dtype\n", ops.size(),
                   ops.size() == 1 ? "" : "s");
    for (const json& r : ops) {
      fmt::format_to(it, "  {:<28} {:>8} calls in {} instead of {}\n", str(r, "op"), count(r, "calls"),
                     str(r, "to"), str(r, "from"));
    }
    out += '\n';
  }
  if (const json& pc = at(model, "perturb"); pc.is_object()) {
    fmt::format_to(
        it, "Perturbation check (OP_PERTURB): {} ops checked ({} runs on perturbed inputs), {} flagged\n",
        count(pc, "checked"), count(pc, "runs"), count(pc, "flagged"));
    if (const std::string first = str(pc, "first"); !first.empty())
      fmt::format_to(it, "  first flagged: {} (every check is in perturb.csv)\n", printable(first));
    out += '\n';
  }
}

// Tools with no section of their own: their findings as run.json holds them.
void renderOtherFindings(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  for (const auto& [name, text] : at(model, "other_findings").items()) {
    if (name == "dtype cast" || name == "perturbation check") continue;  // renderAccuracyChecks
    if (text.is_string()) fmt::format_to(it, "Findings of {}:\n{}\n\n", name, text.get<std::string>());
  }
}

// memory_snapshot.json, as the report read it: the failed request and the largest sites live then.
void renderOom(const json& oom, std::string& out) {
  auto it = std::back_inserter(out);
  // A site by its two innermost frames (the first is often an allocation helper).
  auto where = [](const json& stack) {
    if (!stack.is_array() || stack.empty()) return std::string("(no backtrace)");
    return printable(frameText(stack[0]) + (stack.size() > 1 ? " <- " + frameText(stack[1]) : ""));
  };
  const json& request = at(oom, "failed_request");
  const json& live = at(oom, "live_summary");
  const json& stack = at(request, "stack");
  fmt::format_to(it,
                 "  OUT OF MEMORY on {}: a request of {} bytes ({}) failed{} with {} bytes ({}) in use in {} "
                 "allocations from {} sites (memory_snapshot.json)\n",
                 str(request, "place"), count(request, "bytes"), humanBytes(count(request, "bytes")),
                 stack.is_array() && !stack.empty() ? " at " + where(stack) : "", count(live, "bytes"),
                 humanBytes(count(live, "bytes")), count(live, "allocations"), count(live, "sites"));
  std::size_t shown = 0;
  for (const json& l : at(oom, "live")) {
    if (shown++ == 5) break;
    const json& site = at(l, "stack");
    fmt::format_to(it, "    live: {} bytes in {} allocations from {}\n", count(l, "bytes"),
                   count(l, "allocations"), where(site));
  }
}

// Memory (memcheck): leaks, what was still held at exit, the peaks and the errors.
void renderMemory(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  if (const json& mem = at(model, "memory"); mem.is_object() && mem.contains("unreadable")) {
    fmt::format_to(it, "Memory (memcheck): unknown: {}\n", str(mem, "unreadable"));
  } else if (mem.is_object()) {
    fmt::format_to(it,
                   "Memory (memcheck): {} bytes leaked in {} allocations from {} sites; {} memory errors\n",
                   count(mem, "leaked_bytes"), count(mem, "leaked_allocations"), count(mem, "leak_sites"),
                   count(mem, "errors_total"));
    if (mem.contains("held_bytes"))
      fmt::format_to(it, "  still held at exit (not leaks): {} bytes ({}) in {} allocations from {} sites\n",
                     count(mem, "held_bytes"), humanBytes(count(mem, "held_bytes")),
                     count(mem, "held_allocations"), count(mem, "held_sites"));
    for (const json& p : at(mem, "peaks")) {
      fmt::format_to(it, "  peak on {}: {} bytes ({}) after op #{}{}\n", str(p, "place"), count(p, "bytes"),
                     humanBytes(count(p, "bytes")), count(p, "op_seq"),
                     str(p, "op").empty() ? "" : " (" + str(p, "op") + ")");
    }
    for (const json& pk : at(mem, "piece_peaks")) {
      fmt::format_to(it, "  peak of the program's tensors on {}: {} bytes ({}){}{}\n", str(pk, "place"),
                     count(pk, "bytes"), humanBytes(count(pk, "bytes")),
                     str(pk, "site").empty() ? "" : " at " + printable(str(pk, "site")),
                     at(pk, "modules").empty() ? "" : "; held then by module:");
      for (const json& md : at(pk, "modules"))
        fmt::format_to(it, "    {} bytes ({}) in {}\n", count(md, "bytes"), humanBytes(count(md, "bytes")),
                       printable(str(md, "module")));
    }
    for (const auto& [key, what] :
         {std::pair{"steps", "device memory"}, {"piece_steps", "the allocator's pieces"}}) {
      for (const json& st : at(mem, key)) {
        const json& g = at(st, "growth");
        const std::int64_t growth = g.is_number_integer() ? g.get<std::int64_t>() : 0;
        fmt::format_to(
            it,
            "  per step on {} ({}): {} steps marked; in use at a step's end {} -> {} bytes ({:+}); "
            "highest peak {} bytes ({}) in step {}\n",
            str(st, "place"), what, count(st, "steps"), count(st, "first_end"), count(st, "last_end"), growth,
            count(st, "max_peak"), humanBytes(count(st, "max_peak")), count(st, "max_peak_step"));
      }
    }
    for (const json& l : at(mem, "leaks")) {
      const json& stack = at(l, "stack");
      fmt::format_to(it, "  leak: {} bytes in {} allocations on {}{} from {}\n", count(l, "bytes"),
                     count(l, "allocations"), str(l, "place"),
                     l.contains("bytes_per_step")
                         ? fmt::format(", growing by {} bytes a step", count(l, "bytes_per_step"))
                         : std::string(),
                     printable(stack.is_array() && !stack.empty() ? frameText(stack[0]) : "(no backtrace)"));
    }
    for (const json& e : at(mem, "errors")) {
      const json& stack = at(e, "stack");
      fmt::format_to(it, "  error: {} {}{}\n", str(e, "kind"), str(e, "message"),
                     stack.is_array() && !stack.empty() ? " at " + frameText(stack[0]) : "");
    }
    if (const json& oom = at(mem, "oom"); oom.is_object()) renderOom(oom, out);
  } else if (const json& oom = at(model, "oom"); oom.is_object()) {
    out +=
        "Memory: memcheck was off (opscope run --memcheck for leaks and memory errors); the out-of-memory "
        "snapshot:\n";
    renderOom(oom, out);
  } else {
    notEnabled(out, "Memory (memcheck)", "opscope run --memcheck");
  }
}

// Capture: what capture.db holds and its statistics.
void renderCapture(const json& model, std::string& out) {
  auto it = std::back_inserter(out);
  if (const json& cap = at(model, "capture"); cap.is_object()) {
    fmt::format_to(it, "Capture: {} ops, {} tensors, {} bytes of tensor data ({} stored) in {}/{}\n",
                   count(cap, "ops"), count(cap, "tensors"), count(cap, "bytes"),
                   humanBytes(count(cap, "stored_bytes")), str(model, "dir"), str(cap, "db"));
    fmt::format_to(it, "  list them: {}\n", str(cap, "list_command"));
    if (const json& stats = at(cap, "stats"); stats.is_object()) {
      fmt::format_to(it, "  statistics (OP_CAPTURE_MODE=stats) of {} calls, {} tensors",
                     count(stats, "calls"), count(stats, "tensors"));
      if (const json& first = at(stats, "first_nan"); first.is_object()) {
        fmt::format_to(it, "; first NaN/Inf in the outputs of {} #{}\n", str(first, "op"),
                       count(first, "seq"));
      } else {
        out += "; no NaN or Inf in any output\n";
      }
    }
    renderSampling(at(at(model, "sampling"), "capture"), "OP_CAPTURE_SAMPLE", "captured", out);
  } else {
    notEnabled(out, "Capture", "opscope run --capture");
  }
}

}  // namespace

std::string renderSummary(const json& model) {
  std::string out;
  // Each section, then a blank line (the findings of other tools end in their own).
  for (const auto section : {renderRun, renderOps, renderAccuracy, renderCpuWork}) {
    section(model, out);
    out += '\n';
  }
  renderAccuracyChecks(model, out);
  renderOtherFindings(model, out);
  for (const auto section : {renderMemory, renderCapture}) {
    section(model, out);
    out += '\n';
  }
  out += renderVerdict(model);
  return out;
}

std::string frameText(const json& f) {
  std::string out = str(f, "function").empty() ? "??" : str(f, "function");
  if (f.contains("file")) {
    out += fmt::format(" {}:{}", str(f, "file"), count(f, "line"));
  } else if (at(f, "program").is_boolean()) {  // a site's line, as it is
  } else {
    out += fmt::format(" ({}+{})", str(f, "module"), str(f, "offset"));
  }
  if (at(f, "inlined").is_boolean() && at(f, "inlined").get<bool>()) out += " [inlined]";
  return out;
}

std::string humanBytes(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= (std::uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", b / (1 << 30));
  if (bytes >= (std::uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (bytes >= (std::uint64_t{1} << 10)) return fmt::format("{:.1f} KiB", b / (1 << 10));
  return fmt::format("{} B", bytes);
}

std::string renderVerdict(const json& model) {
  std::string out = "Verdict:\n";
  auto it = std::back_inserter(out);
  if (const json& acc = at(model, "accuracy"); acc.is_object()) {
    if (const json& first = at(acc, "first_failure"); first.is_object()) {
      const std::string framework = str(first, "framework_op");
      const std::string site = str(first, "site");
      fmt::format_to(it, "  WRONG NUMBERS: {} of {} compared ops failed; first: {} #{}{}\n",
                     count(acc, "ops_failed"), count(acc, "ops_compared"), str(first, "op"),
                     count(first, "seq"),
                     printable(site.empty() ? framework.empty() ? "" : " in " + framework : " in " + site));
    } else if (count(acc, "ops_compared") > 0) {
      const json& sampled = at(at(model, "sampling"), "compare");
      fmt::format_to(
          it, "  accuracy: all {} compared ops match the CPU reference{}\n", count(acc, "ops_compared"),
          sampled.is_object() ? fmt::format(" (sampled: {}; {} calls not compared)",
                                            printable(str(sampled, "what")), count(sampled, "skipped"))
                              : std::string());
    } else {
      out += "  accuracy: no op was compared\n";
    }
  } else {
    out += "  accuracy: not checked (--compare)\n";
  }
  if (const json& dc = at(model, "dtype_cast"); dc.is_object() && !at(dc, "ops").empty()) {
    std::string ops;
    for (const json& r : at(dc, "ops")) ops += (ops.empty() ? "" : ", ") + str(r, "op");
    fmt::format_to(it, "    ({} ran in {} by OP_DTYPE_CAST: compare with a run without it)\n", printable(ops),
                   str(at(dc, "ops")[0], "to"));
  }
  if (const json& pc = at(model, "perturb"); pc.is_object() && count(pc, "flagged") > 0) {
    fmt::format_to(
        it, "  UNSTABLE OPS: {} op checks flagged by the perturbation check; first: {} (perturb.csv)\n",
        count(pc, "flagged"), printable(str(pc, "first")));
  } else if (pc.is_object()) {
    fmt::format_to(it, "  stability: the {} perturbed ops moved no more than their inputs' change explains\n",
                   count(pc, "checked"));
  }
  if (const json& ops = at(model, "ops"); ops.is_object() && ops.contains("unreadable")) {
    fmt::format_to(it, "  speed: unknown ({})\n", str(ops, "unreadable"));
  } else if (ops.is_object() && !at(ops, "table").empty()) {
    const json& top = at(ops, "table")[0];
    fmt::format_to(it, "  slowest op: {} ({:.1f}% of device time after warm-up, {:.3f} ms in {} calls)\n",
                   str(top, "name"), real(top, "share"), real(top, "device_total_ms"),
                   count(top, "calls") - std::min(count(top, "calls"), count(top, "warmup_calls")));
  } else {
    out += "  speed: not profiled (--profile)\n";
  }
  if (const json& mem = at(model, "memory"); mem.is_object() && mem.contains("unreadable")) {
    fmt::format_to(it, "  memory: unknown ({})\n", str(mem, "unreadable"));
  } else if (mem.is_object()) {
    if (const json& oom = at(mem, "oom"); oom.is_object()) {
      fmt::format_to(
          it, "  OUT OF MEMORY: a request of {} bytes failed on {}; what was live: memory_snapshot.json\n",
          count(at(oom, "failed_request"), "bytes"), str(at(oom, "failed_request"), "place"));
    }
    if (count(mem, "leaked_bytes") == 0 && count(mem, "errors_total") == 0) {
      out += "  memory: no leaks, no memory errors\n";
    } else {
      fmt::format_to(it, "  MEMORY: {} bytes leaked from {} sites, {} memory errors\n",
                     count(mem, "leaked_bytes"), count(mem, "leak_sites"), count(mem, "errors_total"));
    }
    // MEM_CHECK_INIT's and MEM_CHECK_RACE's findings, named apart: numbers that change from run to run.
    std::size_t uninitialized = 0, races = 0;
    std::string first, first_race;
    for (const json& e : at(mem, "errors")) {
      if (str(e, "kind") == "uninitialized-read" && uninitialized++ == 0) first = str(e, "message");
      if (str(e, "kind") == "race" && races++ == 0) first_race = str(e, "message");
    }
    if (uninitialized > 0) {
      fmt::format_to(it, "  UNINITIALIZED READ: {} site{} read device bytes nothing wrote; first: {}\n",
                     uninitialized, uninitialized == 1 ? "" : "s", printable(first));
    }
    if (races > 0) {
      fmt::format_to(it, "  RACE: {} pair{} of accesses on different queues that nothing orders; first: {}\n",
                     races, races == 1 ? "" : "s", printable(first_race));
    }
  } else {
    if (const json& oom = at(model, "oom"); oom.is_object()) {
      fmt::format_to(
          it, "  OUT OF MEMORY: a request of {} bytes failed on {}; what was live: memory_snapshot.json\n",
          count(at(oom, "failed_request"), "bytes"), str(at(oom, "failed_request"), "place"));
    }
    out += "  memory: not checked (--memcheck)\n";
  }
  // What to do about each finding.
  for (const json& n : at(model, "next")) {
    fmt::format_to(it, "  next ({}): {}\n", str(n, "about"), str(n, "text"));
    if (!str(n, "command").empty()) fmt::format_to(it, "      {}\n", str(n, "command"));
    if (!str(n, "site").empty()) fmt::format_to(it, "      {}\n", str(n, "site"));
  }
  return out;
}

}  // namespace opscope::report
