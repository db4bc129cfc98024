// The profiler on real programs: traces of mnist_train, llama_train and profile_probe, read back with
// nlohmann-json, checked against the Perfetto importer's rules (tools/trace-check) and loaded in the Chrome
// DevTools trace engine; the summary under a planted delay; results unchanged; traces completed on signals.
#include "../support/demo_runs.h"
#include "../support/test_data.h"
#include "../support/trace_consumers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include "test_paths.h"

#include <opscope/gunzip.h>

namespace opscope_test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr long kDevicePidBase = 4'194'304;

std::int64_t ns(const json& microseconds) { return std::llround(microseconds.get<double>() * 1000.0); }

struct Span {
  long pid = 0;
  long tid = 0;
  std::int64_t ts = 0;
  std::int64_t dur = 0;
  std::string name;
  std::string cat;
  json args;
};

// A trace read back: host spans of ops by seq, device spans of ops by seq, flows, counters.
struct Trace {
  json root;
  std::map<std::uint64_t, std::vector<Span>> host_ops;    // seq -> host spans (cat mlu_op / fallback)
  std::map<std::uint64_t, std::vector<Span>> device_ops;  // seq -> device spans
  std::vector<Span> device_spans;                         // every device span
  std::vector<Span> host_spans;                           // every host span
  std::map<std::string, std::vector<json>> flow_starts, flow_ends;  // cat/id -> events
  std::map<long, std::vector<std::pair<std::int64_t, double>>>
      memory;  // device pid -> (ts, bytes): program's
  std::map<long, std::string> process_names;
  std::map<std::pair<long, long>, std::string> thread_names;
};

Trace readTrace(const fs::path& path) {
  Trace t;
  std::ifstream in(path);
  t.root = json::parse(in);
  for (const json& e : t.root.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      if (e.at("name") == "process_name") t.process_names[e.at("pid")] = e.at("args").at("name");
      if (e.at("name") == "thread_name") t.thread_names[{e.at("pid"), e.at("tid")}] = e.at("args").at("name");
    } else if (ph == "X") {
      Span s{e.at("pid"),
             e.at("tid"),
             ns(e.at("ts")),
             ns(e.at("dur")),
             e.at("name"),
             e.at("cat"),
             e.value("args", json::object())};
      const bool device = s.pid >= kDevicePidBase;
      (device ? t.device_spans : t.host_spans).push_back(s);
      if (s.cat == "mlu_op" || s.cat == "fallback") {
        if (s.args.contains("seq")) (device ? t.device_ops : t.host_ops)[s.args.at("seq")].push_back(s);
      }
    } else if (ph == "s" || ph == "f") {
      const std::string key = e.at("cat").get<std::string>() + "/" + e.at("id").dump();
      (ph == "s" ? t.flow_starts : t.flow_ends)[key].push_back(e);
    } else if (ph == "C" && e.at("name") == "device memory") {  // the program's (not opscope's)
      t.memory[e.at("pid")].emplace_back(ns(e.at("ts")), e.at("args").at("bytes").get<double>());
    }
  }
  for (auto& [pid, values] : t.memory)
    std::stable_sort(values.begin(), values.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return t;
}

// What OP_DUMP_ARGS printed of each op, by another path than the trace: its name, and each present tensor
// as the trace shows it ("float32[4,1,28,28]", " strides [..]" added when it is not contiguous), from the
// detailed lines, which always show the strides and say whether they are contiguous:
//   opscope: op #12 relu (mluopRelu) thread 0 device 0 queue 1: x float32[4,32,26,26]; y float32[4,32,26,26]
//   opscope:   in        x: float32[4,32,26,26] strides [21632,676,26,1] ARRAY contiguous @0x...
struct DumpedOp {
  std::string name;
  std::map<std::string, std::string> tensors;  // filled at OP_DUMP_ARGS=2
};
std::map<std::uint64_t, DumpedOp> dumpedOps(const std::string& err) {
  std::map<std::uint64_t, DumpedOp> ops;
  DumpedOp* current = nullptr;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    const std::string op = "opscope: op #";
    if (line.starts_with(op)) {
      std::istringstream fields(line.substr(op.size()));
      std::uint64_t seq = 0;
      std::string name;
      current = (fields >> seq >> name) ? &ops[seq] : nullptr;
      if (current != nullptr) current->name = name;
      continue;
    }
    const auto at = line.find(" strides [");
    if (current == nullptr || !line.starts_with("opscope:   ") || at == std::string::npos) continue;
    // "<role> <name>: <dtype>[dims] strides [strides] <layout> contiguous|non-contiguous @ptr"
    std::istringstream fields(line.substr(11));
    std::string role, name, tensor;
    fields >> role >> name >> tensor;
    name.pop_back();  // the colon
    const auto strides_end = line.find(']', at + 10);
    if (line.find(" non-contiguous @") != std::string::npos) tensor += line.substr(at, strides_end + 1 - at);
    current->tensors[name] = tensor;
  }
  return ops;
}

Env profiling(const fs::path& root, Env extra = {}) {
  Env env = preload({{"OP_TIME_MEASURE", "1"}, {"OPSCOPE_RESULT_DIR", root.string()}});
  for (auto& kv : extra) env.push_back(kv);
  return env;
}

