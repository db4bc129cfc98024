// Conformance of the kernel library against DIOPI-style cases (issue 25): the shapes, dtypes and parameters
// of DeepLink DIOPI's published conformance configs (read as facts in docs/diopi-cases.md; no code of
// theirs), each run through the op's C entry point on the device and through the CPU reference on the same
// inputs, every output compared (floating: the dtype's tolerance, scaled for reductions; integers and bool:
// exactly). A case passes when both accept it and agree, or — where the case's arguments are outside what
// PyTorch's own API accepts — when both refuse it with BAD_PARAM (float64: the device says NOT_SUPPORTED
// and the reference computes, which is what the hook's automatic fallback relies on).
//
// The categories are issue 25's: edge cases the library used to refuse, the features DIOPI tests (class
// weights, grouped-query attention, pooling dilation, norm p, SGD nesterov/dampening, AdamW amsgrad, normal
// with tensor mean/std, rotary embedding from tables), integer dtypes, float64. Each test prints its case
// count. Shapes are DIOPI's, except that the largest are cut to a few ten thousand elements (the suite also
// runs under the sanitizers); what DIOPI has that the library does not (N-d losses, variable-length
// attention) is counted as "not run" in the summary, with the reason.
#include "elementwise_util.h"

#include <mlu/op_args.h>
#include <mlu/op_invoke.h>

#include <gmock/gmock.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using optest::Dims;
using optest::Handle;
using optest::Tensor;
using optest::Tolerance;

constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT, kF16 = MLUOP_DTYPE_HALF, kBF16 = MLUOP_DTYPE_BFLOAT16,
                          kF64 = MLUOP_DTYPE_DOUBLE, kI8 = MLUOP_DTYPE_INT8, kI16 = MLUOP_DTYPE_INT16,
                          kI32 = MLUOP_DTYPE_INT32, kI64 = MLUOP_DTYPE_INT64, kU8 = MLUOP_DTYPE_UINT8,
                          kBool = MLUOP_DTYPE_BOOL;
const std::vector<mluopDataType_t> kFloats = {kF32, kF16, kBF16};
const std::vector<mluopDataType_t> kInts = {kI8, kI16, kI32, kI64, kU8};
const std::vector<mluopDataType_t> kIntsAndBool = {kI8, kI16, kI32, kI64, kU8, kBool};

bool isFloat(mluopDataType_t t) { return t == kF32 || t == kF16 || t == kBF16 || t == kF64; }
std::string name(mluopDataType_t t) { return mluopGetNameOfDataType(t); }
std::string shape(const Dims& d) { return testing::PrintToString(d); }

}  // namespace

namespace conformance {

using mlu::invoke;  // the op's C entry point called from its argument struct

// One side of a case (the device's or the reference's): the tensors it made, found again by their data.
// Values come from a generator seeded per case, so both sides get the same ones.
class Side {
 public:
  Side(bool device, std::uint32_t seed) : device_(device), seed_(seed) {}

  mlu::TensorView tensor(mluopDataType_t dtype, const Dims& dims, const std::vector<double>& values,
                         const Dims& strides = {}) {
    tensors_.push_back(std::make_unique<Tensor>(device_ ? Tensor::device(dtype, dims, values, strides)
                                                        : Tensor::host(dtype, dims, values, strides)));
    return tensors_.back()->view();
  }
  // A tensor of DIOPI-like random values for its dtype: floats in [lo, hi), integers in [-4, 4) (uint8
  // [0, 8)), bool 0/1.
  mlu::TensorView random(mluopDataType_t dtype, const Dims& dims, double lo = -2, double hi = 2,
                         const Dims& strides = {}) {
    std::vector<double> v = optest::randomValues(optest::numel(dims), seed_++, lo, hi);
    if (!isFloat(dtype)) {
      for (double& x : v) {
        x = std::floor(x * 4.0 / std::max(std::fabs(lo), std::fabs(hi)));
        if (dtype == kU8) x = std::fabs(x) * 2;
        if (dtype == kBool) x = x > 0 ? 1 : 0;
      }
    }
    return tensor(dtype, dims, v, strides);
  }
  // Whole numbers drawn uniformly from [lo, hi) (index and target values).
  mlu::TensorView integers(mluopDataType_t dtype, const Dims& dims, double lo, double hi) {
    std::vector<double> v = optest::randomValues(optest::numel(dims), seed_++, lo, hi);
    for (double& x : v) x = std::min(std::floor(x), hi - 1);
    return tensor(dtype, dims, v);
  }
  mlu::TensorView output(mluopDataType_t dtype, const Dims& dims) { return tensor(dtype, dims, {}); }
  const Tensor* find(const void* data) const {
    for (const auto& t : tensors_)
      if (t->data() == data) return t.get();
    return nullptr;
  }

 private:
  bool device_;
  std::uint32_t seed_;
  std::vector<std::unique_ptr<Tensor>> tensors_;
};

enum class Expect { kMatch, kRefused, kDeviceNotSupported };

struct Outcome {
  bool pass = false;
  std::string why;
};

bool close(const std::vector<double>& a, const std::vector<double>& b, Tolerance tol, std::string& why) {
  if (a.size() != b.size()) {
    why = "sizes differ";
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if ((std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i]) continue;
    if (!(std::fabs(a[i] - b[i]) <= tol.atol + tol.rtol * std::fabs(b[i]))) {
      why = "element " + std::to_string(i) + ": device " + std::to_string(a[i]) + ", reference " +
            std::to_string(b[i]);
      return false;
    }
  }
  return true;
}

// Builds the case's arguments on both sides (build is called once per side), runs the op on the device
// and in the reference, and checks the expectation; outputs compare within the dtype's tolerance times
// `scale` (exactly for integers and bool).
template <typename Args>
Outcome runCase(const Handle& handle, std::uint32_t seed, const std::function<void(Side&, Args&)>& build,
                Expect expect, double scale) {
  Side dev(true, seed), host(false, seed);
  Args da{}, ha{};
  build(dev, da);
  build(host, ha);
  const mluopStatus_t ds = invoke(handle, da);
  const mlu::Status hs = mlu::reference::run(ha);
  Outcome o;
  if (expect == Expect::kRefused) {
    o.pass = ds == MLUOP_STATUS_BAD_PARAM && hs.code == MLUOP_STATUS_BAD_PARAM;
    if (!o.pass)
      o.why = "expected BAD_PARAM from both, got device " + std::to_string(ds) + ", reference " + hs.message;
    return o;
  }
  if (expect == Expect::kDeviceNotSupported) {
    o.pass = ds == MLUOP_STATUS_NOT_SUPPORTED && hs.ok();
    if (!o.pass)
      o.why = "expected NOT_SUPPORTED and a reference result: " + std::string(mluopGetLastErrorMessage()) +
              " / " + hs.message;
    return o;
  }
  if (ds != MLUOP_STATUS_SUCCESS || !hs.ok()) {
    o.why = "device: " + std::string(ds == MLUOP_STATUS_SUCCESS ? "ok" : mluopGetLastErrorMessage()) +
            "; reference: " + (hs.ok() ? "ok" : hs.message);
    return o;
  }
  handle.sync();
  const auto dt = mlu::tensorArgs(da);
  const auto ht = mlu::tensorArgs(ha);
  for (std::size_t i = 0; i < dt.size(); ++i) {
    if (!mlu::writes(dt[i].meta.role) || !dt[i].view->present) continue;
    const Tensor* d = dev.find(dt[i].view->data);
    const Tensor* h = host.find(ht[i].view->data);
    if (d == nullptr || h == nullptr) continue;
    Tolerance tol = optest::toleranceFor(dt[i].view->dtype);
    if (!isFloat(dt[i].view->dtype)) tol = {0, 0};
    tol.atol *= scale;
    tol.rtol *= scale;
    std::string why;
    if (!close(d->values(), h->values(), tol, why)) {
      o.why = std::string(dt[i].meta.name) + " " + why;
      return o;
    }
  }
  o.pass = true;
  return o;
}

// A registered case: its category, a label, and how to run it.
struct Case {
  std::string category, label;
  std::function<Outcome(const Handle&)> run;
};

class Registry {
 public:
  template <typename Args>
  void add(const std::string& category, const std::string& label, std::function<void(Side&, Args&)> build,
           Expect expect = Expect::kMatch, double scale = 1.0) {
    const auto seed = static_cast<std::uint32_t>(cases_.size() * 7919 + 1);
    cases_.push_back({category, std::string(Args::kName) + " " + label,
                      [build = std::move(build), expect, scale, seed](const Handle& h) {
                        return runCase<Args>(h, seed, build, expect, scale);
                      }});
  }
  void notRun(const std::string& category, const std::string& what, int count) {
    not_run_[category].emplace_back(what, count);
  }
  const std::vector<Case>& cases() const { return cases_; }
  const std::map<std::string, std::vector<std::pair<std::string, int>>>& notRun() const { return not_run_; }

