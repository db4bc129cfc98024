// Tests of the normalization and rotary embedding ops: layer_norm, rms_norm, batch_norm and rope, forward
// and backward. For every op: the device against the CPU reference for float32/float16/bfloat16 over shapes
// including size 0, odd sizes and non-contiguous inputs and outputs, with and without weight/bias (and
// batch_norm in training with and without running stats, and in inference); the reference against
// hand-worked values; every backward (grad_input and the weight/bias gradients) against central finite
// differences of its forward in float64; every BAD_PARAM path with its message.
#include "reduce_util.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using optest::Dims;
using optest::expectClose;
using optest::Handle;
using optest::randomValues;
using optest::Tensor;
using optest::Tolerance;
using optest::toleranceFor;
using reducetest::dot;
using reducetest::dtypeLabel;
using reducetest::kDeviceDtypes;
using reducetest::lastError;
using reducetest::makePair;
using reducetest::numericalGradient;
using reducetest::Pair;
using reducetest::permutedStrides;
using testing::HasSubstr;

constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT;
constexpr mluopDataType_t kF16 = MLUOP_DTYPE_HALF;
constexpr mluopDataType_t kF64 = MLUOP_DTYPE_DOUBLE;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// ---- helpers ----

// An optional tensor argument: NULL descriptor and pointer (C) or an absent view (reference) when null.
mluopTensorDescriptor_t D(const Tensor* t) { return t != nullptr ? t->desc() : nullptr; }
void* P(const Tensor* t) { return t != nullptr ? t->data() : nullptr; }
mlu::TensorView V(const Tensor* t) { return t != nullptr ? t->view() : mlu::TensorView{}; }

// The device or the host half of an optional pair.
const Tensor* dev(const std::optional<Pair>& p) { return p ? &p->dev : nullptr; }
const Tensor* host(const std::optional<Pair>& p) { return p ? &p->host : nullptr; }

mluopDataType_t statDtype(mluopDataType_t x) { return x == kF64 ? kF64 : kF32; }

void expectBadParam(mluopStatus_t status, const std::string& message) {
  EXPECT_EQ(status, MLUOP_STATUS_BAD_PARAM) << message;
  EXPECT_THAT(lastError(), HasSubstr(message));
}

void expectBadParam(const mlu::Status& status, const std::string& message) {
  EXPECT_EQ(status.code, MLUOP_STATUS_BAD_PARAM) << message;
  EXPECT_THAT(status.message, HasSubstr(message));
}

void expectOk(const mlu::Status& status) { ASSERT_TRUE(status.ok()) << status.message; }

void expectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                const std::string& what) {
  expectClose(actual, expected, {1e-12, 1e-12}, what);
}

// Random values with a non-zero mean, so centering matters.
std::vector<double> shifted(std::int64_t n, std::uint32_t seed, double shift = 0.75) {
  std::vector<double> v = randomValues(n, seed);
  for (double& x : v) x += shift;
  return v;
}

Dims leading(const Dims& dims, int nn) { return Dims(dims.begin(), dims.end() - nn); }
Dims trailing(const Dims& dims, int nn) { return Dims(dims.end() - nn, dims.end()); }

// The per-dtype tolerance with atol grown for a result accumulated over k elements.
Tolerance sumTolerance(mluopDataType_t dtype, std::int64_t k) {
  return reducetest::reductionTolerance(dtype, k);
}

// ---- op calls: device (C API) and reference (argument structs) ----

mluopStatus_t layerNormForward(const Handle& h, int nn, double eps, const Tensor* x, const Tensor* w,
                               const Tensor* b, const Tensor* y, const Tensor* mean, const Tensor* rstd) {
  return mluopLayerNormForward(h, nn, eps, D(x), P(x), D(w), P(w), D(b), P(b), D(y), P(y), D(mean), P(mean),
                               D(rstd), P(rstd));
}
mlu::Status layerNormForward(int nn, double eps, const Tensor* x, const Tensor* w, const Tensor* b,
                             const Tensor* y, const Tensor* mean, const Tensor* rstd) {
  mlu::layer_norm_forward_args a;
  a.normalized_ndim = nn;
  a.eps = eps;
  a.x = V(x);
  a.weight = V(w);
  a.bias = V(b);
  a.y = V(y);
  a.mean = V(mean);
  a.rstd = V(rstd);
  return mlu::reference::run(a);
}

mluopStatus_t layerNormBackward(const Handle& h, int nn, const Tensor* go, const Tensor* x,
                                const Tensor* mean, const Tensor* rstd, const Tensor* w, const Tensor* gi,
                                const Tensor* gw, const Tensor* gb) {
  return mluopLayerNormBackward(h, nn, D(go), P(go), D(x), P(x), D(mean), P(mean), D(rstd), P(rstd), D(w),
                                P(w), D(gi), P(gi), D(gw), P(gw), D(gb), P(gb));
}
mlu::Status layerNormBackward(int nn, const Tensor* go, const Tensor* x, const Tensor* mean,
                              const Tensor* rstd, const Tensor* w, const Tensor* gi, const Tensor* gw,
                              const Tensor* gb) {
  mlu::layer_norm_backward_args a;
  a.normalized_ndim = nn;
  a.grad_output = V(go);
  a.x = V(x);
  a.mean = V(mean);
  a.rstd = V(rstd);
  a.weight = V(w);
  a.grad_input = V(gi);
  a.grad_weight = V(gw);
  a.grad_bias = V(gb);
  return mlu::reference::run(a);
}

mluopStatus_t rmsNormForward(const Handle& h, int nn, double eps, const Tensor* x, const Tensor* w,
                             const Tensor* y, const Tensor* rstd) {
  return mluopRmsNormForward(h, nn, eps, D(x), P(x), D(w), P(w), D(y), P(y), D(rstd), P(rstd));
}
mlu::Status rmsNormForward(int nn, double eps, const Tensor* x, const Tensor* w, const Tensor* y,
                           const Tensor* rstd) {
  mlu::rms_norm_forward_args a;
  a.normalized_ndim = nn;
  a.eps = eps;
  a.x = V(x);
  a.weight = V(w);
  a.y = V(y);
  a.rstd = V(rstd);
  return mlu::reference::run(a);
}

mluopStatus_t rmsNormBackward(const Handle& h, int nn, const Tensor* go, const Tensor* x, const Tensor* rstd,
                              const Tensor* w, const Tensor* gi, const Tensor* gw) {
  return mluopRmsNormBackward(h, nn, D(go), P(go), D(x), P(x), D(rstd), P(rstd), D(w), P(w), D(gi), P(gi),
                              D(gw), P(gw));
}
mlu::Status rmsNormBackward(int nn, const Tensor* go, const Tensor* x, const Tensor* rstd, const Tensor* w,
                            const Tensor* gi, const Tensor* gw) {
  mlu::rms_norm_backward_args a;
  a.normalized_ndim = nn;
  a.grad_output = V(go);
  a.x = V(x);
  a.rstd = V(rstd);
  a.weight = V(w);
  a.grad_input = V(gi);
  a.grad_weight = V(gw);
  return mlu::reference::run(a);
}

struct BnForward {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
  const Tensor* x = nullptr;
  const Tensor* weight = nullptr;
  const Tensor* bias = nullptr;
  const Tensor* running_mean = nullptr;
  const Tensor* running_var = nullptr;
  const Tensor* y = nullptr;
  const Tensor* save_mean = nullptr;
  const Tensor* save_invstd = nullptr;
};
mluopStatus_t batchNormForward(const Handle& h, const BnForward& c) {
  return mluopBatchNormForward(h, c.training, c.momentum, c.eps, D(c.x), P(c.x), D(c.weight), P(c.weight),
                               D(c.bias), P(c.bias), D(c.running_mean), P(c.running_mean), D(c.running_var),
                               P(c.running_var), D(c.y), P(c.y), D(c.save_mean), P(c.save_mean),
                               D(c.save_invstd), P(c.save_invstd));
}
mlu::Status batchNormForward(const BnForward& c) {
  mlu::batch_norm_forward_args a;
  a.training = c.training;
  a.momentum = c.momentum;
  a.eps = c.eps;
  a.x = V(c.x);
  a.weight = V(c.weight);
  a.bias = V(c.bias);
  a.running_mean = V(c.running_mean);
  a.running_var = V(c.running_var);
  a.y = V(c.y);
  a.save_mean = V(c.save_mean);
  a.save_invstd = V(c.save_invstd);
  return mlu::reference::run(a);
}

struct BnBackward {
  const Tensor* grad_output = nullptr;
  const Tensor* x = nullptr;
  const Tensor* weight = nullptr;
  const Tensor* save_mean = nullptr;
  const Tensor* save_invstd = nullptr;
  const Tensor* grad_input = nullptr;
  const Tensor* grad_weight = nullptr;
  const Tensor* grad_bias = nullptr;
};
mluopStatus_t batchNormBackward(const Handle& h, const BnBackward& c) {
  return mluopBatchNormBackward(h, D(c.grad_output), P(c.grad_output), D(c.x), P(c.x), D(c.weight),
                                P(c.weight), D(c.save_mean), P(c.save_mean), D(c.save_invstd),
                                P(c.save_invstd), D(c.grad_input), P(c.grad_input), D(c.grad_weight),
                                P(c.grad_weight), D(c.grad_bias), P(c.grad_bias));
}
mlu::Status batchNormBackward(const BnBackward& c) {
  mlu::batch_norm_backward_args a;
  a.grad_output = V(c.grad_output);
  a.x = V(c.x);
  a.weight = V(c.weight);
  a.save_mean = V(c.save_mean);
  a.save_invstd = V(c.save_invstd);
  a.grad_input = V(c.grad_input);
  a.grad_weight = V(c.grad_weight);
  a.grad_bias = V(c.grad_bias);
  return mlu::reference::run(a);
}

