// The trace checker (opscope::tracecheck and the trace-check program): each rule on a trace that breaks it
// and on one that keeps it, the program's output and exit status, and the DevTools trace engine's view of
// a hand-written host + device trace (tools/trace-check/devtools_check.mjs).
#include "../support/subprocess.h"
#include "../support/test_data.h"
#include "../support/trace_consumers.h"

#include <trace_check.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include "test_paths.h"

namespace {

using nlohmann::json;
using opscope::tracecheck::check;
using opscope::tracecheck::Report;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr std::int64_t kHost = 100;
constexpr std::int64_t kDevice = 1000000000;

json meta(const std::string& name, std::int64_t pid, std::optional<std::int64_t> tid, json args) {
  json ev = {{"ph", "M"}, {"name", name}, {"pid", pid}, {"args", std::move(args)}};
  if (tid) ev["tid"] = *tid;
  return ev;
}

json complete(const std::string& name, const std::string& cat, std::int64_t pid, std::int64_t tid, double ts,
              double dur) {
  return {{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
}

json event(const std::string& ph, const std::string& name, std::int64_t pid, std::int64_t tid, double ts) {
  return {{"ph", ph}, {"name", name}, {"cat", "host"}, {"pid", pid}, {"tid", tid}, {"ts", ts}};
}

json flow(const std::string& ph, std::int64_t pid, std::int64_t tid, double ts, json id = 1,
          const std::string& cat = "mlu_op", const std::string& name = "conv2d_forward") {
  json ev = {{"ph", ph}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"id", id}};
  if (ph == "f") ev["bp"] = "e";
  return ev;
}

// A well-formed trace using every rule: names, sort indices and labels, nested and touching X slices on the
// host thread (a zero-length one, a child listed before its longer parent with the same ts), a B/E pair
// holding an X, a device slice joined to the host's by a flow, a counter, an instant and an async pair.
json goodEvents() {
  return json::array({
      meta("process_name", kHost, 1, {{"name", "host"}}),
      meta("thread_name", kHost, 1, {{"name", "main"}}),
      meta("process_sort_index", kHost, std::nullopt, {{"sort_index", 0}}),
      meta("thread_sort_index", kHost, 1, {{"sort_index", 0}}),
      meta("process_labels", kHost, std::nullopt, {{"labels", "demo"}}),
      meta("process_name", kDevice, 7, {{"name", "MLU 0"}}),
      meta("thread_name", kDevice, 7, {{"name", "queue 7"}}),
      complete("conv2d_forward", "mlu_op", kHost, 1, 12.345, 10.5),  // 7: listed before its parent
      complete("train_step", "host", kHost, 1, 10, 100),
      complete("relu_forward", "mlu_op", kHost, 1, 22.845, 5),  // touches conv2d_forward's end
      complete("marker", "host", kHost, 1, 27.845, 0),          // zero length, at relu's end
      event("B", "optimizer", kHost, 1, 50),
      complete("adam_update", "mlu_op", kHost, 1, 51.5, 8.5),  // inside the B/E pair, ends with it
      event("E", "optimizer", kHost, 1, 60),
      complete("conv2d_forward", "mlu_op", kDevice, 7, 30.125, 5.25),
      flow("s", kHost, 1, 12.345),
      flow("f", kDevice, 7, 30.125),
      {{"ph", "C"},
       {"name", "memory"},
       {"pid", kDevice},
       {"ts", 40},
       {"args", {{"used", 1024}, {"peak", 2048.5}}}},
      {{"ph", "i"}, {"name", "sync"}, {"pid", kHost}, {"tid", 1}, {"ts", 70}, {"s", "t"}},
      {{"ph", "b"}, {"name", "h2d"}, {"cat", "copy"}, {"pid", kDevice}, {"ts", 31}, {"id", "0x1"}},
      {{"ph", "e"}, {"name", "h2d"}, {"cat", "copy"}, {"pid", kDevice}, {"ts", 33}, {"id", "0x1"}},
  });
}

json wrap(json events) { return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}; }

// The good trace with one event changed (index) or one appended (index == -1).
Report checkChanged(int index, const json& ev) {
  json events = goodEvents();
  if (index < 0) {
    events.push_back(ev);
  } else {
    events[static_cast<std::size_t>(index)] = ev;
  }
  return check(wrap(std::move(events)));
}

std::string errorsOf(const Report& r) {
  std::string text;
  for (const auto& e : r.errors) text += "\n  " + e;
  return text;
}

// Exactly one violation, whose message holds every fragment.
#define EXPECT_ONE_ERROR(report, ...)                        \
  do {                                                       \
    const Report& r_ = (report);                             \
    EXPECT_EQ(r_.error_count, 1u) << errorsOf(r_);           \
    EXPECT_THAT(r_.errors, ElementsAre(AllOf(__VA_ARGS__))); \
  } while (0)

TEST(TraceCheck, WellFormedTracePassesWithItsStatistics) {
  const Report r = check(wrap(goodEvents()));
  EXPECT_TRUE(r.ok()) << errorsOf(r);
  EXPECT_EQ(r.error_count, 0u);
  EXPECT_EQ(r.events, 21u);
  EXPECT_EQ(r.by_phase.at("M"), 7u);
  EXPECT_EQ(r.by_phase.at("X"), 6u);
  EXPECT_EQ(r.by_phase.at("B"), 1u);
  EXPECT_EQ(r.by_phase.at("E"), 1u);
  EXPECT_EQ(r.by_phase.at("s"), 1u);
  EXPECT_EQ(r.by_phase.at("f"), 1u);
  EXPECT_EQ(r.by_phase.at("C"), 1u);
  EXPECT_EQ(r.slices, 7u);  // six X and the B/E pair
  EXPECT_EQ(r.tracks, 2u);
  EXPECT_EQ(r.flows, 1u);
}

TEST(TraceCheck, TopLevelIsAnObjectWithTraceEventsOrABareArray) {
  EXPECT_TRUE(check(goodEvents()).ok());
  EXPECT_TRUE(check(json{{"traceEvents", json::array()}}).ok());
  EXPECT_ONE_ERROR(check(json(42)), HasSubstr("top level"), HasSubstr("neither an object"));
  EXPECT_ONE_ERROR(check(json{{"events", goodEvents()}}),
                   HasSubstr("\"traceEvents\" is missing or not an array"));
  EXPECT_ONE_ERROR(check(json{{"traceEvents", {{"ph", "X"}}}}),
                   HasSubstr("\"traceEvents\" is missing or not"));
}

TEST(TraceCheck, DisplayTimeUnitIsMsOrNs) {
  for (const char* unit : {"ms", "ns"}) {
    EXPECT_TRUE(check(json{{"traceEvents", goodEvents()}, {"displayTimeUnit", unit}}).ok()) << unit;
  }
  EXPECT_ONE_ERROR(check(json{{"traceEvents", goodEvents()}, {"displayTimeUnit", "us"}}),
                   HasSubstr("\"displayTimeUnit\" is \"us\""));
  EXPECT_ONE_ERROR(check(json{{"traceEvents", goodEvents()}, {"displayTimeUnit", 1}}),
                   HasSubstr("\"displayTimeUnit\" is 1"));
}

// opscope's traces say their format version in otherData (opscope/results/trace_file.h): the current one and
// an older file without it pass; a newer one is refused with the reason.
TEST(TraceCheck, ATraceInANewerFormatVersionIsRefused) {
  EXPECT_TRUE(check(json{{"traceEvents", goodEvents()}, {"otherData", {{"format_version", 1}}}}).ok());
  EXPECT_TRUE(check(json{{"traceEvents", goodEvents()}, {"otherData", {{"tool", "opscope"}}}}).ok());
  EXPECT_ONE_ERROR(check(json{{"traceEvents", goodEvents()}, {"otherData", {{"format_version", 2}}}}),
                   HasSubstr("the trace is in format version 2, newer than this opscope reads (1)"));
  EXPECT_ONE_ERROR(check(json{{"traceEvents", goodEvents()}, {"otherData", {{"format_version", "2"}}}}),
                   HasSubstr("format_version is not an integer"));
}

TEST(TraceCheck, EveryEventIsAnObject) {
  EXPECT_ONE_ERROR(checkChanged(-1, json::array({1, 2})), HasSubstr("event #21: not an object"));
}

TEST(TraceCheck, PhIsAKnownPhaseString) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  ev.erase("ph");
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 \"late\""), HasSubstr("\"ph\" is missing"));
  ev["ph"] = 88;
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21"),
                   HasSubstr("\"ph\" is missing or not a string"));
  ev["ph"] = "Q";
  const Report r = checkChanged(-1, ev);
  EXPECT_ONE_ERROR(r, HasSubstr("event #21 Q \"late\""), HasSubstr("unknown phase \"Q\""));
  EXPECT_EQ(r.by_phase.at("Q"), 1u);
}

