// analyze.h — `opscope analyze RUNFOLDER`: the flight recorder's dumps of a multi-rank run's ranks
// (flight_recorder.json in each rank's result directory, docs/recorder.md) read together, to say why the job
// hung or failed. Missing ranks are tolerated and named; mismatches are not capped.
//
// The model (JSON):
//   folder, world_size, dumps[] (the ranks with a dump), missing[] (ranks without one), warnings[]
//   comms[]  {comm, size, ranks[] (those whose dump has it),
//             per_rank[{rank, last_enqueued, last_started, last_completed, error, reasons[]}],
//             first_incomplete: null | {seq, collective, count, dtype, op, root,
//                 never_enqueued[{rank, in_call (its host call never returned), last{seq, collective, state},
//                                 backtrace[]}],
//                 not_completed[{rank, state, waiting_s}], failed[{rank, error}], completed[] (ranks)},
//             mismatches[{seq, collective, what}] (every one, in sequence order),
//             late[{seq, collective, rank, late_s}] (a rank that posted a collective >= 0.1 s after the
//                 others, the 20 latest; from 0.5 s a finding)}
//   consistency  null | {ranks[], records (the (step, index) records compared), differing, first: null |
//             {step, index, kind ("param", "grad"), op, seq, ranks[] (unlike the most common hash),
//             others[]}} from each rank's consistency.jsonl (OP_RANK_CONSISTENCY)
//   nan_origin  null | {ranks[{rank, op, op_seq, carried_by: null | {comm, collective, seq}}] (in the order
//             the collectives after them carried them), first_rank}: each rank's OP_OVERFLOW_CHECK finding
//             (the first op that made NaN/Inf from finite inputs: only where a NaN was born)
//   verdict  one line per finding ("" when none)
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace opscope::analysis {

// The folder cannot be analysed (it holds no rank's result directory).
class AnalysisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws AnalysisError when folder holds no rank directory.
nlohmann::json analyzeRanks(const std::filesystem::path& folder);

// The analysis as text (what `opscope analyze` prints).
std::string renderAnalysis(const nlohmann::json& model);

}  // namespace opscope::analysis