mluopStatus_t rope(const Handle& h, bool backward, double theta, std::int64_t offset, const Tensor& x,
                   const Tensor& y) {
  return backward ? mluopRopeBackward(h, theta, offset, x.desc(), x.data(), y.desc(), y.data())
                  : mluopRopeForward(h, theta, offset, x.desc(), x.data(), y.desc(), y.data());
}
mlu::Status rope(bool backward, double theta, std::int64_t offset, const Tensor& x, const Tensor& y) {
  if (backward) {
    mlu::rope_backward_args a;
    a.theta = theta;
    a.position_offset = offset;
    a.grad_output = x.view();
    a.grad_input = y.view();
    return mlu::reference::run(a);
  }
  mlu::rope_forward_args a;
  a.theta = theta;
  a.position_offset = offset;
  a.x = x.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

// ================================ layer_norm / rms_norm ================================

struct NormCase {
  Dims dims;
  int nn;             // normalized_ndim
  Dims x_strides;     // empty: contiguous
  Dims out_strides;   // for y and grad_input
  double eps = 1e-5;  // the forward's
};

const std::vector<NormCase>& normCases() {
  static const std::vector<NormCase> cases = {
      {{4, 7}, 1, {}, {}},
      {{3, 5, 6}, 2, {}, {}},
      {{2, 3, 9}, 1, permutedStrides({2, 3, 9}, {2, 0, 1}), {}},  // x's normalized dim strided
      {{5, 33}, 1, {}, {40, 1}},                                  // padded output rows
      {{6, 10}, 1, {16, 1}, permutedStrides({6, 10}, {1, 0})},    // padded x, transposed output
      {{2, 3, 4}, 2, permutedStrides({2, 3, 4}, {1, 2, 0}), {}},  // rows strided, normalized dims not dense
      {{0, 5}, 1, {}, {}},                                        // no rows
      {{3, 0}, 1, {}, {}},                                        // empty rows: NaN statistics
      {{7}, 1, {}, {}},                                           // 1-d x: 0-d mean/rstd
      {{70, 300}, 1, {}, {}},                                     // several blocks and cores
      // DIOPI's layer_norm cases: eps 0, negative (PyTorch checks none: rstd is NaN where var + eps < 0)
      // and large, and empty tensors (layer_norm_empty_tensor: nothing normalized, or no rows)
      {{4, 7}, 1, {}, {}, 0.0},
      {{4, 7}, 1, {}, {}, -1e-5},
      {{4, 7}, 1, {}, {}, 2.0},
      {{0}, 1, {}, {}, 1e-2},
      {{0, 12}, 2, {}, {}, 1e-8},
      {{6, 0, 9}, 1, {}, {}, -3.0},
  };
  return cases;
}

std::string caseLabel(mluopDataType_t dtype, const NormCase& c, int variant) {
  return dtypeLabel(dtype) + " " + testing::PrintToString(c.dims) + " nn " + std::to_string(c.nn) + " eps " +
         std::to_string(c.eps) + " variant " + std::to_string(variant);
}

// layer_norm (kLayer) or rms_norm forward on the device and the reference; variant 0: no weight/bias,
// 1: weight only, 2: weight and bias (rms_norm: bias never).
template <bool kLayer>
void normForwardDeviceMatchesReference() {
  Handle h;
  std::uint32_t seed = 100;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const NormCase& c : normCases()) {
      for (int variant = 0; variant < 3; ++variant) {
        if (!kLayer && variant == 2) continue;
        const std::string what = caseLabel(dtype, c, variant);
        const Dims param = trailing(c.dims, c.nn), stat = leading(c.dims, c.nn);
        const std::int64_t k = optest::numel(param);
        const Pair x = makePair(dtype, c.dims, shifted(optest::numel(c.dims), seed++), c.x_strides);
        std::optional<Pair> w, b;
        if (variant >= 1) w.emplace(makePair(dtype, param, randomValues(k, seed++, 0.5, 1.5)));
        if (variant >= 2) b.emplace(makePair(dtype, param, randomValues(k, seed++)));
        const Pair y = makePair(dtype, c.dims, {}, c.out_strides);
        const Pair mean = makePair(statDtype(dtype), stat), rstd = makePair(statDtype(dtype), stat);
        if constexpr (kLayer) {
          ASSERT_EQ(layerNormForward(h, c.nn, c.eps, &x.dev, dev(w), dev(b), &y.dev, &mean.dev, &rstd.dev),
                    MLUOP_STATUS_SUCCESS)
              << what << ": " << lastError();
          expectOk(layerNormForward(c.nn, c.eps, &x.host, host(w), host(b), &y.host, &mean.host, &rstd.host));
        } else {
          ASSERT_EQ(rmsNormForward(h, c.nn, c.eps, &x.dev, dev(w), &y.dev, &rstd.dev), MLUOP_STATUS_SUCCESS)
              << what << ": " << lastError();
          expectOk(rmsNormForward(c.nn, c.eps, &x.host, host(w), &y.host, &rstd.host));
        }
        h.sync();
        expectClose(y.dev.values(), y.host.values(), sumTolerance(dtype, 4), what + " y");
        if (kLayer) expectClose(mean.dev.values(), mean.host.values(), sumTolerance(kF32, k), what + " mean");
        expectClose(rstd.dev.values(), rstd.host.values(), sumTolerance(kF32, k), what + " rstd");
      }
    }
  }
}

TEST(LayerNorm, ForwardDeviceMatchesReference) { normForwardDeviceMatchesReference<true>(); }

TEST(RmsNorm, ForwardDeviceMatchesReference) { normForwardDeviceMatchesReference<false>(); }

// Backward on the device and the reference, from the reference forward's mean/rstd; variant 0: no weight
// and no parameter gradients, 1: weight and grad_weight, 2: weight, grad_weight and grad_bias.
template <bool kLayer>
void normBackwardDeviceMatchesReference() {
  Handle h;
  std::uint32_t seed = 200;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const NormCase& c : normCases()) {
      for (int variant = 0; variant < 3; ++variant) {
        if (!kLayer && variant == 2) continue;
        const std::string what = caseLabel(dtype, c, variant);
        const Dims param = trailing(c.dims, c.nn), stat = leading(c.dims, c.nn);
        const std::int64_t n = optest::numel(c.dims), k = optest::numel(param), rows = optest::numel(stat);
        const Pair x = makePair(dtype, c.dims, shifted(n, seed++), c.x_strides);
        const Pair go = makePair(dtype, c.dims, randomValues(n, seed++), c.x_strides);
        std::optional<Pair> w, gw, gb;
        if (variant >= 1) {
          w.emplace(makePair(dtype, param, randomValues(k, seed++, 0.5, 1.5)));
          gw.emplace(makePair(dtype, param));
        }
        if (variant >= 2) gb.emplace(makePair(dtype, param));
        // The statistics from the reference forward.
        Tensor y_ref = Tensor::host(dtype, c.dims);
        Tensor mean_ref = Tensor::host(statDtype(dtype), stat),
               rstd_ref = Tensor::host(statDtype(dtype), stat);
        if (kLayer) {
          expectOk(layerNormForward(c.nn, 1e-5, &x.host, nullptr, nullptr, &y_ref, &mean_ref, &rstd_ref));
        } else {
          expectOk(rmsNormForward(c.nn, 1e-5, &x.host, nullptr, &y_ref, &rstd_ref));
        }
        const Pair mean = makePair(statDtype(dtype), stat, mean_ref.values());
        const Pair rstd = makePair(statDtype(dtype), stat, rstd_ref.values());
        const Pair gi = makePair(dtype, c.dims, {}, c.out_strides);
        if constexpr (kLayer) {
          ASSERT_EQ(layerNormBackward(h, c.nn, &go.dev, &x.dev, &mean.dev, &rstd.dev, dev(w), &gi.dev,
                                      dev(gw), dev(gb)),
                    MLUOP_STATUS_SUCCESS)
              << what << ": " << lastError();
          expectOk(layerNormBackward(c.nn, &go.host, &x.host, &mean.host, &rstd.host, host(w), &gi.host,
                                     host(gw), host(gb)));
        } else {
          ASSERT_EQ(rmsNormBackward(h, c.nn, &go.dev, &x.dev, &rstd.dev, dev(w), &gi.dev, dev(gw)),
                    MLUOP_STATUS_SUCCESS)
              << what << ": " << lastError();
          expectOk(rmsNormBackward(c.nn, &go.host, &x.host, &rstd.host, host(w), &gi.host, host(gw)));
        }
        h.sync();
        expectClose(gi.dev.values(), gi.host.values(), sumTolerance(dtype, 4), what + " grad_input");
        if (gw)
          expectClose(gw->dev.values(), gw->host.values(), sumTolerance(dtype, rows), what + " grad_weight");
        if (gb)
          expectClose(gb->dev.values(), gb->host.values(), sumTolerance(dtype, rows), what + " grad_bias");
      }
    }
  }
}

TEST(LayerNorm, BackwardDeviceMatchesReference) { normBackwardDeviceMatchesReference<true>(); }

TEST(RmsNorm, BackwardDeviceMatchesReference) { normBackwardDeviceMatchesReference<false>(); }