TEST(TraceCheck, NameIsAString) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  ev.erase("name");
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X"), HasSubstr("\"name\" is missing"));
  ev["name"] = json::array();
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X"),
                   HasSubstr("\"name\" is missing or not a string"));
}

TEST(TraceCheck, PidIsAnUnsigned32BitInteger) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  for (const json& pid : {json(), json("100"), json(-1), json(1.5), json(std::int64_t{1} << 32)}) {
    if (pid.is_null()) {
      ev.erase("pid");
    } else {
      ev["pid"] = pid;
    }
    EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""),
                     HasSubstr("\"pid\" is missing or not an integer in [0, 4294967295]"));
  }
  ev["pid"] = 4294967295u;
  EXPECT_TRUE(checkChanged(-1, ev).ok());
}

TEST(TraceCheck, TsIsANumberForEveryPhaseButM) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  ev["ts"] = "5";
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""),
                   HasSubstr("\"ts\" is not a number but \"5\""));
  ev.erase("ts");
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""), HasSubstr("\"ts\" is missing"));
  json counter = {{"ph", "C"}, {"name", "memory"}, {"pid", kDevice}, {"args", {{"used", 1}}}};
  EXPECT_ONE_ERROR(checkChanged(-1, counter), HasSubstr("event #21 C \"memory\""),
                   HasSubstr("\"ts\" is missing"));
  // Metadata may omit ts (the good trace's do).
  EXPECT_FALSE(goodEvents()[0].contains("ts"));
}

