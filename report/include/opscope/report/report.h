// report.h — the run report of a result directory: what `opscope report DIR` writes as DIR/report.html and
// what `opscope summary DIR` prints. Both are drawn from one model, so the page and the text always give the
// same counts.
//
// The model is a JSON object (embedded in the page as it is; docs/report.md describes it):
//   dir, generated, opscope_version, warnings[]           the directory, when the report was made, problems
//                                                         met reading it (a section that could not be read
//                                                         says so; the others are still shown)
//   run      {command, pid, rank, start_time, duration_s, ended, version, options{}}
//   tools    {capture, compare, profile, memcheck, fallback, overflow}   which tools were on
//   ops      null | {calls, device_ms, host_ms, warmup{calls, device_ms, host_ms}, alongside[], table[],
//                    traces[], timeline}
//            calls, device_ms, host_ms: every op call; warmup: the first call of each op and input shapes;
//            alongside: the other tools that ran (their work slows what was timed)
//            table: {name, calls, warmup_calls, device_total_ms, device_mean_ms, device_max_ms,
//            host_total_ms,
//                   host_mean_ms, warmup_device_ms, warmup_host_ms, share, shapes[], shape_count}
//                   times, means and share after warm-up; sorted by device time; share in percent of all
//                   device time after warm-up; shapes: the same figures per input signature ({shapes, ...}),
//                   slowest first, Limits::shapes_per_op of them and one line summing the rest
//            by_framework_op, by_module: [{name, calls, device_ms, host_ms, share}] (a framework's program:
//                   the library calls by the outermost framework op around them and by module, from
//                   time_measure.csv; most device time first, Limits::view_rows of them), *_total: rows in
//                   all
//            timeline: {start_us, end_us, spans_total, spans_shown, names[], tracks[{name, spans[[ts, dur,
//                   name index]]}]}: device tasks per queue, the longest kept when there are too many
//            device_time: null | {run_ms, steps (null: none marked), steps_ms, devices[{device, window_ms,
//                   tasks, busy_ms, compute_ms, copy_ms, collective_ms, other_ms, compute_and_copy_ms,
//                   compute_and_collective_ms, idle_ms, idle{host_bound_ms, host_copy_ms, host_collective_ms,
//                   notifier_ms, queued_ms}, host_in_idle[{name, ms}], queues[{queue, ...the same}]}],
//                   critical_path{ms, device_ms, host_ms, latency_ms, top[{name, where: device|host|latency,
//                   ms, share}]}, slowest_step{step, ms, top[]}, step_rows[{step, ms, busy_ms, idle_ms,
//                   host_bound_ms, path_device_ms, path_host_ms, path_latency_ms, top[]}], step_rows_total}:
//                   where the device time went (device_time.h; docs/profiler.md)
//   accuracy null | {ops_compared, tensors, ops_passed, ops_failed, first_failure{op, seq, tensor,
//   framework_op,
//                    site, replay} | null (site: where the program called it, "" when not known),
//                    rows_total, rows[]}: rows are compared tensors, failing ops first, each with every
//                    metric of autocompare.csv and, when it failed, `replay`: the op-replay command
//   fallback null | {ops[{op, forced, automatic}]}
//   overflow null | {ops, first{op, seq, detail} | null}
//   memory   null | {leaked_bytes, leaked_allocations, leak_sites, errors_total, held_bytes?,
//                    held_allocations?, held_sites? (what a program that declared its end still held then:
//                    not leaks), peaks[{place, bytes,
//                    op_seq, op}], series[{place, points[[time_ms, bytes]]}], leaks[], errors[] (leaks and
//                    errors as in memcheck.json), steps?/piece_steps? [{place, steps, first_end, last_end,
//                    growth, max_peak, max_peak_step, rows[{step, peak, end, growth}]}] (the program's marked
//                    steps: device memory, and its allocator's pieces), piece_peaks? [{place, bytes, op_seq?,
//                    op?, site?, modules[{module, bytes}]}] (a program allocator's peak), oom?
//                    {failed_request{bytes, place, stack}, live_summary{bytes, allocations, sites},
//                    program_allocator{...}, live[{bytes, allocations, place, stack}], failures?}
//                    (memory_snapshot.json)}
//   oom      null | memory.oom's shape: memory_snapshot.json when memcheck was off (OP_OOM_SNAPSHOT, on in
//            `opscope run`); with memcheck it is memory.oom
//   capture  null | {ops, tensors, bytes, stored_bytes, db, list_command, stats?{calls, tensors,
//                    first_nan{op, seq, replay?} | null}} (stats: OP_CAPTURE_MODE=stats)
//   next     [{about: accuracy|speed|memory, text, command?, site?}]: what to do about each finding
// A section is null when its tool was off (tools says which).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opscope::report {

// The directory cannot be reported on (missing, unreadable, or no opscope result in it).
class ReportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Limits {
  std::size_t compare_rows = 5000;     // compared tensors listed (failures first)
  std::size_t timeline_spans = 20000;  // device spans drawn, over all queues
  std::size_t memory_points = 2000;    // points per memory series
  std::size_t leak_sites = 200;        // leak sites and errors listed
  std::size_t shapes_per_op = 20;      // input signatures listed per op (the rest summed in one line)
  std::size_t view_rows = 50;          // rows of the views by framework op and by module
  // Told the name and size of each large file (over 64 MiB) before it is read: a long run's files take a
  // while (a million op calls: about 10 s).
  std::function<void(const std::string& file, std::uintmax_t bytes)> progress;
};

// Reads a result directory. Throws ReportError when it is not one; a file that is there but cannot be
// read is a warning in the model.
nlohmann::json loadRun(const std::filesystem::path& dir, const Limits& limits = {});

// The page: one self-contained HTML file (no network), the model embedded.
std::string renderHtml(const nlohmann::json& model);

// The page's <style> element, for other pages (opscope diff's, the ranks' view) to look alike.
std::string_view reportStyle();

// The same findings as plain text, for terminals and CI logs; it ends with renderVerdict's lines.
std::string renderSummary(const nlohmann::json& model);

// Bytes as people read them: "512 B", "4.0 KiB", "396.6 MiB", "1.2 GiB".
std::string humanBytes(std::uint64_t bytes);

// A memcheck backtrace frame as one line: "function file:line", or "function (module+offset)" without debug
// information, " [inlined]" after an inlined one.
std::string frameText(const nlohmann::json& frame);

// "Verdict:" and three lines: accuracy (the first failing op), speed (the slowest op), memory (leaks,
// errors).
std::string renderVerdict(const nlohmann::json& model);

}  // namespace opscope::report