TEST(LayerNorm, ReferenceHandWorked) {
  // [1, 2, 3, 4]: mean 2.5, biased variance 1.25, rstd 1/sqrt(1.25).
  const Tensor x = Tensor::host(kF64, {1, 4}, {1, 2, 3, 4});
  Tensor y = Tensor::host(kF64, {1, 4}), mean = Tensor::host(kF64, {1}), rstd = Tensor::host(kF64, {1});
  expectOk(layerNormForward(1, 0.0, &x, nullptr, nullptr, &y, &mean, &rstd));
  expectNear(y.values(), {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738},
             "y");
  expectNear(mean.values(), {2.5}, "mean");
  expectNear(rstd.values(), {0.8944271909999159}, "rstd");
  const Tensor w = Tensor::host(kF64, {4}, {1, 2, 0.5, -1}), b = Tensor::host(kF64, {4}, {0, 1, 0, 0.5});
  expectOk(layerNormForward(1, 0.0, &x, &w, &b, &y, &mean, &rstd));
  expectNear(y.values(),
             {-1.3416407864998738, 1 - 0.8944271909999158, 0.22360679774997896, -0.8416407864998738},
             "y with weight and bias");
  // Over the last 2 dims of a [2, 1, 2] x, in a transposed layout: rows [1, 3] and [5, 9].
  const Tensor x2 = Tensor::host(kF64, {2, 1, 2}, {1, 3, 5, 9}, {1, 2, 2});
  Tensor y2 = Tensor::host(kF64, {2, 1, 2}), mean2 = Tensor::host(kF64, {2}), rstd2 = Tensor::host(kF64, {2});
  expectOk(layerNormForward(2, 0.0, &x2, nullptr, nullptr, &y2, &mean2, &rstd2));
  expectNear(y2.values(), {-1, 1, -1, 1}, "two rows");
  expectNear(mean2.values(), {2, 7}, "two means");
  expectNear(rstd2.values(), {1, 0.5}, "two rstds");
  // eps enters under the square root: var 0 gives rstd 1/sqrt(eps).
  const Tensor flat = Tensor::host(kF64, {3}, {2, 2, 2});
  Tensor y3 = Tensor::host(kF64, {3}), mean3 = Tensor::host(kF64, {}), rstd3 = Tensor::host(kF64, {});
  expectOk(layerNormForward(1, 0.25, &flat, nullptr, nullptr, &y3, &mean3, &rstd3));
  expectNear(rstd3.values(), {2}, "rstd of a constant row");
  expectNear(y3.values(), {0, 0, 0}, "y of a constant row");
  // An empty row has NaN statistics.
  const Tensor empty = Tensor::host(kF64, {2, 0});
  Tensor y4 = Tensor::host(kF64, {2, 0}), mean4 = Tensor::host(kF64, {2}), rstd4 = Tensor::host(kF64, {2});
  expectOk(layerNormForward(1, 1e-5, &empty, nullptr, nullptr, &y4, &mean4, &rstd4));
  EXPECT_TRUE(std::isnan(mean4.values()[0]) && std::isnan(rstd4.values()[1]));
}

TEST(RmsNorm, ReferenceHandWorked) {
  // [1, 2, 3, 4]: mean square 7.5.
  const Tensor x = Tensor::host(kF64, {4}, {1, 2, 3, 4});
  Tensor y = Tensor::host(kF64, {4}), rstd = Tensor::host(kF64, {});
  expectOk(rmsNormForward(1, 0.0, &x, nullptr, &y, &rstd));
  expectNear(rstd.values(), {0.3651483716701107}, "rstd");
  expectNear(y.values(), {0.3651483716701107, 0.7302967433402214, 1.0954451150103321, 1.4605934866804429},
             "y");
  const Tensor w = Tensor::host(kF64, {4}, {2, 0, -1, 0.5});
  expectOk(rmsNormForward(1, 0.0, &x, &w, &y, &rstd));
  expectNear(y.values(), {0.7302967433402214, 0, -1.0954451150103321, 0.7302967433402214}, "y with weight");
  // eps: [3, 4] has mean square 12.5; with eps 3.5 rstd = 1/4.
  const Tensor x2 = Tensor::host(kF64, {1, 2}, {3, 4});
  Tensor y2 = Tensor::host(kF64, {1, 2}), rstd2 = Tensor::host(kF64, {1});
  expectOk(rmsNormForward(1, 3.5, &x2, nullptr, &y2, &rstd2));
  expectNear(rstd2.values(), {0.25}, "rstd with eps");
  expectNear(y2.values(), {0.75, 1}, "y with eps");
}

// d/dx, d/dweight, d/dbias of dot(forward(x, weight, bias), r) by central differences, against the
// reference backward with grad_output = r, in float64. Without a weight, grad_weight and grad_bias must be
// the gradients at weight = 1 and bias = 0.
template <bool kLayer>
void normBackwardMatchesFiniteDifferences(const Dims& dims, int nn, bool with_weight) {
  const Dims param = trailing(dims, nn), stat = leading(dims, nn);
  const std::int64_t n = optest::numel(dims), k = optest::numel(param);
  const std::vector<double> x0 = shifted(n, 7), r = randomValues(n, 8);
  const std::vector<double> w0 =
      with_weight ? randomValues(k, 9, 0.5, 1.5) : std::vector<double>(static_cast<std::size_t>(k), 1.0);
  const std::vector<double> b0 =
      with_weight ? randomValues(k, 10) : std::vector<double>(static_cast<std::size_t>(k), 0.0);
  const double eps = 1e-3;
  // dot(y, r), the forward always given weight and bias (layer_norm) or weight (rms_norm).
  const auto forward = [&](const std::vector<double>& xv, const std::vector<double>& wv,
                           const std::vector<double>& bv) {
    const Tensor x = Tensor::host(kF64, dims, xv), w = Tensor::host(kF64, param, wv),
                 b = Tensor::host(kF64, param, bv);
    Tensor y = Tensor::host(kF64, dims), mean = Tensor::host(kF64, stat), rstd = Tensor::host(kF64, stat);
    if (kLayer) {
      expectOk(layerNormForward(nn, eps, &x, &w, &b, &y, &mean, &rstd));
    } else {
      expectOk(rmsNormForward(nn, eps, &x, &w, &y, &rstd));
    }
    return dot(y.values(), r);
  };
  // The saved statistics, from a forward with or without weight (they do not depend on it).
  const Tensor x = Tensor::host(kF64, dims, x0), go = Tensor::host(kF64, dims, r),
               w = Tensor::host(kF64, param, w0);
  Tensor y = Tensor::host(kF64, dims), mean = Tensor::host(kF64, stat), rstd = Tensor::host(kF64, stat);
  const Tensor* wp = with_weight ? &w : nullptr;
  Tensor gi = Tensor::host(kF64, dims), gw = Tensor::host(kF64, param), gb = Tensor::host(kF64, param);
  if (kLayer) {
    expectOk(layerNormForward(nn, eps, &x, wp, nullptr, &y, &mean, &rstd));
    expectOk(layerNormBackward(nn, &go, &x, &mean, &rstd, wp, &gi, &gw, &gb));
  } else {
    expectOk(rmsNormForward(nn, eps, &x, wp, &y, &rstd));
    expectOk(rmsNormBackward(nn, &go, &x, &rstd, wp, &gi, &gw));
  }
  const std::string what = testing::PrintToString(dims) + (with_weight ? " with weight" : " without weight");
  const Tolerance tol = reducetest::finiteDifferenceTolerance();
  expectClose(gi.values(), numericalGradient(x0, [&](const auto& v) { return forward(v, w0, b0); }), tol,
              what + " grad_input");
  expectClose(gw.values(), numericalGradient(w0, [&](const auto& v) { return forward(x0, v, b0); }), tol,
              what + " grad_weight");
  if (kLayer) {
    expectClose(gb.values(), numericalGradient(b0, [&](const auto& v) { return forward(x0, w0, v); }), tol,
                what + " grad_bias");
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  normBackwardMatchesFiniteDifferences<true>({3, 5}, 1, true);
  normBackwardMatchesFiniteDifferences<true>({2, 3, 4}, 2, true);
  normBackwardMatchesFiniteDifferences<true>({4, 3}, 1, false);
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  normBackwardMatchesFiniteDifferences<false>({3, 5}, 1, true);
  normBackwardMatchesFiniteDifferences<false>({2, 3, 4}, 2, true);
  normBackwardMatchesFiniteDifferences<false>({4, 3}, 1, false);
}

TEST(LayerNorm, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {3, 4}, randomValues(12, 1));
  const Tensor w = Tensor::device(kF32, {4}), w5 = Tensor::device(kF32, {5}), b16 = Tensor::device(kF16, {4});
  const Tensor y = Tensor::device(kF32, {3, 4}), y43 = Tensor::device(kF32, {4, 3});
  const Tensor mean = Tensor::device(kF32, {3}), rstd = Tensor::device(kF32, {3}),
               rstd4 = Tensor::device(kF32, {4});
  const Tensor y_bcast = Tensor::device(kF32, {3, 4}, {}, {0, 1});
  expectBadParam(layerNormForward(h, 0, 1e-5, &x, nullptr, nullptr, &y, &mean, &rstd),
                 "layer_norm_forward: normalized_ndim = 0 is out of range for a 2-d x (expected 1 to 2)");
  expectBadParam(layerNormForward(h, 3, 1e-5, &x, nullptr, nullptr, &y, &mean, &rstd),
                 "normalized_ndim = 3 is out of range for a 2-d x (expected 1 to 2)");
  expectBadParam(layerNormForward(h, 1, kInf, &x, nullptr, nullptr, &y, &mean, &rstd),
                 "eps = inf; expected a finite eps");
  expectBadParam(layerNormForward(h, 1, 1e-5, &x, &w5, nullptr, &y, &mean, &rstd),
                 "weight has shape [5] but the normalized shape of x [3, 4] is [4] (its last 1 dims)");
  expectBadParam(layerNormForward(h, 1, 1e-5, &x, &w, &b16, &y, &mean, &rstd),
                 "bias is float16 but x is float32; they must have the same dtype");
  expectBadParam(layerNormForward(h, 1, 1e-5, &x, &w, nullptr, &y43, &mean, &rstd),
                 "y has shape [4, 3] but x has shape [3, 4]; they must be equal");
  expectBadParam(layerNormForward(h, 1, 1e-5, &x, nullptr, nullptr, &y, &mean, &rstd4),
                 "rstd has shape [4] but x [3, 4] has leading shape [3] (its dims before the last 1)");
  expectBadParam(layerNormForward(h, 1, 1e-5, &x, nullptr, nullptr, &y_bcast, &mean, &rstd),
                 "y (shape [3, 4], strides [0, 1]) overlaps itself");
  // y in x's memory; mean and rstd in one buffer.
  expectBadParam(
      mluopLayerNormForward(h, 1, 1e-5, x.desc(), x.data(), nullptr, nullptr, nullptr, nullptr, y.desc(),
                            x.data(), mean.desc(), mean.data(), rstd.desc(), rstd.data()),
      "y overlaps x in memory; an output must not share memory with an input");
  expectBadParam(
      mluopLayerNormForward(h, 1, 1e-5, x.desc(), x.data(), nullptr, nullptr, nullptr, nullptr, y.desc(),
                            y.data(), mean.desc(), mean.data(), rstd.desc(), mean.data()),
      "mean and rstd overlap in memory; outputs must not share memory");
  expectBadParam(layerNormForward(h, 1, 1e-5, &x, nullptr, nullptr, &y, nullptr, &rstd), "mean_desc is NULL");
  // A 16-bit x keeps float32 statistics.
  const Tensor xh = Tensor::device(kF16, {3, 4}), yh = Tensor::device(kF16, {3, 4}),
               mean_h = Tensor::device(kF16, {3});
  expectBadParam(layerNormForward(h, 1, 1e-5, &xh, nullptr, nullptr, &yh, &mean_h, &rstd),
                 "mean is float16 but must be float32 for a float16 x");
  const Tensor xi = Tensor::device(MLUOP_DTYPE_INT32, {3, 4});
  EXPECT_EQ(layerNormForward(h, 1, 1e-5, &xi, nullptr, nullptr, &y, &mean, &rstd),
            MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("x is int32, which is not supported"));
  const Tensor x0 = Tensor::device(kF32, {}), y0 = Tensor::device(kF32, {}), s0 = Tensor::device(kF32, {});
  expectBadParam(layerNormForward(h, 1, 1e-5, &x0, nullptr, nullptr, &y0, &s0, &s0),
                 "x is 0-d; layer_norm and rms_norm need at least 1 dim");
  // The reference refuses the same calls.
  const Tensor xr = Tensor::host(kF64, {3, 4}), yr = Tensor::host(kF64, {3, 4}), mr = Tensor::host(kF64, {3}),
               rr = Tensor::host(kF64, {3}), mr32 = Tensor::host(kF32, {3});
  expectBadParam(layerNormForward(2, 1e-5, &xr, nullptr, nullptr, &yr, &mr, &rr),
                 "mean has shape [3] but x [3, 4] has leading shape []");
  expectBadParam(layerNormForward(1, 1e-5, &xr, nullptr, nullptr, &yr, &mr32, &rr),
                 "mean is float32 but must be float64 for a float64 x");
  expectBadParam(layerNormForward(1, 1e-5, &xr, nullptr, nullptr, &yr, nullptr, &rr), "mean is missing");
  expectBadParam(layerNormForward(1, std::nan(""), &xr, nullptr, nullptr, &yr, &mr, &rr),
                 "eps = nan; expected a finite eps");
  EXPECT_EQ(layerNormForward(h, 1, 1e-5, &xr, nullptr, nullptr, &yr, &mr, &rr), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("x is float64, which the device does not support"));
}