TEST(TraceCheck, TsIsFiniteAndNotNegative) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  ev["ts"] = -0.5;
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""),
                   HasSubstr("\"ts\" is negative (-0.5)"));
  ev["ts"] = std::numeric_limits<double>::infinity();
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""),
                   HasSubstr("\"ts\" is not finite"));
  ev["ts"] = 0;
  EXPECT_TRUE(checkChanged(-1, ev).ok());
}

TEST(TraceCheck, TidIsRequiredOnThreadPhases) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  ev.erase("tid");
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""), HasSubstr("\"tid\" is missing"));
  json instant = {{"ph", "i"}, {"name", "sync"}, {"pid", kHost}, {"ts", 70}, {"tid", "main"}};
  EXPECT_ONE_ERROR(checkChanged(-1, instant), HasSubstr("event #21 i \"sync\""),
                   HasSubstr("\"tid\" is missing or not an integer"));
  json f = flow("f", kDevice, 7, 30.125);
  f.erase("tid");
  EXPECT_THAT(checkChanged(16, f).errors,
              Contains(AllOf(HasSubstr("event #16 f"), HasSubstr("\"tid\" is missing"))));
  // tid 0 is "unset" to Perfetto, which moves the event to thread pid; only pid 0 may use it.
  EXPECT_ONE_ERROR(checkChanged(-1, complete("late", "host", kHost, 0, 5, 1)),
                   HasSubstr("event #21 X \"late\""),
                   HasSubstr("\"tid\" is 0, which Perfetto reads as unset and replaces with the pid (100)"));
  EXPECT_TRUE(checkChanged(-1, complete("late", "host", 0, 0, 5, 1)).ok());
  // Counters and process metadata belong to a process: no tid needed (the good trace's counter has none).
  EXPECT_FALSE(goodEvents()[17].contains("tid"));
}

TEST(TraceCheck, CompleteEventHasANonNegativeNumericDur) {
  json ev = complete("late", "host", kHost, 2, 5, 1);
  ev.erase("dur");
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""), HasSubstr("\"dur\" is missing"));
  ev["dur"] = "1";
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""),
                   HasSubstr("\"dur\" is not a number but \"1\""));
  ev["dur"] = -2;
  EXPECT_ONE_ERROR(checkChanged(-1, ev), HasSubstr("event #21 X \"late\""),
                   HasSubstr("\"dur\" is negative (-2)"));
  ev["dur"] = 0;
  EXPECT_TRUE(checkChanged(-1, ev).ok());
}