 private:
  std::vector<Case> cases_;
  std::map<std::string, std::vector<std::pair<std::string, int>>> not_run_;
};

}  // namespace conformance

namespace {

using conformance::Expect;
using conformance::Registry;
using conformance::Side;
using mlu::TensorView;

// ---------------------------------------------------------------------------------------------------------
// Category 1: edge cases the library refused before (gather 0-d/empty, uniform low == high, normal std 0,
// linear's broadcast bias on an empty output, layer_norm on empty tensors and odd eps, fill of negative
// values into uint8) and the conversions (copy of negative floats and ints into uint8).

void edgeCases(Registry& r) {
  const std::string cat = "edge cases";
  struct Gather {
    int dim;
    Dims x, index;
  };
  for (const Gather& g : std::vector<Gather>{{0, {8}, {}},
                                             {-1, {9}, {12}},
                                             {1, {3, 9}, {2, 15}},
                                             {0, {16, 4, 4}, {16, 4, 4}},
                                             {-2, {14, 6, 2}, {13, 10, 1}},
                                             {1, {8, 4, 14, 14}, {8, 4, 14, 14}},
                                             {0, {2, 0}, {1, 0}},
                                             {-2, {5, 0, 9}, {16, 0, 14}},
                                             {-1, {}, {}},
                                             {0, {}, {15}}}) {
    for (const mluopDataType_t dtype : {kF32, kF16, kI16, kI32, kI64, kU8, kI8, kBool}) {
      r.add<mlu::gather_args>(
          cat, name(dtype) + " x" + shape(g.x) + " index" + shape(g.index),
          [g, dtype](Side& s, mlu::gather_args& a) {
            a.dim = g.dim;
            a.x = s.random(dtype, g.x);
            const int nd = static_cast<int>(g.x.size());
            const std::int64_t size =
                g.x.empty() ? 1 : g.x[static_cast<std::size_t>(g.dim < 0 ? g.dim + nd : g.dim)];
            a.index = s.integers(kI64, g.index, 0, std::max<double>(static_cast<double>(size), 1));
            a.y = s.output(dtype, g.index);
          });
    }
  }
  struct Range {
    double low, high;
    Dims y;
  };
  for (const Range& u : std::vector<Range>{{0, 1, {}},
                                           {0.5, 1.5, {1}},
                                           {-0.125, 0.125, {64, 64}},
                                           {0.25, 0.25, {16, 1, 3, 3}},
                                           {-0.0481, 0.0481, {96, 48, 3, 3}},
                                           {-5, -1, {4, 3, 5}},
                                           {0, 0, {0}},
                                           {2.3, 12, {4, 0}},
                                           {-4, 3, {3, 0, 9}}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      r.add<mlu::uniform_args>(
          cat, name(dtype) + " [" + std::to_string(u.low) + ", " + std::to_string(u.high) + ") " + shape(u.y),
          [u, dtype](Side& s, mlu::uniform_args& a) {
            a.seed = 7;
            a.offset = 3;
            a.low = u.low;
            a.high = u.high;
            a.y = s.output(dtype, u.y);
          });
    }
  }
  struct Normal {
    double mean, std;
    Dims y;
  };
  for (const Normal& n : std::vector<Normal>{{-1, 0, {}},
                                             {-0.5, 0.5, {1280}},
                                             {0, 1, {32, 160}},
                                             {0.1, 2.3, {320, 8}},
                                             {2, 3, {32, 80}},
                                             {1, 1, {2, 2, 20, 16}},
                                             {0, 1, {320, 2, 3, 3}},
                                             {0.2, 0.5, {0}},
                                             {-2, 0, {4, 0}},
                                             {0, 3, {2, 0, 9}}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      r.add<mlu::normal_args>(
          cat,
          name(dtype) + " mean " + std::to_string(n.mean) + " std " + std::to_string(n.std) + " " +
              shape(n.y),
          [n, dtype](Side& s, mlu::normal_args& a) {
            a.seed = 11;
            a.offset = 0;
            a.mean = n.mean;
            a.std = n.std;
            a.y = s.output(dtype, n.y);
          },
          Expect::kMatch, 4);
    }
  }
  // linear: DIOPI's four (the 5-d input cut in its leading dims)
  struct Linear {
    Dims x, w, b;
    bool bias;
  };
  for (const Linear& l : std::vector<Linear>{{{2, 512}, {10, 512}, {10}, true},
                                             {{16, 49, 128}, {384, 128}, {}, false},
                                             {{2, 3, 6, 4, 512}, {1, 512}, {1}, true},
                                             {{16, 8}, {0, 8}, {16, 0}, true}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      r.add<mlu::linear_args>(
          cat, name(dtype) + " x" + shape(l.x) + " w" + shape(l.w) + " b" + shape(l.b),
          [l, dtype](Side& s, mlu::linear_args& a) {
            a.x = s.random(dtype, l.x, -1, 1);
            a.weight = s.random(dtype, l.w, -0.1, 0.1);
            if (l.bias) a.bias = s.random(dtype, l.b);
            Dims y = l.x;
            y.back() = l.w[0];
            a.y = s.output(dtype, y);
          },
          Expect::kMatch, 8);
    }
  }
  struct LayerNorm {
    Dims x;
    int normalized_ndim;
    bool affine;
    double eps;
  };
  for (const LayerNorm& l : std::vector<LayerNorm>{{{2, 5, 3, 5}, 3, false, 1e-5},
                                                   {{2, 313, 128}, 1, true, 1e-5},
                                                   {{2, 64}, 1, true, 1e-12},
                                                   {{32}, 1, true, 0},
                                                   {{2, 5, 3, 5}, 2, true, -1e-5},
                                                   {{2, 16, 128}, 3, true, 2},
                                                   {{0}, 1, true, 1e-2},
                                                   {{0, 12}, 2, true, 1e-8},
                                                   {{6, 0, 9}, 1, true, -3}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      r.add<mlu::layer_norm_forward_args>(
          cat, name(dtype) + " x" + shape(l.x) + " eps " + std::to_string(l.eps),
          [l, dtype](Side& s, mlu::layer_norm_forward_args& a) {
            a.normalized_ndim = l.normalized_ndim;
            a.eps = l.eps;
            a.x = s.random(dtype, l.x);
            const Dims inner(l.x.end() - l.normalized_ndim, l.x.end());
            const Dims outer(l.x.begin(), l.x.end() - l.normalized_ndim);
            if (l.affine) {
              a.weight = s.random(dtype, inner);
              a.bias = s.random(dtype, inner);
            }
            a.y = s.output(dtype, l.x);
            a.mean = s.output(kF32, outer);  // float32 statistics for float32 and the half types
            a.rstd = s.output(kF32, outer);
          },
          Expect::kMatch, 4);
    }
  }
  // fill (fill_not_float): every value on every integer dtype and shape, fractional ones truncated, -10
  // into uint8 wrapping to 246
  for (const double value : {0.234, 3.0, 4.8, -10.0, 0.23, 1.0, 0.0}) {
    for (const Dims& dims : std::vector<Dims>{{}, {1}, {64}, {4, 49}, {0}, {0, 5}, {3, 0, 6}}) {
      for (const mluopDataType_t dtype : kIntsAndBool) {
        r.add<mlu::fill_args>(cat, name(dtype) + " " + std::to_string(value) + " " + shape(dims),
                              [value, dims, dtype](Side& s, mlu::fill_args& a) {
                                a.value = value;
                                a.y = s.output(dtype, dims);
                              });
      }
    }
  }
  // cast_dtype / copy: the pairs without complex, on DIOPI's shapes (source broadcast where theirs is)
  struct Pair {
    mluopDataType_t src, dst;
  };
  for (const Pair& p : std::vector<Pair>{{kF32, kI32},
                                         {kF32, kU8},
                                         {kF16, kBool},
                                         {kI64, kF32},
                                         {kI32, kF32},
                                         {kI16, kF32},
                                         {kI8, kI16},
                                         {kU8, kF16},
                                         {kBool, kI8},
                                         {kU8, kI8},
                                         {kI8, kU8},
                                         {kI8, kBool},
                                         {kI16, kU8},
                                         {kI32, kI64},
                                         {kI64, kI32},
                                         {kF16, kI32},
                                         {kF32, kI64},
                                         {kU8, kBool},
                                         {kBool, kU8}}) {
    for (const Dims& dims : std::vector<Dims>{{32, 64}, {16, 8}, {}, {0}, {4, 0}, {5, 0, 7}}) {
      r.add<mlu::copy_args>(cat, name(p.src) + " -> " + name(p.dst) + " " + shape(dims),
                            [p, dims](Side& s, mlu::copy_args& a) {
                              a.x = s.random(p.src, dims, -300, 300);
                              a.y = s.output(p.dst, dims);
                            });
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Category 2: the features DIOPI tests.

void lossCases(Registry& r, const std::string& cat) {
  struct Nll {
    Dims input;
    bool weight;
    int reduction;
    std::int64_t ignore_index;
  };
  const int kNone = MLUOP_REDUCTION_NONE, kMean = MLUOP_REDUCTION_MEAN, kSum = MLUOP_REDUCTION_SUM;
  // The target's shape: the scores' without the class dim (dim 1; dim 0 of a 1-d input).
  const auto targetDims = [](const Dims& input) {
    Dims t;
    for (std::size_t d = 0; d < input.size(); ++d)
      if (d != (input.size() == 1 ? 0u : 1u)) t.push_back(input[d]);
    return t;
  };
  // Targets in [0, C), every fifth set to ignore_index when that is a class or C (DIOPI's 79 with C = 79).
  const auto targets = [targetDims](Side& s, const Dims& input, std::int64_t ignore) {
    const std::int64_t classes = input.size() == 1 ? input[0] : input[1];
    const Dims dims = targetDims(input);
    std::vector<double> t = optest::randomValues(optest::numel(dims), 5, 0, static_cast<double>(classes));
    for (std::size_t i = 0; i < t.size(); ++i) {
      t[i] = classes == 0 ? 0 : std::floor(t[i]);
      if (i % 5 == 0 && ignore >= 0 && ignore <= classes) t[i] = static_cast<double>(ignore);
    }
    return s.tensor(kI64, dims, t);
  };
  // DIOPI's nll_loss cases (the largest spatial ones cut) and nll_loss_empty_tensor
  for (const Nll& c : std::vector<Nll>{{{100}, false, kMean, -100},
                                       {{200, 79}, true, kNone, 79},
                                       {{2, 92, 29}, true, kMean, -100},
                                       {{2, 15, 32, 32}, false, kSum, 0},
                                       {{79}, true, kSum, 79},
                                       {{180, 80}, true, kSum, 0},
                                       {{2, 79, 8, 8}, true, kMean, 79},
                                       {{3, 80, 5, 4, 5}, true, kNone, 100},
                                       {{5, 16, 0}, true, kNone, -100},
                                       {{0, 16}, true, kMean, 94},
                                       {{0, 5, 6, 1, 3}, true, kSum, 62},
                                       {{4, 82, 0, 3}, true, kMean, 0},
                                       {{2048, 32}, false, kMean, -100},
                                       {{0}, false, kNone, 0},
                                       {{16, 0}, true, kMean, 0},
                                       {{5, 0, 5, 6, 0, 3}, true, kSum, 0},
                                       {{4, 0, 8, 3}, true, kMean, 0}}) {
    for (const mluopDataType_t dtype : kFloats) {
      const std::int64_t classes = c.input.size() == 1 ? c.input[0] : c.input[1];
      const Dims out = c.reduction == kNone ? targetDims(c.input) : Dims{};
      const std::string label = name(dtype) + " input" + shape(c.input) + (c.weight ? " weighted" : "") +
                                " reduction " + std::to_string(c.reduction) + " ignore " +
                                std::to_string(c.ignore_index);
      r.add<mlu::nll_loss_forward_args>(
          cat, label,
          [=](Side& s, mlu::nll_loss_forward_args& a) {
            a.reduction = c.reduction;
            a.ignore_index = c.ignore_index;
            a.input = s.random(dtype, c.input, -4, 0);
            a.target = targets(s, c.input, c.ignore_index);
            if (c.weight) a.weight = s.random(dtype, {classes}, 0.1, 2);
            a.output = s.output(dtype, out);
          },
          Expect::kMatch, 16);
      r.add<mlu::nll_loss_backward_args>(
          cat, label,
          [=](Side& s, mlu::nll_loss_backward_args& a) {
            a.reduction = c.reduction;
            a.ignore_index = c.ignore_index;
            a.grad_output = s.random(dtype, out, 0.5, 2);
            a.target = targets(s, c.input, c.ignore_index);
            if (c.weight) a.weight = s.random(dtype, {classes}, 0.1, 2);
            a.grad_input = s.output(dtype, c.input);
          },
          Expect::kMatch, 4);
    }
  }
  struct Ce {
    Dims input;
    bool weight;
    int reduction;
    std::int64_t ignore_index;
    double smoothing;
  };
  // DIOPI's cross_entropy cases (label smoothing True = 1) and cross_entropy_empty_tensor
  for (const Ce& c : std::vector<Ce>{{{1024, 81}, false, kMean, -100, 0.0},
                                     {{3, 9}, true, kNone, 9, 1.0},
                                     {{64, 9}, true, kSum, 9, 1.0},
                                     {{5, 9, 12, 4}, true, kSum, 9, 0.3},
                                     {{0, 16}, true, kNone, 5, 0.0},
                                     {{0, 5, 6}, true, kSum, -100, -1.3},
                                     {{4, 6, 0, 3}, true, kMean, 1, 0.4},
                                     {{5, 0}, false, kNone, 0, 0.0}}) {
    for (const mluopDataType_t dtype : kFloats) {
      const std::int64_t classes = c.input.size() == 1 ? c.input[0] : c.input[1];
      const Dims out = c.reduction == kNone ? targetDims(c.input) : Dims{};
      const std::string label = name(dtype) + " logits" + shape(c.input) + (c.weight ? " weighted" : "") +
                                " reduction " + std::to_string(c.reduction) + " smoothing " +
                                std::to_string(c.smoothing);
      r.add<mlu::cross_entropy_forward_args>(
          cat, label,
          [=](Side& s, mlu::cross_entropy_forward_args& a) {
            a.reduction = c.reduction;
            a.ignore_index = c.ignore_index;
            a.label_smoothing = c.smoothing;
            a.logits = s.random(dtype, c.input, -3, 3);
            a.target = targets(s, c.input, c.ignore_index);
            if (c.weight) a.weight = s.random(dtype, {classes}, 0.1, 2);
            a.output = s.output(dtype, out);
          },
          Expect::kMatch, 16);
      r.add<mlu::cross_entropy_backward_args>(
          cat, label,
          [=](Side& s, mlu::cross_entropy_backward_args& a) {
            a.reduction = c.reduction;
            a.ignore_index = c.ignore_index;
            a.label_smoothing = c.smoothing;
            a.grad_output = s.random(dtype, out, 0.5, 2);
            a.logits = s.random(dtype, c.input, -3, 3);
            a.target = targets(s, c.input, c.ignore_index);
            if (c.weight) a.weight = s.random(dtype, {classes}, 0.1, 2);
            a.grad_logits = s.output(dtype, c.input);
          },
          Expect::kMatch, 4);
    }
  }
  r.notRun(cat, "cross_entropy with probability targets", 8);
}

void poolingCases(Registry& r, const std::string& cat) {
  struct Pool {
    Dims x;
    std::vector<int> kernel, stride, padding, dilation;
    bool ceil;
  };
  const auto out = [](const Pool& p) {
    const int base = p.x.size() == 3 ? 1 : 0;
    Dims o = p.x;
    for (int i = 0; i < 2; ++i) {
      const std::int64_t in = p.x[static_cast<std::size_t>(2 - base + i)];
      const std::int64_t d = p.dilation.empty() ? 1 : p.dilation[static_cast<std::size_t>(i)];
      const std::int64_t k = p.kernel[static_cast<std::size_t>(i)], s = p.stride[static_cast<std::size_t>(i)],
                         pad = p.padding[static_cast<std::size_t>(i)];
      std::int64_t num = in + 2 * pad - d * (k - 1) - 1 + (p.ceil ? s - 1 : 0);
      std::int64_t v = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
      if (p.ceil && (v - 1) * s >= in + pad) --v;
      o[static_cast<std::size_t>(2 - base + i)] = v;
    }
    return o;
  };
  // DIOPI's max_pool2d cases (stride None = kernel; the (2, 64, 352, 528) one cut to (2, 4, 44, 66))
  for (const Pool& p : std::vector<Pool>{{{3, 12, 20}, {6, 6}, {6, 6}, {0, 0}, {1, 1}, false},
                                         {{5, 4, 17, 22}, {6, 12}, {3, 100}, {2, 6}, {4, 3}, true},
                                         {{6, 17, 23}, {6, 8}, {3, 2}, {2, 3}, {2, 3}, false},
                                         {{1, 4, 17, 23}, {6, 8}, {3, 2}, {2, 3}, {2, 3}, true},
                                         {{2, 4, 44, 66}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
                                         {{2, 16, 12, 40}, {2, 1}, {2, 1}, {0, 0}, {1, 1}, true},
                                         {{2, 16, 4, 26}, {2, 2}, {2, 1}, {0, 1}, {1, 1}, false},
                                         {{3, 4, 10}, {3, 3}, {2, 2}, {0, 0}, {2, 2}, true}}) {
    for (const mluopDataType_t dtype : kFloats) {
      const Dims y = out(p);
      const std::string label = name(dtype) + " x" + shape(p.x) + " d" + testing::PrintToString(p.dilation) +
                                (p.ceil ? " ceil" : "");
      r.add<mlu::max_pool2d_forward_args>(cat, label, [=](Side& s, mlu::max_pool2d_forward_args& a) {
        a.kernel = p.kernel;
        a.stride = p.stride;
        a.padding = p.padding;
        a.dilation = p.dilation;
        a.ceil_mode = p.ceil;
        a.x = s.random(dtype, p.x);
        a.y = s.output(dtype, y);
        a.indices = s.output(kI64, y);
      });
      r.add<mlu::max_pool2d_backward_args>(
          cat, label,
          [=](Side& s, mlu::max_pool2d_backward_args& a) {
            a.kernel = p.kernel;
            a.stride = p.stride;
            a.padding = p.padding;
            a.dilation = p.dilation;
            a.ceil_mode = p.ceil;
            a.grad_output = s.random(dtype, y);
            // indices inside the plane (any, as a forward could give: each names one input position)
            const std::int64_t plane = p.x[p.x.size() - 1] * p.x[p.x.size() - 2];
            std::vector<double> idx =
                optest::randomValues(optest::numel(y), 3, 0, static_cast<double>(plane) - 0.001);
            for (double& v : idx) v = std::floor(v);
            a.indices = s.tensor(kI64, y, idx);
            a.grad_input = s.output(dtype, p.x);
          },
          Expect::kMatch, 4);
    }
  }
}

void normCases(Registry& r, const std::string& cat) {
  struct Norm {
    double p;
    std::vector<int> dims;
    Dims x;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const auto reduced = [](const Dims& x, const std::vector<int>& dims) {
    if (dims.empty()) return Dims{};
    Dims y;
    for (int d = 0; d < static_cast<int>(x.size()); ++d) {
      bool cut = false;
      for (int e : dims) cut = cut || (e < 0 ? e + static_cast<int>(x.size()) : e) == d;
      if (!cut) y.push_back(x[static_cast<std::size_t>(d)]);
    }
    return y;
  };
  // DIOPI's norm cases (dim None = every dim; the 0-d x reduces its one element)
  for (const Norm& n : std::vector<Norm>{{0, {}, {}},
                                         {2.5, {}, {128}},
                                         {inf, {0, 1}, {384, 128}},
                                         {-inf, {1, 2}, {256, 512, 1, 1}},
                                         {2, {1}, {384, 128}},
                                         {-2, {-1}, {384, 128}},
                                         {1, {0}, {0}},
                                         {2, {-1}, {0, 12}},
                                         {0, {0, -2}, {13, 0, 4}}}) {
    for (const mluopDataType_t dtype : kFloats) {
      r.add<mlu::norm_args>(
          cat, name(dtype) + " p " + std::to_string(n.p) + " x" + shape(n.x),
          [=](Side& s, mlu::norm_args& a) {
            a.p = n.p;
            a.dims = n.dims;
            a.keepdim = false;
            a.x = s.random(dtype, n.x);
            a.y = s.output(dtype, reduced(n.x, n.dims));
          },
          Expect::kMatch, 16);
    }
  }
}

void optimizerCases(Registry& r, const std::string& cat) {
  struct Sgd {
    float lr, momentum, weight_decay, dampening;
    bool nesterov;
    Dims shape;
    bool buffer;
  };
  // DIOPI's sgd cases and sgd_without_buf; the ones PyTorch's SGD refuses (negative hyper-parameters are
  // not among them: momentum > 1 and dampening < 0 or > 1 are taken)
  for (const Sgd& c : std::vector<Sgd>{{.05f, .5f, 0, 0, true, {}, true},
                                       {.001f, 0, .5f, -0.5f, false, {16, 8}, true},
                                       {.1f, .01f, 0, .1f, false, {2, 3, 16}, true},
                                       {.1f, .01f, .1f, 0, true, {4, 32, 7, 7}, true},
                                       {0, 1, 3, 2, false, {4, 16, 3, 8, 2}, true},
                                       {3, .5f, 2.3f, 3.0f, false, {0}, true},
                                       {.2f, 2, 4.0f, 0, true, {3, 0}, true},
                                       {.07f, 1.2f, 5, 6.5f, false, {4, 0, 9}, true},
                                       {.1f, .01f, 0, .1f, false, {2, 3, 16}, false},
                                       {.1f, .01f, .1f, 0, true, {4, 32, 7, 7}, false}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      r.add<mlu::sgd_step_args>(
          cat,
          name(dtype) + " " + shape(c.shape) + (c.nesterov ? " nesterov" : "") +
              (c.buffer ? "" : " no buffer"),
          [=](Side& s, mlu::sgd_step_args& a) {
            a.lr = c.lr;
            a.momentum = c.momentum;
            a.dampening = c.dampening;
            a.weight_decay = c.weight_decay;
            a.nesterov = c.nesterov;
            a.param = s.random(dtype, c.shape);
            a.grad = s.random(dtype, c.shape);
            if (c.buffer) a.momentum_buffer = s.random(dtype, c.shape, 0, 1);
          },
          Expect::kMatch, 32);
    }
  }
  struct Adam {
    float lr, beta1, beta2, eps;
    std::int64_t step;
    float weight_decay;
    bool amsgrad;
    Dims shape;
  };
  // DIOPI's four active adam/adamw cases have hyper-parameters torch.optim.AdamW refuses (eps < 0, a
  // negative weight_decay or lr, beta1 outside [0, 1)): BAD_PARAM, as documented. Its commented-out cases
  // with sane hyper-parameters run, with and without amsgrad.
  for (const Adam& c : std::vector<Adam>{{0, 0, 0.3f, -1e-2f, 3, -0.2f, false, {}},
                                         {3.2f, -2, 1, 0, 2, 2.5f, false, {0}},
                                         {-2, 4.3f, -4, 2, 4, 0, true, {4, 0}},
                                         {0, 0, 0, 1e-4f, 5, -3, true, {12, 0, 9}}}) {
    r.add<mlu::adamw_step_args>(
        cat, "degenerate " + shape(c.shape),
        [=](Side& s, mlu::adamw_step_args& a) {
          a.lr = c.lr;
          a.beta1 = c.beta1;
          a.beta2 = c.beta2;
          a.eps = c.eps;
          a.step = c.step;
          a.weight_decay = c.weight_decay;
          a.grad_scale = 1;
          a.amsgrad = c.amsgrad;
          a.param = s.random(kF32, c.shape);
          a.grad = s.random(kF32, c.shape);
          a.exp_avg = s.random(kF32, c.shape);
          a.exp_avg_sq = s.random(kF32, c.shape, 0, 1);
          if (c.amsgrad) a.max_exp_avg_sq = s.random(kF32, c.shape, 0, 1);
        },
        Expect::kRefused);
  }
  for (const Dims& dims : std::vector<Dims>{{16}, {16, 8}, {2, 3, 16}, {4, 32, 7, 7}, {4, 0}, {12, 0, 9}}) {
    for (const bool amsgrad : {false, true}) {
      for (const mluopDataType_t dtype : {kF32, kF16}) {
        r.add<mlu::adamw_step_args>(
            cat, name(dtype) + " " + shape(dims) + (amsgrad ? " amsgrad" : ""),
            [=](Side& s, mlu::adamw_step_args& a) {
              a.lr = 0.001f;
              a.beta1 = 0.9f;
              a.beta2 = 0.99f;
              a.eps = 1e-8f;
              a.step = 3;
              a.weight_decay = 0.01f;
              a.grad_scale = 1;
              a.amsgrad = amsgrad;
              a.param = s.random(dtype, dims);
              a.grad = s.random(dtype, dims);
              a.exp_avg = s.random(dtype, dims, -0.1, 0.1);
              a.exp_avg_sq = s.random(dtype, dims, 0, 0.1);
              if (amsgrad) a.max_exp_avg_sq = s.random(dtype, dims, 0, 0.1);
            },
            Expect::kMatch, 8);
      }
    }
  }
}

void randomAndRotaryCases(Registry& r, const std::string& cat) {
  // normal_std_tensor, normal_mean_tensor and normal_tensor (the mixed-dtype pairs as one dtype; the
  // (256, 256, 3, 3) pair cut to (16, 256, 3, 3))
  struct Normal {
    Dims mean, std, y;
  };
  std::vector<Normal> normals;
  for (const Dims& d :
       std::vector<Dims>{{}, {16}, {8, 4}, {16, 16, 3, 3}, {256, 128, 1, 1}, {0}, {4, 0}, {4, 0, 7}}) {
    normals.push_back({{}, d, d});
    normals.push_back({d, {}, d});
  }
  for (const Normal& n : std::vector<Normal>{{{}, {128}, {128}},
                                             {{16, 64}, {16, 64}, {16, 64}},
                                             {{8, 8, 16}, {8, 16}, {8, 8, 16}},
                                             {{16, 1, 3, 3}, {16, 256, 3, 3}, {16, 256, 3, 3}},
                                             {{256, 128, 3, 1}, {256, 128, 1, 1}, {256, 128, 3, 1}},
                                             {{0}, {0}, {0}},
                                             {{4, 0}, {2, 1, 1}, {2, 4, 0}},
                                             {{2, 0, 9}, {0, 9}, {2, 0, 9}}}) {
    normals.push_back(n);
  }
  for (const Normal& n : normals) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      r.add<mlu::normal_tensor_args>(
          cat, name(dtype) + " mean" + shape(n.mean) + " std" + shape(n.std),
          [=](Side& s, mlu::normal_tensor_args& a) {
            a.seed = 5;
            a.offset = 2;
            a.mean = s.random(dtype, n.mean);
            a.std = s.random(dtype, n.std, 0, 2);
            a.y = s.output(dtype, n.y);
          },
          Expect::kMatch, 8);
    }
  }
  // rotary_emb and rotary_emb_empty_tensor (the (1, 125, 16, 512) pair cut to D = 64)
  struct Rotary {
    Dims x, table;
    bool conj, interleaved;
  };
  for (const Rotary& c : std::vector<Rotary>{{{12}, {6}, true, true},
                                             {{64}, {32}, false, false},
                                             {{2, 128}, {2, 64}, false, true},
                                             {{3, 8, 256}, {3, 1, 128}, false, false},
                                             {{1, 64}, {1, 32}, true, true},
                                             {{3, 5, 12}, {3, 5, 6}, true, false},
                                             {{1, 125, 16, 64}, {125, 1, 32}, false, false},
                                             {{1, 125, 16, 64}, {125, 1, 32}, true, true},
                                             {{2, 64, 16, 32}, {64, 1, 16}, false, true},
                                             {{3, 100, 8, 64}, {100, 1, 32}, true, false},
                                             {{0}, {0}, false, true},
                                             {{0}, {0}, true, false},
                                             {{0, 128}, {0, 64}, false, true},
                                             {{3, 8, 0}, {3, 1, 0}, false, false},
                                             {{1, 0}, {1, 0}, true, true},
                                             {{0, 5, 12}, {0, 5, 6}, true, false},
                                             {{1, 0, 16, 32}, {0, 1, 16}, false, false},
                                             {{1, 125, 16, 0}, {125, 1, 0}, true, true}}) {
    for (const mluopDataType_t dtype : kFloats) {
      r.add<mlu::rotary_embedding_args>(
          cat,
          name(dtype) + " x" + shape(c.x) + (c.conj ? " conj" : "") + (c.interleaved ? " interleaved" : ""),
          [=](Side& s, mlu::rotary_embedding_args& a) {
            a.conj = c.conj;
            a.interleaved = c.interleaved;
            a.x = s.random(dtype, c.x);
            a.cos = s.random(dtype, c.table, -1, 1);
            a.sin = s.random(dtype, c.table, -1, 1);
            a.y = s.output(dtype, c.x);
          },
          Expect::kMatch, 2);
    }
  }
}

void attentionCases(Registry& r, const std::string& cat) {
  // flash_attention_gqa (8:1 and 4:1) and the mha and multihead_attention cases, in [B, H, S, D] with the
  // sequence and head dims cut (DIOPI's (2, 64, 64, 128) is B, S, H, D: here B 2, 8 heads on 1, S 64, D 32)
  struct Attention {
    std::int64_t b, h, hkv, sq, sk, d;
    bool causal;
    double scale;
  };
  for (const Attention& c : std::vector<Attention>{{2, 8, 1, 64, 64, 32, true, 0.0883},
                                                   {1, 8, 2, 64, 64, 32, false, 0},
                                                   {2, 8, 2, 32, 32, 32, true, 0.125},
                                                   {1, 16, 16, 16, 16, 64, true, 0.125},
                                                   {2, 28, 28, 10, 5, 16, false, 1.234},
                                                   {2, 2, 2, 2, 2, 8, false, 0},
                                                   {2, 4, 4, 0, 0, 8, false, 0}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      const std::string label = name(dtype) + " H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) +
                                " Sq " + std::to_string(c.sq) + (c.causal ? " causal" : "");
      r.add<mlu::scaled_dot_product_attention_forward_args>(
          cat, label,
          [=](Side& s, mlu::scaled_dot_product_attention_forward_args& a) {
            a.causal = c.causal;
            a.scale = c.scale;
            a.q = s.random(dtype, {c.b, c.h, c.sq, c.d});
            a.k = s.random(dtype, {c.b, c.hkv, c.sk, c.d});
            a.v = s.random(dtype, {c.b, c.hkv, c.sk, c.d});
            a.o = s.output(dtype, {c.b, c.h, c.sq, c.d});
            a.lse = s.output(kF32, {c.b, c.h, c.sq});
          },
          Expect::kMatch, 8);
    }
  }
  // multihead_attention_varlen and flash_attention_varlen_mha/_gqa (q = k = v packed, one offset list for
  // both sides; heads and head dims cut, the 2784-row case to its first three sequences)
  struct Varlen {
    std::vector<double> cu;
    std::int64_t h, hkv, d;
    bool causal;
    double scale;
  };
  for (const Varlen& c : std::vector<Varlen>{{{0, 0, 0, 1, 1}, 9, 9, 8, true, 0},
                                             {{0, 1, 2}, 4, 4, 16, false, 0},
                                             {{0, 3}, 8, 8, 64, true, 0},
                                             {{0, 13, 66, 153, 256}, 4, 4, 32, false, 0},
                                             {{0, 256, 300, 425, 512}, 2, 2, 32, true, 0},
                                             {{0, 32}, 8, 2, 32, true, 0},
                                             {{0, 16, 48, 64}, 8, 2, 32, true, 0.0883},
                                             {{0, 32, 64, 128, 256}, 4, 2, 32, false, 0},
                                             {{0, 16, 48, 64, 128}, 8, 2, 16, true, 0.125},
                                             {{0, 2, 7, 19, 32, 64, 96, 128, 256, 512}, 4, 2, 16, false, 0},
                                             {{0, 32, 96, 224}, 4, 2, 16, true, 0}}) {
    for (const mluopDataType_t dtype : {kF32, kF16}) {
      const std::int64_t t = static_cast<std::int64_t>(c.cu.back());
      const Dims cu_dims{static_cast<std::int64_t>(c.cu.size())};
      const std::string label = name(dtype) + " T " + std::to_string(t) + " H " + std::to_string(c.h) +
                                " Hkv " + std::to_string(c.hkv) + (c.causal ? " causal" : "");
      r.add<mlu::attention_varlen_forward_args>(
          cat, label,
          [=](Side& s, mlu::attention_varlen_forward_args& a) {
            a.causal = c.causal;
            a.scale = c.scale;
            a.q = s.random(dtype, {t, c.h, c.d});
            a.k = s.random(dtype, {t, c.hkv, c.d});
            a.v = s.random(dtype, {t, c.hkv, c.d});
            a.cu_seqlens_q = s.tensor(kI64, cu_dims, c.cu);
            a.cu_seqlens_k = s.tensor(MLUOP_DTYPE_INT32, cu_dims, c.cu);
            a.o = s.output(dtype, {t, c.h, c.d});
            a.lse = s.output(kF32, {c.h, t});
          },
          Expect::kMatch, 8);
      r.add<mlu::attention_varlen_backward_args>(
          cat, label,
          [=](Side& s, mlu::attention_varlen_backward_args& a) {
            a.causal = c.causal;
            a.scale = c.scale;
            a.grad_o = s.random(dtype, {t, c.h, c.d});
            a.q = s.random(dtype, {t, c.h, c.d});
            a.k = s.random(dtype, {t, c.hkv, c.d});
            a.v = s.random(dtype, {t, c.hkv, c.d});
            a.o = s.random(dtype, {t, c.h, c.d});
            a.lse = s.random(kF32, {c.h, t}, 1, 3);  // any lse: P = exp(S - lse), the same on both sides
            a.cu_seqlens_q = s.tensor(kI64, cu_dims, c.cu);
            a.cu_seqlens_k = s.tensor(kI64, cu_dims, c.cu);
            a.grad_q = s.output(dtype, {t, c.h, c.d});
            a.grad_k = s.output(dtype, {t, c.hkv, c.d});
            a.grad_v = s.output(dtype, {t, c.hkv, c.d});
          },
          Expect::kMatch, 16);
    }
  }
}

void featureCases(Registry& r) {
  const std::string cat = "features";
  lossCases(r, cat);
  poolingCases(r, cat);
  normCases(r, cat);
  optimizerCases(r, cat);
  randomAndRotaryCases(r, cat);
  attentionCases(r, cat);
}

// ---------------------------------------------------------------------------------------------------------
// Category 3: integer dtypes — DIOPI's pointwise_binary shapes on int8/16/32/64, uint8 (and bool where
// PyTorch takes it), the unary and reduction configs.

template <typename Args>
void binaryInt(Registry& r, const std::string& cat, mluopDataType_t dtype, const Dims& a_dims,
               const Dims& b_dims, const Dims& c_dims, mluopDataType_t c_dtype) {
  r.add<Args>(cat, name(dtype) + " " + shape(a_dims) + " op " + shape(b_dims), [=](Side& s, Args& a) {
    a.a = s.random(dtype, a_dims);
    a.b = s.random(dtype, b_dims);
    a.c = s.output(c_dtype, c_dims);
  });
}

void integerCases(Registry& r) {
  const std::string cat = "integer dtypes";
  struct Shapes {
    Dims a, b, c;
  };
  // pointwise_binary's shapes (the two largest cut in their leading dims) and its broadcasts
  const std::vector<Shapes> shapes = {{{}, {}, {}},
                                      {{1024}, {1024}, {1024}},
                                      {{384, 128}, {384, 128}, {384, 128}},
                                      {{16, 64, 3, 3}, {16, 64, 3, 3}, {16, 64, 3, 3}},
                                      {{2, 4, 16, 128}, {2, 4, 16, 128}, {2, 4, 16, 128}},
                                      {{0}, {0}, {0}},
                                      {{1024}, {1}, {1024}},
                                      {{8, 1, 128}, {16, 128}, {8, 16, 128}},
                                      {{2, 32, 1, 1}, {2, 32, 13, 13}, {2, 32, 13, 13}}};
  for (const Shapes& sh : shapes) {
    for (const mluopDataType_t t : kIntsAndBool) {
      const bool is_bool = t == kBool;
      binaryInt<mlu::add_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      binaryInt<mlu::mul_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      binaryInt<mlu::maximum_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      binaryInt<mlu::minimum_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      binaryInt<mlu::div_args>(r, cat, t, sh.a, sh.b, sh.c, kF32);
      binaryInt<mlu::eq_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::ne_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::lt_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::le_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::gt_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::ge_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::logical_and_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::logical_or_args>(r, cat, t, sh.a, sh.b, sh.c, kBool);
      binaryInt<mlu::bitwise_and_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      binaryInt<mlu::bitwise_or_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      if (!is_bool) {
        binaryInt<mlu::sub_args>(r, cat, t, sh.a, sh.b, sh.c, t);
        binaryInt<mlu::remainder_args>(r, cat, t, sh.a, sh.b, sh.c, t);
      }
    }
  }
  // unary: abs, neg (not bool; uint8 wraps), bitwise_not, logical_not, sign, clamp_scalar's integer cases
  for (const Dims& dims : std::vector<Dims>{{}, {1024}, {384, 128}, {2, 4, 16, 128}, {0}, {4, 0}}) {
    for (const mluopDataType_t t : kIntsAndBool) {
      const auto unary = [&]<typename Args>(mluopDataType_t y_dtype) {
        r.add<Args>(cat, name(t) + " " + shape(dims), [=](Side& s, Args& a) {
          a.x = s.random(t, dims);
          a.y = s.output(y_dtype, dims);
        });
      };
      unary.template operator()<mlu::abs_args>(t);
      unary.template operator()<mlu::bitwise_not_args>(t);
      unary.template operator()<mlu::logical_not_args>(kBool);
      unary.template operator()<mlu::sign_args>(t);
      if (t != kBool) unary.template operator()<mlu::neg_args>(t);
    }
  }
  struct Clamp {
    bool has_min;
    double min;
    bool has_max;
    double max;
    Dims dims;
  };
  for (const Clamp& c : std::vector<Clamp>{{true, -1, false, 0, {}},
                                           {false, 0, true, 0, {182}},
                                           {false, 0, true, 2, {384, 128}},
                                           {true, 1, true, 3, {1, 2429, 2}},
                                           {true, 2, true, 1, {3, 0, 9}},
                                           {true, 0, true, 2, {0}},
                                           {true, -1, false, 0, {4, 0}}}) {
    for (const mluopDataType_t t : kInts) {
      if (t == kU8 && c.has_min && c.min < 0)
        continue;  // DIOPI's uint8 runs with min -1 compare wrapped values
      r.add<mlu::clamp_args>(cat, name(t) + " " + shape(c.dims), [=](Side& s, mlu::clamp_args& a) {
        a.has_min = c.has_min;
        a.min = c.min;
        a.has_max = c.has_max;
        a.max = c.max;
        a.x = s.random(t, c.dims);
        a.y = s.output(t, c.dims);
      });
    }
  }
  // sum (reduce_op_1, reduce_partial_op_4): y int64
  struct Reduce {
    Dims x;
    std::vector<int> dims;
    Dims y;
  };
  for (const Reduce& c : std::vector<Reduce>{{{64}, {}, {}},
                                             {{169, 4}, {-1}, {169}},
                                             {{17, 100, 4}, {0, 1}, {4}},
                                             {{2, 16, 8, 8}, {-1, 0, 2}, {16}},
                                             {{2, 16, 8, 8}, {3}, {2, 16, 8}},
                                             {{0}, {}, {}},
                                             {{0, 2}, {0}, {2}},
                                             {{16, 0, 9}, {1}, {16, 9}},
                                             {{}, {}, {}}}) {
    for (const mluopDataType_t t : kIntsAndBool) {
      r.add<mlu::sum_args>(cat, name(t) + " x" + shape(c.x), [=](Side& s, mlu::sum_args& a) {
        a.dims = c.dims;
        a.keepdim = false;
        a.x = s.random(t, c.x);
        a.y = s.output(kI64, c.y);
      });
    }
  }
  // max / min along a dim (reduce_partial_op_2, max_min_equal_input), argmax (not bool)
  struct Dim {
    Dims x;
    int dim;
    Dims y;
  };
  for (const Dim& c : std::vector<Dim>{{{64}, 0, {}},
                                       {{169, 4}, 1, {169}},
                                       {{17, 100, 4}, -2, {17, 4}},
                                       {{2, 16, 8, 8}, 3, {2, 16, 8}},
                                       {{}, 0, {}},
                                       {{12, 0}, 0, {0}},
                                       {{2, 0, 9}, 2, {2, 0}}}) {
    for (const mluopDataType_t t : kIntsAndBool) {
      const auto extremum = [&]<typename Args>() {
        r.add<Args>(cat, name(t) + " x" + shape(c.x) + " dim " + std::to_string(c.dim),
                    [=](Side& s, Args& a) {
                      a.dim = c.dim;
                      a.keepdim = false;
                      a.x = s.random(t, c.x);
                      a.values = s.output(t, c.y);
                      a.indices = s.output(kI64, c.y);
                    });
      };
      extremum.template operator()<mlu::max_args>();
      extremum.template operator()<mlu::min_args>();
      if (t == kBool) continue;
      r.add<mlu::argmax_args>(
          cat, name(t) + " x" + shape(c.x) + " dim " + std::to_string(c.dim),
          [=](Side& s, mlu::argmax_args& a) {
            a.dim = c.dim;
            a.keepdim = true;
            a.x = s.random(t, c.x);
            Dims y = c.x;
            if (!y.empty())
              y[static_cast<std::size_t>(c.dim < 0 ? c.dim + static_cast<int>(y.size()) : c.dim)] = 1;
            a.indices = s.output(kI64, y);
          });
    }
  }
  // the scalar forms
  for (const mluopDataType_t t : kInts) {
    for (const double value : {2.0, 0.0, 3.0}) {
      r.add<mlu::add_scalar_args>(cat, name(t) + " + " + std::to_string(value),
                                  [=](Side& s, mlu::add_scalar_args& a) {
                                    a.x = s.random(t, {1024});
                                    a.value = value;
                                    a.y = s.output(t, {1024});
                                  });
      r.add<mlu::mul_scalar_args>(cat, name(t) + " * " + std::to_string(value),
                                  [=](Side& s, mlu::mul_scalar_args& a) {
                                    a.x = s.random(t, {1024});
                                    a.value = value;
                                    a.y = s.output(t, {1024});
                                  });
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Category 4: float64 stays the reference's (NOT_SUPPORTED on the device, as on the hardware; the hook's
// automatic fallback carries it — tests/fallback).

void float64Cases(Registry& r) {
  const std::string cat = "float64";
  for (const Dims& dims : std::vector<Dims>{{}, {1024}, {16, 64}, {0, 3}}) {
    const auto binary = [&]<typename Args>() {
      r.add<Args>(
          cat, shape(dims),
          [=](Side& s, Args& a) {
            a.a = s.random(kF64, dims);
            a.b = s.random(kF64, dims, 0.5, 2);
            a.c = s.output(std::is_same_v<Args, mlu::eq_args> ? kBool : kF64, dims);
          },
          Expect::kDeviceNotSupported);
    };
    binary.template operator()<mlu::add_args>();
    binary.template operator()<mlu::mul_args>();
    binary.template operator()<mlu::div_args>();
    binary.template operator()<mlu::remainder_args>();
    binary.template operator()<mlu::eq_args>();
    const auto unary = [&]<typename Args>() {
      r.add<Args>(
          cat, shape(dims),
          [=](Side& s, Args& a) {
            a.x = s.random(kF64, dims, 0.5, 2);
            a.y = s.output(kF64, dims);
          },
          Expect::kDeviceNotSupported);
    };
    unary.template operator()<mlu::exp_args>();
    unary.template operator()<mlu::log_args>();
    unary.template operator()<mlu::erf_args>();
    unary.template operator()<mlu::floor_args>();
    r.add<mlu::sum_args>(
        cat, shape(dims),
        [=](Side& s, mlu::sum_args& a) {
          a.x = s.random(kF64, dims);
          a.y = s.output(kF64, {});
        },
        Expect::kDeviceNotSupported);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Category 5: the ops of real model families (issue 43) on their shapes: MobileNetV3's hardsigmoid and
// hardswish with their backward, a GPT decoder's positions (arange), top-k and top-p sampling (topk, sort,
// cumsum of the sorted probabilities) over a 65-character vocabulary, in every dtype each takes.

void modelCases(Registry& r) {
  const std::string cat = "model ops";
  for (const mluopDataType_t t : kFloats) {
    const Dims act = {4, 16, 8, 8};
    const auto activation = [&]<typename Args>() {
      r.add<Args>(cat, name(t) + " " + shape(act), [=](Side& s, Args& a) {
        a.x = s.random(t, act, -5, 5);
        a.y = s.output(t, act);
      });
    };
    activation.template operator()<mlu::hardsigmoid_args>();
    activation.template operator()<mlu::hardswish_args>();
    const auto backward = [&]<typename Args>() {
      r.add<Args>(cat, name(t) + " " + shape(act), [=](Side& s, Args& a) {
        a.grad_output = s.random(t, act);
        a.x = s.random(t, act, -5, 5);
        a.grad_input = s.output(t, act);
      });
    };
    backward.template operator()<mlu::hardsigmoid_backward_args>();
    backward.template operator()<mlu::hardswish_backward_args>();
  }
  for (const mluopDataType_t t : {kF32, kF16, kBF16, kI64, kI32}) {
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{64}}) {
      r.add<mlu::arange_args>(cat, name(t) + " [" + std::to_string(n) + "]",
                              [=](Side& s, mlu::arange_args& a) {
                                a.start = 0;
                                a.step = 1;
                                a.y = s.output(t, {n});
                              });
    }
  }
  r.add<mlu::arange_args>(
      cat, "step 0",
      [](Side& s, mlu::arange_args& a) {
        a.start = 0;
        a.step = 0;
        a.y = s.output(kF32, {4});
      },
      Expect::kRefused);
  const Dims logits = {8, 65};
  for (const mluopDataType_t t : {kF32, kF16, kBF16, kI64}) {
    for (const std::int64_t k : {std::int64_t{1}, std::int64_t{10}, std::int64_t{65}}) {
      r.add<mlu::topk_args>(cat, name(t) + " " + shape(logits) + " k " + std::to_string(k),
                            [=](Side& s, mlu::topk_args& a) {
                              a.k = k;
                              a.dim = -1;
                              a.largest = true;
                              a.x = s.random(t, logits);
                              a.values = s.output(t, {8, k});
                              a.indices = s.output(kI64, {8, k});
                            });
    }
    r.add<mlu::sort_args>(cat, name(t) + " " + shape(logits) + " descending",
                          [=](Side& s, mlu::sort_args& a) {
                            a.dim = 1;
                            a.descending = true;
                            a.x = s.random(t, logits);
                            a.values = s.output(t, logits);
                            a.indices = s.output(kI64, logits);
                          });
    r.add<mlu::cumsum_args>(
        cat, name(t) + " " + shape(logits),
        [=](Side& s, mlu::cumsum_args& a) {
          a.dim = -1;
          a.x = s.random(t, logits, 0, 1);
          a.y = s.output(t, logits);
        },
        Expect::kMatch, 8.0);  // a running sum of 65 terms
  }
  r.add<mlu::topk_args>(
      cat, "k past the dim",
      [](Side& s, mlu::topk_args& a) {
        a.k = 66;
        a.dim = -1;
        a.largest = true;
        a.x = s.random(kF32, {8, 65});
        a.values = s.output(kF32, {8, 66});
        a.indices = s.output(kI64, {8, 66});
      },
      Expect::kRefused);
  r.add<mlu::sort_args>(
      cat, "float64",
      [](Side& s, mlu::sort_args& a) {
        a.dim = 0;
        a.descending = false;
        a.x = s.random(kF64, {65});
        a.values = s.output(kF64, {65});
        a.indices = s.output(kI64, {65});
      },
      Expect::kDeviceNotSupported);
}

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    edgeCases(reg);
    featureCases(reg);
    integerCases(reg);
    float64Cases(reg);
    modelCases(reg);
    return reg;
  }();
  return r;
}

// Runs every case of a category; each failure names its case; prints the counts.
void runCategory(const std::string& category) {
  const Handle handle;
  int total = 0, passed = 0;
  for (const conformance::Case& c : registry().cases()) {
    if (c.category != category) continue;
    ++total;
    const conformance::Outcome o = c.run(handle);
    if (o.pass) {
      ++passed;
    } else {
      ADD_FAILURE() << category << ": " << c.label << ": " << o.why;
    }
  }
  int not_run = 0;
  std::string reasons;
  if (const auto it = registry().notRun().find(category); it != registry().notRun().end()) {
    for (const auto& [what, count] : it->second) {
      not_run += count;
      reasons += "\n  not run (" + std::to_string(count) + "): " + what;
    }
  }
  std::printf("conformance %s: %d cases, %d passed, %d failed; %d of DIOPI's cases not run%s\n",
              category.c_str(), total, passed, total - passed, not_run, reasons.c_str());
  EXPECT_GT(total, 0);
}

TEST(Conformance, EdgeCasesRefusedBefore) { runCategory("edge cases"); }
TEST(Conformance, FeaturesDiopiTests) { runCategory("features"); }
TEST(Conformance, IntegerDtypes) { runCategory("integer dtypes"); }
TEST(Conformance, Float64StaysTheReferences) { runCategory("float64"); }
TEST(Conformance, ModelFamilyOps) { runCategory("model ops"); }

}  // namespace
