// signatures.h — an op call's arguments as the trace shows them, interned: calls with the same tensors
// (dtype, shape, strides), int lists and convolution parameters share one signature, formatted once.
// Scalar arguments change from call to call (a step count, a learning rate), so they travel in the event's
// scalar slots instead and are formatted by the writer.
#pragma once

#include "events.h"

#include <opscope/op_call.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace opscope::profiler {

struct Signature {
  // JSON object members (no braces): the tensors' names (schema order), dtypes, shapes, and — when some
  // tensor is not contiguous — strides (null for the contiguous ones); then int lists, convolution
  // parameters, workspace sizes.
  std::string json;
  std::string shapes;  // for time_measure.csv: "x float32[4,1,28,28]; y float32[4,10]"
};

class Signatures {
 public:
  Signatures();

  // Fills e.name (the signature id), e.scalar and e.scalars from the call's arguments.
  void record(const OpCall& call, Event& e);
  // The signature of an id (thread-safe; ids are never reused). Returns a copy.
  Signature get(std::uint32_t id) const;

 private:
  std::uint32_t intern(std::uint64_t key, const OpCall& call);

  const std::uint64_t serial_;  // tells this object's entries in the threads' caches from another's
  mutable std::mutex mutex_;
  std::vector<Signature> signatures_;  // guarded by mutex_; index = id
};

// The scalar arguments of an op from an event's slots, as JSON object members ("lr":0.001,"step":3).
std::string scalarMembers(mlu::OpId op, const Event& e);

// Appends s as a JSON string literal (quoted, escaped).
void appendJsonString(std::string& out, std::string_view s);

}  // namespace opscope::profiler
