// call_sample.h — which calls of a long run a tool takes (OP_AUTOCOMPARE_SAMPLE, OP_CAPTURE_SAMPLE). Real
// training repeats the same op signatures every step, so checking every call of a long run is work wasted:
//   first:N      the first N calls of each op signature (below)
//   every:K      the calls of every K-th step: steps 0, K, 2K, ...
//   steps:A-B    the calls of steps A to B (steps:A: step A alone)
// Items may be combined with commas, each narrowing the others ("steps:10-19,first:2"). Steps are counted
// from 0 as OP_TIME_MEASURE_SCHEDULE counts them: the program's opscope_step() calls, or its framework's
// (torch_mlu: optimizer steps); the calls before the first step's end are step 0's, those after the last
// (evaluation, sampling) the next step's.
//
// An op signature is the op, its tensors' dtypes, shapes and strides and its integer arguments (axes, modes:
// not its floating-point scalars, a learning rate that changes each step). Where the program made the call
// is not part of it: the layers of a model that repeat one shape are one signature (a kernel's fault
// follows its shapes and dtypes, not the module). A signature's first N calls are taken whatever their
// steps.
#pragma once

#include <opscope/op_call.h>

#include <nlohmann/json_fwd.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace opscope {

struct SampleSpec {
  std::optional<std::uint64_t> first;                            // first:N
  std::optional<std::uint64_t> every;                            // every:K
  std::optional<std::pair<std::uint64_t, std::uint64_t>> steps;  // steps:A-B
  std::string variable;                                          // "OP_AUTOCOMPARE_SAMPLE"
  std::string text;                                              // as the variable gave it

  // Throws ConfigError, naming the variable, for a value that is none of the above.
  static SampleSpec parse(const std::string& variable, const std::string& value);
  bool samples() const { return first || every || steps; }
  // "the first 4 calls of each op signature", "steps 10-19, the first 2 calls of each op signature", ...
  std::string describe() const;
};

// A tool's sampler: take(call) says whether the tool takes the call (and counts it); step() when the
// program's step ends. Thread-safe.
class CallSampler {
 public:
  explicit CallSampler(SampleSpec spec = {}) : spec_(std::move(spec)) {}
  CallSampler(const CallSampler&) = delete;
  CallSampler& operator=(const CallSampler&) = delete;

  const SampleSpec& spec() const { return spec_; }
  // Whether the tool takes the call: always when the spec samples nothing (nothing is counted then).
  bool take(const OpCall& call);
  void step() { step_.fetch_add(1, std::memory_order_relaxed); }

  std::uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }
  std::uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }
  std::uint64_t steps() const { return step_.load(std::memory_order_relaxed); }
  std::size_t signatures() const;

 private:
  SampleSpec spec_;
  std::atomic<std::uint64_t> step_{0};
  std::atomic<std::uint64_t> taken_{0};
  std::atomic<std::uint64_t> skipped_{0};
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::uint64_t> seen_;  // signature hash -> its calls taken
};

// The hash of a call's op signature (above).
std::uint64_t opSignature(const OpCall& call);

// run.json's findings of a sampling tool: {"sample": the variable's value, "what": describe(), "taken",
// "skipped", "signatures" (first:N's), "steps" (ended)}.
nlohmann::json samplingFindings(const CallSampler& sampler);
// "OP_AUTOCOMPARE_SAMPLE=first:4 (the first 4 calls of each op signature): 1234 calls compared, 5678 not
// (410 op signatures, 50 steps)" (verb: "compared")
std::string samplingLine(const CallSampler& sampler, std::string_view verb);

}  // namespace opscope
