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
  // JSON object members in schema order, each after a comma: a tensor as its name and
  // "dtype[shape]" ("x":"float32[4,1,28,28]", with " strides [..]" added when it is not contiguous), int
  // lists, convolution parameters, workspace sizes ("workspace bytes":4096), scalars past the event's
  // slots.
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

// Appends the scalar arguments of an op from an event's slots as JSON object members, each after a comma
// (,"lr":0.001,"step":3).
void appendScalarMembers(std::string& out, mlu::OpId op, const Event& e);

// Appends s as a JSON string literal (quoted, escaped).
void appendJsonString(std::string& out, std::string_view s);

}  // namespace opscope::profiler
