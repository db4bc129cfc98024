// memcheck's parts alone, in-process (no LD_PRELOAD): the allocation table (frees that match nothing, peaks,
// the timeline), the quarantine, red-zone damage read back from real device memory, the once-per-site
// error log; then the whole tool driven with made-up runtime and op calls as the hook would drive it.
#include "allocation_table.h"
#include "error_log.h"
#include "red_zones.h"

#include <opscope/memcheck/memcheck_tool.h>

#include <mlu/mlurt.h>
#include <mlu/op_args.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;
using opscope::memcheck::AllocationTable;
using opscope::memcheck::ErrorLog;
using opscope::memcheck::kPinnedHost;
using opscope::memcheck::kRedZoneByte;
using opscope::memcheck::LiveAllocation;
using opscope::memcheck::MemoryError;
using opscope::memcheck::Quarantine;
using opscope::memcheck::Quarantined;
using opscope::memcheck::redZoneDamage;
using ::testing::HasSubstr;

namespace {

LiveAllocation block(std::uintptr_t ptr, std::size_t size, int device = 0, opscope::StackId stack = 0) {
  LiveAllocation a;
  a.ptr = ptr;
  a.size = size;
  a.device = device;
  a.stack = stack;
  return a;
}

}  // namespace

TEST(AllocationTable, AFreeThatMatchesNothingIsNamedForWhatItIs) {
  AllocationTable table;
  table.add(block(0x1000, 256, 0, 7));
  table.add(block(0x9000, 64, kPinnedHost, 8));

  // A pointer inside an allocation; the other allocator's free; never allocated.
  EXPECT_FALSE(table.release(0x1010, false, 1, 0, 0));
  MemoryError e = table.badFree(0x1010, false, 1, 3);
  EXPECT_EQ(e.kind, "interior-free");
  EXPECT_EQ(e.message, "mlurtFree of 0x1010, 16 bytes inside a 256-byte allocation on MLU 0 at 0x1000");
  EXPECT_EQ(e.alloc_stack, 7u);
  EXPECT_EQ(e.op_seq, 3u);
  EXPECT_FALSE(table.release(0x9000, false, 1, 0, 0));
  e = table.badFree(0x9000, false, 1, 3);
  EXPECT_EQ(e.kind, "alloc-dealloc-mismatch");
  EXPECT_THAT(e.message, HasSubstr("made by mlurtHostMalloc (free it with mlurtHostFree)"));
  EXPECT_EQ(table.badFree(0x5000, true, 1, 3).message, "mlurtHostFree of 0x5000, which was never allocated");

  // Freed, then freed again: a double free, with the first free's stack.
  const auto freed = table.release(0x1000, false, 9, 100, 4);
  ASSERT_TRUE(freed);
  EXPECT_EQ(freed->size, 256u);
  EXPECT_FALSE(table.release(0x1000, false, 10, 200, 5));
  e = table.badFree(0x1000, false, 10, 5);
  EXPECT_EQ(e.kind, "double-free");
  EXPECT_EQ(e.message, "mlurtFree of 0x1000, a 256-byte allocation on MLU 0 that was already freed");
  EXPECT_EQ(e.alloc_stack, 7u);
  EXPECT_EQ(e.free_stack, 9u);
  EXPECT_EQ(e.stack, 10u);

  // Allocated again at the same address: no longer "freed".
  table.add(block(0x1000, 32));
  EXPECT_EQ(table.badFree(0x1000, true, 1, 0).kind, "alloc-dealloc-mismatch");
}

