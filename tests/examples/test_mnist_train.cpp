// Runs the real mnist_train program: a short training must learn (the loss falls and the held-out accuracy
// is far above chance), bad command lines must stop with status 2 and say what is wrong, and data parallel
// training under mpirun (--ddp) must give the losses of one process with the same global batch.
#include "mpi_run.h"
#include "program_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>
#include "test_paths.h"

namespace {

using examples_test::ProgramRun;
using ::testing::HasSubstr;

ProgramRun run(const std::string& args) { return examples_test::run(MNIST_TRAIN_PATH, args); }

TEST(MnistTrain, ShortTrainingLearns) {
  const ProgramRun r = run("--steps 80 --batch-size 32 --test-size 500 --log-interval 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // "Train Epoch: 0 [320/60000 (1%)]\tLoss: 1.234567" and "Test set: ... Accuracy: 412/500 (82.4%)".
  // (Plain string parsing: GCC 12 warns falsely inside <regex> under -fsanitize=address.)
  std::vector<double> losses;
  int correct = -1;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("Train Epoch: 0 [", 0) == 0 && line.find("/60000") != std::string::npos) {
      const std::size_t at = line.find("Loss: ");
      ASSERT_NE(at, std::string::npos) << line;
      losses.push_back(std::stod(line.substr(at + 6)));
    }
    if (const std::size_t at = line.find("Accuracy: "); at != std::string::npos) {
      ASSERT_NE(line.find("/500 ", at), std::string::npos) << line;
      correct = std::stoi(line.substr(at + 10));
    }
  }
  ASSERT_GE(losses.size(), 10u) << r.output;
  EXPECT_NEAR(losses.front(), 2.30, 0.15) << "an untrained 10-class model starts near ln(10)";
  const double last = (losses[losses.size() - 1] + losses[losses.size() - 2] + losses[losses.size() - 3]) / 3;
  EXPECT_LT(last, losses.front() - 0.8) << r.output;
  ASSERT_GE(correct, 0) << r.output;
  EXPECT_GT(correct, 250) << "well above the 10% of chance";
}

TEST(MnistTrain, BadArgumentsStopWithStatusTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--dtype float64", "--dtype must be float32, float16 or bfloat16, got 'float64'"},
      {"--steps abc", "--steps needs a whole number >= 0, got 'abc'"},
      {"--batch-size 0", "--batch-size needs a whole number >= 1"},
      {"--lr -1", "--lr needs a non-negative number"},
      {"--frobnicate", "unknown argument '--frobnicate'"},
      {"--steps", "missing value after --steps"},
  };
  for (const auto& [args, message] : cases) {
    const ProgramRun r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << args;
  }
}

}  // namespace

namespace {

// "Loss: X" of every training line, and the "Accuracy: N/" count.
std::pair<std::vector<double>, int> lossesAndCorrect(const std::string& output) {
  std::vector<double> losses;
  int correct = -1;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (const std::size_t at = line.find("Loss: "); at != std::string::npos && line.rfind("Train", 0) == 0)
      losses.push_back(std::stod(line.substr(at + 6)));
    if (const std::size_t at = line.find("Accuracy: "); at != std::string::npos)
      correct = std::stoi(line.substr(at + 10));
  }
  return {losses, correct};
}

TEST(MnistTrainDdp, FourRanksGiveTheLossesOfOne) {
  // Each rank takes a quarter of every global batch of 32, its dropout masks drawn at its rows' place in the
  // global batch's Philox stream: the losses are one process's to float32 rounding of the gradient sums
  // (measured at most 9e-6 over 30 steps), and the held-out set, shared out among the ranks, scores alike.
  const std::string args = "--steps 20 --batch-size 32 --test-size 1000 --log-interval 1";
  const ProgramRun one = run(args);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const ProgramRun many =
      examples_test::run(opscope_test::mpirunCommand(4) + " " + MNIST_TRAIN_PATH, "--ddp " + args);
  ASSERT_EQ(many.exit_code, 0) << many.output;
  EXPECT_THAT(many.output, HasSubstr("data parallel: 4 ranks, 8 images of the global batch each"));
  const auto [a, correct_a] = lossesAndCorrect(one.output);
  const auto [b, correct_b] = lossesAndCorrect(many.output);
  ASSERT_EQ(a.size(), 20u) << one.output;
  ASSERT_EQ(b.size(), a.size()) << many.output;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-4) << "step " << i + 1;
  EXPECT_NEAR(correct_b, correct_a, 2) << many.output;
  EXPECT_GT(correct_a, 300) << "it learns (chance is 100 of 1000)";
}

}  // namespace
