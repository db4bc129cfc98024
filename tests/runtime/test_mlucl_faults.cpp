// The collective faults of MLU_SIM_FAULT, each planted in a real MPI job (mpirun, mlucl_probe): a count or
// dtype off on one rank and a skipped call fail on every rank with a message naming the odd rank (and no
// byte written past the call's elements); NaN on one rank reaches every rank's result; a late rank delays
// everyone; a rank that never reaches a collective hangs the job (here cut short by `timeout`; the flight
// recorder of the next issue names it); malformed items stop the program before it starts.
#include "mpi_run.h"
#include "program_run.h"
#include "test_paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace {

using examples_test::ProgramRun;
using ::testing::HasSubstr;
using ::testing::Not;

ProgramRun probe(const std::string& fault, int np, const std::string& args = "--calls 3",
                 const std::string& prefix = "") {
  return examples_test::run(prefix + "env MLU_SIM_FAULT='" + fault + "' " + opscope_test::mpirunCommand(np) +
                                " " + opscope_test::paths::kMluclProbe,
                            args);
}

TEST(MluclFaults, WithoutFaultsEveryCallSums) {
  const ProgramRun r = probe("", 3);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 2 call 3: ok sum 6 nan 0 canary intact"));
}

TEST(MluclFaults, ACountOffOnOneRankFailsEveryRankAndWritesNothing) {
  const ProgramRun r = probe("allreduce:count=-1@rank=2@call=2", 4);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 0 call 1: ok sum 10"));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.output, HasSubstr("rank " + std::to_string(rank) + " call 2: failed MLUCL_ERROR_MISMATCH"));
    EXPECT_THAT(r.output, HasSubstr("rank " + std::to_string(rank) + " canary intact, first element " +
                                    std::to_string(rank + 1)))
        << "nothing moved";
  }
  EXPECT_THAT(
      r.output,
      HasSubstr("ranks 0,1,3: allreduce #2 sum float32 x 1024; rank 2: allreduce #2 sum float32 x 1023"));
}

TEST(MluclFaults, ADtypeOffOnOneRankFailsEveryRank) {
  const ProgramRun r = probe("allreduce:dtype=int32@rank=1", 2);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("rank 0: allreduce #1 sum float32 x 1024; rank 1: allreduce #1 sum int32 x 1024"));
  EXPECT_THAT(r.output, HasSubstr("rank 1 call 1: failed MLUCL_ERROR_MISMATCH"));
}

TEST(MluclFaults, ASkippedCallPutsTheRankOutOfStep) {
  // Rank 1 skips its 2nd call: it returns success at once, but its next collective is #3 while the others
  // are at #2, and every rank is told.
  const ProgramRun r = probe("allreduce:skip@rank=1@call=2", 3);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(
      r.output,
      HasSubstr("ranks 0,2: allreduce #2 sum float32 x 1024; rank 1: allreduce #3 sum float32 x 1024"));
}

TEST(MluclFaults, NanOnOneRankReachesEveryRank) {
  const ProgramRun r = probe("allreduce:nan@rank=1@call=1@0.25", 2, "--calls 2 --count 1000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Every 4th element of rank 1's buffer (a quarter) is NaN, and so is that element of every rank's sum.
  EXPECT_THAT(r.output, HasSubstr("rank 0 call 1: ok sum 3 nan 250 canary intact"));
  EXPECT_THAT(r.output, HasSubstr("rank 1 call 1: ok sum 3 nan 250 canary intact"));
  EXPECT_THAT(r.output, HasSubstr("rank 0 call 2: ok sum 3 nan 0"));
}

TEST(MluclFaults, ALateRankDelaysEveryone) {
  const ProgramRun r = probe("allreduce:delay=600@rank=1@call=1", 2, "--calls 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::size_t at = r.output.find("rank 0 call 1: ok sum 3 nan 0 canary intact seconds ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_GE(std::stod(r.output.substr(at + 52)), 0.55) << r.output;
}

TEST(MluclFaults, ARankThatNeverReachesACollectiveHangsTheJob) {
  // Rank 1's call 2 never returns (it never enqueues it): rank 0 waits there. `timeout` ends the job after
  // 4 s (mpirun passes SIGTERM on to the ranks).
  const ProgramRun r = probe("allreduce:hang@rank=1@call=2", 2, "--calls 3", "timeout --kill-after=10 4 ");
  EXPECT_EQ(r.exit_code, 124) << "timed out\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 0 call 1: ok"));
  EXPECT_THAT(r.output, HasSubstr("rank 0 call 2: enqueued"));
  EXPECT_THAT(r.output, Not(HasSubstr("rank 1 call 2: enqueued")));
  EXPECT_THAT(r.output, Not(HasSubstr("call 2: ok")));
}

TEST(MluclFaults, MalformedItemsStopTheProgramBeforeItStarts) {
  // Checked when the library loads, before main: the probe is started alone (no mpirun needed).
  const auto alone = [](const std::string& fault) {
    return examples_test::run("env " + opscope_test::mpiSanitizerOptions() + " MLU_SIM_FAULT='" + fault +
                                  "' " + std::string(opscope_test::paths::kMluclProbe),
                              "--calls 1");
  };
  for (const char* bad : {"allreduce:hang@rank=x", "allreduce:count=0", "allreduse:hang",
                          "barrier:dtype=float99", "allreduce:nan@2", "send:delay=-1", "recv:skip@0.5"}) {
    const ProgramRun r = alone(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("mlucl: MLU_SIM_FAULT item")) << bad << "\n" << r.output;
    EXPECT_THAT(r.output, Not(HasSubstr("call 1"))) << bad;
  }
  // An op's item is the kernel library's to check and apply, not an error here.
  const ProgramRun op = alone("relu:nan");
  EXPECT_EQ(op.exit_code, 0) << op.output;
  EXPECT_THAT(op.output, HasSubstr("rank 0 call 1: ok sum 1 nan 0"));
}

}  // namespace
