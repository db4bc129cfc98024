// Tests of adamw_step: the reference against a hand-worked step; the device against the reference over
// several steps (float32 master weights with and without a bfloat16/float16 model copy, loss scaling
// through grad_scale, half-precision gradients, non-contiguous tensors, size 0), a single step in every
// device dtype; and every BAD_PARAM path with its message.
#include "reduce_util.h"

#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using optest::Dims;
using optest::expectClose;
using optest::Handle;
using optest::randomValues;
using optest::Tensor;
using reducetest::dtypeLabel;
using reducetest::lastError;
using reducetest::makePair;
using reducetest::Pair;
using reducetest::permutedStrides;
using testing::HasSubstr;

constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT;
constexpr mluopDataType_t kF64 = MLUOP_DTYPE_DOUBLE;
constexpr mluopDataType_t kBF16 = MLUOP_DTYPE_BFLOAT16;
constexpr mluopDataType_t kF16 = MLUOP_DTYPE_HALF;

struct Hyper {
  float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
  std::int64_t step = 1;
  float grad_scale = 1.0f;
};

// The tensors of one optimizer state; model may be absent (a default Tensor is not possible: a pointer).
struct State {
  const Tensor& param;
  const Tensor& grad;
  const Tensor& exp_avg;
  const Tensor& exp_avg_sq;
  const Tensor* model;
  const Tensor* max_exp_avg_sq = nullptr;  // amsgrad when present
};

mluopStatus_t deviceStep(const Handle& h, const Hyper& p, const State& s) {
  const Tensor* x = s.max_exp_avg_sq;
  return mluopAdamwStep(h, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step, p.grad_scale, x != nullptr,
                        s.param.desc(), s.param.data(), s.grad.desc(), s.grad.data(), s.exp_avg.desc(),
                        s.exp_avg.data(), s.exp_avg_sq.desc(), s.exp_avg_sq.data(), x ? x->desc() : nullptr,
                        x ? x->data() : nullptr, s.model ? s.model->desc() : nullptr,
                        s.model ? s.model->data() : nullptr);
}

mlu::Status referenceStep(const Hyper& p, const State& s) {
  mlu::adamw_step_args a;
  a.lr = p.lr;
  a.beta1 = p.beta1;
  a.beta2 = p.beta2;
  a.eps = p.eps;
  a.weight_decay = p.weight_decay;
  a.step = p.step;
  a.grad_scale = p.grad_scale;
  a.param = s.param.view();
  a.grad = s.grad.view();
  a.exp_avg = s.exp_avg.view();
  a.exp_avg_sq = s.exp_avg_sq.view();
  if (s.model != nullptr) a.model_param = s.model->view();
  a.amsgrad = s.max_exp_avg_sq != nullptr;
  if (a.amsgrad) a.max_exp_avg_sq = s.max_exp_avg_sq->view();
  return mlu::reference::run(a);
}

void expectOk(const mlu::Status& status) { ASSERT_TRUE(status.ok()) << status.message; }

void expectBadParam(mluopStatus_t status, const std::string& message) {
  EXPECT_EQ(status, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr(message));
}

