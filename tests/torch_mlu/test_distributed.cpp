// PyTorch data parallelism on the MLU as its users run it: /usr/bin/python3 programs started by Open MPI's
// mpirun, on torch_mlu's torch.distributed backend "mlucl" (torch_mlu/src/process_group.h), alone and under
// `opscope run`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"
#include "test_paths.h"
#include "torch_paths.h"

namespace {

using opscope_test::Env;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

const std::string kSource = opscope_test::paths::kSourceDir;
const std::string kMnist = kSource + "/examples/torch_mnist/main.py";

Env jobEnv(Env extra = {}) {
  extra.insert(extra.end(), {{"PYTHONPATH", std::string(torch_test::kPythonPath)},
                             {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                             {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
  return extra;
}

// mpirun -np N /usr/bin/python3 ARGS..., preceded by `prefix` (e.g. `opscope run ... --`).
opscope_test::Run mpiPython(int np, const std::vector<std::string>& args, const Env& env = {},
                            std::vector<std::string> prefix = {}) {
  std::vector<std::string> argv = std::move(prefix);
  argv.insert(argv.end(), {opscope_test::paths::kMpirun, "-np", std::to_string(np), "--oversubscribe",
                           torch_test::kPython});
  argv.insert(argv.end(), args.begin(), args.end());
  return opscope_test::run(argv, jobEnv(env));
}

// "step N loss X" lines.
std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("step ", 0) == 0 && line.find(" loss ") != std::string::npos)
      v.push_back(std::stod(line.substr(line.find(" loss ") + 6)));
  }
  return v;
}

// Every collective of the backend against hand-worked values, Work.wait() from another stream, DDP of a
// small model against the same model trained on the CPU with the global batch, and the errors a user meets
// (distributed_check.py), on 2 ranks.
TEST(TorchMluDistributed, CollectivesAndDdpOfTwoRanksGiveTheHandWorkedValues) {
  const opscope_test::Run r = mpiPython(2, {kSource + "/tests/torch_mlu/distributed_check.py"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("distributed_check: 2 ranks, 37 checks passed (17 of DDP)")) << r.out << r.err;
}

std::vector<std::string> mnistDdpArgs(int steps) {
  return {kMnist,
          "--ddp",
          "--max-steps",
          std::to_string(steps),
          "--print-losses",
          "--no-eval",
          "--no-dropout",
          "--lr",
          "0.1",
          "--batch-size",
          "64",
          "--train-size",
          "2000"};
}

// The MNIST example's DDP on 2 ranks learns as 1 rank does with the same global batch: the same losses to
// float32 rounding (the gradients are summed in another order) over 20 steps. At the example's default
// lr 1.0, Adadelta amplifies that rounding to 1% by step 20 (docs/torch_mlu.md): the test takes lr 0.1.
TEST(TorchMluDistributed, MnistDdpOnTwoRanksLearnsLikeOneRankWithTheSameGlobalBatch) {
  constexpr int kSteps = 20;
  const opscope_test::Run one = mpiPython(1, mnistDdpArgs(kSteps));
  const opscope_test::Run two = mpiPython(2, mnistDdpArgs(kSteps));
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  ASSERT_EQ(two.exit_code, 0) << two.out << two.err;
  EXPECT_THAT(two.out,
              HasSubstr("data parallel: 2 ranks (backend mlucl), 32 samples of each global batch of 64"));
  const std::vector<double> a = losses(one.out), b = losses(two.out);
  ASSERT_EQ(a.size(), static_cast<std::size_t>(kSteps)) << one.out;
  ASSERT_EQ(b.size(), a.size()) << two.out;  // rank 0 alone prints
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << "step " << i + 1;
  EXPECT_LT(b.back(), b.front() - 0.3) << "it learns: " << two.out;
  EXPECT_THAT(two.err, HasSubstr("torch_mlu: no op fell back to the CPU")) << two.err;
}

}  // namespace
