// diff.h — `opscope diff RUN_A RUN_B`: where two runs' op calls first differ, from the statistics that
// OP_CAPTURE_MODE=stats keeps for every tensor of every call (capture.db's tensor_stats), or from the whole
// tensors of the captured calls (tensors mode: each pair of tensors that are not bit-identical compared by
// auto-compare's metrics, compare/metrics.h, at the same tolerances; they diverge when not allclose).
//
// Alignment: the k-th call of an op in one run is paired with the k-th call of the same op in the other
// (op name and call order), so that a call present in only one run (an extra evaluation, a fallback that
// splits an op) shifts nothing else; the calls past the other run's count of that op are "only in" one run.
// A pair differs when a tensor's dtype or shape differs, its NaN or Inf counts differ, or its checksums
// differ and its min, max or mean moves by more than atol + rtol x the tensor's magnitude, or its L2 norm by
// more than rtol of itself, at the dtype's tolerance (auto-compare's defaults, opscope/tolerance.h's
// defaultTolerance: 1e-5 float32, 1e-3 float16, 1e-2 bfloat16, 1e-8 float64; integers exactly). Two runs made
// in different floating dtypes (float32 against bfloat16) are judged, every floating tensor, at the looser
// dtype's tolerance.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::analysis {

// A run cannot be compared (not a capture.db or result directory, no statistics, damaged).
class DiffError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorDifference {
  std::string tensor;   // "output grad_w"
  std::string what;     // "mean 0.0123 vs 0.0125", "checksum only", "shape [2, 3] vs [3, 2]"
  double relative = 0;  // the largest relative difference of the statistics (infinity: dtype, shape, NaN/Inf)
  bool diverges = false;
};

struct CallPair {
  std::string op;
  std::uint64_t call = 0;  // the op's k-th call, from 1
  std::uint64_t seq_a = 0, seq_b = 0;
  std::string site;  // where run A's program called it (capture.db's sites: module, line), "" when not known
  std::vector<TensorDifference> tensors;  // the tensors that are not bit-identical
  double relative = 0;                    // the largest of them
  bool diverges = false;
};

struct RunDiff {
  std::string run_a, run_b;  // the capture.db files
  bool whole = false;  // both runs hold whole tensors (tensors mode), compared by auto-compare's metrics
  std::uint64_t calls_a = 0, calls_b = 0, aligned = 0, identical = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> only;  // op -> calls only in A, only in B
  std::optional<CallPair> first;  // the first diverging pair, in A's call order
  std::vector<CallPair> largest;  // the diverging pairs, largest difference first (at most `top`)
  std::uint64_t diverging = 0;
};

// Compares two runs (each a capture.db or a result directory holding one). Throws DiffError.
RunDiff diffRuns(const std::filesystem::path& a, const std::filesystem::path& b, std::size_t top = 10);

// The comparison as text: the counts, the first divergence, the ops only one run has, the largest ones.
std::string renderDiff(const RunDiff& d);

// The same as one self-contained page (no script), in `style` (a <style> element: the launcher gives the
// report's, report::reportStyle(), so that the page looks like the report).
// `more`: further sections put at the end of the page (those of the runs' time diff, time_diff.h).
std::string renderDiffHtml(const RunDiff& d, std::string_view style, std::string_view more = {});

}  // namespace opscope::analysis