TEST(LayerNorm, BackwardBadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {3, 4}), go = Tensor::device(kF32, {3, 4}),
               go34 = Tensor::device(kF32, {3, 5});
  const Tensor mean = Tensor::device(kF32, {3}), rstd = Tensor::device(kF32, {3}),
               mean16 = Tensor::device(kF16, {3});
  const Tensor gi = Tensor::device(kF32, {3, 4}), gw = Tensor::device(kF32, {4}),
               gw3 = Tensor::device(kF32, {3}), gb16 = Tensor::device(kF16, {4});
  expectBadParam(
      layerNormBackward(h, 1, &go34, &x, &mean, &rstd, nullptr, &gi, nullptr, nullptr),
      "layer_norm_backward: grad_output has shape [3, 5] but x has shape [3, 4]; they must be equal");
  expectBadParam(layerNormBackward(h, 1, &go, &x, &mean16, &rstd, nullptr, &gi, nullptr, nullptr),
                 "mean is float16 but must be float32 for a float32 x");
  expectBadParam(layerNormBackward(h, 1, &go, &x, &mean, &rstd, nullptr, &gi, &gw3, nullptr),
                 "grad_weight has shape [3] but the normalized shape of x [3, 4] is [4]");
  expectBadParam(layerNormBackward(h, 1, &go, &x, &mean, &rstd, nullptr, &gi, &gw, &gb16),
                 "grad_bias is float16 but x is float32");
  expectBadParam(layerNormBackward(h, 5, &go, &x, &mean, &rstd, nullptr, &gi, &gw, nullptr),
                 "normalized_ndim = 5 is out of range for a 2-d x");
  expectBadParam(mluopLayerNormBackward(h, 1, go.desc(), go.data(), x.desc(), x.data(), mean.desc(),
                                        mean.data(), rstd.desc(), rstd.data(), nullptr, nullptr, gi.desc(),
                                        go.data(), nullptr, nullptr, nullptr, nullptr),
                 "grad_input overlaps grad_output in memory");
  expectBadParam(mluopLayerNormBackward(h, 1, go.desc(), go.data(), x.desc(), x.data(), mean.desc(),
                                        mean.data(), rstd.desc(), rstd.data(), nullptr, nullptr, gi.desc(),
                                        gi.data(), gw.desc(), gw.data(), gw.desc(), gw.data()),
                 "grad_weight and grad_bias overlap in memory");
  const Tensor xr = Tensor::host(kF64, {3, 4}), gr = Tensor::host(kF64, {3, 4}), mr = Tensor::host(kF64, {3});
  Tensor gir = Tensor::host(kF64, {4, 3});
  expectBadParam(layerNormBackward(1, &gr, &xr, &mr, &mr, nullptr, &gir, nullptr, nullptr),
                 "grad_input has shape [4, 3] but x has shape [3, 4]");
}

TEST(RmsNorm, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {2, 3, 4}), y = Tensor::device(kF32, {2, 3, 4});
  const Tensor w = Tensor::device(kF32, {3, 4}), w4 = Tensor::device(kF32, {4}),
               rstd = Tensor::device(kF32, {2}), rstd6 = Tensor::device(kF32, {2, 3}),
               rstd16 = Tensor::device(kF16, {2});
  expectBadParam(rmsNormForward(h, 2, std::nan(""), &x, &w, &y, &rstd), "rms_norm_forward: eps = nan");
  expectBadParam(rmsNormForward(h, 2, 1e-6, &x, &w4, &y, &rstd),
                 "weight has shape [4] but the normalized shape of x [2, 3, 4] is [3, 4] (its last 2 dims)");
  expectBadParam(rmsNormForward(h, 2, 1e-6, &x, &w, &y, &rstd6),
                 "rstd has shape [2, 3] but x [2, 3, 4] has leading shape [2] (its dims before the last 2)");
  expectBadParam(rmsNormForward(h, 2, 1e-6, &x, &w, &y, &rstd16), "rstd is float16 but must be float32");
  expectBadParam(rmsNormForward(h, -1, 1e-6, &x, &w, &y, &rstd), "normalized_ndim = -1 is out of range");
  expectBadParam(mluopRmsNormForward(h, 2, 1e-6, x.desc(), x.data(), w.desc(), w.data(), y.desc(), w.data(),
                                     rstd.desc(), rstd.data()),
                 "y overlaps weight in memory");
  const Tensor gi = Tensor::device(kF32, {2, 3, 4}), gw = Tensor::device(kF32, {3, 4}),
               gw16 = Tensor::device(kF16, {3, 4});
  expectBadParam(rmsNormBackward(h, 2, &y, &x, &rstd6, &w, &gi, &gw),
                 "rms_norm_backward: rstd has shape [2, 3]");
  expectBadParam(rmsNormBackward(h, 2, &y, &x, &rstd, &w, &gi, &gw16),
                 "grad_weight is float16 but x is float32");
  expectBadParam(rmsNormBackward(h, 2, &y, &x, &rstd, &w4, &gi, &gw), "weight has shape [4]");
  const Tensor xr = Tensor::host(kF64, {2, 3, 4}), rr = Tensor::host(kF64, {2});
  Tensor yr = Tensor::host(kF64, {2, 3, 4});
  expectBadParam(rmsNormForward(1, 1e-6, &xr, nullptr, &yr, &rr),
                 "rstd has shape [2] but x [2, 3, 4] has leading "
                 "shape [2, 3]");
  expectBadParam(rmsNormBackward(2, &yr, &xr, &rr, nullptr, &yr, nullptr), "grad_input overlaps grad_output");
}

// ================================ batch_norm ================================

