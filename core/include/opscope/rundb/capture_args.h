// capture_args.h — turning an op's argument struct into capture records: its scalars and descriptors as
// text, and its tensors copied out of device memory.
#pragma once

#include <opscope/op_call.h>
#include <opscope/op_format.h>
#include <opscope/rundb/record.h>
#include <opscope/tensor_snapshot.h>

#include <mlu/op_args.h>

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace opscope::rundb {

template <typename Args>
void describeScalars(const Args& args, CapturedOp& op) {
  args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
    using V = std::decay_t<decltype(value)>;
    const std::string name(meta.name);
    if constexpr (std::is_same_v<V, mlu::TensorView>) {
      return;
    } else if constexpr (std::is_same_v<V, mlu::IntList>) {
      op.scalars.emplace_back(name, intsText(value, value.size()));
    } else if constexpr (std::is_same_v<V, mlu::ConvParams>) {
      op.scalars.emplace_back(name, convText(value));
    } else if constexpr (std::is_same_v<V, mlu::Workspace>) {
      op.scalars.emplace_back(name, fmt::format("{}", value.size));
    } else if constexpr (std::is_same_v<V, bool>) {
      op.scalars.emplace_back(name, value ? "1" : "0");
    } else {
      op.scalars.emplace_back(name, fmt::format("{}", value));  // shortest round-trip form
    }
  });
}

// A record of the call: which op, its sequence number, thread, queue and device (no tensors yet).
inline CapturedOp opRecord(const OpCall& call) {
  CapturedOp op;
  op.seq = call.seq;
  op.op = call.op;
  op.name = std::string(call.name);
  op.symbol = std::string(call.symbol);
  op.framework_op = std::string(call.framework_op);
  if (call.site != nullptr) {
    op.site_id = call.site->id;
    op.module = call.site->module;
    op.source = call.site->source;
    op.forward_op = call.site->forward_op;
  }
  op.region = std::string(call.region);
  op.thread = call.thread;
  op.queue = call.queue_id;
  op.device = call.device;
  return op;
}

// A tensor record of argument arg_index (view v) holding packed data.
inline TensorRecord tensorRecord(const char* role, int arg_index, std::string_view name,
                                 const mlu::TensorView& v, Bytes data) {
  TensorRecord t;
  t.role = role;
  t.arg_index = arg_index;
  t.arg_name = std::string(name);
  t.dtype = v.dtype;
  t.layout = v.layout;
  t.shape.assign(v.dims.begin(), v.dims.begin() + v.ndim);
  t.strides.assign(v.strides.begin(), v.strides.begin() + v.ndim);
  t.data = std::move(data);
  return t;
}

// Copies the op's inputs (inputs == true: IN and INOUT tensors, role "input") or outputs (OUT and INOUT,
// role "output") out of device memory into op.tensors, each into buffer(bytes) (a Bytes whose memory it
// reuses; CaptureWriter::buffer gives back those of ops already written). The caller has synced the op's
// queue. Returns the bytes copied.
template <typename Args, typename Buffer>
std::size_t snapshotTensors(const Args& args, bool inputs, CapturedOp& op, Buffer&& buffer) {
  std::size_t bytes = 0;
  int index = 0;
  args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
    const int arg_index = index++;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
      const bool is_input = meta.reads();
      const bool is_output = meta.writes();
      if (!value.present || (inputs ? !is_input : !is_output)) return;
      const std::size_t packed = static_cast<std::size_t>(value.numel()) * value.elementSize();
      op.tensors.push_back(tensorRecord(inputs ? "input" : "output", arg_index, meta.name, value,
                                        snapshotTensor(value, buffer(packed))));
      bytes += op.tensors.back().data.size();
    }
  });
  return bytes;
}

}  // namespace opscope::rundb