// torch.optim.AdamW, one step by hand: param 1, grad 0.5, fresh state, lr 0.1, betas (0.9, 0.999), eps 1e-8,
// weight_decay 0.01. param = 1 * (1 - 0.001) = 0.999; m = 0.05, v = 0.00025; m̂ = 0.05 / 0.1 = 0.5,
// v̂ = 0.00025 / 0.001 = 0.25; param = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8).
TEST(AdamW, ReferenceHandWorked) {
  Hyper p;
  p.lr = 0.1f;
  p.weight_decay = 0.01f;
  const double lr = p.lr, b1 = p.beta1, b2 = p.beta2, eps = p.eps, wd = p.weight_decay;  // the float values
  Tensor param = Tensor::host(kF64, {2}, {1.0, -2.0}), grad = Tensor::host(kF64, {2}, {0.5, 0.0}),
         m = Tensor::host(kF64, {2}), v = Tensor::host(kF64, {2}), model = Tensor::host(kBF16, {2});
  expectOk(referenceStep(p, {param, grad, m, v, &model}));
  const double p0 = 1.0 * (1 - lr * wd) -
                    lr * (((1 - b1) * 0.5) / (1 - b1)) / (std::sqrt(((1 - b2) * 0.25) / (1 - b2)) + eps);
  const double p1 = -2.0 * (1 - lr * wd);  // zero grad: only the decay (0 / (0 + eps) = 0)
  expectClose(param.values(), {p0, p1}, {1e-15, 1e-15}, "param");
  EXPECT_NEAR(param.values()[0], 0.999 - 0.1, 1e-7);
  expectClose(m.values(), {(1 - b1) * 0.5, 0.0}, {1e-15, 1e-15}, "exp_avg");
  expectClose(v.values(), {(1 - b2) * 0.25, 0.0}, {1e-15, 1e-15}, "exp_avg_sq");
  expectClose(model.values(),
              {mlu::bfloat16ToFloat(mlu::floatToBfloat16(static_cast<float>(p0))),
               mlu::bfloat16ToFloat(mlu::floatToBfloat16(static_cast<float>(p1)))},
              {0, 0}, "model_param");
  // Step 2 with grad -1 scaled by 4 (grad_scale 4 divides it back to -0.25... of the stored -1).
  Hyper q = p;
  q.step = 2;
  q.grad_scale = 4.0f;
  grad.setValues({-1.0, 0.0});
  expectOk(referenceStep(q, {param, grad, m, v, nullptr}));
  const double g = -0.25;
  const double m2 = b1 * (1 - b1) * 0.5 + (1 - b1) * g, v2 = b2 * (1 - b2) * 0.25 + (1 - b2) * g * g;
  const double p0b = p0 * (1 - lr * wd) - lr * (m2 / (1 - b1 * b1)) / (std::sqrt(v2 / (1 - b2 * b2)) + eps);
  expectClose(param.values(), {p0b, p1 * (1 - lr * wd)}, {1e-14, 1e-14}, "param after step 2");
  expectClose(m.values(), {m2, 0.0}, {1e-15, 1e-15}, "exp_avg after step 2");
  expectClose(v.values(), {v2, 0.0}, {1e-15, 1e-15}, "exp_avg_sq after step 2");
  // The device, in float32, on the same two steps.
  Handle h;
  Tensor dp = Tensor::device(kF32, {2}, {1.0, -2.0}), dg = Tensor::device(kF32, {2}, {0.5, 0.0}),
         dm = Tensor::device(kF32, {2}), dv = Tensor::device(kF32, {2});
  ASSERT_EQ(deviceStep(h, p, {dp, dg, dm, dv, nullptr}), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectClose(dp.values(), {p0, p1}, {1e-6, 1e-6}, "device param");
  dg.setValues({-1.0, 0.0});
  ASSERT_EQ(deviceStep(h, q, {dp, dg, dm, dv, nullptr}), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectClose(dp.values(), {p0b, p1 * (1 - lr * wd)}, {1e-6, 1e-6}, "device param after step 2");
  expectClose(dm.values(), {m2, 0.0}, {1e-7, 1e-6}, "device exp_avg after step 2");
  expectClose(dv.values(), {v2, 0.0}, {1e-9, 1e-6}, "device exp_avg_sq after step 2");
}

// amsgrad keeps the running max of v and divides by it: after a step whose v falls (grad 0 after a grad
// of 2), the step uses the earlier, larger v. Hand-worked with beta2 0.5 so the numbers stay readable:
// step 1: g = 2, m = 0.2 (beta1 0.9), v = 0.5 * 4 = 2, vmax = 2; step 2: g = 0, m = 0.18, v = 1, vmax = 2.
TEST(AdamW, AmsgradUsesTheRunningMaxOfV) {
  Hyper p;
  p.lr = 0.1f;
  p.beta2 = 0.5f;
  p.weight_decay = 0.0f;
  const double lr = p.lr, b1 = p.beta1, eps = p.eps;
  Handle h;
  Tensor param = Tensor::host(kF64, {1}, {1.0}), grad = Tensor::host(kF64, {1}, {2.0}),
         m = Tensor::host(kF64, {1}), v = Tensor::host(kF64, {1}), vmax = Tensor::host(kF64, {1});
  Tensor dp = Tensor::device(kF32, {1}, {1.0}), dg = Tensor::device(kF32, {1}, {2.0}),
         dm = Tensor::device(kF32, {1}), dv = Tensor::device(kF32, {1}), dx = Tensor::device(kF32, {1});
  State host{param, grad, m, v, nullptr, &vmax}, device{dp, dg, dm, dv, nullptr, &dx};
  expectOk(referenceStep(p, host));
  ASSERT_EQ(deviceStep(h, p, device), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();  // before the gradient is changed for step 2
  // step 1: bias corrections 1 - 0.9 and 1 - 0.5: m^ = 2, v^ = 4 -> param 1 - 0.1 * 2 / (2 + eps)
  const double p1 = 1.0 - lr * ((1 - b1) * 2 / (1 - b1)) / (std::sqrt(2.0 / 0.5) + eps);
  Hyper q = p;
  q.step = 2;
  grad.setValues({0.0});
  dg.setValues({0.0});
  expectOk(referenceStep(q, host));
  ASSERT_EQ(deviceStep(h, q, device), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  // step 2: m = 0.18, v = 1, vmax = 2; bias corrections 1 - 0.81 and 1 - 0.25
  const double m2 = b1 * (1 - b1) * 2;
  const double p2 = p1 - lr * (m2 / (1 - b1 * b1)) / (std::sqrt(2.0 / 0.75) + eps);
  expectClose(v.values(), {1.0}, {1e-15, 1e-15}, "exp_avg_sq falls");
  expectClose(vmax.values(), {2.0}, {1e-15, 1e-15}, "max_exp_avg_sq keeps the max");
  expectClose(param.values(), {p2}, {1e-7, 1e-7}, "param (float32 hyper-parameters)");
  expectClose(dx.values(), {2.0}, {1e-6, 1e-6}, "device max_exp_avg_sq");
  expectClose(dp.values(), {p2}, {1e-6, 1e-6}, "device param");
  // without amsgrad the same second step divides by the smaller v: a larger step
  Tensor param2 = Tensor::host(kF64, {1}, {p1}), m3 = Tensor::host(kF64, {1}, {(1 - b1) * 2}),
         v3 = Tensor::host(kF64, {1}, {2.0});
  expectOk(referenceStep(q, {param2, grad, m3, v3, nullptr}));
  EXPECT_LT(param2.values()[0], p2);
  // amsgrad and max_exp_avg_sq come together
  expectBadParam(mluopAdamwStep(h, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, 1, 1.0f, true, dp.desc(),
                                dp.data(), dg.desc(), dg.data(), dm.desc(), dm.data(), dv.desc(), dv.data(),
                                nullptr, nullptr, nullptr, nullptr),
                 "adamw_step: amsgrad needs max_exp_avg_sq");
  expectBadParam(mluopAdamwStep(h, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, 1, 1.0f, false, dp.desc(),
                                dp.data(), dg.desc(), dg.data(), dm.desc(), dm.data(), dv.desc(), dv.data(),
                                dx.desc(), dx.data(), nullptr, nullptr),
                 "max_exp_avg_sq is given but amsgrad is off");
  Tensor shared = Tensor::device(kF32, {1});
  expectBadParam(mluopAdamwStep(h, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, 1, 1.0f, true, dp.desc(),
                                dp.data(), dg.desc(), dg.data(), dm.desc(), dm.data(), dv.desc(), dv.data(),
                                dv.desc(), dv.data(), nullptr, nullptr),
                 "exp_avg_sq and max_exp_avg_sq share memory");
}

struct Layout {
  Dims dims;
  Dims strides;  // empty: contiguous
  std::string label;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {{1000}, {}, "[1000]"},
      {{70001}, {}, "[70001] (several chunks)"},
      {{37, 13}, permutedStrides({37, 13}, {1, 0}), "[37, 13] transposed"},
      {{5, 7}, {16, 2}, "[5, 7] padded"},
      {{0, 3}, {}, "empty"},
      {{}, {}, "0-d"},
  };
  return all;
}

// Several steps of float32 master weights (with a half model copy, loss scaling and half gradients in
// some runs) on the device and in the reference, from the same start and the same gradients.
TEST(AdamW, DeviceMatchesReferenceOverSteps) {
  Handle h;
  std::uint32_t seed = 1;
  struct Run {
    mluopDataType_t grad_dtype;
    mluopDataType_t model_dtype;  // INVALID: no model copy
    float grad_scale;
    bool amsgrad = false;
  };
  const std::vector<Run> runs = {{kF32, MLUOP_DTYPE_INVALID, 1.0f},
                                 {kF32, kBF16, 1.0f},
                                 {kBF16, kBF16, 1024.0f},
                                 {kF16, kF16, 512.0f},
                                 {kF32, kF32, 8.0f},
                                 {kF32, MLUOP_DTYPE_INVALID, 1.0f, true},
                                 {kBF16, kBF16, 64.0f, true}};
  for (const Run& run : runs) {
    for (const Layout& l : layouts()) {
      const std::string what =
          "grad " + dtypeLabel(run.grad_dtype) + " model " +
          (run.model_dtype == MLUOP_DTYPE_INVALID ? "none" : dtypeLabel(run.model_dtype)) + " grad_scale " +
          std::to_string(run.grad_scale) + (run.amsgrad ? " amsgrad " : " ") + l.label;
      const std::int64_t n = optest::numel(l.dims);
      const Pair param = makePair(kF32, l.dims, randomValues(n, seed++), l.strides);
      const Pair m = makePair(kF32, l.dims, std::vector<double>(static_cast<std::size_t>(n), 0.0), l.strides);
      const Pair v = makePair(kF32, l.dims, std::vector<double>(static_cast<std::size_t>(n), 0.0), l.strides);
      Pair grad = makePair(run.grad_dtype, l.dims, {}, l.strides);
      const bool copy = run.model_dtype != MLUOP_DTYPE_INVALID;
      const Pair model = makePair(copy ? run.model_dtype : kF32, l.dims, {}, l.strides);
      const Pair vmax =
          makePair(kF32, l.dims, std::vector<double>(static_cast<std::size_t>(n), 0.0), l.strides);
      for (std::int64_t step = 1; step <= 5; ++step) {
        // Gradients of varying size (some tiny, some large), loss-scaled.
        std::vector<double> g = randomValues(n, seed++);
        for (std::size_t i = 0; i < g.size(); ++i) g[i] *= (i % 3 == 0 ? 1e-3 : 1.0) * run.grad_scale;
        grad.dev.setValues(g);
        grad.host.setValues(g);
        Hyper p;
        p.step = step;
        p.grad_scale = run.grad_scale;
        p.lr = step == 3 ? 0.0f : 1e-2f;  // lr 0: nothing moves but the moments
        ASSERT_EQ(deviceStep(h, p,
                             {param.dev, grad.dev, m.dev, v.dev, copy ? &model.dev : nullptr,
                              run.amsgrad ? &vmax.dev : nullptr}),
                  MLUOP_STATUS_SUCCESS)
            << lastError();
        expectOk(referenceStep(p, {param.host, grad.host, m.host, v.host, copy ? &model.host : nullptr,
                                   run.amsgrad ? &vmax.host : nullptr}));
        h.sync();
      }
      expectClose(param.dev.values(), param.host.values(), {1e-5, 1e-5}, what + " param");
      expectClose(m.dev.values(), m.host.values(), {1e-6, 1e-5}, what + " exp_avg");
      expectClose(v.dev.values(), v.host.values(), {1e-8, 1e-5}, what + " exp_avg_sq");
      if (run.amsgrad)
        expectClose(vmax.dev.values(), vmax.host.values(), {1e-8, 1e-5}, what + " max_exp_avg_sq");
      if (copy) {
        expectClose(model.dev.values(), model.host.values(), optest::toleranceFor(run.model_dtype),
                    what + " model_param");
        // The copy is the master weight rounded to its dtype.
        Tensor rounded = Tensor::host(run.model_dtype, l.dims, param.dev.values());
        EXPECT_EQ(model.dev.values(), rounded.values()) << what;
      }
    }
  }
}

// One step with param, exp_avg and exp_avg_sq of each device dtype.
TEST(AdamW, DeviceMatchesReferenceInEveryDtype) {
  Handle h;
  std::uint32_t seed = 100;
  for (const mluopDataType_t dtype : {kF32, kBF16, kF16}) {
    for (const Layout& l : layouts()) {
      const std::string what = dtypeLabel(dtype) + " " + l.label;
      const std::int64_t n = optest::numel(l.dims);
      const Pair param = makePair(dtype, l.dims, randomValues(n, seed++), l.strides);
      const Pair m = makePair(dtype, l.dims, randomValues(n, seed++, -0.1, 0.1), l.strides);
      const Pair v = makePair(dtype, l.dims, randomValues(n, seed++, 0.0, 0.01), l.strides);
      const Pair grad = makePair(dtype, l.dims, randomValues(n, seed++), l.strides);
      Hyper p;
      p.step = 7;
      ASSERT_EQ(deviceStep(h, p, {param.dev, grad.dev, m.dev, v.dev, nullptr}), MLUOP_STATUS_SUCCESS)
          << lastError();
      expectOk(referenceStep(p, {param.host, grad.host, m.host, v.host, nullptr}));
      h.sync();
      const optest::Tolerance tol = optest::toleranceFor(dtype);
      expectClose(param.dev.values(), param.host.values(), tol, what + " param");
      expectClose(m.dev.values(), m.host.values(), tol, what + " exp_avg");
      expectClose(v.dev.values(), v.host.values(), tol, what + " exp_avg_sq");
    }
  }
}

// A late step: the bias corrections are ~1 and beta^t underflows harmlessly.
TEST(AdamW, LargeStepCount) {
  Handle h;
  const Pair param = makePair(kF32, {64}, randomValues(64, 1)),
             grad = makePair(kF32, {64}, randomValues(64, 2)),
             m = makePair(kF32, {64}, randomValues(64, 3, -0.1, 0.1)),
             v = makePair(kF32, {64}, randomValues(64, 4, 0.0, 0.01));
  Hyper p;
  p.step = std::int64_t{1} << 40;
  ASSERT_EQ(deviceStep(h, p, {param.dev, grad.dev, m.dev, v.dev, nullptr}), MLUOP_STATUS_SUCCESS);
  expectOk(referenceStep(p, {param.host, grad.host, m.host, v.host, nullptr}));
  h.sync();
  expectClose(param.dev.values(), param.host.values(), {1e-5, 1e-5}, "param");
}

TEST(AdamW, BadParams) {
  Handle h;
  const Tensor param = Tensor::device(kF32, {4, 5}), grad = Tensor::device(kF32, {4, 5}),
               m = Tensor::device(kF32, {4, 5}), v = Tensor::device(kF32, {4, 5}),
               model = Tensor::device(kBF16, {4, 5});
  const State ok{param, grad, m, v, &model};
  ASSERT_EQ(deviceStep(h, Hyper{}, ok), MLUOP_STATUS_SUCCESS) << lastError();
  const std::string op = "adamw_step: ";
  const auto with = [](auto change) {
    Hyper p;
    change(p);
    return p;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.step = 0; }), ok),
                 op + "step = 0 must be at least 1 (the step count is 1-based)");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.step = -3; }), ok), "step = -3 must be at least 1");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.lr = -0.5f; }), ok),
                 op + "lr = -0.5 must be non-negative and finite");
  expectBadParam(deviceStep(h, with([&](Hyper& p) { p.lr = nan; }), ok), "lr = nan must be non-negative");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.beta1 = 1.0f; }), ok),
                 op + "beta1 = 1 must be in [0, 1)");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.beta1 = -0.1f; }), ok),
                 "beta1 = -0.1 must be in [0, 1)");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.beta2 = 1.5f; }), ok), "beta2 = 1.5 must be in [0, 1)");
  expectBadParam(deviceStep(h, with([&](Hyper& p) { p.beta2 = nan; }), ok), "beta2 = nan must be in [0, 1)");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.eps = 0.0f; }), ok),
                 op + "eps = 0 must be positive and finite");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.eps = -1e-8f; }), ok), "eps = -1e-08 must be positive");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.weight_decay = -0.01f; }), ok),
                 op + "weight_decay = -0.01 must be non-negative and finite");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.grad_scale = 0.0f; }), ok),
                 op + "grad_scale = 0 must be positive and finite (1 = no loss scaling)");
  expectBadParam(deviceStep(h, with([&](Hyper& p) { p.grad_scale = inf; }), ok),
                 "grad_scale = inf must be positive");
  expectBadParam(deviceStep(h, with([](Hyper& p) { p.grad_scale = -2.0f; }), ok),
                 "grad_scale = -2 must be positive");

  // Shapes and dtypes.
  const Tensor wrong = Tensor::device(kF32, {5, 4});
  expectBadParam(deviceStep(h, Hyper{}, {param, wrong, m, v, &model}),
                 op + "grad has shape [5, 4] but param has shape [4, 5]; they must be equal");
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, wrong, v, &model}),
                 "exp_avg has shape [5, 4] but param");
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, m, wrong, &model}),
                 "exp_avg_sq has shape [5, 4] but param");
  const Tensor model_wrong = Tensor::device(kBF16, {20});
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, m, v, &model_wrong}),
                 "model_param has shape [20] but param has shape [4, 5]");
  const Tensor m_bf16 = Tensor::device(kBF16, {4, 5});
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, m_bf16, v, &model}),
                 op + "exp_avg is bfloat16 but param is float32; they must have the same dtype");
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, m, m_bf16, &model}),
                 "exp_avg_sq is bfloat16 but param is");
  const Tensor ints = Tensor::device(MLUOP_DTYPE_INT32, {4, 5});
  EXPECT_EQ(deviceStep(h, Hyper{}, {param, ints, m, v, &model}), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("grad is int32, which is not supported"));
  EXPECT_EQ(deviceStep(h, Hyper{}, {param, grad, m, v, &ints}), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("model_param is int32, which is not supported"));
  const Tensor p64 = Tensor::device(kF64, {4, 5}), m64 = Tensor::device(kF64, {4, 5}),
               v64 = Tensor::device(kF64, {4, 5});
  EXPECT_EQ(deviceStep(h, Hyper{}, {p64, grad, m64, v64, nullptr}), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("param is float64, which the device does not support"));

  // Memory: a broadcast (self-overlapping) state, and tensors sharing memory.
  const Tensor broadcast = Tensor::device(kF32, {4, 5}, {}, {0, 1});
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, broadcast, v, &model}),
                 op + "exp_avg (shape [4, 5], strides [0, 1]) overlaps itself");
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, param, v, &model}),
                 op + "param and exp_avg share memory; each updated tensor needs its own");
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, m, v, &param}), "param and model_param share memory");
  expectBadParam(deviceStep(h, Hyper{}, {param, grad, m, grad, &model}),
                 "exp_avg_sq shares memory with grad");
  // A broadcast grad is fine (it is only read).
  const Tensor grad_row = Tensor::device(kF32, {4, 5}, {}, {0, 1});
  EXPECT_EQ(deviceStep(h, Hyper{}, {param, grad_row, m, v, &model}), MLUOP_STATUS_SUCCESS) << lastError();

  // The reference checks alike, and reports a missing tensor.
  const Tensor hp = Tensor::host(kF32, {3}), hg = Tensor::host(kF32, {3}), hm = Tensor::host(kF32, {3}),
               hv = Tensor::host(kF32, {3});
  const mlu::Status s = referenceStep(with([](Hyper& p) { p.beta1 = 1.0f; }), {hp, hg, hm, hv, nullptr});
  EXPECT_EQ(s.code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(s.message, HasSubstr("beta1 = 1 must be in [0, 1)"));
  mlu::adamw_step_args missing;
  missing.step = 1;
  missing.eps = 1e-8f;
  missing.grad_scale = 1.0f;
  missing.param = hp.view();
  EXPECT_THAT(mlu::reference::run(missing).message, HasSubstr("grad is missing"));
}

}  // namespace