struct BnCase {
  Dims dims;
  Dims x_strides;
  Dims y_strides;
};

const std::vector<BnCase>& bnCases() {
  static const std::vector<BnCase> cases = {
      {{4, 3}, {}, {}},
      {{2, 3, 5}, {}, {}},
      {{2, 3, 4, 5}, permutedStrides({2, 3, 4, 5}, {0, 2, 3, 1}), {}},  // channels-last x
      {{3, 2, 7}, {}, permutedStrides({3, 2, 7}, {2, 1, 0})},           // transposed y
      {{0, 3, 4}, {}, {}},                                              // no values per channel
      {{2, 0, 3}, {}, {}},                                              // no channels
      {{16, 4, 65}, {}, {}},                                            // several blocks and cores
  };
  return cases;
}

// mode 0: training without running stats, 1: training with them, 2: inference.
TEST(BatchNorm, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 300;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const BnCase& c : bnCases()) {
      for (int mode = 0; mode < 3; ++mode) {
        const std::int64_t n = optest::numel(c.dims), ch = c.dims[1], m = ch == 0 ? 0 : n / ch;
        if (mode != 2 && ch > 0 && m == 1) continue;
        const std::string what =
            dtypeLabel(dtype) + " " + testing::PrintToString(c.dims) + " mode " + std::to_string(mode);
        const bool affine = (seed % 2) == 0;
        // Running stats in x's dtype or float32, alternately.
        const mluopDataType_t running_dtype = (seed % 3) == 0 ? dtype : kF32;
        const Pair x = makePair(dtype, c.dims, shifted(n, seed++), c.x_strides);
        std::optional<Pair> w, b, rm, rv, sm, si;
        if (affine) {
          w.emplace(makePair(dtype, {ch}, randomValues(ch, seed++, 0.5, 1.5)));
          b.emplace(makePair(dtype, {ch}, randomValues(ch, seed++)));
        }
        if (mode >= 1) {
          rm.emplace(makePair(running_dtype, {ch}, randomValues(ch, seed++)));
          rv.emplace(makePair(running_dtype, {ch}, randomValues(ch, seed++, 0.5, 1.5)));
        }
        if (mode != 2 || affine) {
          sm.emplace(makePair(statDtype(dtype), {ch}));
          si.emplace(makePair(statDtype(dtype), {ch}));
        }
        const Pair y = makePair(dtype, c.dims, {}, c.y_strides);
        // Momentum 0.1, and a negative one and one above 1 (PyTorch takes any finite momentum).
        const double momentum = seed % 5 == 0 ? -0.1 : seed % 5 == 1 ? 1.5 : 0.1;
        BnForward d{mode != 2, momentum, 1e-5,   &x.dev,  dev(w), dev(b),
                    dev(rm),   dev(rv),  &y.dev, dev(sm), dev(si)};
        BnForward r{mode != 2, momentum, 1e-5,    &x.host,  host(w), host(b),
                    host(rm),  host(rv), &y.host, host(sm), host(si)};
        ASSERT_EQ(batchNormForward(h, d), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
        expectOk(batchNormForward(r));
        h.sync();
        expectClose(y.dev.values(), y.host.values(), sumTolerance(dtype, 4), what + " y");
        if (sm) expectClose(sm->dev.values(), sm->host.values(), sumTolerance(kF32, m), what + " save_mean");
        if (si)
          expectClose(si->dev.values(), si->host.values(), sumTolerance(kF32, m), what + " save_invstd");
        if (rm)
          expectClose(rm->dev.values(), rm->host.values(), sumTolerance(running_dtype, m),
                      what + " running_mean");
        if (rv)
          expectClose(rv->dev.values(), rv->host.values(), sumTolerance(running_dtype, m),
                      what + " running_var");
      }
    }
  }
}

TEST(BatchNorm, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 400;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const BnCase& c : bnCases()) {
      for (int variant = 0; variant < 2; ++variant) {
        const std::int64_t n = optest::numel(c.dims), ch = c.dims[1], m = ch == 0 ? 0 : n / ch;
        const std::string what =
            dtypeLabel(dtype) + " " + testing::PrintToString(c.dims) + " variant " + std::to_string(variant);
        const Pair x = makePair(dtype, c.dims, shifted(n, seed++), c.x_strides);
        const Pair go = makePair(dtype, c.dims, randomValues(n, seed++), c.y_strides);
        Tensor y_ref = Tensor::host(dtype, c.dims), sm_ref = Tensor::host(statDtype(dtype), {ch}),
               si_ref = Tensor::host(statDtype(dtype), {ch});
        if (m > 1 || ch == 0) {
          expectOk(batchNormForward(
              {true, 0.1, 1e-5, &x.host, nullptr, nullptr, nullptr, nullptr, &y_ref, &sm_ref, &si_ref}));
        }
        const Pair sm = makePair(statDtype(dtype), {ch}, sm_ref.values());
        const Pair si = makePair(statDtype(dtype), {ch}, si_ref.values());
        std::optional<Pair> w, gw, gb;
        if (variant == 1) {
          w.emplace(makePair(dtype, {ch}, randomValues(ch, seed++, 0.5, 1.5)));
          gw.emplace(makePair(dtype, {ch}));
          gb.emplace(makePair(dtype, {ch}));
        }
        const Pair gi = makePair(dtype, c.dims, {}, c.y_strides);
        ASSERT_EQ(
            batchNormBackward(h, {&go.dev, &x.dev, dev(w), &sm.dev, &si.dev, &gi.dev, dev(gw), dev(gb)}),
            MLUOP_STATUS_SUCCESS)
            << what << ": " << lastError();
        expectOk(batchNormBackward(
            {&go.host, &x.host, host(w), &sm.host, &si.host, &gi.host, host(gw), host(gb)}));
        h.sync();
        expectClose(gi.dev.values(), gi.host.values(), sumTolerance(dtype, 4), what + " grad_input");
        if (gw)
          expectClose(gw->dev.values(), gw->host.values(), sumTolerance(dtype, m), what + " grad_weight");
        if (gb) expectClose(gb->dev.values(), gb->host.values(), sumTolerance(dtype, m), what + " grad_bias");
      }
    }
  }
}

TEST(BatchNorm, ReferenceHandWorked) {
  // x [2, 1, 2] = [[1, 2]], [[3, 4]]: channel 0 holds 1..4, mean 2.5, biased variance 1.25, unbiased 5/3.
  const Tensor x = Tensor::host(kF64, {2, 1, 2}, {1, 2, 3, 4});
  Tensor y = Tensor::host(kF64, {2, 1, 2}), sm = Tensor::host(kF64, {1}), si = Tensor::host(kF64, {1});
  Tensor rm = Tensor::host(kF64, {1}, {0}), rv = Tensor::host(kF64, {1}, {1});
  expectOk(batchNormForward({true, 0.1, 0.0, &x, nullptr, nullptr, &rm, &rv, &y, &sm, &si}));
  expectNear(y.values(), {-1.3416407864998738, -0.4472135954999579, 0.4472135954999579, 1.3416407864998738},
             "y");
  expectNear(sm.values(), {2.5}, "save_mean");
  expectNear(si.values(), {0.8944271909999159}, "save_invstd");
  expectNear(rm.values(), {0.25}, "running_mean = 0.9 * 0 + 0.1 * 2.5");
  expectNear(rv.values(), {1.0666666666666667}, "running_var = 0.9 * 1 + 0.1 * 5/3 (unbiased)");
  // A negative momentum (PyTorch takes any, DIOPI's cases use -0.1): the same mixing.
  Tensor rm_neg = Tensor::host(kF64, {1}, {0}), rv_neg = Tensor::host(kF64, {1}, {1});
  expectOk(batchNormForward({true, -0.1, 0.0, &x, nullptr, nullptr, &rm_neg, &rv_neg, &y, &sm, &si}));
  expectNear(rm_neg.values(), {-0.25}, "running_mean = 1.1 * 0 - 0.1 * 2.5");
  expectNear(rv_neg.values(), {0.9333333333333333}, "running_var = 1.1 * 1 - 0.1 * 5/3");
  // Inference with running mean 1 and variance 4: y = (x - 1) / 2 * weight + bias.
  const Tensor rm2 = Tensor::host(kF64, {1}, {1}), rv2 = Tensor::host(kF64, {1}, {4});
  const Tensor w = Tensor::host(kF64, {1}, {2}), b = Tensor::host(kF64, {1}, {1});
  expectOk(batchNormForward({false, 0.1, 0.0, &x, nullptr, nullptr, &rm2, &rv2, &y, nullptr, nullptr}));
  expectNear(y.values(), {0, 0.5, 1, 1.5}, "inference");
  expectOk(batchNormForward({false, 0.1, 0.0, &x, &w, &b, &rm2, &rv2, &y, &sm, &si}));
  expectNear(y.values(), {1, 2, 3, 4}, "inference with weight and bias");
  expectNear(sm.values(), {1}, "inference save_mean is the running mean");
  expectNear(si.values(), {0.5}, "inference save_invstd is 1/sqrt(running_var + eps)");
  expectNear(rm2.values(), {1}, "inference leaves running_mean alone");
  // Two channels of [2, 2]: channel 0 = {1, 3}, channel 1 = {2, 6}.
  const Tensor x2 = Tensor::host(kF64, {2, 2}, {1, 2, 3, 6});
  Tensor y2 = Tensor::host(kF64, {2, 2}), sm2 = Tensor::host(kF64, {2}), si2 = Tensor::host(kF64, {2});
  expectOk(batchNormForward({true, 0.1, 0.0, &x2, nullptr, nullptr, nullptr, nullptr, &y2, &sm2, &si2}));
  expectNear(y2.values(), {-1, -1, 1, 1}, "two channels");
  expectNear(sm2.values(), {2, 4}, "two means");
  expectNear(si2.values(), {1, 0.5}, "two invstds");
  // No values per channel: NaN statistics, running stats untouched.
  const Tensor empty = Tensor::host(kF64, {0, 1, 3});
  Tensor y3 = Tensor::host(kF64, {0, 1, 3});
  Tensor rm3 = Tensor::host(kF64, {1}, {0.5}), rv3 = Tensor::host(kF64, {1}, {2});
  expectOk(batchNormForward({true, 0.1, 1e-5, &empty, nullptr, nullptr, &rm3, &rv3, &y3, &sm, &si}));
  EXPECT_TRUE(std::isnan(sm.values()[0]) && std::isnan(si.values()[0]));
  expectNear(rm3.values(), {0.5}, "running_mean untouched");
  expectNear(rv3.values(), {2}, "running_var untouched");
}

