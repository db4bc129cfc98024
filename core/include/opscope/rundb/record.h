// record.h — a captured op as plain data: what the capture tool hands to the writer, and what the reader
// gives back to op-replay.
#pragma once

#include <opscope/bytes.h>

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace opscope::rundb {

// The statistics of a tensor that OP_CAPTURE_MODE=stats keeps for every tensor of every op call (a row of
// capture.db's tensor_stats), instead of the tensor itself (computed by stats.h's tensorStats).
struct TensorStats {
  std::int64_t numel = 0;
  // Over the finite elements (NaN and Inf are counted apart, so that one NaN does not hide the rest): 0
  // when there is none. Integers and bool are read as float64.
  double min = 0, max = 0, mean = 0;
  double l2 = 0;  // sqrt of the sum of squares of the finite elements
  std::int64_t nan = 0, inf = 0;
  // XXH3-64 of the packed bytes (Debian's libxxhash, which capture already uses to find duplicate
  // tensors: ~17 GB/s here, where a table-driven CRC-32C runs at a few GB/s): equal bytes, equal checksum.
  std::uint64_t checksum = 0;
};

struct TensorRecord {
  std::string role;   // "input" (before the op), "output" (after it), "cpu_output" (compare failures)
  int arg_index = 0;  // position in the op's schema argument list
  std::string arg_name;
  mluopDataType_t dtype = MLUOP_DTYPE_INVALID;
  mluopTensorLayout_t layout = MLUOP_LAYOUT_ARRAY;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // as the op saw them, in elements
  Bytes data;                         // elements packed contiguous, row-major, little-endian
  // Stats mode: the statistics, when the capture computed them already (else the writer does, from data).
  std::optional<TensorStats> stats;
  // Stats mode: data left empty because the same bytes (stats->checksum, numel) were copied for one of
  // the op calls just before, which the writer's ring still holds.
  bool same_as_earlier = false;
};

// One compared tensor of an op (auto-compare): a row of compare_results.
struct CompareRecord {
  std::string arg_name;  // the output's schema name; "input <name>" for an input checked to be unchanged
  bool allclose = true;
  double max_abs_diff = 0, max_rel_diff = 0, mae = 0, cosine = 1, mismatch_ratio = 0;
  double diff1 = 0, diff2 = 0, diff3 = 0;
  std::int64_t dev_nan = 0, ref_nan = 0;
  double atol = 0, rtol = 0;
  std::string verdict;   // "pass" or "fail"
  std::string op_class;  // compare/op_class.h: exact, elementwise, reduction or random
  double max_ulp = 0, mean_ulp = 0;
};

// A transfer of the collective library (libmlucl): a row of capture.db's collectives. Its CapturedOp holds
// the call's name ("allreduce"), symbol, thread, queue, host times and status, and as tensors what it sent
// (role "send", arg_index 0) and received ("recv", 1), 1-D.
struct CollectiveRecord {
  std::uint64_t comm = 0;  // mluclCommGetId
  std::uint64_t seq = 0;   // as libmlucl checks it across ranks; 0 for a refused call
  int rank = -1;
  int world_size = 0;
  std::uint64_t count = 0;
  int dtype = 0;             // mluclDataType_t (the kernel library's dtypes)
  int op = -1;               // mluclReduceOp_t, -1 when not a reduction
  int peer = -1;             // broadcast: the root; send / recv: the peer
  std::uint64_t op_seq = 0;  // the program's last op call before it
};

struct CapturedOp {
  std::int64_t op_id = 0;  // row in capture.db (assigned by the writer; set by the reader)
  std::uint64_t seq = 0;
  mlu::OpId op = mlu::OpId::kCount;
  std::string name;
  std::string symbol;
  std::string framework_op;  // OpCall::framework_op ("aten::linear > aten::addmm"), empty when none
  // OpCall::site: the program's module, source line and (for a backward call) forward op; site_id 0 and
  // all empty when none. The writer stores each site once (capture.db's sites).
  std::uint32_t site_id = 0;
  std::string module;
  std::string source;
  std::string forward_op;
  std::string region;  // OpCall::region: the program's region ("compare#1"), empty outside every region
  std::uint32_t thread = 0;
  std::uint64_t queue = 0;
  int device = 0;
  std::int64_t host_start_ns = 0;
  std::int64_t host_dur_ns = 0;
  std::int64_t device_dur_ns = -1;  // -1: not measured
  int status = 0;
  int fallback = 0;  // 0: ran on the device, 1: forced to the CPU (OP_FALLBACK_LIST), 2: automatic
  std::vector<TensorRecord> tensors;
  // Scalars by schema name, as text that parses back exactly: integers and bools as integers, floats in
  // their shortest round-trip form, int lists as JSON arrays, a convolution descriptor as a JSON object
  // {"padding":[..],"stride":[..],"dilation":[..],"groups":n}, a workspace as its size in bytes.
  std::vector<std::pair<std::string, std::string>> scalars;
  // Auto-compare results of the op. A record with `attach` set adds them (and its cpu_output tensors) to
  // the row of the same seq when one was written already (the op was captured too); otherwise it becomes
  // an op row of its own. Such records are written even past the capture cap.
  std::vector<CompareRecord> compare;
  bool attach = false;
  // Whether the op's tensors are stored, so op-replay can run it (false: an op row for its compare results
  // only).
  bool captured = true;
  // OP_CAPTURE_MODE=stats: the writer stores the statistics of each tensor (tensor_stats), and the tensors
  // themselves only when a trigger keeps them (the op is in the ring of the last op calls before one).
  bool stats = false;
  // Set for a transfer of the collective library: the writer stores a collectives row (and its buffers'
  // rows), not an op row.
  std::optional<CollectiveRecord> collective;

  const TensorRecord* find(const std::string& role, int arg_index) const {
    for (const auto& t : tensors) {
      if (t.role == role && t.arg_index == arg_index) return &t;
    }
    return nullptr;
  }
};

struct RunRecord {
  std::int64_t pid = 0;
  int rank = -1;
  int world_size = 0;  // 0: not one of several ranks
  std::string command_line;
  std::string start_time_iso;
  std::int64_t start_unix_ns = 0;
  std::string opscope_version;
  std::string options_json;  // {"OP_CAPTURE":"1",...}
};

}  // namespace opscope::rundb