TEST(AllocationTable, FreesAreRememberedUpToTheLimitTheLatestOfAnAddressKept) {
  AllocationTable table(/*freed_remembered=*/2);
  for (std::uintptr_t p : {0x100, 0x200, 0x300}) {
    table.add(block(p, 16));
    ASSERT_TRUE(table.release(p, false, 0, 0, 0));
  }
  // 0x100 is forgotten (three frees, two remembered): never allocated, as far as the table knows.
  EXPECT_EQ(table.badFree(0x100, false, 0, 0).kind, "invalid-free");
  EXPECT_EQ(table.badFree(0x200, false, 0, 0).kind, "double-free");
  // 0x200 allocated and freed again: the older entry of it leaving does not forget the newer.
  table.add(block(0x200, 16));
  ASSERT_TRUE(table.release(0x200, false, 0, 0, 0));
  table.add(block(0x400, 16));
  ASSERT_TRUE(table.release(0x400, false, 0, 0, 0));
  EXPECT_EQ(table.badFree(0x200, false, 0, 0).kind, "double-free");
  EXPECT_EQ(table.badFree(0x300, false, 0, 0).kind, "invalid-free");
}

TEST(AllocationTable, PeaksPerPlaceAndTheTimeline) {
  AllocationTable table(16, /*timeline_samples=*/4);
  LiveAllocation a = block(0x1000, 100);
  a.time = 500'000;  // ticks, at 2 ns a tick below
  a.op_seq = 1;
  table.add(a);
  LiveAllocation b = block(0x2000, 50);
  b.time = 1'250'000;
  b.op_seq = 2;
  table.add(b);
  table.add(block(0x8000, 10, kPinnedHost));
  ASSERT_TRUE(table.release(0x1000, false, 0, 1'500'000, 3));
  LiveAllocation c = block(0x3000, 20);
  c.op_seq = 4;
  table.add(c);  // 70 in use: below the peak of 150; the fifth sample is past the cap

  EXPECT_EQ(table.inUse(0), 70u);
  EXPECT_EQ(table.inUse(kPinnedHost), 10u);
  const auto peaks = table.peaks();
  ASSERT_EQ(peaks.size(), 2u);
  EXPECT_EQ(peaks[0].device, kPinnedHost);
  EXPECT_EQ(peaks[1].device, 0);
  EXPECT_EQ(peaks[1].bytes, 150u);
  EXPECT_EQ(peaks[1].op_seq, 2u);
  EXPECT_EQ(table.timelineCsv(2.0),
            "time_ms,op_seq,place,bytes\n"
            "1.000000,1,MLU 0,100\n"
            "2.500000,2,MLU 0,150\n"
            "0.000000,0,pinned host memory,10\n"
            "3.000000,3,MLU 0,50\n");
  ASSERT_EQ(table.live().size(), 3u);
  EXPECT_EQ(table.live()[0].ptr, 0x2000u);
  ASSERT_NE(table.containing(0x2000 + 49, false), nullptr);
  EXPECT_EQ(table.containing(0x2000 + 50, false), nullptr);
  EXPECT_EQ(table.containing(0x2000, false), nullptr);  // a free of the start is not "inside"
  EXPECT_NE(table.containing(0x2000, true), nullptr);
}

TEST(Quarantine, TheOldestLeaveOnceOverTheCapDownToThreeQuarters) {
  Quarantine q(1000);
  auto freed = [](std::uintptr_t p) {
    LiveAllocation a = block(p, 200);
    a.front = 64;
    a.back = 36;  // 300 bytes with its red zones
    return Quarantined{a, 5};
  };
  EXPECT_TRUE(q.hold(freed(0x1000)).empty());
  EXPECT_TRUE(q.hold(freed(0x2000)).empty());
  EXPECT_TRUE(q.hold(freed(0x3000)).empty());
  EXPECT_EQ(q.bytes(), 900u);
  // 1,200 > 1,000: out go the two oldest (900, then 600 <= 750).
  const std::vector<Quarantined> out = q.hold(freed(0x4000));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].allocation.ptr, 0x1000u);
  EXPECT_EQ(out[1].allocation.ptr, 0x2000u);
  EXPECT_EQ(q.bytes(), 600u);
  EXPECT_FALSE(q.holds(0x1000));
  EXPECT_TRUE(q.holds(0x3000));
  ASSERT_NE(q.containing(0x3000 + 199), nullptr);
  EXPECT_EQ(q.containing(0x3000 + 199)->free_stack, 5u);
  EXPECT_EQ(q.containing(0x3000 + 200), nullptr);
  EXPECT_EQ(q.containing(0x2000), nullptr);
  EXPECT_EQ(q.all().size(), 2u);
}

