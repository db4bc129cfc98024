// record.h — a captured op as plain data: what the capture tool hands to the writer, and what the reader
// gives back to op-replay.
#pragma once

#include <mlu/mluops.h>
#include <mlu/op_args.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace opscope::capture {

struct TensorRecord {
  std::string role;   // "input" (before the op), "output" (after it), "cpu_output" (compare failures)
  int arg_index = 0;  // position in the op's schema argument list
  std::string arg_name;
  mluopDataType_t dtype = MLUOP_DTYPE_INVALID;
  mluopTensorLayout_t layout = MLUOP_LAYOUT_ARRAY;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // as the op saw them, in elements
  std::vector<std::byte> data;        // elements packed contiguous, row-major, little-endian
};

struct CapturedOp {
  std::int64_t op_id = 0;  // row in capture.db (assigned by the writer; set by the reader)
  std::uint64_t seq = 0;
  mlu::OpId op = mlu::OpId::kCount;
  std::string name;
  std::string symbol;
  std::uint32_t thread = 0;
  std::uint64_t queue = 0;
  int device = 0;
  std::int64_t host_start_ns = 0;
  std::int64_t host_dur_ns = 0;
  std::int64_t device_dur_ns = -1;  // -1: not measured
  int status = 0;
  bool fallback = false;
  std::vector<TensorRecord> tensors;
  // Scalars by schema name, as text that parses back exactly: integers and bools as integers, floats in
  // their shortest round-trip form, int lists as JSON arrays, a convolution descriptor as a JSON object
  // {"padding":[..],"stride":[..],"dilation":[..],"groups":n}, a workspace as its size in bytes.
  std::vector<std::pair<std::string, std::string>> scalars;

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
  std::string command_line;
  std::string start_time_iso;
  std::int64_t start_unix_ns = 0;
  std::string opscope_version;
  std::string options_json;  // {"OP_CAPTURE":"1",...}
};

}  // namespace opscope::capture
