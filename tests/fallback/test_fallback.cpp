// Fallback, run for real: ops of mnist_train, a 4-thread 2-device program and the hook probe moved to the
// CPU reference by OP_FALLBACK_LIST, or automatically when the device answers NOT_SUPPORTED.
#include "../support/demo_runs.h"
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace opscope_test;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from),
                         v.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
         static_cast<double>(to - from);
}

// The workflow: a planted scale=1.5 in sgd_step wrecks training; with sgd_step on the CPU the losses are
// the fault-free ones again (float32: to rounding).
TEST(Fallback, BisectingAPlantedFaultRestoresTheLosses) {
  const auto command = mnistCommand(MNIST_TRAIN_PATH, 30, 16);
  const auto clean = run(command);
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  const auto good = losses(clean.out);
  ASSERT_EQ(good.size(), 30u);
  EXPECT_LT(mean(good, 25, 30), good[0] - 0.3);  // it learns

  const Env fault = {{"MLU_SIM_FAULT", "sgd_step:scale=1.5"}};
  const auto broken = run(command, fault);
  const auto bad = losses(broken.out);
  ASSERT_EQ(bad.size(), 30u) << broken.all();
  // Diverged: the weights grow 1.5x a step, so the loss ends far above where it started (or not finite).
  EXPECT_TRUE(!std::isfinite(bad.back()) || bad.back() > 2 * good[0]) << bad.back();

  Env env = fault;
  env.emplace_back("OP_FALLBACK_LIST", "sgd_step");
  const auto bisected = run(command, preload(env));
  ASSERT_EQ(bisected.exit_code, 0) << bisected.all();
  const auto fixed = losses(bisected.out);
  ASSERT_EQ(fixed.size(), good.size());
  for (std::size_t i = 0; i < good.size(); ++i) EXPECT_NEAR(fixed[i], good[i], 1e-4 * std::abs(good[i])) << i;
  // 8 parameter tensors (two convs, two linears, weight and bias) a step.
  EXPECT_THAT(bisected.err,
              HasSubstr("opscope: fallback: 1 op ran on the CPU instead of the device, 240 calls in all"));
  EXPECT_THAT(bisected.err, HasSubstr("sgd_step"));
  EXPECT_THAT(bisected.err, HasSubstr("calls (forced by the fallback list)"));
}