TEST(RedZones, DamageIsMeasuredFromTheFurthestByteWritten) {
  EXPECT_EQ(opscope::memcheck::frontRedZone(0), 0u);
  EXPECT_EQ(opscope::memcheck::frontRedZone(1), 256u);
  EXPECT_EQ(opscope::memcheck::frontRedZone(256), 256u);
  EXPECT_EQ(opscope::memcheck::frontRedZone(257), 512u);

  std::vector<unsigned char> zones(8 + 8, kRedZoneByte);  // front 8, back 8
  EXPECT_EQ(redZoneDamage(zones.data(), 8, 8, 100), "");
  zones[8 + 3] = 0;  // the 4th byte past the end (the first three untouched: still counted to the furthest)
  EXPECT_EQ(redZoneDamage(zones.data(), 8, 8, 100), "4 bytes past the end of a 100-byte allocation");
  zones[7] = 1;  // the byte just before the start
  EXPECT_EQ(
      redZoneDamage(zones.data(), 8, 8, 100),
      "4 bytes past the end of a 100-byte allocation and 1 byte before the start of a 100-byte allocation");
  zones[8 + 3] = kRedZoneByte;
  zones[2] = 1;  // 6 bytes before the start is the furthest
  EXPECT_EQ(redZoneDamage(zones.data(), 8, 8, 100), "6 bytes before the start of a 100-byte allocation");
}

