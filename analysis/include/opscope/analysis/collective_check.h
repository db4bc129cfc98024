// collective_check.h — the transfers of the collective library checked across the ranks of a run, from
// what each rank's capture.db kept of them (its collectives tables): auto-compare cannot check a transfer
// inside one process (an all-reduce's result depends on every rank's input), the run folder can.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

namespace opscope::analysis {

// A rank's capture: its rank in the job and its capture.db (which may be missing or not hold collectives).
struct RankCapture {
  int rank = 0;
  std::filesystem::path db;
};

// Matches each transfer across the captures by communicator and sequence number (send and recv by the pair
// of ranks and their own numbers) and checks what every rank received:
//   allreduce, reduce_scatter  against the reduction of the ranks' inputs, computed in float64 (integers with
//                              the dtype's wrap-around), within the dtype's tolerance plus the rounding a sum
//                              of that many terms may take; max and min exactly
//   broadcast, allgather, send/recv  exactly (the root's, the ranks' concatenated, the sender's bytes)
// With statistics only (OP_CAPTURE_MODE=stats) by checksums and NaN counts: no rank received a NaN that no
// rank sent, the ranks received the same bytes (an all-reduce, broadcast or all-gather), and the root's or
// sender's. The ranks' calls must agree (name, count, dtype, reduction, root).
//
// The model (null when no capture holds a transfer):
//   {ranks_with_collectives[], transfers, checked, by_contents, by_statistics, mismatching,
//    not_checked{reason: count}, mismatches[{comm, collective, seq, rank, what}] (the first 100 in
//    sequence order), mismatches_left_out, errors[] (captures that could not be read)}
// Every capture.db is untrusted: sizes are checked against the calls before anything is read.
nlohmann::json checkCollectives(const std::vector<RankCapture>& captures);

}  // namespace opscope::analysis