TEST(TraceCheck, BeginAndEndBalancePerThread) {
  // A B never ended.
  EXPECT_ONE_ERROR(checkChanged(-1, event("B", "backward", kHost, 1, 80)),
                   HasSubstr("event #21 B \"backward\""), HasSubstr("B never ended"),
                   HasSubstr("pid 100 tid 1"));
  // An E with nothing open: the same events on another thread do not balance it.
  json events = goodEvents();
  events.push_back(event("B", "backward", kHost, 2, 80));
  events.push_back(event("E", "backward", kHost, 3, 90));
  const Report r = check(wrap(events));
  EXPECT_EQ(r.error_count, 2u) << errorsOf(r);
  EXPECT_THAT(r.errors, Contains(AllOf(HasSubstr("event #22 E \"backward\""), HasSubstr("E with no open B"),
                                       HasSubstr("pid 100 tid 3"))));
  // Balance is checked in ts order, not file order.
  events = goodEvents();
  events.push_back(event("E", "backward", kHost, 2, 90));
  events.push_back(event("B", "backward", kHost, 2, 80));
  EXPECT_TRUE(check(wrap(events)).ok()) << errorsOf(check(wrap(events)));
  // An E closing a B of another name.
  EXPECT_ONE_ERROR(checkChanged(13, event("E", "optimiser", kHost, 1, 60)),
                   HasSubstr("event #13 E \"optimiser\""), HasSubstr("closes B of another name"),
                   HasSubstr("event #11 B \"optimizer\""));
}

TEST(TraceCheck, SlicesOnOneThreadNestStrictly) {
  // relu_forward moved to start inside conv2d_forward [12.345, 22.845] and end after it.
  EXPECT_ONE_ERROR(checkChanged(9, complete("relu_forward", "mlu_op", kHost, 1, 20, 5)),
                   HasSubstr("event #9 X \"relu_forward\""),
                   HasSubstr("overlaps event #7 X \"conv2d_forward\""), HasSubstr("pid 100 tid 1"),
                   HasSubstr("[20, 25] starts inside [12.345, 22.845]"));
  // An X crossing the end of the B/E slice [50, 60].
  EXPECT_ONE_ERROR(checkChanged(12, complete("adam_update", "mlu_op", kHost, 1, 55, 6)),
                   HasSubstr("event #12 X \"adam_update\""), HasSubstr("overlaps event #11 B \"optimizer\""));
  // Only the first overlapping pair of a thread is reported.
  json events = goodEvents();
  events.push_back(complete("a", "host", kHost, 2, 0, 10));
  events.push_back(complete("b", "host", kHost, 2, 5, 10));
  events.push_back(complete("c", "host", kHost, 2, 12, 10));
  EXPECT_ONE_ERROR(check(wrap(events)), HasSubstr("event #22 X \"b\""),
                   HasSubstr("overlaps event #21 X \"a\""));
  // The same overlap across two threads is fine.
  events = goodEvents();
  events.push_back(complete("a", "host", kHost, 2, 0, 10));
  events.push_back(complete("b", "host", kHost, 3, 5, 10));
  EXPECT_TRUE(check(wrap(events)).ok());
}

TEST(TraceCheck, CounterArgsAreAllNumbers) {
  json counter = {{"ph", "C"}, {"name", "memory"}, {"pid", kDevice}, {"ts", 41}};
  EXPECT_ONE_ERROR(checkChanged(-1, counter), HasSubstr("event #21 C \"memory\""),
                   HasSubstr("counter \"args\" is missing or not an object"));
  counter["args"] = {{"used", 1024}, {"device", "MLU 0"}};
  EXPECT_ONE_ERROR(checkChanged(-1, counter), HasSubstr("event #21 C \"memory\""),
                   HasSubstr("counter value args.device is not a number but \"MLU 0\""));
  counter["args"] = {{"used", 1024}, {"free", 0.5}};
  EXPECT_TRUE(checkChanged(-1, counter).ok());
}