// A small block and a large one: each finds an overflow past the end and one before the start, once.
TEST(RedZones, AnOverflowOnTheDeviceIsReadBackOnceThenRepainted) {
  const opscope::memcheck::Runtime rt;
  ASSERT_TRUE(rt.ok());
  opscope::memcheck::RedZones zones(rt, 256, 64);
  for (const std::size_t size : {std::size_t{100}, std::size_t{1} << 16}) {
    SCOPED_TRACE(size);
    void* user = nullptr;
    ASSERT_EQ(zones.allocate(size, &user), MLURT_SUCCESS);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(user) % 256, 0u) << "the program's pointer stays aligned";
    zones.settle();
    LiveAllocation a = block(reinterpret_cast<std::uintptr_t>(user), size);
    a.front = 256;
    a.back = 64;
    EXPECT_THAT(zones.check({a}), ::testing::ElementsAre(""));

    const std::vector<unsigned char> bytes(size + 5, 7);  // 5 bytes too many
    ASSERT_EQ(mlurtMemcpy(user, bytes.data(), bytes.size(), MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
    EXPECT_THAT(zones.check({a}),
                ::testing::ElementsAre(fmt::format("5 bytes past the end of a {}-byte allocation", size)));
    EXPECT_THAT(zones.check({a}), ::testing::ElementsAre("")) << "repainted: reported once";
    auto* before = static_cast<unsigned char*>(user) - 3;
    ASSERT_EQ(mlurtMemcpy(before, bytes.data(), 3, MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
    EXPECT_THAT(zones.check({a}), ::testing::ElementsAre(
                                      fmt::format("3 bytes before the start of a {}-byte allocation", size)));
    zones.release(a);
  }
}

// Many blocks checked in one call (one kernel and one copy of flags per device): only the damaged ones are
// reported, each with how far the write went; the program's bytes are never painted over; a larger batch
// than before (a larger flag buffer) works the same.
TEST(RedZones, ABatchOfBlocksReportsExactlyTheDamagedOnes) {
  const opscope::memcheck::Runtime rt;
  ASSERT_TRUE(rt.ok());
  opscope::memcheck::RedZones zones(rt, 256, 64);
  for (const std::size_t count : {std::size_t{10}, std::size_t{300}}) {
    SCOPED_TRACE(count);
    std::vector<LiveAllocation> blocks;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t size = 8 + 24 * (i % 7);  // sizes that are not multiples of 8 words
      void* user = nullptr;
      ASSERT_EQ(zones.allocate(size, &user), MLURT_SUCCESS);
      LiveAllocation a = block(reinterpret_cast<std::uintptr_t>(user), size);
      a.front = 256;
      a.back = 64;
      blocks.push_back(a);
    }
    zones.settle();  // painted before the program writes, as before an op
    std::vector<std::string> expected(count);
    for (std::size_t i = 0; i < count; ++i) {
      const LiveAllocation& a = blocks[i];
      auto* user = reinterpret_cast<unsigned char*>(a.ptr);
      const std::vector<unsigned char> bytes(a.size + 64, static_cast<unsigned char>(i));
      std::size_t n = a.size;  // the program's own bytes
      if (i % 37 == 3) {
        n = a.size + 1 + i % 64;  // past the end, by 1 to 64 bytes
        expected[i] = fmt::format("{} byte{} past the end of a {}-byte allocation", n - a.size,
                                  n - a.size == 1 ? "" : "s", a.size);
      }
      ASSERT_EQ(mlurtMemcpy(user, bytes.data(), n, MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
      if (i % 51 == 7) {
        ASSERT_EQ(mlurtMemcpy(user - 2, bytes.data(), 2, MLURT_MEMCPY_HOST_TO_DEVICE), MLURT_SUCCESS);
        if (!expected[i].empty()) expected[i] += " and ";  // i = 262: both
        expected[i] += "2 bytes before the start of a " + std::to_string(a.size) + "-byte allocation";
      }
    }
    EXPECT_EQ(zones.check(blocks), expected);
    EXPECT_EQ(zones.check(blocks), std::vector<std::string>(count)) << "repainted: reported once";
    for (std::size_t i = 0; i < count; ++i) {
      const LiveAllocation& a = blocks[i];
      std::vector<unsigned char> back(a.size);
      ASSERT_EQ(mlurtMemcpy(back.data(), reinterpret_cast<void*>(a.ptr), a.size, MLURT_MEMCPY_DEVICE_TO_HOST),
                MLURT_SUCCESS);
      ASSERT_EQ(back, std::vector<unsigned char>(a.size, static_cast<unsigned char>(i))) << i;
    }
    for (const LiveAllocation& a : blocks) zones.release(a);
  }
}

TEST(ErrorLog, EachKindOncePerSite) {
  ErrorLog log;
  MemoryError e;
  e.kind = "double-free";
  e.stack = 3;
  EXPECT_TRUE(log.add(e, "0x10"));
  EXPECT_FALSE(log.add(e, "0x20")) << "same kind, same stack";
  e.kind = "invalid-free";
  EXPECT_TRUE(log.add(e, "0x10")) << "another kind at the same stack";
  e.stack = 0;  // no backtraces: the site is the place named
  EXPECT_TRUE(log.add(e, "0x10"));
  EXPECT_FALSE(log.add(e, "0x10"));
  EXPECT_TRUE(log.add(e, "0x30"));
  const auto all = log.all();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].kind, "double-free");
  EXPECT_EQ(all[3].stack, 0u);
}

namespace {

// An mlurtMalloc call as the hook records it.
opscope::RuntimeCall mallocCall(std::size_t size, void** out) {
  opscope::RuntimeCall c;
  c.kind = opscope::RuntimeCallKind::kMalloc;
  c.symbol = "mlurtMalloc";
  c.out = out;
  c.size = size;
  return c;
}

// The tool driven as the hook drives it: the call offered to replace() (memcheck makes it, with red zones or
// into the quarantine), then onRuntimeCall.
void runThroughMemcheck(opscope::Tool& tool, opscope::RuntimeCall& c) {
  c.replaced = tool.replace(c);
  EXPECT_TRUE(c.replaced) << c.symbol;
  tool.onRuntimeCall(c);
}

mlu::TensorView floats(void* data, std::int64_t n) {
  mlu::TensorView v;
  v.dtype = MLUOP_DTYPE_FLOAT;
  v.ndim = 1;
  v.dims[0] = n;
  v.strides[0] = 1;
  v.data = data;
  v.present = true;
  return v;
}

}  // namespace

TEST(MemcheckTool, MadeUpCallsGiveEachErrorOnceAndTheLeakInMemcheckJson) {
  const fs::path dir = fs::temp_directory_path() / ("memcheck_parts_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  opscope::Config config;
  config.mem_check = true;
  opscope::RunInfo run;
  run.result_dir = dir.string();
  run.command_line = "made-up";
  const auto tool = opscope::memcheck::makeMemcheckTool(config, run);

  void* x = nullptr;
  void* leak = nullptr;
  opscope::RuntimeCall c = mallocCall(64, &x);  // 16 floats
  runThroughMemcheck(*tool, c);
  ASSERT_EQ(c.status, MLURT_SUCCESS);
  opscope::RuntimeCall l = mallocCall(1000, &leak);
  runThroughMemcheck(*tool, l);

  // relu over 20 floats of a 16-float allocation: an argument past its end.
  mlu::relu_args args;
  args.x = floats(x, 20);
  args.y = floats(x, 16);
  opscope::OpCall op;
  op.op = mlu::OpId::relu;
  op.name = "relu";
  op.symbol = "mluopRelu";
  op.seq = 1;
  op.args = &args;
  op.args_ok = true;
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(tool->wants(op));
  tool->before(op);
  tool->before(op);  // the same site again: not reported twice
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("out-of-bounds-argument"));
  EXPECT_THAT(said, HasSubstr("relu #1 argument x spans 80 bytes from"));
  EXPECT_THAT(said, HasSubstr("16 bytes past the end of a 64-byte allocation on MLU 0"));
  EXPECT_EQ(said.find("out-of-bounds-argument"), said.rfind("out-of-bounds-argument"));

  // Freed (into the quarantine), then used by an op, then freed again.
  opscope::RuntimeCall f;
  f.kind = opscope::RuntimeCallKind::kFree;
  f.symbol = "mlurtFree";
  f.ptr = x;
  runThroughMemcheck(*tool, f);
  EXPECT_EQ(f.status, MLURT_SUCCESS);
  args.x = floats(x, 16);
  op.seq = 2;
  ::testing::internal::CaptureStderr();
  tool->before(op);
  opscope::RuntimeCall again = f;
  again.status = MLURT_SUCCESS;
  runThroughMemcheck(*tool, again);
  said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("use-after-free"));
  EXPECT_THAT(said, HasSubstr("relu #2 argument x at"));
  EXPECT_THAT(said, HasSubstr("double-free"));
  EXPECT_EQ(again.status, MLURT_ERROR_INVALID_POINTER) << "refused as the runtime would";

  ::testing::internal::CaptureStderr();
  tool->flush();
  said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("1000 bytes leaked in 1 allocation"));
  std::ifstream in(dir / "memcheck.json");
  const nlohmann::json report = nlohmann::json::parse(in);
  // Without backtraces an error's site is the op and argument: x and y (both in the freed block) are two.
  ASSERT_EQ(report["errors"].size(), 4u) << report.dump(1);
  EXPECT_EQ(report["errors"][0]["kind"], "out-of-bounds-argument");
  EXPECT_EQ(report["errors"][1]["kind"], "use-after-free");
  EXPECT_EQ(report["errors"][2]["kind"], "use-after-free");
  EXPECT_THAT(report["errors"][2]["message"].get<std::string>(), HasSubstr("argument y"));
  EXPECT_EQ(report["errors"][3]["kind"], "double-free");
  ASSERT_EQ(report["leaks"].size(), 1u);
  EXPECT_EQ(report["leaks"][0]["bytes"], 1000);
  EXPECT_EQ(fs::status(dir / "memcheck.json").permissions() & fs::perms::others_read, fs::perms::none);
  fs::remove_all(dir);
}