// Everything a complete trace of a program that ran ops on one thread must satisfy.
void expectCompleteTrace(const fs::path& dir, const std::map<std::uint64_t, DumpedOp>& ops) {
  const fs::path path = dir / "trace.json";
  ASSERT_TRUE(fs::exists(path)) << dir;
  EXPECT_FALSE(fs::exists(dir / "trace.json.tmp"));
  EXPECT_TRUE(validTrace(path.string()));
  const Trace t = readTrace(path);
  EXPECT_EQ(t.root.at("displayTimeUnit"), "ms");
  EXPECT_EQ(t.root.at("otherData").at("tool"), "opscope");
  EXPECT_EQ(t.root.at("otherData").at("events_written"), t.root.at("traceEvents").size());

  // Every op once on a host track and once on a device track, under its own name.
  ASSERT_EQ(t.host_ops.size(), ops.size());
  ASSERT_EQ(t.device_ops.size(), ops.size());
  for (const auto& [seq, op] : ops) {
    const std::string& name = op.name;
    ASSERT_EQ(t.host_ops.count(seq), 1u) << "op #" << seq << " " << name << " has no host span";
    ASSERT_EQ(t.host_ops.at(seq).size(), 1u) << "op #" << seq;
    const Span& host = t.host_ops.at(seq)[0];
    EXPECT_EQ(host.name, name);
    EXPECT_EQ(host.pid, t.root.at("otherData").at("pid").get<long>());
    EXPECT_EQ(host.args.at("seq"), seq);
    // Each tensor the hook printed, by name, with its dtype, shape and (when not contiguous) strides.
    ASSERT_FALSE(op.tensors.empty()) << "op #" << seq << " " << name;
    for (const auto& [tensor, text] : op.tensors) {
      ASSERT_TRUE(host.args.contains(tensor)) << "op #" << seq << " " << name << " lacks " << tensor;
      EXPECT_EQ(host.args.at(tensor), text) << "op #" << seq << " " << name;
    }
    ASSERT_EQ(t.device_ops.count(seq), 1u) << "op #" << seq << " " << name << " has no device span";
    ASSERT_EQ(t.device_ops.at(seq).size(), 1u) << "op #" << seq;
    const Span& device = t.device_ops.at(seq)[0];
    EXPECT_EQ(device.name, name);
    EXPECT_GE(device.pid, kDevicePidBase);
    EXPECT_GE(device.ts, host.ts) << "a kernel cannot start before its launch";
    // Its flow: starts at the launch, ends at the kernel.
    const std::string key = "mlu_op/" + std::to_string(seq);
    ASSERT_EQ(t.flow_starts.count(key), 1u) << key;
    ASSERT_EQ(t.flow_ends.count(key), 1u) << key;
    const json& s = t.flow_starts.at(key)[0];
    const json& f = t.flow_ends.at(key)[0];
    EXPECT_EQ(ns(s.at("ts")), host.ts);
    EXPECT_EQ(s.at("tid").get<long>(), host.tid);
    EXPECT_EQ(ns(f.at("ts")), device.ts);
    EXPECT_EQ(f.at("pid").get<long>(), device.pid);
    EXPECT_EQ(f.at("tid").get<long>(), device.tid);
    EXPECT_EQ(f.at("bp"), "e");
  }
  // Device spans of one queue never overlap.
  std::map<std::pair<long, long>, std::vector<Span>> queues;
  for (const Span& s : t.device_spans) queues[{s.pid, s.tid}].push_back(s);
  for (auto& [queue, spans] : queues) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ts < b.ts; });
    for (std::size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].ts + spans[i - 1].dur, spans[i].ts)
          << spans[i - 1].name << " and " << spans[i].name << " overlap on queue " << queue.second;
    }
    EXPECT_EQ(t.thread_names.at(queue), "queue " + std::to_string(queue.second));
    EXPECT_EQ(t.process_names.at(queue.first), "MLU " + std::to_string(queue.first - kDevicePidBase));
  }
  // The device-memory counter comes back to where it started: the program freed everything.
  ASSERT_FALSE(t.memory.empty());
  for (const auto& [pid, values] : t.memory) {
    ASSERT_GE(values.size(), 2u);
    EXPECT_EQ(values.front().second, values.back().second) << "device pid " << pid;
    EXPECT_GT(
        std::max_element(values.begin(), values.end(), [](auto& a, auto& b) { return a.second < b.second; })
            ->second,
        values.front().second);
  }

  // The same trace in the Chrome DevTools trace engine: its threads, their slices and the flows.
  const json dt = runDevtools(path.string());
  std::size_t host_entries = 0, device_entries = 0;
  for (const json& thread : dt.at("threads")) {
    if (thread.at("pid").get<long>() >= kDevicePidBase) {
      device_entries += thread.at("entries").get<std::size_t>();
      EXPECT_THAT(thread.at("thread_name").get<std::string>(), ::testing::StartsWith("queue "));
      EXPECT_THAT(thread.at("process_name").get<std::string>(), ::testing::StartsWith("MLU "));
      EXPECT_EQ(thread.at("roots"), thread.at("entries")) << "device spans nest: they overlap";
    } else {
      host_entries += thread.at("entries").get<std::size_t>();
      EXPECT_THAT(thread.at("thread_name").get<std::string>(), ::testing::StartsWith("thread "));
      EXPECT_EQ(thread.at("tree_nodes"), thread.at("entries")) << "a span partly overlaps another";
    }
  }
  EXPECT_EQ(host_entries, t.host_spans.size());
  EXPECT_EQ(device_entries, t.device_spans.size());
  std::size_t op_flows = 0;
  for (const json& flow : dt.at("flows")) {
    ASSERT_EQ(flow.size(), 2u);
    // The engine lists a flow's slices in the order it met them in the file (a device task that finished
    // while its synchronous copy was still running may be written first): told apart by process.
    const bool host_first = flow[0][0].get<long>() < kDevicePidBase;
    const json& host = flow[host_first ? 0 : 1];
    const json& device = flow[host_first ? 1 : 0];
    EXPECT_LT(host[0].get<long>(), kDevicePidBase) << "a flow starts on the host";
    EXPECT_GE(device[0].get<long>(), kDevicePidBase) << "and ends on a device";
    EXPECT_LE(host[2].get<double>(), device[2].get<double>()) << "at or after its launch";
    if (host[4] == "mlu_op") {
      ++op_flows;
      EXPECT_EQ(host[3], device[3]) << "a launch joins the kernel of the same op";
    }
  }
  EXPECT_EQ(op_flows, ops.size());
  std::size_t all_starts = 0;
  for (const auto& [key, events] : t.flow_starts) all_starts += events.size();
  EXPECT_EQ(dt.at("flows").size(), all_starts);
}

