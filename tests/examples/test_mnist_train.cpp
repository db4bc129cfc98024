// Runs the real mnist_train program: a short training must learn (the loss falls and the held-out accuracy
// is far above chance), and bad command lines must stop with status 2 and say what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;

struct ProgramRun {
  int exit_code = -1;
  std::string output;
};

ProgramRun run(const std::string& args) {
  ProgramRun r;
  const std::string cmd = std::string(MNIST_TRAIN_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(MnistTrain, ShortTrainingLearns) {
  const ProgramRun r = run("--steps 80 --batch-size 32 --test-size 500 --log-interval 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> losses;
  const std::regex loss_line(R"(Train Epoch: 0 \[\d+/60000 \(\d+%\)\]\tLoss: ([0-9.]+))");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), loss_line), end; it != end; ++it) {
    losses.push_back(std::stod((*it)[1]));
  }
  ASSERT_GE(losses.size(), 10u) << r.output;
  EXPECT_NEAR(losses.front(), 2.30, 0.15) << "an untrained 10-class model starts near ln(10)";
  const double last = (losses[losses.size() - 1] + losses[losses.size() - 2] + losses[losses.size() - 3]) / 3;
  EXPECT_LT(last, losses.front() - 0.8) << r.output;

  std::smatch m;
  const std::regex accuracy(R"(Accuracy: (\d+)/500)");
  ASSERT_TRUE(std::regex_search(r.output, m, accuracy)) << r.output;
  EXPECT_GT(std::stoi(m[1]), 250) << "well above the 10% of chance";
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