TEST(TraceCheck, FlowEventsHaveAnIdAndBindEnclosing) {
  json s = flow("s", kHost, 1, 12.345);
  s.erase("id");
  const Report missing = checkChanged(15, s);
  EXPECT_THAT(missing.errors, Contains(AllOf(HasSubstr("event #15 s \"conv2d_forward\""),
                                             HasSubstr("flow event has no \"id\""))));
  s["id"] = 1.5;  // Perfetto ignores ids that are not integers or strings
  EXPECT_THAT(checkChanged(15, s).errors, Contains(AllOf(HasSubstr("event #15 s"), HasSubstr("no \"id\""))));
  json f = flow("f", kDevice, 7, 30.125);
  f["bp"] = "n";
  EXPECT_ONE_ERROR(checkChanged(16, f), HasSubstr("event #16 f \"conv2d_forward\""),
                   HasSubstr("\"bp\" is \"n\", expected \"e\""));
  // String ids work as well as integer ones.
  json events = goodEvents();
  events[15]["id"] = "op-1";
  events[16]["id"] = "op-1";
  const Report r = check(wrap(events));
  EXPECT_TRUE(r.ok()) << errorsOf(r);
  EXPECT_EQ(r.flows, 1u);
}

TEST(TraceCheck, EveryFlowHasOneStartAndOneEndInOrder) {
  // An f with no s.
  Report r = checkChanged(15, complete("late", "host", kHost, 2, 5, 1));
  EXPECT_ONE_ERROR(r, HasSubstr("event #16 f"),
                   HasSubstr("flow id 1 (cat \"mlu_op\", name \"conv2d_forward\")"),
                   HasSubstr("has 0 s events"));
  EXPECT_EQ(r.flows, 0u);
  // Two s for one id.
  r = checkChanged(-1, flow("s", kHost, 1, 12.345));
  EXPECT_ONE_ERROR(r, HasSubstr("event #15 s"), HasSubstr("flow id 1"), HasSubstr("has 2 s events"));
  // An s with no f.
  EXPECT_ONE_ERROR(checkChanged(16, complete("late", "host", kHost, 2, 5, 1)), HasSubstr("event #15 s"),
                   HasSubstr("has 0 f events"));
  // The same id in another category is another flow.
  r = checkChanged(-1, flow("s", kHost, 1, 22.845, 1, "other"));
  EXPECT_THAT(r.errors, Contains(AllOf(HasSubstr("event #21 s"), HasSubstr("flow id 1 (cat \"other\""),
                                       HasSubstr("has 0 f events"))));
  // The s after the f: device slice and f moved before the host slice.
  json events = goodEvents();
  events[14] = complete("conv2d_forward", "mlu_op", kDevice, 7, 1, 2);
  events[16] = flow("f", kDevice, 7, 1);
  r = check(wrap(events));
  EXPECT_ONE_ERROR(r, HasSubstr("event #15 s"), HasSubstr("s at ts 12.345 is after its f at ts 1"),
                   HasSubstr("event #16 f"));
  EXPECT_EQ(r.flows, 0u);
}

TEST(TraceCheck, FlowEndsLieInsideASliceOfTheirThread) {
  // The s moved to a gap on the host thread (before train_step begins): neither consumer can bind it.
  const Report r = checkChanged(15, flow("s", kHost, 1, 5));
  EXPECT_EQ(r.error_count, 2u) << errorsOf(r);
  EXPECT_THAT(r.errors, Contains(AllOf(HasSubstr("event #15 s \"conv2d_forward\""),
                                       HasSubstr("no slice on pid 100 tid 1 encloses ts 5"))));
  EXPECT_THAT(r.errors,
              Contains(AllOf(HasSubstr("event #15 s"), HasSubstr("no slice on pid 100 tid 1 begins at "
                                                                 "ts 5 with cat \"mlu_op\""))));
  // An f on a thread without slices.
  const Report other = checkChanged(16, flow("f", kDevice, 8, 30.125));
  EXPECT_EQ(other.error_count, 2u) << errorsOf(other);
  EXPECT_THAT(other.errors, Contains(HasSubstr("no slice on pid 1000000000 tid 8 encloses ts 30.125")));
}

