// The MLU_SIM_* environment variables, checked through the real device_query example run as a child
// process (the runtime reads its environment once, at load, so it cannot be changed in this process).
#include "test_util.h"

#include <sys/wait.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include "test_paths.h"

namespace mlurt_test {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

struct ChildRun {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout and stderr together
};

// Single-quotes text for /bin/sh.
std::string shellQuote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// Runs device_query with the MLU_SIM_* variables cleared, then set as given ("NAME=value" each).
ChildRun runDeviceQuery(const std::vector<std::string>& assignments) {
  std::string command = "env -u MLU_SIM_DEVICE_COUNT -u MLU_SIM_MEMORY_MB -u MLU_SIM_CORES";
  for (const std::string& assignment : assignments) command += " " + shellQuote(assignment);
  command += " " + shellQuote(DEVICE_QUERY_PATH) + " 2>&1";
  ChildRun run;
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

TEST(EnvironmentTest, DefaultConfiguration) {
  const ChildRun run = runDeviceQuery({});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("device 0:"));
  EXPECT_THAT(run.output, HasSubstr("device 1:"));
  EXPECT_THAT(run.output, Not(HasSubstr("device 2:")));
  EXPECT_THAT(run.output, HasSubstr("8589934592 bytes"));
  EXPECT_THAT(run.output, HasSubstr("OK"));
  EXPECT_THAT(run.output, Not(HasSubstr("MISMATCH")));
}

TEST(EnvironmentTest, DeviceCount) {
  const ChildRun run = runDeviceQuery({"MLU_SIM_DEVICE_COUNT=3"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("3 simulated"));
  EXPECT_THAT(run.output, HasSubstr("device 0:"));
  EXPECT_THAT(run.output, HasSubstr("device 1:"));
  EXPECT_THAT(run.output, HasSubstr("device 2:"));
  EXPECT_THAT(run.output, Not(HasSubstr("device 3:")));
  EXPECT_THAT(run.output, HasSubstr("device 2) -> D2H"));  // the round trip used the last device
}

TEST(EnvironmentTest, OneDevice) {
  const ChildRun run = runDeviceQuery({"MLU_SIM_DEVICE_COUNT=1"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("device 0:"));
  EXPECT_THAT(run.output, Not(HasSubstr("device 1:")));
}

TEST(EnvironmentTest, LargestDeviceCount) {
  const ChildRun run = runDeviceQuery({"MLU_SIM_DEVICE_COUNT=64", "MLU_SIM_MEMORY_MB=16"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("device 63:"));
  EXPECT_THAT(run.output, Not(HasSubstr("device 64:")));
}

TEST(EnvironmentTest, MemoryPerDevice) {
  const ChildRun run = runDeviceQuery({"MLU_SIM_MEMORY_MB=64"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("67108864 bytes"));
  EXPECT_THAT(run.output, HasSubstr("64 MiB"));
  EXPECT_THAT(run.output, Not(HasSubstr("8589934592")));
}

TEST(EnvironmentTest, Cores) {
  const ChildRun run = runDeviceQuery({"MLU_SIM_CORES=3", "MLU_SIM_DEVICE_COUNT=2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Every device reports 3 cores.
  EXPECT_THAT(run.output, ContainsRegex("device 0:[^\n]*\n *cores +3\n"));
  EXPECT_THAT(run.output, ContainsRegex("device 1:[^\n]*\n *cores +3\n"));
}

TEST(EnvironmentTest, AllThreeTogether) {
  const ChildRun run =
      runDeviceQuery({"MLU_SIM_DEVICE_COUNT=4", "MLU_SIM_MEMORY_MB=32", "MLU_SIM_CORES=1024"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("device 3:"));
  EXPECT_THAT(run.output, HasSubstr("33554432 bytes"));
  EXPECT_THAT(run.output, ContainsRegex("cores +1024\n"));
}

// An empty value means unset, as for every opscope variable: the defaults (issue 18; it was refused).
TEST(EnvironmentTest, EmptyValuesMeanTheDefaults) {
  const ChildRun run =
      runDeviceQuery({"MLU_SIM_DEVICE_COUNT=", "MLU_SIM_MEMORY_MB=", "MLU_SIM_CORES=", "MLU_SIM_FAULT="});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const ChildRun plain = runDeviceQuery({});
  auto withoutAddresses = [](const std::string& text) {  // the address ranges change from run to run
    std::string out, line;
    std::istringstream in(text);
    while (std::getline(in, line)) {
      if (line.find("address range") == std::string::npos) out += line + "\n";
    }
    return out;
  };
  EXPECT_EQ(withoutAddresses(run.output), withoutAddresses(plain.output));
  EXPECT_THAT(run.output, HasSubstr("simulated MLU device"));
}

struct Malformed {
  const char* name;
  const char* value;
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name << "='" << m.value << "'"; }

class MalformedEnvironmentTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedEnvironmentTest, StopsTheProgramWithStatusTwoNamingTheVariableAndValue) {
  const Malformed& m = GetParam();
  const ChildRun run = runDeviceQuery({std::string(m.name) + "=" + m.value});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr(m.name));
  EXPECT_THAT(run.output, HasSubstr(m.value));
  // Stopped before the program ran.
  EXPECT_THAT(run.output, Not(HasSubstr("simulated MLU device")));
}

INSTANTIATE_TEST_SUITE_P(
    All, MalformedEnvironmentTest,
    ::testing::Values(Malformed{"MLU_SIM_DEVICE_COUNT", "abc"}, Malformed{"MLU_SIM_DEVICE_COUNT", "0"},
                      Malformed{"MLU_SIM_DEVICE_COUNT", "-1"}, Malformed{"MLU_SIM_DEVICE_COUNT", "99999"},
                      Malformed{"MLU_SIM_DEVICE_COUNT", "65"}, Malformed{"MLU_SIM_DEVICE_COUNT", "2x"},
                      Malformed{"MLU_SIM_DEVICE_COUNT", "1.5"}, Malformed{"MLU_SIM_MEMORY_MB", "12x"},
                      Malformed{"MLU_SIM_MEMORY_MB", "0"}, Malformed{"MLU_SIM_MEMORY_MB", "-64"},
                      Malformed{"MLU_SIM_MEMORY_MB", "99999999999999999999"}, Malformed{"MLU_SIM_CORES", " "},
                      Malformed{"MLU_SIM_CORES", "0"}, Malformed{"MLU_SIM_CORES", "1025"},
                      Malformed{"MLU_SIM_CORES", "three"}),
    [](const ::testing::TestParamInfo<Malformed>& info) {
      std::string name = std::string(info.param.name).substr(std::string("MLU_SIM_").size()) + "_";
      for (const char c : std::string(info.param.value)) {
        name += std::isalnum(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string("_");
      }
      return name + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace mlurt_test
