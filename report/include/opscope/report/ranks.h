// ranks.h — one view of a multi-rank run: the run folder that holds each rank's result directory
// (<folder>/<stamp>-rank<R>-<pid>-XXXXXX, see RunInfo::run_folder). What `opscope report FOLDER` writes as
// FOLDER/report.html and FOLDER/trace.json, and `opscope summary FOLDER` prints.
//
// The model (JSON):
//   folder, generated, opscope_version, warnings[]
//   world_size    the ranks the job had (run.json's world_size), missing_ranks[] those without a directory
//   ranks[]       {rank, pid, dir, ended, duration_s, ops_calls, device_ms, host_ms, peak_bytes,
//                  accuracy_failed, leaked_bytes, memory_errors, fallback_ops, overflow_ops,
//                  collectives, collective_device_ms, steps, collective_mismatches (transfers whose result on
//                  this rank the cross-rank check found wrong), busy_ms, idle_ms, host_bound_ms (its device
//                  time: report.h's ops.device_time, summed over its devices), collective_wait_ms (its
//                  collectives' wait for the last rank: straggler)}   one row per rank, in rank order (null
//                  when a tool was off)
//   straggler     {rank, collectives, last, others_waited_ms, ranks[{rank, waited_ms, last,
//                  others_waited_ms}], clock} | null: over the collectives two or more ranks ran, on the
//                  aligned clocks, each rank's wait for the last to arrive; the straggler is the rank the
//                  others waited for longest (null when the clocks cannot be aligned)
//   steps         {count, rows[{step, ms[] (per rank, null when the rank has no such step), slowest_rank,
//                  slowest_ms, fastest_ms}], slowest_counts{rank: steps it was the slowest in}}  from each
//                  rank's ProfilerStep#N spans (opscope_step()); null without traces
//   collectives_check   the ranks' captured collective transfers checked across ranks
//   (analysis/collective_check.h's
//                  model: addAnalyses) | null when no rank's capture.db holds any
//   flight_recorder   {dumps[], missing[], verdict[]} | null: analysis/analyze.h's analysis of the ranks'
//                  flight_recorder.json (null when no rank wrote one)
//   trace         {file, events, ranks, flows, clock} | null: the merged trace (null when no rank has one)
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace opscope::report {

// Reads every rank's directory and, when write_trace, merges their traces into folder/trace.json: a process
// per rank's host and per rank's device, the ranks' clocks aligned (one host: the CLOCK_MONOTONIC origin each
// trace records; several hosts: the end of the first collective they share), and each collective joined
// across its ranks by flows (rank r to rank r + 1, by communicator and sequence number). Throws
// ReportError when dir holds no rank directory.
nlohmann::json loadRanks(const std::filesystem::path& dir, bool write_trace);

// What the offline analyses (analysis/, which the report does not call: the launcher joins the two) found
// in the folder, added to loadRanks's model: its collectives_check, each rank's collective_mismatches, its
// flight_recorder and warnings.
struct FolderAnalyses {
  nlohmann::json collectives_check;  // analysis::checkCollectives's model (null: no capture holds a transfer)
  nlohmann::json flight_recorder;    // analysis::analyzeRanks's model (null: no rank wrote a dump)
  std::vector<std::string> warnings;  // what an analysis could not read
};
void addAnalyses(nlohmann::json& model, const FolderAnalyses& analyses);

// The page (report.html of the folder) and the text (`opscope summary FOLDER`).
std::string renderRanksHtml(const nlohmann::json& model);
std::string renderRanksSummary(const nlohmann::json& model);

}  // namespace opscope::report