TEST(TraceCheck, FlowEndsStartTheirSliceWithItsCategoryForDevtools) {
  // Inside the device slice, but not at its start: Perfetto binds it, DevTools does not.
  EXPECT_ONE_ERROR(checkChanged(16, flow("f", kDevice, 7, 31)), HasSubstr("event #16 f \"conv2d_forward\""),
                   HasSubstr("no slice on pid 1000000000 tid 7 begins at ts 31 with cat \"mlu_op\""));
  // At the start of the host slice but in another category.
  json s = flow("s", kHost, 1, 12.345, 1, "op");
  json f = flow("f", kDevice, 7, 30.125, 1, "op");
  json events = goodEvents();
  events[15] = s;
  events[16] = f;
  const Report r = check(wrap(events));
  EXPECT_EQ(r.error_count, 2u) << errorsOf(r);
  EXPECT_THAT(r.errors,
              Contains(AllOf(HasSubstr("event #15 s"), HasSubstr("begins at ts 12.345 with cat \"op\""))));
  EXPECT_THAT(r.errors,
              Contains(AllOf(HasSubstr("event #16 f"), HasSubstr("begins at ts 30.125 with cat \"op\""))));
  // An s at the start of the outer slice train_step (cat "host") of a nested pair binds to it.
  events = goodEvents();
  events[15] = flow("s", kHost, 1, 10, 1, "host");
  events[16] = flow("f", kHost, 1, 50, 1, "host");
  EXPECT_TRUE(check(wrap(events)).ok()) << errorsOf(check(wrap(events)));
}

TEST(TraceCheck, MetadataNamesAndArgs) {
  EXPECT_ONE_ERROR(checkChanged(-1, meta("process_uptime", kHost, 1, {{"value", 1}})),
                   HasSubstr("event #21 M \"process_uptime\""), HasSubstr("metadata name is not one of"));
  EXPECT_ONE_ERROR(checkChanged(0, meta("process_name", kHost, 1, {{"title", "host"}})),
                   HasSubstr("event #0 M \"process_name\""),
                   HasSubstr("\"args.name\" is missing or not a string"));
  EXPECT_ONE_ERROR(checkChanged(1, meta("thread_name", kHost, 1, {{"name", 1}})),
                   HasSubstr("event #1 M \"thread_name\""),
                   HasSubstr("\"args.name\" is missing or not a string"));
  EXPECT_ONE_ERROR(checkChanged(1, meta("thread_name", kHost, std::nullopt, {{"name", "main"}})),
                   HasSubstr("event #1 M \"thread_name\""), HasSubstr("\"tid\" is missing"));
  EXPECT_ONE_ERROR(checkChanged(2, meta("process_sort_index", kHost, std::nullopt, {{"sort_index", "0"}})),
                   HasSubstr("event #2 M \"process_sort_index\""), HasSubstr("\"args.sort_index\""));
  EXPECT_ONE_ERROR(checkChanged(4, meta("process_labels", kHost, std::nullopt, {{"labels", 3}})),
                   HasSubstr("event #4 M \"process_labels\""), HasSubstr("\"args.labels\""));
}

TEST(TraceCheck, AtMostOneNamePerProcessAndThread) {
  EXPECT_ONE_ERROR(checkChanged(-1, meta("process_name", kHost, 2, {{"name", "host again"}})),
                   HasSubstr("event #21 M \"process_name\""), HasSubstr("a second process_name for pid 100"),
                   HasSubstr("first: event #0"));
  EXPECT_ONE_ERROR(checkChanged(-1, meta("thread_name", kHost, 1, {{"name", "main"}})),
                   HasSubstr("event #21 M \"thread_name\""),
                   HasSubstr("a second thread_name for pid 100 tid 1"), HasSubstr("first: event #1"));
  // A name for another thread of the process is fine.
  EXPECT_TRUE(checkChanged(-1, meta("thread_name", kHost, 2, {{"name", "worker"}})).ok());
}

TEST(TraceCheck, AsyncEventsHaveAnId) {
  json b = {{"ph", "b"}, {"name", "h2d"}, {"cat", "copy"}, {"pid", kDevice}, {"ts", 31}};
  EXPECT_ONE_ERROR(checkChanged(19, b), HasSubstr("event #19 b \"h2d\""),
                   HasSubstr("async event has no \"id\""));
  b["id2"] = {{"local", "0x1"}};
  EXPECT_TRUE(checkChanged(19, b).ok());
}

TEST(TraceCheck, StoresTheFirstHundredErrorsAndCountsAll) {
  json events = json::array();
  for (int i = 0; i < 150; ++i) events.push_back({{"ph", "i"}, {"pid", 1}, {"tid", 1}, {"ts", i}});
  const Report r = check(wrap(events));
  EXPECT_EQ(r.error_count, 150u);
  ASSERT_EQ(r.errors.size(), opscope::tracecheck::kMaxStoredErrors);
  EXPECT_THAT(r.errors.front(), HasSubstr("event #0 i: \"name\" is missing"));
  EXPECT_THAT(r.errors.back(), HasSubstr("event #99 i: \"name\" is missing"));
}