// d/dx, d/dweight, d/dbias of dot(batch_norm_training(x, weight, bias), r) by central differences.
void batchNormBackwardMatchesFiniteDifferences(const Dims& dims, bool affine) {
  const std::int64_t n = optest::numel(dims), ch = dims[1];
  const std::vector<double> x0 = shifted(n, 21), r = randomValues(n, 22), w0 = randomValues(ch, 23, 0.5, 1.5),
                            b0 = randomValues(ch, 24);
  const double eps = 1e-3;
  const auto forward = [&](const std::vector<double>& xv, const std::vector<double>& wv,
                           const std::vector<double>& bv, Tensor* sm, Tensor* si) {
    const Tensor x = Tensor::host(kF64, dims, xv), w = Tensor::host(kF64, {ch}, wv),
                 b = Tensor::host(kF64, {ch}, bv);
    Tensor y = Tensor::host(kF64, dims);
    expectOk(batchNormForward(
        {true, 0.1, eps, &x, affine ? &w : nullptr, affine ? &b : nullptr, nullptr, nullptr, &y, sm, si}));
    return dot(y.values(), r);
  };
  Tensor sm = Tensor::host(kF64, {ch}), si = Tensor::host(kF64, {ch});
  forward(x0, w0, b0, &sm, &si);
  const Tensor x = Tensor::host(kF64, dims, x0), go = Tensor::host(kF64, dims, r),
               w = Tensor::host(kF64, {ch}, w0);
  Tensor gi = Tensor::host(kF64, dims), gw = Tensor::host(kF64, {ch}), gb = Tensor::host(kF64, {ch});
  expectOk(batchNormBackward({&go, &x, affine ? &w : nullptr, &sm, &si, &gi, &gw, &gb}));
  const Tolerance tol = reducetest::finiteDifferenceTolerance();
  const std::string what = testing::PrintToString(dims) + (affine ? " affine" : "");
  expectClose(gi.values(),
              numericalGradient(x0, [&](const auto& v) { return forward(v, w0, b0, nullptr, nullptr); }), tol,
              what + " grad_input");
  if (affine) {
    expectClose(gw.values(),
                numericalGradient(w0, [&](const auto& v) { return forward(x0, v, b0, nullptr, nullptr); }),
                tol, what + " grad_weight");
    expectClose(gb.values(),
                numericalGradient(b0, [&](const auto& v) { return forward(x0, w0, v, nullptr, nullptr); }),
                tol, what + " grad_bias");
  }
}

TEST(BatchNorm, BackwardMatchesFiniteDifferences) {
  batchNormBackwardMatchesFiniteDifferences({4, 3}, true);
  batchNormBackwardMatchesFiniteDifferences({2, 3, 5}, true);
  batchNormBackwardMatchesFiniteDifferences({3, 2, 2, 2}, false);
}

TEST(BatchNorm, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {4, 3, 2}), y = Tensor::device(kF32, {4, 3, 2});
  const Tensor c3 = Tensor::device(kF32, {3}), c3b = Tensor::device(kF32, {3}),
               c4 = Tensor::device(kF32, {4}), c3h = Tensor::device(kF16, {3});
  const Tensor x1 = Tensor::device(kF32, {5}), y1 = Tensor::device(kF32, {5});
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x1, nullptr, nullptr, nullptr, nullptr, &y1, nullptr, nullptr}),
      "batch_norm_forward: x has shape [5]; expected at least 2 dims [N, C, ...]");
  expectBadParam(
      batchNormForward(h, {true, kNan, 1e-5, &x, nullptr, nullptr, nullptr, nullptr, &y, nullptr, nullptr}),
      "momentum = nan; expected a finite number");
  expectBadParam(
      batchNormForward(h, {true, 0.1, kInf, &x, nullptr, nullptr, nullptr, nullptr, &y, nullptr, nullptr}),
      "eps = inf; expected a finite eps");
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, &c4, nullptr, nullptr, nullptr, &y, nullptr, nullptr}),
      "weight has shape [4] but x [4, 3, 2] has 3 channels; expected [3]");
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, &c3, &c3h, nullptr, nullptr, &y, nullptr, nullptr}),
      "bias is float16 but x is float32; they must have the same dtype");
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, &c3, nullptr, &y, nullptr, nullptr}),
      "running_mean is given without running_var; give both running stats or neither");
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, nullptr, &c3, &y, nullptr, nullptr}),
      "running_var is given without running_mean");
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, &c3h, &c3, &y, nullptr, nullptr}),
      "running_mean is float16 but x is float32; the running stats must be float32 or x's dtype");
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, &c3, &c3h, &y, nullptr, nullptr}),
      "running_var is float16 but running_mean is float32");
  expectBadParam(batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, &c3, &c4, &y, nullptr, nullptr}),
                 "running_var has shape [4] but x [4, 3, 2] has 3 channels");
  expectBadParam(
      batchNormForward(h, {false, 0.1, 1e-5, &x, nullptr, nullptr, nullptr, nullptr, &y, nullptr, nullptr}),
      "inference (training = false) normalizes with the running stats, but running_mean and running_var "
      "are absent");
  const Tensor one = Tensor::device(kF32, {1, 3}), one_y = Tensor::device(kF32, {1, 3});
  expectBadParam(batchNormForward(h, {true, 0.1, 1e-5, &one, nullptr, nullptr, nullptr, nullptr, &one_y,
                                      nullptr, nullptr}),
                 "training needs more than 1 value per channel, but x [1, 3] has 1");
  // One value per channel is fine in inference.
  EXPECT_EQ(
      batchNormForward(h, {false, 0.1, 1e-5, &one, nullptr, nullptr, &c3, &c3b, &one_y, nullptr, nullptr}),
      MLUOP_STATUS_SUCCESS)
      << lastError();
  expectBadParam(
      batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, nullptr, nullptr, &y, &c3h, nullptr}),
      "save_mean is float16 but must be float32 for a float32 x");
  expectBadParam(batchNormForward(h, {true, 0.1, 1e-5, &x, nullptr, nullptr, nullptr, nullptr, &y, &c3, &c4}),
                 "save_invstd has shape [4] but x [4, 3, 2] has 3 channels");
  expectBadParam(mluopBatchNormForward(h, true, 0.1, 1e-5, x.desc(), x.data(), nullptr, nullptr, nullptr,
                                       nullptr, c3.desc(), c3.data(), c3b.desc(), c3.data(), y.desc(),
                                       y.data(), nullptr, nullptr, nullptr, nullptr),
                 "running_mean and running_var overlap in memory");
  const Tensor c3c = Tensor::device(kF32, {3});
  expectBadParam(mluopBatchNormForward(h, true, 0.1, 1e-5, x.desc(), x.data(), c3.desc(), c3.data(), nullptr,
                                       nullptr, c3b.desc(), c3.data(), c3c.desc(), c3c.data(), y.desc(),
                                       y.data(), nullptr, nullptr, nullptr, nullptr),
                 "running_mean overlaps weight in memory");
  // backward
  const Tensor go = Tensor::device(kF32, {4, 3, 2}), go2 = Tensor::device(kF32, {4, 3, 3}),
               gi = Tensor::device(kF32, {4, 3, 2});
  expectBadParam(batchNormBackward(h, {&y1, &x1, nullptr, &c3, &c3b, &y1, nullptr, nullptr}),
                 "batch_norm_backward: x has shape [5]; expected at least 2 dims [N, C, ...]");
  expectBadParam(batchNormBackward(h, {&go2, &x, nullptr, &c3, &c3b, &gi, nullptr, nullptr}),
                 "grad_output has shape [4, 3, 3] but x has shape [4, 3, 2]; they must be equal");
  expectBadParam(batchNormBackward(h, {&go, &x, nullptr, &c4, &c3b, &gi, nullptr, nullptr}),
                 "save_mean has shape [4] but x [4, 3, 2] has 3 channels");
  expectBadParam(batchNormBackward(h, {&go, &x, nullptr, &c3, &c3h, &gi, nullptr, nullptr}),
                 "save_invstd is float16 but must be float32 for a float32 x");
  expectBadParam(batchNormBackward(h, {&go, &x, nullptr, &c3, &c3b, &gi, &c3h, nullptr}),
                 "grad_weight is float16 but x is float32");
  expectBadParam(batchNormBackward(h, {&go, &x, nullptr, &c3, &c3b, &gi, nullptr, &c4}),
                 "grad_bias has shape [4] but x [4, 3, 2] has 3 channels");
  const Tensor xr = Tensor::host(kF64, {2, 3}), yr = Tensor::host(kF64, {2, 3}), sr = Tensor::host(kF64, {3});
  expectBadParam(
      batchNormForward({false, 0.1, 1e-5, &xr, nullptr, nullptr, nullptr, nullptr, &yr, nullptr, nullptr}),
      "running_mean and running_var are absent");
  expectBadParam(batchNormBackward({&yr, &xr, nullptr, &sr, &sr, &yr, nullptr, nullptr}),
                 "grad_input overlaps grad_output in memory");
}