TEST(Fallback, TheWholeProgramOnTheCpuStillLearns) {
  const auto command = mnistCommand(MNIST_TRAIN_PATH, 30, 16);
  const auto clean = run(command);
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  const auto good = losses(clean.out);
  const auto r = run(command, preload({{"OP_FALLBACK_LIST", ".*"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto cpu = losses(r.out);
  ASSERT_EQ(cpu.size(), 30u);
  EXPECT_LT(mean(cpu, 25, 30), cpu[0] - 0.3);
  // Same data, same seeds: the CPU path follows the device's losses to float32 rounding (both accumulate
  // differently, so not bit for bit).
  for (std::size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(cpu[i], good[i], 1e-3 * std::abs(good[i])) << i;
  EXPECT_THAT(r.err, HasSubstr("conv2d_forward"));
  EXPECT_THAT(r.err, HasSubstr("dropout_forward"));
}

TEST(Fallback, TheDisableListAloneMeansEverythingElse) {
  const auto r =
      run(mnistCommand(MNIST_TRAIN_PATH, 2, 4), preload({{"OP_FALLBACK_DISABLE_LIST", "conv2d.*,sgd_step"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  std::string report;
  for (const auto& line : linesStartingWith(r.err, "opscope:   ")) report += line + "\n";
  EXPECT_THAT(report, HasSubstr("   relu "));
  EXPECT_THAT(report, HasSubstr("   linear "));
  EXPECT_THAT(report, HasSubstr("(forced by the fallback list)"));
  EXPECT_THAT(report, Not(HasSubstr("conv2d")));
  EXPECT_THAT(report, Not(HasSubstr("sgd_step")));
}

TEST(Fallback, NotSupportedFallsBackAutomaticallyWithOneWarning) {
  const auto command = mnistCommand(MNIST_TRAIN_PATH, 3, 4);
  const auto clean = run(command);
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  // No tool on at all, and with a tool on: either way relu (exact on both sides) runs on the CPU.
  for (const Env& extra : {Env{}, Env{{"OP_DUMP_ARGS", "1"}}}) {
    Env env = extra;
    env.emplace_back("MLU_SIM_FAULT", "relu:notsupported");
    const auto r = run(command, preload(env));
    ASSERT_EQ(r.exit_code, 0) << r.all();
    EXPECT_EQ(losses(r.out), losses(clean.out));
    EXPECT_EQ(linesStartingWith(r.err, "opscope: warning: the device does not support relu").size(), 1u)
        << r.err;
    EXPECT_THAT(r.err,
                HasSubstr("opscope: fallback: 1 op ran on the CPU instead of the device, 9 calls in all"));
    EXPECT_THAT(r.err, HasSubstr("calls (automatic: the device answered NOT_SUPPORTED)"));
  }
  // Turned off, the program gets the status (and mnist_train stops with its error).
  const auto off = run(command, preload({{"MLU_SIM_FAULT", "relu:notsupported"}, {"OP_AUTO_FALLBACK", "0"}}));
  EXPECT_NE(off.exit_code, 0);
  EXPECT_THAT(off.all(), HasSubstr("relu"));
  EXPECT_THAT(off.all(), HasSubstr("MLU_SIM_FAULT (notsupported)"));
  EXPECT_THAT(off.err, Not(HasSubstr("opscope: fallback:")));
}

// In-place ops on several queues at once: mul_scalar(c, c) and add on 4 threads, 2 devices.
TEST(Fallback, InPlaceOpsOnSeveralQueues) {
  const auto r = run(
      {MULTI_QUEUE_PROGRAM_PATH, "4", "25", "4096"},
      preload({{"OP_FALLBACK_LIST", "add,mul_scalar"}, {"MLU_SIM_FAULT", "mul_scalar:offset=1,add:nan@1"}}));
  // The device's add and mul_scalar are broken; on the CPU the program's own result check passes.
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("ok"));
  EXPECT_THAT(r.err, HasSubstr("2 ops ran on the CPU instead of the device, 200 calls in all"));
}

// llama_train's attention, RoPE (in place) and SwiGLU ops read and write strided views of shared buffers
// (q, k, v in one qkv buffer; gate and up in one gate_up buffer): on the CPU they give the same losses.
TEST(Fallback, StridedViewsOfSharedBuffers) {
  const auto command = llamaCommand(LLAMA_TRAIN_PATH, 5);
  const auto clean = run(command);
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  const auto good = losses(clean.out);
  ASSERT_EQ(good.size(), 5u);
  const auto r =
      run(command, preload({{"OP_FALLBACK_LIST", "rope_.*,scaled_dot_product_attention_.*,silu.*,mul"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto cpu = losses(r.out);
  ASSERT_EQ(cpu.size(), good.size());
  for (std::size_t i = 0; i < good.size(); ++i)
    EXPECT_NEAR(cpu[i], good[i], 2e-4 * good[i]) << i;  // 4 digits printed
  EXPECT_THAT(r.err, HasSubstr("opscope: fallback: 7 ops ran on the CPU instead of the device"));
}

// A non-contiguous view (every other element of a 2x8 buffer): the CPU result lands in the device buffer
// exactly as the device's would, and memory between a strided output's elements is left alone.
TEST(Fallback, NonContiguousInputsAndOutputs) {
  const auto clean = run({HOOK_PROBE_PATH, "ops"});
  ASSERT_EQ(clean.exit_code, 0) << clean.all();
  const auto expected = linesStartingWith(clean.out, "result ");
  ASSERT_EQ(expected.size(), 1u);
  // The planted bug shows on the device...
  const auto faulty = run({HOOK_PROBE_PATH, "ops"}, {{"MLU_SIM_FAULT", "add:noncontig"}});
  ASSERT_EQ(faulty.exit_code, 0) << faulty.all();
  EXPECT_NE(linesStartingWith(faulty.out, "result "), expected);
  // ... and not on the CPU.
  const auto r = run({HOOK_PROBE_PATH, "ops"},
                     preload({{"OP_FALLBACK_LIST", "add"}, {"MLU_SIM_FAULT", "add:noncontig"}}));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(linesStartingWith(r.out, "result "), expected);
  // The refused add (mismatched shapes) is refused on the CPU too, with the same status.
  EXPECT_EQ(linesStartingWith(r.out, "bad add: status 3"), linesStartingWith(clean.out, "bad add: status 3"));
}

}  // namespace