TEST(ProfilerDemos, MnistTraceHoldsEveryOpOnceOnHostAndDevice) {
  const fs::path root = tempDir("profiler_mnist");
  const opscope_test::Run r =
      run(mnistCommand(MNIST_TRAIN_PATH, 3, 4), profiling(root, {{"OP_DUMP_ARGS", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ops = dumpedOps(r.err);
  ASSERT_GT(ops.size(), 100u);
  const fs::path dir = onlyResultDir(root);
  expectCompleteTrace(dir, ops);
  EXPECT_THAT(r.err, ::testing::HasSubstr("opscope profiler: " + std::to_string(ops.size()) + " op calls"));
  // The closing line counts the trace's events as a reader does.
  const Trace t = readTrace(dir / "trace.json");
  const std::size_t events = t.root.at("traceEvents").size();
  EXPECT_THAT(r.err, ::testing::HasSubstr(fmt::format("opscope: profiler: {} events in trace.json", events)));
  // A span per training step (opscope_step()), named as PyTorch's profiler names them, on the training
  // thread, one after the other from the start, each holding that step's ops.
  std::vector<Span> steps;
  for (const Span& s : t.host_spans) {
    if (s.cat == "user_annotation") steps.push_back(s);
  }
  ASSERT_EQ(steps.size(), 3u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].name, "ProfilerStep#" + std::to_string(i));
    EXPECT_EQ(steps[i].args.at("step"), i);
    // Each starts where the one before ended (its dur may be a nanosecond short: trace_writer.cpp).
    if (i > 0) {
      EXPECT_NEAR(steps[i].ts, steps[i - 1].ts + steps[i - 1].dur, 1) << steps[i].name;
    }
    std::size_t inside = 0;
    for (const auto& [seq, spans] : t.host_ops) {
      if (spans[0].ts >= steps[i].ts && spans[0].ts + spans[0].dur <= steps[i].ts + steps[i].dur) ++inside;
    }
    EXPECT_GT(inside, 20u) << steps[i].name;
  }
  // time_measure.csv: one row per op call, in sequence order.
  std::ifstream csv(dir / "time_measure.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(
      line,
      "name,seq,thread,device,queue,host_ms,device_ms,device_tasks,fallback,shapes,framework_op,module");
  std::vector<std::uint64_t> seqs;
  while (std::getline(csv, line)) {
    std::istringstream fields(line);
    std::string name, seq;
    std::getline(fields, name, ',');
    std::getline(fields, seq, ',');
    seqs.push_back(std::stoull(seq));
    EXPECT_EQ(ops.at(seqs.back()).name, name);
  }
  EXPECT_EQ(seqs.size(), ops.size());
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  fs::remove_all(root);
}

TEST(ProfilerDemos, LlamaTraceHoldsEveryOpOnceOnHostAndDevice) {
  const fs::path root = tempDir("profiler_llama");
  const opscope_test::Run r =
      run(llamaCommand(LLAMA_TRAIN_PATH, 2), profiling(root, {{"OP_DUMP_ARGS", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ops = dumpedOps(r.err);
  ASSERT_GT(ops.size(), 200u);
  expectCompleteTrace(onlyResultDir(root), ops);
  // llama's gate and up projections are strided halves of one buffer: the ops reading them show strides
  // on those tensors (checked against the dump above); ops with only contiguous tensors show none.
  int strided = 0;
  for (const auto& [seq, op] : ops) {
    bool some = false;
    for (const auto& [tensor, text] : op.tensors) some = some || text.find(" strides [") != std::string::npos;
    strided += some ? 1 : 0;
  }
  EXPECT_GT(strided, 0);
  EXPECT_LT(strided, static_cast<int>(ops.size()));
  fs::remove_all(root);
}

// With memcheck and auto-compare on, opscope's own device work (auto-compare's copies of the op's tensors,
// memcheck's red-zone kernels on its queue) is on tracks of its own named for the tool, never on the
// program's queues: every device span there belongs to a traced call. The program's memory counter leaves
// out what memcheck holds (red zones, the quarantine), so it ends at 0 as the program freed everything;
// memcheck's holding is a counter of its own. summary.txt counts opscope's work apart.
TEST(ProfilerDemos, OpscopesOwnWorkIsApartFromTheProgramsWork) {
  const fs::path root = tempDir("profiler_own_work");
  const opscope_test::Run r = run(mnistCommand(MNIST_TRAIN_PATH, 3, 4),
                                  profiling(root, {{"MEM_CHECK", "1"}, {"OP_AUTOCOMPARE", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = onlyResultDir(root);
  const Trace t = readTrace(dir / "trace.json");
  std::map<std::string, std::size_t> own;  // track name -> spans
  std::size_t program = 0;
  for (const Span& s : t.device_spans) {
    const std::string& track = t.thread_names.at({s.pid, s.tid});
    if (track.rfind("opscope ", 0) == 0) {
      ++own[track];
      EXPECT_EQ(s.cat, "opscope") << s.name;
      continue;
    }
    ++program;
    EXPECT_THAT(track, ::testing::StartsWith("queue "));
    EXPECT_TRUE(s.args.contains("seq") || s.args.contains("correlation"))
        << s.name << " on " << track << " belongs to no traced call";
  }
  EXPECT_GT(program, 100u);
  EXPECT_GT(own["opscope autocompare"], 100u) << "auto-compare copies every op's tensors to the host";
  EXPECT_GT(own["opscope memcheck"], 10u) << "memcheck paints and checks red zones";
  // Counters: the program's memory, back at 0; memcheck's, which holds freed blocks until the end.
  ASSERT_EQ(t.memory.size(), 1u);
  const auto& memory = t.memory.begin()->second;
  EXPECT_EQ(memory.back().second, 0.0);
  std::size_t own_counter = 0;
  double own_peak = 0;
  for (const json& e : t.root.at("traceEvents")) {
    if (e.at("ph") == "C" && e.at("name") == "opscope device memory") {
      ++own_counter;
      own_peak = std::max(own_peak, e.at("args").at("bytes").get<double>());
    }
  }
  EXPECT_GT(own_counter, 10u);
  EXPECT_GT(own_peak, 0.0);
  std::ifstream summary_file(dir / "summary.txt");
  std::stringstream summary;
  summary << summary_file.rdbuf();
  EXPECT_THAT(summary.str(), ::testing::HasSubstr("opscope's own device work"));
  EXPECT_THAT(summary.str(), ::testing::HasSubstr("autocompare: memcpy D2H"));
  EXPECT_THAT(summary.str(), ::testing::HasSubstr("memcheck: opscope_memcheck_check_red_zones"));
  EXPECT_TRUE(validTrace((dir / "trace.json").string()));
  const json dt = runDevtools((dir / "trace.json").string());
  for (const json& thread : dt.at("threads")) {
    EXPECT_EQ(thread.at("tree_nodes"), thread.at("entries")) << thread.dump();
  }
  // Every flow of the file joined: each op's launch and each copy's, none of opscope's own work.
  std::size_t starts = 0, ends = 0;
  for (const auto& [key, events] : t.flow_starts) starts += events.size();
  for (const auto& [key, events] : t.flow_ends) ends += events.size();
  EXPECT_EQ(starts, ends);
  EXPECT_GE(ends, t.host_ops.size());
  EXPECT_EQ(dt.at("flows").size(), ends);
  fs::remove_all(root);
}

// The results are bit-identical with and without the profiler.
TEST(ProfilerDemos, ResultsAreBitIdentical) {
  const fs::path root = tempDir("profiler_identical");
  for (const auto& command : {mnistCommand(MNIST_TRAIN_PATH, 5, 8), llamaCommand(LLAMA_TRAIN_PATH, 3)}) {
    const opscope_test::Run plain = run(command);
    const opscope_test::Run profiled = run(command, profiling(root));
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
    const auto expected = losses(plain.out);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(losses(profiled.out), expected);
  }
  fs::remove_all(root);
}

// A planted 300 ms delay in relu: relu tops the table, each of its device spans lasts at least 300 ms, and
// its host spans stay well below that (the hook does not wait for the device). (Batch 1 and a delay this long
// so that the other ops stay well below relu's 6 x 300 ms even in a sanitizer build on a busy machine: with
// 20 ms, a CI run once saw matmul's 8 calls take 124 ms, one of them 48 ms; with 100 ms, a TSan run saw
// sgd_step's 16 calls take 627 ms, one of them 323 ms.)
TEST(ProfilerDemos, ADelayedOpTopsTheSummaryAndIsNotWaitedFor) {
  const fs::path root = tempDir("profiler_delay");
  const opscope_test::Run r =
      run(mnistCommand(MNIST_TRAIN_PATH, 2, 1), profiling(root, {{"MLU_SIM_FAULT", "relu:delay=300"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = onlyResultDir(root);
  std::ifstream summary(dir / "summary.txt");
  std::string line;
  std::getline(summary, line);
  EXPECT_THAT(line, ::testing::StartsWith("opscope profiler: "));
  std::getline(summary, line);
  EXPECT_THAT(line, ::testing::StartsWith("Name "));
  std::getline(summary, line);
  EXPECT_THAT(line, ::testing::StartsWith("relu ")) << "the first row of summary.txt";
  EXPECT_THAT(r.err, ::testing::HasSubstr("\nrelu "));

  const Trace t = readTrace(dir / "trace.json");
  int relus = 0;
  for (const auto& [seq, spans] : t.device_ops) {
    if (spans[0].name != "relu") continue;
    ++relus;
    EXPECT_GE(spans[0].dur, 300'000'000) << "relu #" << seq;
    EXPECT_LT(t.host_ops.at(seq)[0].dur, 150'000'000) << "the host waited for relu #" << seq;
  }
  EXPECT_EQ(relus, 6);  // 3 relus per forward, 2 steps
  fs::remove_all(root);
}

// Four threads on two devices, each with a queue of its own: a track per thread and per queue, both
// devices named, the copies' flows joined, memory back to zero on both devices.
TEST(ProfilerProbe, ThreadsAndDevicesGetTracksOfTheirOwn) {
  const fs::path root = tempDir("profiler_threads");
  const opscope_test::Run r =
      run({PROFILE_PROBE_PATH, "threads", "20"}, profiling(root, {{"MLU_SIM_DEVICE_COUNT", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path path = onlyResultDir(root) / "trace.json";
  EXPECT_TRUE(validTrace(path.string()));
  const Trace t = readTrace(path);
  EXPECT_EQ(t.host_ops.size(), 4u * (1 + 2 * 20));
  EXPECT_EQ(t.device_ops.size(), t.host_ops.size());
  std::set<long> host_threads, device_pids;
  std::set<std::pair<long, long>> queues;
  for (const Span& s : t.host_spans) host_threads.insert(s.tid);
  for (const Span& s : t.device_spans) {
    device_pids.insert(s.pid);
    queues.insert({s.pid, s.tid});
  }
  EXPECT_EQ(host_threads.size(), 4u);
  EXPECT_EQ(device_pids, (std::set<long>{kDevicePidBase, kDevicePidBase + 1}));
  EXPECT_GE(queues.size(), 4u);
  EXPECT_EQ(t.process_names.at(kDevicePidBase + 1), "MLU 1");
  std::size_t copies = 0;
  for (const auto& [key, starts] : t.flow_starts) {
    if (key.rfind("memcpy/", 0) != 0) continue;
    ++copies;
    EXPECT_EQ(t.flow_ends.count(key), 1u) << key;
  }
  EXPECT_EQ(copies, 4u * 20);
  ASSERT_EQ(t.memory.size(), 2u);
  for (const auto& [pid, values] : t.memory) EXPECT_EQ(values.back().second, 0.0) << pid;
  const json dt = runDevtools(path.string());
  std::set<long> dt_host_threads;
  for (const json& thread : dt.at("threads")) {
    if (thread.at("pid").get<long>() < kDevicePidBase) dt_host_threads.insert(thread.at("tid").get<long>());
  }
  EXPECT_EQ(dt_host_threads, host_threads);
  fs::remove_all(root);
}

// A program killed with SIGKILL cannot finish its trace: trace.json.tmp holds all but about its last
// second (the writer drains every thread and flushes once a second) with every track named before its first
// event. trace-check --repair makes it a complete trace that passes the importer's rules and that DevTools
// loads with its host and device tracks, every flow joined; the report makes its op table from the trace.
TEST(ProfilerDemos, AKilledRunsTraceIsRepairedWithItsDeviceTracks) {
  const fs::path root = tempDir("profiler_killed");
  const pid_t pid =
      spawn({MNIST_TRAIN_PATH, "--steps", "100000", "--batch-size", "16", "--no-eval"}, profiling(root));
  ASSERT_GT(pid, 0);
  // Killed after a few seconds (the writer has drained every thread twice), once the trace on disk holds a
  // few hundred KiB.
  fs::path tmp;
  const auto started = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < started + std::chrono::seconds(120)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) tmp = entry.path() / "trace.json.tmp";
    if (std::chrono::steady_clock::now() > started + std::chrono::milliseconds(2500) && !tmp.empty() &&
        fs::exists(tmp, ec) && fs::file_size(tmp, ec) > (300u << 10)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "mnist_train ended before it was killed, status " << status;
  const fs::path dir = tmp.parent_path();
  ASSERT_TRUE(fs::exists(tmp)) << dir;
  ASSERT_FALSE(fs::exists(dir / "trace.json"));

  // The report reads the unfinished trace as it is.
  const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.all();
  EXPECT_THAT(summary.out, ::testing::HasSubstr("the op table is made from the op spans in the trace"));
  EXPECT_THAT(summary.out, ::testing::ContainsRegex("Ops \\(profiler\\): [1-9][0-9]* op calls"));
  EXPECT_THAT(summary.out, ::testing::HasSubstr("conv2d_forward"));

  const auto repaired = run({TRACE_CHECK_PATH, "--repair", tmp.string()});
  ASSERT_EQ(repaired.exit_code, 0) << repaired.all();
  EXPECT_THAT(repaired.out, ::testing::HasSubstr("repaired;"));
  const fs::path path = dir / "trace.json";
  EXPECT_TRUE(validTrace(path.string()));
  const Trace t = readTrace(path);
  EXPECT_EQ(t.root.at("otherData").at("repaired"), true);
  EXPECT_GT(t.host_ops.size(), 100u);
  EXPECT_GT(t.device_ops.size(), 100u);
  EXPECT_GE(t.thread_names.size(), 2u) << "the host thread and the device queue are named";
  std::size_t ends = 0;
  for (const auto& [key, events] : t.flow_ends) ends += events.size();
  const json dt = runDevtools(path.string());
  std::size_t device_entries = 0;
  for (const json& thread : dt.at("threads")) {
    EXPECT_EQ(thread.at("tree_nodes"), thread.at("entries")) << thread.dump();
    if (thread.at("pid").get<long>() >= kDevicePidBase) {
      device_entries += thread.at("entries").get<std::size_t>();
      EXPECT_THAT(thread.at("thread_name").get<std::string>(), ::testing::StartsWith("queue "));
      EXPECT_EQ(thread.at("process_name"), "MLU 0");
    }
  }
  EXPECT_EQ(device_entries, t.device_spans.size());
  EXPECT_EQ(dt.at("flows").size(), ends);
  EXPECT_GT(ends, 100u);
  // The report then reads the repaired trace, not both.
  const auto after = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_THAT(after.out, ::testing::Not(::testing::HasSubstr("trace.json.tmp")));
  EXPECT_THAT(after.out, ::testing::HasSubstr("the op table is made from the op spans in the trace"));
  // Its input is kept, and an existing output is not replaced.
  EXPECT_TRUE(fs::exists(tmp));
  const auto again = run({TRACE_CHECK_PATH, "--repair", tmp.string()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, ::testing::HasSubstr("exists; not replaced"));
  // The result directory given instead of the file: its cut trace repaired beside it; nothing left to do
  // the second time.
  fs::remove(path);
  const auto by_dir = run({TRACE_CHECK_PATH, "--repair", dir.string()});
  EXPECT_EQ(by_dir.exit_code, 0) << by_dir.all();
  EXPECT_THAT(by_dir.out, ::testing::HasSubstr("repaired;"));
  EXPECT_TRUE(validTrace(path.string()));
  const auto nothing = run({TRACE_CHECK_PATH, "--repair", dir.string()});
  EXPECT_EQ(nothing.exit_code, 1) << nothing.all();
  EXPECT_THAT(nothing.err, ::testing::HasSubstr("no trace to repair"));
  // `opscope report` of the killed run leaves a trace.json Perfetto loads.
  fs::remove(path);
  const auto report = run({OPSCOPE_PATH, "report", dir.string()});
  EXPECT_EQ(report.exit_code, 0) << report.all();
  EXPECT_THAT(report.err,
              ::testing::HasSubstr("trace.json.tmp was cut short (the run was killed): repaired into "
                                   "trace.json"));
  EXPECT_TRUE(validTrace(path.string()));
  fs::remove_all(root);
}

// A program stopped mid-run: the trace is completed by the signal handler and holds every op called so far.
class ProfilerSignals : public ::testing::TestWithParam<std::pair<std::string, int>> {};

TEST_P(ProfilerSignals, TheTraceIsCompleteAndHoldsTheOpsSoFar) {
  const auto& [mode, sig] = GetParam();
  const fs::path root = tempDir("profiler_signal_" + mode);
  const opscope_test::Run r =
      run({PROFILE_PROBE_PATH, mode, "40"}, profiling(root, {kSanitizerCrashOptions}));
  EXPECT_EQ(r.signal, sig) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("iterations 40"));
  const fs::path dir = onlyResultDir(root);
  ASSERT_TRUE(fs::exists(dir / "trace.json")) << r.err;
  const Trace t = readTrace(dir / "trace.json");  // parses
  // Every op called before the signal: the first fill, then a fill and an add per iteration.
  std::set<std::uint64_t> seqs;
  for (const auto& [seq, spans] : t.host_ops) seqs.insert(seq);
  EXPECT_EQ(seqs.size(), 1u + 2 * 40);
  EXPECT_EQ(*seqs.rbegin(), 1u + 2 * 40);
  // The Perfetto rules hold, except that a kernel still running at the signal has no device span, so its
  // flow has no end.
  const auto report = checkTrace((dir / "trace.json").string());
  for (const std::string& error : report.errors) EXPECT_THAT(error, ::testing::HasSubstr("flow")) << error;
  EXPECT_NO_THROW(runDevtools((dir / "trace.json").string()));
  EXPECT_TRUE(fs::exists(dir / "summary.txt"));
  // run.json says how the run ended.
  std::ifstream run_json(dir / "run.json");
  const json info = json::parse(run_json, nullptr, false);
  ASSERT_FALSE(info.is_discarded());
  EXPECT_EQ(info["ended"], "signal SIG" + std::string(sigabbrev_np(sig)));
  EXPECT_EQ(info["tools"]["profile"], true);
  EXPECT_GT(info["duration_s"].get<double>(), 0.0);
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Profiler, ProfilerSignals,
                         ::testing::Values(std::make_pair(std::string("sigint"), SIGINT),
                                           std::make_pair(std::string("sigterm"), SIGTERM),
                                           std::make_pair(std::string("segv"), SIGSEGV),
                                           std::make_pair(std::string("abort"), SIGABRT)),
                         [](const auto& info) { return info.param.first; });

// More SIGTERMs while the first one's flush runs (as when a job scheduler or an impatient user sends
// several) do not cut it short: the run still ends by SIGTERM with a finished trace and run.json.
TEST(ProfilerProbe, SignalsDuringTheFlushDoNotCutItShort) {
  const fs::path root = tempDir("profiler_sigterm_storm");
  const opscope_test::Run r = run({PROFILE_PROBE_PATH, "sigterm-storm", "40"}, profiling(root));
  EXPECT_EQ(r.signal, SIGTERM) << r.err;
  const fs::path dir = onlyResultDir(root);
  EXPECT_TRUE(fs::exists(dir / "trace.json")) << r.err;
  EXPECT_FALSE(fs::exists(dir / "trace.json.tmp"));
  EXPECT_TRUE(fs::exists(dir / "summary.txt"));
  std::ifstream run_json(dir / "run.json");
  const json info = json::parse(run_json, nullptr, false);
  ASSERT_FALSE(info.is_discarded());
  EXPECT_EQ(info["ended"], "signal SIGTERM");
  fs::remove_all(root);
}

// exit() from another thread while main keeps calling ops: the trace is complete.
TEST(ProfilerProbe, ExitFromAnotherThreadCompletesTheTrace) {
  const fs::path root = tempDir("profiler_exit_thread");
  const opscope_test::Run r = run({PROFILE_PROBE_PATH, "exit-thread", "10"}, profiling(root));
  EXPECT_EQ(r.signal, 0) << r.err;
  const fs::path dir = onlyResultDir(root);
  ASSERT_TRUE(fs::exists(dir / "trace.json")) << r.err;
  const Trace t = readTrace(dir / "trace.json");
  EXPECT_GE(t.host_ops.size(), 1u + 2 * 10);
  const auto report = checkTrace((dir / "trace.json").string());
  for (const std::string& error : report.errors) EXPECT_THAT(error, ::testing::HasSubstr("flow")) << error;
  fs::remove_all(root);
}

// A program that exits before its first runtime call (here: a usage error) used no device: it leaves no
// result directory and the profiler prints nothing.
TEST(ProfilerDemos, AProgramThatExitsBeforeAnyCallLeavesNothing) {
  const fs::path root = tempDir("profiler_early_exit");
  const opscope_test::Run r = run({MNIST_TRAIN_PATH, "--no-such-option"}, profiling(root));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("unknown argument '--no-such-option'"));
  EXPECT_THAT(r.err, ::testing::Not(::testing::HasSubstr("opscope")));
  EXPECT_TRUE(!fs::exists(root) || fs::is_empty(root));
  fs::remove_all(root);
}

// OP_TIME_MEASURE_LIST: only the listed ops get spans of their own on the host and flows; the kernels of the
// others still show on the device, as plain "kernel"s.
TEST(ProfilerDemos, TheListChoosesTheOps) {
  const fs::path root = tempDir("profiler_list");
  const opscope_test::Run r =
      run(mnistCommand(MNIST_TRAIN_PATH, 2, 4), profiling(root, {{"OP_TIME_MEASURE_LIST", "conv2d.*"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path path = onlyResultDir(root) / "trace.json";
  EXPECT_TRUE(validTrace(path.string()));
  const Trace t = readTrace(path);
  ASSERT_FALSE(t.host_ops.empty());
  for (const auto& [seq, spans] : t.host_ops)
    EXPECT_THAT(spans[0].name, ::testing::StartsWith("conv2d")) << seq;
  EXPECT_EQ(t.device_ops.size(), t.host_ops.size());
  int plain_kernels = 0;
  for (const Span& s : t.device_spans) {
    if (s.cat != "kernel") continue;
    ++plain_kernels;
    EXPECT_THAT(s.name, ::testing::Not(::testing::StartsWith("conv2d")));
    EXPECT_FALSE(s.args.contains("seq"));
  }
  EXPECT_GT(plain_kernels, 0);
  std::size_t op_flows = 0;  // one per listed op call
  for (const auto& [key, starts] : t.flow_starts)
    op_flows += key.rfind("mlu_op/", 0) == 0 ? starts.size() : 0;
  EXPECT_EQ(op_flows, t.host_ops.size());
  fs::remove_all(root);
}

// A program with an activity callback of its own: it still gets every record while the profiler holds the
// runtime's callback slot, and the trace still has the device spans.
TEST(ProfilerProbe, TheProgramsActivityCallbackIsChained) {
  const fs::path root = tempDir("profiler_callback");
  const opscope_test::Run plain = run({PROFILE_PROBE_PATH, "callback", "20"});
  const opscope_test::Run profiled = run({PROFILE_PROBE_PATH, "callback", "20"}, profiling(root));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  const auto at = plain.out.find("records ");
  ASSERT_NE(at, std::string::npos) << plain.out;
  const int expected = std::stoi(plain.out.substr(at + 8));
  EXPECT_GE(expected, 3 * 20);
  EXPECT_THAT(profiled.out, ::testing::HasSubstr("records " + std::to_string(expected)));
  const Trace t = readTrace(onlyResultDir(root) / "trace.json");
  EXPECT_EQ(t.device_ops.size(), 1u + 2 * 20);
  fs::remove_all(root);
}

// OP_TRACE_MAX_MB: the trace stops growing at the cap, says so, and is still a complete JSON document.
TEST(ProfilerProbe, TheSizeCapKeepsTheTraceReadable) {
  const fs::path root = tempDir("profiler_cap");
  const opscope_test::Run r =
      run({PROFILE_PROBE_PATH, "run", "4000"}, profiling(root, {{"OP_TRACE_MAX_MB", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("OP_TRACE_MAX_MB=1 reached"));
  const fs::path path = onlyResultDir(root) / "trace.json";
  EXPECT_LE(fs::file_size(path), 1u << 20);
  const Trace t = readTrace(path);
  EXPECT_GT(t.root.at("otherData").at("events_dropped").get<long>(), 0);
  EXPECT_GT(t.host_ops.size(), 100u);
  // The summary still counts every op.
  EXPECT_THAT(r.err, ::testing::HasSubstr("opscope profiler: " + std::to_string(1 + 2 * 4000) + " op calls"));
  fs::remove_all(root);
}

// OP_TRACE_SEGMENT_MB: past the size the trace goes on in trace.1.json, trace.2.json, ..., each at most that
// size, each a complete trace that passes the importer's rules and that DevTools loads whole (its tracks
// named at its head, every flow in it joined); together they hold every op call once. OP_TRACE_MAX_MB caps
// the files together. The report reads them all.
TEST(ProfilerDemos, TheTraceGoesOnInSegmentsEachComplete) {
  const fs::path root = tempDir("profiler_segments");
  const opscope_test::Run r = run(mnistCommand(MNIST_TRAIN_PATH, 40, 16),
                                  profiling(root, {{"OP_TRACE_SEGMENT_MB", "1"}, {"OP_DUMP_ARGS", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ops = dumpedOps(r.err);
  const fs::path dir = onlyResultDir(root);
  std::vector<fs::path> files = {dir / "trace.json"};
  while (fs::exists(dir / fmt::format("trace.{}.json", files.size()))) {
    files.push_back(dir / fmt::format("trace.{}.json", files.size()));
  }
  ASSERT_GE(files.size(), 2u);
  EXPECT_THAT(r.err, ::testing::HasSubstr(fmt::format("trace.json and {} more files", files.size() - 1)));
  std::map<std::uint64_t, int> seen;  // op seq -> host spans over the files
  std::size_t flows = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(files[i].string());
    EXPECT_LE(fs::file_size(files[i]), 1u << 20);
    EXPECT_TRUE(validTrace(files[i].string()));
    const Trace t = readTrace(files[i]);
    EXPECT_EQ(t.root.at("otherData").at("segment"), i);
    for (const auto& [seq, spans] : t.host_ops) seen[seq] += static_cast<int>(spans.size());
    const json dt = runDevtools(files[i].string());
    for (const json& thread : dt.at("threads")) {
      EXPECT_EQ(thread.at("tree_nodes"), thread.at("entries")) << thread.dump();
      EXPECT_FALSE(thread.at("thread_name").is_null()) << thread.dump();
    }
    std::size_t ends = 0;
    for (const auto& [key, events] : t.flow_ends) ends += events.size();
    EXPECT_EQ(dt.at("flows").size(), ends);
    flows += ends;
  }
  ASSERT_EQ(seen.size(), ops.size());
  for (const auto& [seq, count] : seen) EXPECT_EQ(count, 1) << "op #" << seq;
  // Flows across two files are left out (about the device's last second of each file): most are there.
  EXPECT_GT(flows, ops.size() / 2);
  const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.all();
  EXPECT_THAT(summary.out, ::testing::HasSubstr(fmt::format("{} op calls", ops.size())));
  fs::remove_all(root);
}

// OP_TRACE_GZIP=1: trace.json.gz, many times smaller, the same trace inside: it passes the importer's rules
// (trace-check reads .gz), DevTools loads it whole, and the report reads it. Cut in half (as a killed run's
// file, flushed once a second, would be), trace-check --repair still makes a complete trace of it.
TEST(ProfilerDemos, AGzipTraceIsTheSameTraceManyTimesSmaller) {
  const fs::path root = tempDir("profiler_gzip");
  const opscope_test::Run r =
      run(mnistCommand(MNIST_TRAIN_PATH, 12, 16), profiling(root, {{"OP_TRACE_GZIP", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = onlyResultDir(root);
  const fs::path gz = dir / "trace.json.gz";
  ASSERT_TRUE(fs::exists(gz)) << r.err;
  EXPECT_FALSE(fs::exists(dir / "trace.json"));
  EXPECT_THAT(r.err, ::testing::HasSubstr("events in trace.json.gz"));
  const opscope::Gunzipped text = opscope::gunzipFile(gz.string(), std::size_t{1} << 30);
  EXPECT_FALSE(text.cut);
  // About 9x in a plain build (8.9x measured); a TSan build's noisier timestamps once made it 7.9x.
  EXPECT_GT(text.text.size(), 5 * fs::file_size(gz)) << "gzip makes a trace at least 5x smaller";
  const json trace = json::parse(text.text);
  std::size_t ops = 0, flows = 0;
  for (const json& e : trace.at("traceEvents")) {
    ops += e.at("ph") == "X" && e.value("cat", "") == "mlu_op" && e.at("pid").get<long>() < kDevicePidBase;
    flows += e.at("ph") == "f";
  }
  EXPECT_GT(ops, 300u);
  EXPECT_TRUE(validTrace(gz.string()));
  const json dt = runDevtools(gz.string());
  std::size_t entries = 0;
  for (const json& thread : dt.at("threads")) {
    EXPECT_EQ(thread.at("tree_nodes"), thread.at("entries")) << thread.dump();
    entries += thread.at("entries").get<std::size_t>();
  }
  EXPECT_GT(entries, 2 * ops);
  EXPECT_GE(flows, ops);  // every op's launch, and the copies'
  EXPECT_EQ(dt.at("flows").size(), flows);
  const auto summary = run({OPSCOPE_PATH, "summary", dir.string()});
  EXPECT_EQ(summary.exit_code, 0) << summary.all();
  EXPECT_THAT(summary.out, ::testing::HasSubstr(fmt::format("{} op calls", ops)));
  EXPECT_THAT(summary.out, ::testing::HasSubstr("trace.json.gz"));
  // Cut in half, then repaired.
  const fs::path cut = dir / "cut" / "trace.json.gz.tmp";
  fs::create_directories(cut.parent_path());
  fs::copy_file(gz, cut);
  fs::resize_file(cut, fs::file_size(gz) / 2);
  const auto repaired = run({TRACE_CHECK_PATH, "--repair", cut.string()});
  ASSERT_EQ(repaired.exit_code, 0) << repaired.all();
  EXPECT_TRUE(validTrace((dir / "cut" / "trace.json.gz").string()));
  fs::remove_all(root);
}

// A malformed OP_TRACE_MAX_MB stops the program before main with a message naming it; an unwritable result
// directory likewise.
TEST(ProfilerProbe, BadSettingsAreRefusedBeforeMain) {
  const fs::path root = tempDir("profiler_bad");
  const opscope_test::Run bad =
      run({PROFILE_PROBE_PATH, "run", "1"}, profiling(root, {{"OP_TRACE_MAX_MB", "lots"}}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, ::testing::HasSubstr("OP_TRACE_MAX_MB"));
  EXPECT_THAT(bad.out, ::testing::Not(::testing::HasSubstr("iterations")));
  const opscope_test::Run unwritable =
      run({PROFILE_PROBE_PATH, "run", "1"}, profiling("/proc/opscope-cannot-write"));
  EXPECT_EQ(unwritable.exit_code, 2);
  EXPECT_THAT(unwritable.err, ::testing::HasSubstr("OPSCOPE_RESULT_DIR"));
  fs::remove_all(root);
}

// OP_TIME_MEASURE_SCHEDULE=1,1,1,2,2 over 12 mnist steps (opscope_step() after each): step 0 skipped, then
// twice (wait 1, warmup 1, active 2): steps 3-4 into trace_step3.json and 7-8 into trace_step7.json.
TEST(ProfilerSchedule, OneTracePerActiveWindowHoldingItsSteps) {
  const fs::path root = tempDir("profiler_schedule");
  // The ops one step makes, counted independently: a 12-step run's ops minus an 11-step run's.
  const opscope_test::Run r11 = run(mnistCommand(MNIST_TRAIN_PATH, 11, 4), preload({{"OP_DUMP_ARGS", "1"}}));
  const opscope_test::Run r12 =
      run(mnistCommand(MNIST_TRAIN_PATH, 12, 4),
          profiling(root, {{"OP_DUMP_ARGS", "1"}, {"OP_TIME_MEASURE_SCHEDULE", "1,1,1,2,2"}}));
  ASSERT_EQ(r12.exit_code, 0) << r12.err;
  const auto all = dumpedOps(r12.err);
  const std::size_t per_step = all.size() - dumpedOps(r11.err).size();
  const std::size_t setup = all.size() - 12 * per_step;  // ops before the first step (parameter init)
  ASSERT_GT(per_step, 10u);
  const fs::path dir = onlyResultDir(root);
  EXPECT_FALSE(fs::exists(dir / "trace.json"));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
  EXPECT_THAT(files, ::testing::UnorderedElementsAre("trace_step3.json", "trace_step7.json", "summary.txt",
                                                     "time_measure.csv", "run.json"));
  for (const int first : {3, 7}) {
    const fs::path path = dir / fmt::format("trace_step{}.json", first);
    EXPECT_TRUE(validTrace(path.string()));
    const Trace t = readTrace(path);
    std::map<std::uint64_t, DumpedOp> expected;
    for (std::uint64_t seq = setup + first * per_step + 1; seq <= setup + (first + 2) * per_step; ++seq) {
      expected[seq] = all.at(seq);
    }
    ASSERT_EQ(t.host_ops.size(), expected.size()) << path;
    EXPECT_EQ(t.host_ops.begin()->first, expected.begin()->first) << path;
    EXPECT_EQ(t.host_ops.rbegin()->first, expected.rbegin()->first) << path;
    EXPECT_EQ(t.device_ops.size(), expected.size()) << path;
    // The window's memory counter starts with the window (at the value it had then), not at the run's start:
    // nothing in the file comes long before the window's first op.
    std::int64_t first_op = std::numeric_limits<std::int64_t>::max();
    for (const auto& [seq, spans] : t.host_ops) first_op = std::min(first_op, spans[0].ts);
    ASSERT_EQ(t.memory.size(), 1u) << path;
    const auto& memory = t.memory.begin()->second;
    EXPECT_GT(memory.front().first, first_op - 50'000'000) << path << ": the counter starts 50 ms before";
    EXPECT_GT(memory.front().second, 0.0) << path << ": the parameters are on the device by then";
    // A ProfilerStep span per step of the window, numbered as the schedule counts them.
    std::vector<std::string> steps;
    for (const Span& s : t.host_spans) {
      if (s.cat == "user_annotation") steps.push_back(s.name);
    }
    EXPECT_THAT(steps, ::testing::ElementsAre(fmt::format("ProfilerStep#{}", first),
                                              fmt::format("ProfilerStep#{}", first + 1)))
        << path;
    // The window's trace in the DevTools trace engine: every flow of the window joined (the window waits for
    // the device before it closes), and every host span in the thread's tree.
    const json dt = runDevtools(path.string());
    std::size_t starts = 0, ends = 0;
    for (const auto& [key, events] : t.flow_starts) starts += events.size();
    for (const auto& [key, events] : t.flow_ends) ends += events.size();
    EXPECT_GE(starts, expected.size()) << path << ": a flow per op at least";
    EXPECT_EQ(ends, starts) << path;
    EXPECT_EQ(dt.at("flows").size(), starts) << path;
    for (const json& thread : dt.at("threads")) {
      if (thread.at("pid").get<long>() < kDevicePidBase) {
        EXPECT_EQ(thread.at("tree_nodes"), thread.at("entries"))
            << path << ": a span partly overlaps another";
      }
    }
  }
  EXPECT_THAT(r12.err,
              ::testing::HasSubstr("opscope profiler: " + std::to_string(4 * per_step) + " op calls"));
  fs::remove_all(root);
}

TEST(ProfilerSchedule, AMalformedScheduleIsRefusedBeforeMain) {
  const fs::path root = tempDir("profiler_schedule_bad");
  for (const char* bad : {"1,2,3", "0,0,0,0,1", "a,1,1,1,1", "1,1,1,1,1,1"}) {
    const opscope_test::Run r =
        run({PROFILE_PROBE_PATH, "run", "1"}, profiling(root, {{"OP_TIME_MEASURE_SCHEDULE", bad}}));
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, ::testing::HasSubstr("OP_TIME_MEASURE_SCHEDULE")) << bad;
    EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("iterations"))) << bad;
  }
  fs::remove_all(root);
}

// With auto-compare and a forced fallback on, their work shows as spans of its own: relu runs on the CPU
// (cat "fallback", no kernel, no flow) and every compared op is followed by an "opscope: autocompare" span.
TEST(ProfilerDemos, FallbackAndCompareSpansAreShownAsSuch) {
  const fs::path root = tempDir("profiler_tools");
  const opscope_test::Run r = run(
      mnistCommand(MNIST_TRAIN_PATH, 2, 4),
      profiling(root,
                {{"OP_AUTOCOMPARE", "1"}, {"OP_AUTOCOMPARE_LIST", "linear"}, {"OP_FALLBACK_LIST", "relu"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path path = onlyResultDir(root) / "trace.json";
  EXPECT_TRUE(validTrace(path.string()));
  const Trace t = readTrace(path);
  int relus = 0, linears = 0;
  for (const auto& [seq, spans] : t.host_ops) {
    const Span& s = spans[0];
    if (s.name == "relu") {
      ++relus;
      EXPECT_EQ(s.cat, "fallback");
      EXPECT_EQ(s.args.at("fallback"), "forced");
      EXPECT_EQ(t.device_ops.count(seq), 0u) << "relu ran on the CPU";
      EXPECT_EQ(t.flow_starts.count("mlu_op/" + std::to_string(seq)), 0u);
    } else {
      EXPECT_EQ(s.cat, "mlu_op");
      EXPECT_EQ(t.device_ops.count(seq), 1u) << s.name;
    }
    if (s.name == "linear") ++linears;
  }
  EXPECT_EQ(relus, 6);
  int compare_spans = 0;
  for (const Span& s : t.host_spans) {
    if (s.name != "opscope: autocompare") continue;
    EXPECT_EQ(s.cat, "opscope");
    EXPECT_EQ(s.args.at("op"), "linear");
    ++compare_spans;
  }
  EXPECT_GE(compare_spans, linears);  // after each (and before, where it copies the inputs)
  EXPECT_GT(linears, 0);
  fs::remove_all(root);
}

}  // namespace
}  // namespace opscope_test