// ================================ rope ================================

struct RopeCase {
  Dims dims;
  Dims x_strides;
  Dims y_strides;
  std::int64_t offset;
  double theta;
};

const std::vector<RopeCase>& ropeCases() {
  static const std::vector<RopeCase> cases = {
      {{2, 5, 3, 8}, {}, {}, 0, 10000.0},
      {{1, 7, 2, 2}, {}, {}, 3, 10000.0},
      {{2, 4, 3, 6}, permutedStrides({2, 4, 3, 6}, {0, 2, 1, 3}), {}, 0, 500000.0},  // x stored [B, H, S, D]
      {{1, 3, 2, 4}, {}, {48, 16, 8, 2}, 7, 10000.0},                                // y: every other element
      {{1, 3, 2, 4}, {48, 16, 8, 2}, permutedStrides({1, 3, 2, 4}, {3, 2, 1, 0}), 0, 100.0},
      {{0, 3, 2, 4}, {}, {}, 0, 10000.0},
      {{1, 3, 2, 0}, {}, {}, 0, 10000.0},
      {{1, 3, 5, 16}, {}, {}, 1000000, 10000.0},  // large positions
      {{2, 33, 4, 64}, {}, {}, 11, 10000.0},      // several cores
  };
  return cases;
}

TEST(Rope, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 500;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const RopeCase& c : ropeCases()) {
      for (const bool backward : {false, true}) {
        const std::string what = dtypeLabel(dtype) + " " + testing::PrintToString(c.dims) + " offset " +
                                 std::to_string(c.offset) + (backward ? " backward" : " forward");
        const Pair x = makePair(dtype, c.dims, randomValues(optest::numel(c.dims), seed++), c.x_strides);
        const Pair y = makePair(dtype, c.dims, {}, c.y_strides);
        ASSERT_EQ(rope(h, backward, c.theta, c.offset, x.dev, y.dev), MLUOP_STATUS_SUCCESS)
            << what << lastError();
        expectOk(rope(backward, c.theta, c.offset, x.host, y.host));
        h.sync();
        expectClose(y.dev.values(), y.host.values(), toleranceFor(dtype), what);
      }
    }
  }
}

TEST(Rope, InPlaceMatchesOutOfPlace) {
  Handle h;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const bool backward : {false, true}) {
      const Dims dims{2, 6, 3, 8};
      const Dims strides = permutedStrides(dims, {0, 2, 1, 3});
      const std::vector<double> v = randomValues(optest::numel(dims), 41);
      const Pair x = makePair(dtype, dims, v, strides);
      const Tensor y_ref = Tensor::host(dtype, dims);
      ASSERT_EQ(rope(h, backward, 10000.0, 2, x.dev, x.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(rope(backward, 10000.0, 2, x.host, y_ref));
      expectOk(rope(backward, 10000.0, 2, x.host, x.host));
      h.sync();
      expectClose(x.dev.values(), y_ref.values(), toleranceFor(dtype),
                  dtypeLabel(dtype) + " in place on device");
      expectClose(x.host.values(), y_ref.values(), {0, 0}, dtypeLabel(dtype) + " in place on the reference");
    }
  }
}

TEST(Rope, ReferenceHandWorked) {
  // Two tokens of [1, 2, 3, 4] (D = 4, theta 10000): inv_freq = [1, 0.01]; token 0 is not rotated, token 1
  // rotates the pair (x0, x2) by 1 radian and (x1, x3) by 0.01.
  const Tensor x = Tensor::host(kF64, {1, 2, 1, 4}, {1, 2, 3, 4, 1, 2, 3, 4});
  Tensor y = Tensor::host(kF64, {1, 2, 1, 4});
  expectOk(rope(false, 10000.0, 0, x, y));
  const std::vector<double> rotated = {-1.9841106485555495, 1.959900667496664, 2.4623779024123156,
                                       4.019799668334994};
  std::vector<double> expected = {1, 2, 3, 4};
  expected.insert(expected.end(), rotated.begin(), rotated.end());
  expectNear(y.values(), expected, "forward");
  // position_offset 1: token 0 is at position 1.
  const Tensor x1 = Tensor::host(kF64, {1, 1, 1, 4}, {1, 2, 3, 4});
  Tensor y1 = Tensor::host(kF64, {1, 1, 1, 4});
  expectOk(rope(false, 10000.0, 1, x1, y1));
  expectNear(y1.values(), rotated, "position_offset");
  // The backward rotates back.
  const Tensor g = Tensor::host(kF64, {1, 1, 1, 4}, rotated);
  Tensor gi = Tensor::host(kF64, {1, 1, 1, 4});
  expectOk(rope(true, 10000.0, 1, g, gi));
  expectNear(gi.values(), {1, 2, 3, 4}, "backward undoes forward");
  // D = 2: the angle is the position itself; (1, 0) at position 3 becomes (cos 3, sin 3).
  const Tensor x2 = Tensor::host(kF64, {1, 1, 1, 2}, {1, 0});
  Tensor y2 = Tensor::host(kF64, {1, 1, 1, 2});
  expectOk(rope(false, 123.0, 3, x2, y2));
  expectNear(y2.values(), {-0.9899924966004454, 0.1411200080598672}, "D = 2");
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  const Dims dims{2, 3, 2, 6};
  const std::int64_t n = optest::numel(dims);
  const std::vector<double> x0 = randomValues(n, 61), r = randomValues(n, 62);
  const auto loss = [&](const std::vector<double>& v) {
    const Tensor x = Tensor::host(kF64, dims, v);
    Tensor y = Tensor::host(kF64, dims);
    expectOk(rope(false, 10000.0, 5, x, y));
    return dot(y.values(), r);
  };
  const Tensor go = Tensor::host(kF64, dims, r);
  Tensor gi = Tensor::host(kF64, dims);
  expectOk(rope(true, 10000.0, 5, go, gi));
  expectClose(gi.values(), numericalGradient(x0, loss), reducetest::finiteDifferenceTolerance(),
              "rope backward");
}

TEST(Rope, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {1, 3, 2, 4}), y = Tensor::device(kF32, {1, 3, 2, 4});
  const Tensor x3 = Tensor::device(kF32, {3, 2, 4}), y3 = Tensor::device(kF32, {3, 2, 4});
  const Tensor odd = Tensor::device(kF32, {1, 3, 2, 5}), odd_y = Tensor::device(kF32, {1, 3, 2, 5});
  const Tensor y_other = Tensor::device(kF32, {1, 3, 4, 2}), y16 = Tensor::device(kF16, {1, 3, 2, 4});
  const Tensor y_bcast = Tensor::device(kF32, {1, 3, 2, 4}, {}, {24, 0, 4, 1});
  expectBadParam(rope(h, false, 10000.0, 0, x3, y3),
                 "rope_forward: x has shape [3, 2, 4]; expected 4 dims [B, S, H, D]");
  expectBadParam(rope(h, false, 10000.0, 0, odd, odd_y),
                 "x has shape [1, 3, 2, 5]: its head dim D = 5 is odd; rope pairs element i with i + D/2");
  expectBadParam(rope(h, false, 0.0, 0, x, y), "theta = 0; expected a finite theta > 0");
  expectBadParam(rope(h, false, std::nan(""), 0, x, y), "theta = nan; expected a finite theta > 0");
  expectBadParam(rope(h, false, 10000.0, -1, x, y), "position_offset = -1 is negative");
  expectBadParam(rope(h, false, 10000.0, (std::int64_t{1} << 53) - 2, x, y),
                 "position_offset = 9007199254740990 with 3 positions exceeds 2^53");
  expectBadParam(rope(h, false, 10000.0, 0, x, y_other),
                 "y has shape [1, 3, 4, 2] but x has shape [1, 3, 2, 4]");
  expectBadParam(rope(h, false, 10000.0, 0, x, y16), "y is float16 but x is float32");
  expectBadParam(rope(h, false, 10000.0, 0, x, y_bcast),
                 "y (shape [1, 3, 2, 4], strides [24, 0, 4, 1]) overlaps "
                 "itself");
  // y one element into x: a partial overlap. (An exact alias is fine: see InPlaceMatchesOutOfPlace.)
  const Tensor big = Tensor::device(kF32, {25});
  expectBadParam(
      mluopRopeForward(h, 10000.0, 0, x.desc(), big.data(), y.desc(), static_cast<float*>(big.data()) + 1),
      "y partially overlaps x in memory; it may be x itself (same data and strides) or separate memory");
  // Same memory with different strides is a partial overlap too.
  const Tensor xt = Tensor::device(kF32, {1, 3, 2, 4}, {}, permutedStrides({1, 3, 2, 4}, {0, 2, 1, 3}));
  expectBadParam(mluopRopeBackward(h, 10000.0, 0, x.desc(), x.data(), xt.desc(), x.data()),
                 "rope_backward: grad_input partially overlaps grad_output in memory");
  expectBadParam(rope(h, true, 10000.0, 0, x3, y3),
                 "grad_output has shape [3, 2, 4]; expected 4 dims [B, S, H, D]");
  const Tensor xr = Tensor::host(kF64, {1, 2, 1, 3}), yr = Tensor::host(kF64, {1, 2, 1, 3});
  expectBadParam(rope(false, 10000.0, 0, xr, yr), "its head dim D = 3 is odd");
  const Tensor xe = Tensor::host(kF64, {1, 2, 1, 4}), ye = Tensor::host(kF64, {1, 2, 1, 4});
  expectBadParam(rope(true, -2.0, 0, xe, ye), "theta = -2; expected a finite theta > 0");
}