// Files and the trace-check program.

class TraceCheckFiles : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = opscope_test::tempDir("trace_check"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(TraceCheckFiles, CheckFileReadsAndParses) {
  const auto good = write("good.json", wrap(goodEvents()).dump());
  EXPECT_TRUE(opscope_test::validTrace(good));
  EXPECT_EQ(opscope_test::checkTrace(good).flows, 1u);

  const std::string text = wrap(goodEvents()).dump();
  const auto truncated = write("truncated.json", text.substr(0, text.size() / 2));
  const Report cut = opscope::tracecheck::checkFile(truncated);
  EXPECT_ONE_ERROR(cut, HasSubstr(truncated), HasSubstr("not valid JSON"),
                   HasSubstr(fmt::format("it ends early, after {} bytes", text.size() / 2)),
                   HasSubstr("parse error"));
  EXPECT_FALSE(opscope_test::validTrace(truncated));

  const auto garbage = write("garbage.json", "{\"traceEvents\": [}]}");
  EXPECT_ONE_ERROR(opscope::tracecheck::checkFile(garbage), HasSubstr(garbage),
                   HasSubstr("not valid JSON at byte 18 of 20"));

  const auto missing = (dir_ / "missing.json").string();
  EXPECT_ONE_ERROR(opscope::tracecheck::checkFile(missing), HasSubstr(missing), HasSubstr("cannot open"));
}

TEST_F(TraceCheckFiles, ProgramExitStatusAndOutput) {
  const auto good = write("good.json", wrap(goodEvents()).dump(1));
  json bad_events = goodEvents();
  bad_events[9].erase("dur");
  const auto bad = write("bad.json", wrap(bad_events).dump());
  const std::string text = wrap(goodEvents()).dump();
  const auto truncated = write("truncated.json", text.substr(0, text.size() - 40));

  auto r = opscope_test::run({TRACE_CHECK_PATH, good});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  const auto bytes = std::filesystem::file_size(good);
  EXPECT_EQ(r.out,
            fmt::format("trace-check: {}: ok (21 events, 2 tracks, 1 flows, {} bytes, {:.1f} bytes/event)\n",
                        good, bytes, static_cast<double>(bytes) / 21.0));

  r = opscope_test::run({TRACE_CHECK_PATH, bad});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_THAT(r.out, HasSubstr("trace-check: " + bad +
                               ": 1 errors\n  event #9 X \"relu_forward\": \"dur\" is "
                               "missing\n"));

  r = opscope_test::run({TRACE_CHECK_PATH, truncated});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_THAT(r.out,
              HasSubstr("trace-check: " + truncated + ": 1 errors\n  " + truncated + ": not valid JSON"));

  r = opscope_test::run({TRACE_CHECK_PATH, good, bad});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_EQ(opscope_test::linesStartingWith(r.out, "trace-check: ").size(), 2u) << r.out;

  r = opscope_test::run({TRACE_CHECK_PATH});
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_THAT(r.err, HasSubstr("usage: trace-check FILE..."));
  EXPECT_EQ(r.out, "");

  r = opscope_test::run({TRACE_CHECK_PATH, "--bogus", good});
  EXPECT_EQ(r.exit_code, 2) << r.all();

  r = opscope_test::run({TRACE_CHECK_PATH, "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("usage: trace-check FILE..."));
}

TEST_F(TraceCheckFiles, ProgramPrintsTheFirstTwentyErrors) {
  json events = json::array();
  for (int i = 0; i < 30; ++i) events.push_back({{"ph", "i"}, {"name", "tick"}, {"pid", 1}, {"ts", i}});
  const auto path = write("many.json", wrap(events).dump());
  const auto r = opscope_test::run({TRACE_CHECK_PATH, path});
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_EQ(opscope_test::linesStartingWith(r.out, "  event #").size(), 20u) << r.out;
  EXPECT_THAT(r.out, HasSubstr(": 30 errors\n"));
  EXPECT_THAT(r.out, HasSubstr("  ... and 10 more\n"));
}

// The Chrome DevTools trace engine's view.

// A host op and the device work it launched, joined by a flow.
json hostAndDevice(const std::string& flow_cat = "mlu_op") {
  return wrap(json::array({
      meta("process_name", kHost, 1, {{"name", "host"}}),
      meta("thread_name", kHost, 1, {{"name", "main"}}),
      meta("process_name", kDevice, 7, {{"name", "MLU 0"}}),
      meta("thread_name", kDevice, 7, {{"name", "queue 7"}}),
      complete("conv2d_forward", "mlu_op", kHost, 1, 12.345, 10.5),
      complete("conv2d_forward", "mlu_op", kDevice, 7, 30.125, 5.25),
      flow("s", kHost, 1, 12.345, 1, flow_cat),
      flow("f", kDevice, 7, 30.125, 1, flow_cat),
  }));
}

TEST_F(TraceCheckFiles, DevtoolsSeesBothThreadsAndTheFlow) {
  const auto path = write("host_device.json", hostAndDevice().dump());
  ASSERT_TRUE(opscope_test::validTrace(path));
  const json out = opscope_test::runDevtools(path);
  EXPECT_EQ(out.at("engine"), "@paulirish/trace_engine@0.0.65");
  EXPECT_EQ(out.at("events"), 8);

  const json& threads = out.at("threads");
  ASSERT_EQ(threads.size(), 2u) << out.dump(1);
  EXPECT_EQ(threads[0].at("pid"), kHost);
  EXPECT_EQ(threads[0].at("tid"), 1);
  EXPECT_EQ(threads[0].at("process_name"), "host");
  EXPECT_EQ(threads[0].at("thread_name"), "main");
  EXPECT_EQ(threads[0].at("entries"), 1);
  EXPECT_EQ(threads[0].at("names"), (json{{"conv2d_forward", 1}}));
  EXPECT_EQ(threads[1].at("pid"), kDevice);
  EXPECT_EQ(threads[1].at("tid"), 7);
  EXPECT_EQ(threads[1].at("process_name"), "MLU 0");
  EXPECT_EQ(threads[1].at("thread_name"), "queue 7");
  EXPECT_EQ(threads[1].at("entries"), 1);
  EXPECT_EQ(threads[1].at("names"), (json{{"conv2d_forward", 1}}));

  const json expected_flow = json::array({json::array({kHost, 1, 12.345, "conv2d_forward", "mlu_op"}),
                                          json::array({kDevice, 7, 30.125, "conv2d_forward", "mlu_op"})});
  EXPECT_EQ(out.at("flows"), json::array({expected_flow})) << out.dump(1);
}

TEST_F(TraceCheckFiles, DevtoolsKeepsFractionalTimesExactly) {
  const auto path = write("host_device.json", hostAndDevice().dump());
  const json out = opscope_test::runDevtools(path);
  const json& bounds = out.at("bounds");
  // The same double arithmetic as the engine's: ts 12.345 and 30.125 + dur 5.25, unrounded.
  EXPECT_EQ(bounds.at("min").get<double>(), 12.345);
  EXPECT_EQ(bounds.at("max").get<double>(), 30.125 + 5.25);
  EXPECT_EQ(bounds.at("range").get<double>(), (30.125 + 5.25) - 12.345);
  EXPECT_EQ(out.at("flows").at(0).at(0).at(2).get<double>(), 12.345);
}

TEST_F(TraceCheckFiles, DevtoolsDropsAFlowTheCheckerFlags) {
  // The flow's category differs from the slices': DevTools joins nothing, and the checker says why.
  const auto path = write("other_cat.json", hostAndDevice("flow").dump());
  const Report r = opscope_test::checkTrace(path);
  EXPECT_EQ(r.error_count, 2u) << errorsOf(r);
  EXPECT_THAT(r.errors, Contains(HasSubstr("begins at ts 30.125 with cat \"flow\"")));
  const json out = opscope_test::runDevtools(path);
  EXPECT_EQ(out.at("flows"), json::array()) << out.dump(1);
  EXPECT_EQ(out.at("threads").size(), 2u);
}

TEST_F(TraceCheckFiles, RunDevtoolsFailsOnAFileThatIsNotJson) {
  const auto path = write("truncated.json", hostAndDevice().dump().substr(0, 50));
  EXPECT_THROW(opscope_test::runDevtools(path), std::runtime_error);
}

}  // namespace