// ================================ rotary_embedding (given cos/sin tables) ================================

mluopStatus_t rotary(const Handle& h, bool conj, bool interleaved, const Tensor& x, const Tensor& cos,
                     const Tensor& sin, const Tensor& y) {
  return mluopRotaryEmbedding(h, conj, interleaved, x.desc(), x.data(), cos.desc(), cos.data(), sin.desc(),
                              sin.data(), y.desc(), y.data());
}
mlu::Status rotary(bool conj, bool interleaved, const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const Tensor& y) {
  mlu::rotary_embedding_args a;
  a.conj = conj;
  a.interleaved = interleaved;
  a.x = x.view();
  a.cos = cos.view();
  a.sin = sin.view();
  a.y = y.view();
  return mlu::reference::run(a);
}

// rope's tables as tensors [S, 1, D/2]: cos and sin of (s + offset) theta^(-2i/D), in float64.
std::pair<std::vector<double>, std::vector<double>> ropeTables(std::int64_t s_len, std::int64_t d,
                                                               double theta, std::int64_t offset) {
  std::vector<double> c, sn;
  for (std::int64_t s = 0; s < s_len; ++s) {
    for (std::int64_t i = 0; i < d / 2; ++i) {
      const double angle = static_cast<double>(s + offset) *
                           std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      c.push_back(std::cos(angle));
      sn.push_back(std::sin(angle));
    }
  }
  return {c, sn};
}

// With rope's own tables, rotary_embedding (non-interleaved) is rope_forward and its conj rope_backward:
// two independent implementations of one rotation.
TEST(RotaryEmbedding, WithRopesTablesIsRope) {
  Handle h;
  const Dims dims{2, 7, 3, 16};
  const auto [c, sn] = ropeTables(7, 16, 10000.0, 3);
  const std::vector<double> v = randomValues(optest::numel(dims), 71);
  for (const bool conj : {false, true}) {
    const Tensor x64 = Tensor::host(kF64, dims, v);
    Tensor want = Tensor::host(kF64, dims);
    expectOk(rope(conj, 10000.0, 3, x64, want));
    Tensor got = Tensor::host(kF64, dims);
    expectOk(
        rotary(conj, false, x64, Tensor::host(kF64, {7, 1, 8}, c), Tensor::host(kF64, {7, 1, 8}, sn), got));
    expectClose(got.values(), want.values(), {1e-14, 1e-13}, conj ? "reference conj" : "reference");
    const Pair x = makePair(kF32, dims, v);
    const Pair ct = makePair(kF32, {7, 1, 8}, c), st = makePair(kF32, {7, 1, 8}, sn);
    Tensor y = Tensor::device(kF32, dims);
    ASSERT_EQ(rotary(h, conj, false, x.dev, ct.dev, st.dev, y), MLUOP_STATUS_SUCCESS) << lastError();
    h.sync();
    expectClose(y.values(), want.values(), toleranceFor(kF32), conj ? "device conj" : "device");
  }
}

// DIOPI's rotary_emb cases (input ; tables), with conj and interleaved both ways, and its empty cases.
struct RotaryCase {
  Dims x, table;
  Dims x_strides = {};
};
const std::vector<RotaryCase>& rotaryCases() {
  static const std::vector<RotaryCase> cases = {
      {{12}, {6}},
      {{64}, {32}},
      {{2, 128}, {2, 64}},
      {{3, 8, 256}, {3, 1, 128}},
      {{1, 64}, {1, 32}},
      {{3, 5, 12}, {3, 5, 6}},
      {{1, 125, 16, 64}, {125, 1, 32}},  // DIOPI's D is 512; 64 keeps the test quick
      {{2, 64, 16, 32}, {64, 1, 16}},
      {{3, 100, 8, 64}, {100, 1, 32}},
      {{2, 6, 3, 8}, {6, 1, 4}, permutedStrides({2, 6, 3, 8}, {0, 2, 1, 3})},  // x stored [B, H, S, D]
      {{0}, {0}},
      {{0, 128}, {0, 64}},
      {{3, 8, 0}, {3, 1, 0}},
      {{0, 5, 12}, {0, 5, 6}},
      {{1, 125, 16, 0}, {125, 1, 0}},
  };
  return cases;
}

TEST(RotaryEmbedding, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 800;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const RotaryCase& c : rotaryCases()) {
      for (const bool conj : {false, true}) {
        for (const bool interleaved : {false, true}) {
          const std::string what = dtypeLabel(dtype) + " " + testing::PrintToString(c.x) +
                                   (conj ? " conj" : "") + (interleaved ? " interleaved" : "");
          const Pair x = makePair(dtype, c.x, randomValues(optest::numel(c.x), seed++), c.x_strides);
          const Pair ct = makePair(dtype, c.table, randomValues(optest::numel(c.table), seed++));
          const Pair st = makePair(dtype, c.table, randomValues(optest::numel(c.table), seed++));
          Tensor y = Tensor::device(dtype, c.x);
          Tensor y_ref = Tensor::host(dtype, c.x);
          ASSERT_EQ(rotary(h, conj, interleaved, x.dev, ct.dev, st.dev, y), MLUOP_STATUS_SUCCESS)
              << what << ": " << lastError();
          expectOk(rotary(conj, interleaved, x.host, ct.host, st.host, y_ref));
          h.sync();
          Tolerance tol = toleranceFor(dtype);
          tol.atol *= 2;  // two products summed
          expectClose(y.values(), y_ref.values(), tol, what);
        }
      }
    }
  }
}

// Hand-worked on x = [1, 2, 3, 4] with cos [0, 1], sin [1, 0]: the first pair turns by 90 degrees, the
// second not at all. Pairs are (x0, x2), (x1, x3) non-interleaved and (x0, x1), (x2, x3) interleaved.
TEST(RotaryEmbedding, HandWorkedAndInPlace) {
  Handle h;
  const std::vector<double> xv = {1, 2, 3, 4};
  const auto run = [&](bool conj, bool interleaved, const std::vector<double>& expected) {
    const std::string what = std::string(conj ? "conj " : "") + (interleaved ? "interleaved" : "halves");
    const Tensor x = Tensor::host(kF64, {4}, xv), c = Tensor::host(kF64, {2}, {0, 1}),
                 s = Tensor::host(kF64, {2}, {1, 0});
    Tensor y = Tensor::host(kF64, {4});
    expectOk(rotary(conj, interleaved, x, c, s, y));
    expectClose(y.values(), expected, {0, 0}, what);
    // the device, in place (y = x)
    const Pair xd = makePair(kF32, {4}, xv), cd = makePair(kF32, {2}, {0, 1}),
               sd = makePair(kF32, {2}, {1, 0});
    ASSERT_EQ(rotary(h, conj, interleaved, xd.dev, cd.dev, sd.dev, xd.dev), MLUOP_STATUS_SUCCESS)
        << lastError();
    h.sync();
    expectClose(xd.dev.values(), expected, {0, 0}, what + " device in place");
  };
  run(false, false, {-3, 2, 1, 4});
  run(true, false, {3, 2, -1, 4});
  run(false, true, {-2, 1, 3, 4});
  run(true, true, {2, -1, 3, 4});
}

TEST(RotaryEmbedding, BadParams) {
  Handle h;
  const Tensor x = Tensor::device(kF32, {2, 3, 8}), y = Tensor::device(kF32, {2, 3, 8});
  const Tensor c = Tensor::device(kF32, {3, 4}), s = Tensor::device(kF32, {3, 4});
  const Tensor odd = Tensor::device(kF32, {2, 3, 7});
  expectBadParam(
      rotary(h, false, false, odd, c, s, odd),
      "rotary_embedding: x has shape [2, 3, 7]; its last dim (the rotated features) must exist and be even");
  const Tensor wide = Tensor::device(kF32, {3, 8});
  expectBadParam(rotary(h, false, false, x, wide, wide, y),
                 "cos has shape [3, 8], which does not broadcast to x's half [..., D/2]'s shape [2, 3, 4]");
  expectBadParam(rotary(h, false, false, x, c, Tensor::device(kF32, {1, 4}), y),
                 "sin has shape [1, 4] but cos has shape [3, 4]");
  expectBadParam(rotary(h, false, false, x, Tensor::device(kF16, {3, 4}), s, y),
                 "cos is float16 but x is float32");
  expectBadParam(rotary(h, false, false, x, c, s, Tensor::device(kF32, {2, 3, 4})),
                 "y has shape [2, 3, 4] but x has shape [2, 3, 8]");
  // y may be x itself, not a view that partly overlaps it (one element further along one buffer)
  const Tensor buffer = Tensor::host(kF32, {9}), table = Tensor::host(kF32, {4});
  mlu::rotary_embedding_args partial;
  partial.x = buffer.view();
  partial.x.dims[0] = 8;
  partial.y = partial.x;
  partial.y.data = static_cast<float*>(partial.x.data) + 1;
  partial.cos = partial.sin = table.view();
  expectBadParam(mlu::reference::run(partial), "y partially overlaps x in memory");
  partial.y = partial.x;
  expectOk(mlu::reference::run(partial));
  expectBadParam(rotary(false, false, Tensor::host(kF32, {}), Tensor::host(kF32, {}), Tensor::host(kF32, {}),
                        Tensor::host(kF32, {})),
                 "x has shape []; its last dim");
}

}  // namespace
