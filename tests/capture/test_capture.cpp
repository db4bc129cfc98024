// Capture to SQLite: the writer and reader on real database files (round trip, deduplication, the cap,
// damaged files), then the capture tool for real — libopscope.so preloaded into mnist_train and into a
// 4-thread, 2-device program — read back with the reader, the sqlite3 CLI and Python + NumPy, and
// replayed with op-replay.
#include "../support/subprocess.h"
#include "../support/test_data.h"

#include <opscope/rundb/reader.h>
#include <opscope/rundb/writer.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace opscope::rundb;
using opscope::Bytes;
template <typename T>
Bytes bytesOf(const std::vector<T>& values) {
  return opscope_test::bytesOf<Bytes>(values);
}
using opscope_test::Env;
using opscope_test::linesStartingWith;
using opscope_test::run;
using opscope_test::spawn;
using opscope_test::tempDir;
using opscope_test::valuesOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

TensorRecord tensor(std::string role, int index, std::string name, mluopDataType_t dtype,
                    std::vector<std::int64_t> shape, Bytes data) {
  TensorRecord t;
  t.role = std::move(role);
  t.arg_index = index;
  t.arg_name = std::move(name);
  t.dtype = dtype;
  t.shape = shape;
  t.strides.resize(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    t.strides[i] = s;
    s *= shape[i];
  }
  t.data = std::move(data);
  return t;
}

// An add op: c = a + alpha * b, with a float32 `a` that the test varies and a shared `b`.
CapturedOp addOp(std::uint64_t seq, float a_value, const std::vector<float>& b) {
  CapturedOp op;
  op.seq = seq;
  op.op = mlu::OpId::add;
  op.name = "add";
  op.symbol = "mluopAdd";
  op.scalars = {{"alpha", "0.5"}};
  const std::vector<float> a(b.size(), a_value);
  std::vector<float> c(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) c[i] = a[i] + 0.5f * b[i];
  const auto n = static_cast<std::int64_t>(b.size());
  op.tensors.push_back(tensor("input", 1, "a", MLUOP_DTYPE_FLOAT, {n}, bytesOf(a)));
  op.tensors.push_back(tensor("input", 2, "b", MLUOP_DTYPE_FLOAT, {n}, bytesOf(b)));
  op.tensors.push_back(tensor("output", 3, "c", MLUOP_DTYPE_FLOAT, {n}, bytesOf(c)));
  return op;
}

RunRecord runRecord() {
  RunRecord r;
  r.pid = 42;
  r.rank = 1;
  r.command_line = "prog --flag";
  r.start_time_iso = "2026-11-25T00:00:00Z";
  r.opscope_version = "test";
  r.options_json = R"({"OP_CAPTURE":"1"})";
  return r;
}

std::string readError(const std::string& path) {
  try {
    auto reader = CaptureReader::open(path);
    reader->list();
  } catch (const ReadError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(CaptureStore, RoundTripKeepsEveryFieldAndDtype) {
  const fs::path dir = tempDir("roundtrip");
  const std::string path = (dir / "capture.db").string();
  {
    auto writer = CaptureWriter::open(path, runRecord(), std::uint64_t{1} << 30);
    CapturedOp op = addOp(7, 1.25f, {1, 2, 3, -4});
    op.thread = 3;
    op.queue = 9;
    op.device = 1;
    op.host_start_ns = 1000;
    op.host_dur_ns = 55;
    // Other dtypes, a non-contiguous stride record and an empty tensor.
    const std::vector<std::uint16_t> half = {mlu::floatToHalf(0.5f), mlu::floatToHalf(-2.0f)};
    op.tensors.push_back(tensor("input", 4, "h", MLUOP_DTYPE_HALF, {2}, bytesOf(half)));
    op.tensors.push_back(tensor("input", 5, "i", MLUOP_DTYPE_INT64, {2, 1},
                                bytesOf(std::vector<std::int64_t>{-1, 1LL << 40})));
    op.tensors.back().strides = {3, 7};
    op.tensors.push_back(tensor("input", 6, "e", MLUOP_DTYPE_BOOL, {0, 3}, {}));
    EXPECT_TRUE(writer->submit(std::move(op)));
    const Summary s = writer->close();
    EXPECT_EQ(s.ops, 1u);
    EXPECT_EQ(s.tensors, 6u);
    EXPECT_EQ(s.bytes, 16u + 16 + 16 + 4 + 16);
    EXPECT_THAT(summaryLine(s), HasSubstr("captured 1 ops, 6 tensors"));
  }
  auto reader = CaptureReader::open(dir.string());  // a result directory works too
  const auto ids = reader->ids();
  ASSERT_EQ(ids.size(), 1u);
  const CapturedOp op = reader->load(ids[0]);
  EXPECT_EQ(op.seq, 7u);
  EXPECT_EQ(op.op, mlu::OpId::add);
  EXPECT_EQ(op.symbol, "mluopAdd");
  EXPECT_EQ(op.thread, 3u);
  EXPECT_EQ(op.queue, 9u);
  EXPECT_EQ(op.device, 1);
  EXPECT_EQ(op.host_dur_ns, 55);
  ASSERT_EQ(op.tensors.size(), 6u);
  EXPECT_EQ(valuesOf<float>(op.tensors[2].data), (std::vector<float>{1.75f, 2.25f, 2.75f, -0.75f}));
  EXPECT_EQ(op.tensors[3].dtype, MLUOP_DTYPE_HALF);
  EXPECT_EQ(mlu::halfToFloat(valuesOf<std::uint16_t>(op.tensors[3].data)[1]), -2.0f);
  EXPECT_EQ(op.tensors[4].strides, (std::vector<std::int64_t>{3, 7}));
  EXPECT_EQ(valuesOf<std::int64_t>(op.tensors[4].data)[1], 1LL << 40);
  EXPECT_EQ(op.tensors[5].shape, (std::vector<std::int64_t>{0, 3}));
  EXPECT_TRUE(op.tensors[5].data.empty());
  ASSERT_EQ(op.scalars.size(), 1u);
  EXPECT_EQ(op.scalars[0].second, "0.5");
  const auto list = reader->list();
  ASSERT_EQ(list.size(), 1u);
  // The one-line form of its inputs; the int64 input's strides [3, 7] are not its shape's: shown.
  EXPECT_EQ(list[0].inputs,
            "a float32[4]; b float32[4]; h float16[2]; i int64[2,1] strides [3,7]; e bool[0,3]");
  EXPECT_EQ(reader->run().command_line, "prog --flag");
  EXPECT_THAT(readError(path), HasSubstr("(no error)"));
  fs::remove_all(dir);
}

// Schema version 2 added runs.world_size and the collectives tables: a version 1 file (without them) is
// still read, a version from the future is refused.
TEST(CaptureStore, AVersionOneFileIsReadAndAFutureVersionRefused) {
  const fs::path dir = tempDir("v1");
  const std::string path = (dir / "capture.db").string();
  RunRecord record = runRecord();
  record.world_size = 4;
  {
    auto writer = CaptureWriter::open(path, record, std::uint64_t{1} << 30);
    CapturedOp op = addOp(1, 1.0f, {1, 2});
    op.framework_op = "aten::add > aten::add_";
    op.site_id = 7;
    op.module = "layer1.0";
    op.source = "train.py:9 in step";
    CapturedOp second = addOp(2, 2.0f, {1, 2});
    second.site_id = 7;  // the same site: stored once
    second.module = op.module;
    second.source = op.source;
    ASSERT_TRUE(writer->submit(std::move(op)));
    ASSERT_TRUE(writer->submit(std::move(second)));
    writer->close();
  }
  EXPECT_EQ(CaptureReader::open(path)->run().world_size, 4);
  {
    auto reader = CaptureReader::open(path);
    ASSERT_EQ(reader->ids().size(), 2u);
    const CapturedOp op = reader->load(reader->ids()[0]);
    EXPECT_EQ(op.framework_op, "aten::add > aten::add_");
    EXPECT_EQ(op.module, "layer1.0");
    EXPECT_EQ(op.source, "train.py:9 in step");
    EXPECT_EQ(op.forward_op, "");
    EXPECT_EQ(reader->list()[1].site, "layer1.0 at train.py:9 in step");
  }
  EXPECT_EQ(run({"/usr/bin/sqlite3", path,
                 "SELECT value FROM meta WHERE key = 'schema_version'; SELECT count(*) FROM sites"})
                .out,
            "6\n1\n");
  // Version 5: no op classes or ULPs in compare_results.
  run({"/usr/bin/sqlite3", path,
       "ALTER TABLE compare_results DROP COLUMN op_class; ALTER TABLE compare_results DROP COLUMN max_ulp; "
       "ALTER TABLE compare_results DROP COLUMN mean_ulp; UPDATE meta SET value = '5' WHERE key = "
       "'schema_version';"});
  EXPECT_EQ(CaptureReader::open(path)->load(CaptureReader::open(path)->ids()[0]).module, "layer1.0");
  // Version 4: no regions.
  run({"/usr/bin/sqlite3", path,
       "ALTER TABLE ops DROP COLUMN region; UPDATE meta SET value = '4' WHERE key = 'schema_version';"});
  EXPECT_EQ(CaptureReader::open(path)->load(CaptureReader::open(path)->ids()[0]).module, "layer1.0");
  // Version 3: no sites.
  run({"/usr/bin/sqlite3", path,
       "DROP TABLE sites; ALTER TABLE ops DROP COLUMN site_id; UPDATE meta SET value = '3' WHERE key = "
       "'schema_version';"});
  {
    auto reader = CaptureReader::open(path);
    const CapturedOp op = reader->load(reader->ids()[0]);
    EXPECT_EQ(op.framework_op, "aten::add > aten::add_");
    EXPECT_EQ(op.module, "");
    EXPECT_EQ(reader->list()[0].site, "");
  }
  run({"/usr/bin/sqlite3", path,
       "ALTER TABLE runs DROP COLUMN world_size; DROP TABLE collectives; DROP TABLE collective_buffers; "
       "ALTER TABLE ops DROP COLUMN framework_op; UPDATE meta SET value = '1' WHERE key = "
       "'schema_version';"});
  auto reader = CaptureReader::open(path);
  EXPECT_EQ(reader->run().world_size, 0);
  EXPECT_EQ(reader->run().rank, 1);
  ASSERT_EQ(reader->ids().size(), 2u);
  EXPECT_EQ(reader->load(reader->ids()[0]).framework_op, "");
  run({"/usr/bin/sqlite3", path, "UPDATE meta SET value = '7' WHERE key = 'schema_version';"});
  EXPECT_THAT(readError(path),
              HasSubstr("has capture schema version 7; this op-replay reads versions 1 to 6"));
  fs::remove_all(dir);
}

TEST(CaptureStore, IdenticalContentsAreStoredOnce) {
  const fs::path dir = tempDir("dedup");
  const std::string path = (dir / "capture.db").string();
  const std::vector<float> weight(1000, 0.25f);  // read by every op, as weights are every step
  auto writer = CaptureWriter::open(path, runRecord(), std::uint64_t{1} << 30);
  for (int k = 0; k < 10; ++k)
    ASSERT_TRUE(writer->submit(addOp(static_cast<std::uint64_t>(k), static_cast<float>(k), weight)));
  const Summary s = writer->close();
  EXPECT_EQ(s.ops, 10u);
  EXPECT_EQ(s.tensors, 30u);
  EXPECT_EQ(s.bytes, 30u * 4000);
  // 10 distinct `a`, 10 distinct `c`, one `b`.
  EXPECT_EQ(s.stored_bytes, 21u * 4000);
  // 64 KiB pages: a tensor is stored in a few large writes (the page size is fixed when the file is made).
  const auto sql = run({"/usr/bin/sqlite3", path,
                        "SELECT count(*) FROM blobs; SELECT count(*) FROM tensors; PRAGMA page_size;"});
  EXPECT_EQ(sql.out, "21\n30\n65536\n") << sql.err;
  auto reader = CaptureReader::open(path);
  for (const auto id : reader->ids()) EXPECT_EQ(valuesOf<float>(reader->load(id).tensors[1].data), weight);
  fs::remove_all(dir);
}

TEST(CaptureStore, TheCapStopsCaptureAndKeepsWhatWasWritten) {
  const fs::path dir = tempDir("cap");
  const std::string path = (dir / "capture.db").string();
  auto writer = CaptureWriter::open(path, runRecord(), 100'000);  // each op stores 2 x 40 KB of new data
  std::vector<float> b(10'000);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  int accepted = 0;
  for (int k = 0; k < 50 && writer->submit(addOp(static_cast<std::uint64_t>(k), static_cast<float>(k), b));
       ++k) {
    ++accepted;
    if (k % 5 == 4) usleep(20'000);  // let the writer catch up, as a program's compute would
  }
  const Summary s = writer->close();
  EXPECT_TRUE(s.capped);
  EXPECT_LT(s.ops, 50u);
  EXPECT_GE(s.stored_bytes, 100'000u);
  EXPECT_FALSE(writer->submit(addOp(99, 1, b)));
  auto reader = CaptureReader::open(path);
  EXPECT_EQ(reader->ids().size(), s.ops);
  EXPECT_EQ(reader->load(reader->ids().back()).tensors.size(), 3u);
  fs::remove_all(dir);
}

TEST(CaptureStore, DamagedOrWrongFilesGiveOneClearLine) {
  const fs::path dir = tempDir("damaged");
  EXPECT_THAT(readError((dir / "missing.db").string()), HasSubstr("no such file"));
  std::ofstream(dir / "text.db")
      << "this is not a database, just some text that is long enough to have a header......"
         "..............................";
  EXPECT_THAT(readError((dir / "text.db").string()), HasSubstr("is not an SQLite database"));
  // A real capture cut in half.
  const std::string good = (dir / "capture.db").string();
  {
    auto writer = CaptureWriter::open(good, runRecord(), std::uint64_t{1} << 30);
    std::vector<float> b(20'000, 1.0f);
    for (int k = 0; k < 5; ++k)
      writer->submit(addOp(static_cast<std::uint64_t>(k), static_cast<float>(k), b));
    writer->close();
  }
  fs::copy_file(good, dir / "truncated.db");
  fs::resize_file(dir / "truncated.db", fs::file_size(good) / 2);
  EXPECT_THAT(readError((dir / "truncated.db").string()), HasSubstr("is truncated"));
  // An SQLite database that is not a capture.
  run({"/usr/bin/sqlite3", (dir / "other.db").string(), "CREATE TABLE t(x); INSERT INTO t VALUES (1);"});
  EXPECT_THAT(readError((dir / "other.db").string()), HasSubstr("not an opscope capture"));
  // An unknown op id.
  auto reader = CaptureReader::open(good);
  try {
    reader->load(77);
    ADD_FAILURE() << "no error for an unknown op id";
  } catch (const ReadError& e) {
    EXPECT_THAT(e.what(), HasSubstr("has no op with id 77"));
  }
  // A writer cannot create its file.
  EXPECT_THROW(CaptureWriter::open((dir / "text.db" / "capture.db").string(), runRecord(), 1),
               std::runtime_error);
  fs::remove_all(dir);
}

// ---- the capture tool, for real ----

namespace {

Env captureEnv(const fs::path& dir, const std::string& list) {
  Env env = {{"LD_PRELOAD", LIBOPSCOPE_PATH}, {"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", dir.string()}};
  if (!list.empty()) env.emplace_back("OP_CAPTURE_LIST", list);
  return env;
}

// The one capture.db a run wrote under dir.
std::string onlyCapture(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().filename() == "capture.db") found.push_back(entry.path().string());
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? std::string() : found[0];
}

constexpr int kMnistSteps = 4;
const std::vector<std::string> kMnist = {MNIST_TRAIN_PATH, "--steps", std::to_string(kMnistSteps),
                                         "--batch-size",   "16",      "--no-eval",
                                         "--log-interval", "1"};

}  // namespace

TEST(CaptureMnist, Conv2dListCapturesExactlyTheConvolutionsOfTheSchedule) {
  const fs::path dir = tempDir("mnist_conv");
  const auto plain = run(kMnist);
  const auto r = run(kMnist, captureEnv(dir, "conv2d.*"));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(linesStartingWith(r.out, "Train Epoch"), linesStartingWith(plain.out, "Train Epoch"));
  // Per training step the network runs conv1 and conv2 forward, both filter and bias gradients, and the
  // data gradient of conv2 only (conv1's input is the image).
  const int s = kMnistSteps;
  EXPECT_THAT(r.err, HasSubstr(fmt::format("opscope: captured {} ops", 7 * s)));
  const std::string db = onlyCapture(dir);
  const auto counts =
      run({"/usr/bin/sqlite3", db, "SELECT name, count(*) FROM ops GROUP BY name ORDER BY name;"});
  EXPECT_EQ(counts.out,
            fmt::format("conv2d_backward_bias|{}\nconv2d_backward_data|{}\nconv2d_backward_filter|{}\n"
                        "conv2d_forward|{}\n",
                        2 * s, s, 2 * s, 2 * s))
      << counts.err;
  // Shapes and dtypes of the first step's forward convolutions, through DESIGN.md's tensors table.
  const auto shapes =
      run({"/usr/bin/sqlite3", db,
           "SELECT t.role, t.arg_name, t.dtype, t.shape FROM tensors t JOIN ops o USING(op_id) "
           "WHERE o.name = 'conv2d_forward' ORDER BY o.seq, t.role, t.arg_index LIMIT 8;"});
  EXPECT_EQ(shapes.out,
            "input|x|float32|[16, 1, 28, 28]\ninput|w|float32|[32, 1, 3, 3]\ninput|bias|float32|[32]\n"
            "output|y|float32|[16, 32, 26, 26]\n"
            "input|x|float32|[16, 32, 26, 26]\ninput|w|float32|[64, 32, 3, 3]\ninput|bias|float32|[64]\n"
            "output|y|float32|[16, 64, 24, 24]\n")
      << shapes.err;

  // Python's sqlite3 + NumPy, as docs/capture.md shows: the first convolution recomputed in float64 from the
  // captured x, w and bias matches the captured y.
  const std::string script = R"PY(
import json, sqlite3, sys
import numpy as np
db = sqlite3.connect(sys.argv[1])
op_id, = db.execute("SELECT op_id FROM ops WHERE name = 'conv2d_forward' ORDER BY seq LIMIT 1").fetchone()
t = {}
for role, name, dtype, shape, data in db.execute(
        "SELECT role, arg_name, dtype, shape, data FROM tensors WHERE op_id = ?", (op_id,)):
    t[name] = np.frombuffer(data, dtype).reshape(json.loads(shape))
x, w, b, y = (t[k].astype(np.float64) for k in ("x", "w", "bias", "y"))
win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))   # n, c, 26, 26, 3, 3
ref = np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]
print(t["y"].dtype, t["y"].shape, "max_abs_diff %.3g" % np.abs(ref - y).max())
assert np.abs(ref - y).max() < 1e-4
)PY";
  const fs::path py = dir / "check.py";
  std::ofstream(py) << script;
  const auto check = run({"/usr/bin/python3", py.string(), db});
  EXPECT_EQ(check.exit_code, 0) << check.all();
  EXPECT_THAT(check.out, HasSubstr("float32 (16, 32, 26, 26) max_abs_diff"));

  // Every captured op replays bit for bit on the MLU, and agrees with the CPU reference.
  const auto replay = run({OP_REPLAY_PATH, db, "--acc_check"});
  EXPECT_EQ(replay.exit_code, 0) << replay.all();
  EXPECT_THAT(replay.out,
              HasSubstr(fmt::format("replayed {} ops: {} of {} outputs bit-identical to the capture, 0 "
                                    "failed checks",
                                    7 * s, 7 * s, 7 * s)));
  EXPECT_EQ(linesStartingWith(replay.out, "op-replay: conv2d_forward #1 output y  allclose: True").size(), 1u)
      << replay.out;
  fs::remove_all(dir);
}

TEST(CaptureMnist, InPlaceSgdStepsReplayFromTheValuesTheyHad) {
  const fs::path dir = tempDir("mnist_sgd");
  const auto r = run(kMnist, captureEnv(dir, "sgd_step"));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const std::string db = onlyCapture(dir);
  auto reader = CaptureReader::open(db);
  const auto ids = reader->ids();
  ASSERT_EQ(ids.size(), 8u * kMnistSteps);  // one per parameter tensor (4 conv, 4 linear) per step
  // The program overwrites each parameter in place every step: the capture keeps the value each step saw,
  // and the output of one step is the input of the next for the same parameter.
  std::map<std::string, Bytes> last_output;  // by parameter shape
  int chained = 0;
  for (const auto id : ids) {
    const CapturedOp op = reader->load(id);
    const TensorRecord* in = op.find("input", 6);    // param: after lr, momentum, dampening, weight_decay,
    const TensorRecord* out = op.find("output", 6);  // nesterov and init_buffer
    ASSERT_NE(in, nullptr);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(in->arg_name, "param");
    EXPECT_NE(in->data, out->data);
    const std::string key = fmt::format("{}", fmt::join(in->shape, "x"));
    if (last_output.count(key)) {
      EXPECT_EQ(last_output[key], in->data);
      ++chained;
    }
    last_output[key] = out->data;
  }
  EXPECT_GT(chained, 0);
  std::size_t outputs = 0;
  for (const auto id : ids) {
    for (const auto& t : reader->load(id).tensors) outputs += t.role == "output";
  }
  const auto replay = run({OP_REPLAY_PATH, db});
  EXPECT_EQ(replay.exit_code, 0) << replay.all();
  EXPECT_THAT(replay.out,
              HasSubstr(fmt::format("{} of {} outputs bit-identical to the capture, 0 failed checks", outputs,
                                    outputs)));
  fs::remove_all(dir);
}

TEST(CaptureThreads, FourThreadsOnTwoDevicesAreCapturedCompletelyAndConsistently) {
  const fs::path dir = tempDir("threads");
  constexpr int kThreads = 4, kSteps = 25, kElements = 4096;
  const auto r = run(
      {MULTI_QUEUE_PROGRAM_PATH, std::to_string(kThreads), std::to_string(kSteps), std::to_string(kElements)},
      captureEnv(dir, "add,mul_scalar"));
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.out, HasSubstr("ok"));
  auto reader = CaptureReader::open(onlyCapture(dir));
  const auto ids = reader->ids();
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(2 * kThreads * kSteps));
  std::map<int, std::set<int>> add_rounds, mul_rounds;  // thread t -> rounds k seen
  std::map<int, std::set<std::uint64_t>> queues;
  std::set<std::uint64_t> seqs;
  auto uniform = [](const TensorRecord& t) {
    const auto v = valuesOf<float>(t.data);
    EXPECT_EQ(v.size(), static_cast<std::size_t>(kElements));
    for (const float x : v) {
      if (x != v[0]) return std::numeric_limits<float>::quiet_NaN();
    }
    return v[0];
  };
  for (const auto id : ids) {
    const CapturedOp op = reader->load(id);
    EXPECT_TRUE(seqs.insert(op.seq).second) << "sequence numbers are unique";
    if (op.name == "add") {
      // a = 1000 t + k, b = t + 0.5, c = a + b: each op's own inputs, never another round's or thread's.
      const float a = uniform(*op.find("input", 1)), b = uniform(*op.find("input", 2));
      const float c = uniform(*op.find("output", 3));
      const int t = static_cast<int>(b - 0.5f);
      const int k = static_cast<int>(a) - 1000 * t;
      ASSERT_EQ(b, t + 0.5f) << "op " << id;
      ASSERT_TRUE(k >= 0 && k < kSteps) << "op " << id << " a = " << a;
      EXPECT_EQ(c, a + b);
      EXPECT_EQ(op.device, t % 2);
      EXPECT_TRUE(add_rounds[t].insert(k).second) << "thread " << t << " round " << k << " twice";
      queues[t].insert(op.queue);
    } else {
      ASSERT_EQ(op.name, "mul_scalar");
      // In place: x and y are the same buffer; the capture has x as it was before the op.
      const float x = uniform(*op.find("input", 0)), y = uniform(*op.find("output", 2));
      EXPECT_EQ(y, 2 * x);
      const float frac = x - static_cast<float>(static_cast<int>(x));
      EXPECT_EQ(frac, 0.5f) << "x = " << x;
      const int t = static_cast<int>(x) / 1001;  // x = a + b = 1001 t + k + 0.5, with k < 25
      mul_rounds[t].insert(static_cast<int>(x) - 1001 * t);
      queues[t].insert(op.queue);
    }
  }
  std::set<std::uint64_t> all_queues;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(add_rounds[t].size(), static_cast<std::size_t>(kSteps)) << "thread " << t;
    EXPECT_EQ(mul_rounds[t].size(), static_cast<std::size_t>(kSteps)) << "thread " << t;
    EXPECT_EQ(queues[t].size(), 1u) << "thread " << t << " used its own queue";
    all_queues.insert(*queues[t].begin());
  }
  EXPECT_EQ(all_queues.size(), static_cast<std::size_t>(kThreads));
  fs::remove_all(dir);
}

// A full disk (a file-size limit: writes past it fail with EFBIG): the capture stops with one line naming
// the error, and the counts it prints are those of the ops the file holds.
TEST(CaptureMnist, AFullDiskStopsTheCaptureAndTheCountsSayWhatWasWritten) {
  const fs::path dir = tempDir("mnist_full");
  // The shell only sets the limit (SIGXFSZ ignored, so a write fails instead of killing), then becomes
  // mnist_train with the hook preloaded.
  const std::string command = fmt::format(
      "trap '' XFSZ; ulimit -f 3000; exec env LD_PRELOAD={} OP_CAPTURE=1 OPSCOPE_RESULT_DIR={} {} --steps 3 "
      "--batch-size 16 --no-eval",
      LIBOPSCOPE_PATH, dir.string(), MNIST_TRAIN_PATH);
  const auto r = run({"/bin/bash", "-c", command});
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_THAT(r.err, HasSubstr("capture.db failed: "));
  EXPECT_THAT(r.err, HasSubstr("capture stopped"));
  const auto line = linesStartingWith(r.err, "opscope: captured ");
  ASSERT_EQ(line.size(), 1u) << r.err;
  EXPECT_THAT(line[0], HasSubstr("stopped by a write error"));
  const std::string printed = line[0].substr(std::strlen("opscope: captured "));
  const std::string db = onlyCapture(dir);
  const auto count = run({"/usr/bin/sqlite3", db, "SELECT count(*) FROM ops WHERE captured"});
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(printed.substr(0, printed.find(' ')) + "\n", count.out) << line[0];
  fs::remove_all(dir);
}

// A program killed (SIGKILL) while the writer is in the middle of a transaction leaves capture.db-journal
// beside the file: op-replay rolls that unfinished transaction back, says so, and reads every op committed
// before it; the file then passes SQLite's integrity check and its last op replays.
TEST(CaptureMnist, AProgramKilledMidWriteLeavesEveryCommittedOpReadable) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    const fs::path dir = tempDir("mnist_killed");
    const pid_t pid =
        spawn({MNIST_TRAIN_PATH, "--steps", "500", "--batch-size", "32", "--no-eval"},
              {{"LD_PRELOAD", LIBOPSCOPE_PATH}, {"OP_CAPTURE", "1"}, {"OPSCOPE_RESULT_DIR", dir.string()}});
    ASSERT_GT(pid, 0);
    // Kill it once the writer is inside a transaction (the journal exists) with a few MiB committed.
    fs::path db;
    int status = 0;
    bool ended = false;  // on its own, before it was killed
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < give_up && !ended) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir, ec)) db = entry.path() / "capture.db";
      if (!db.empty() && fs::exists(db.string() + "-journal", ec) && fs::file_size(db, ec) > (8u << 20))
        break;
      ended = waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_FALSE(ended) << "mnist_train ended before it was killed, status " << status;
    kill(pid, SIGKILL);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "mnist_train ended before it was killed, status " << status;
    if (!fs::exists(db.string() + "-journal")) {  // killed between two transactions: try again
      fs::remove_all(dir);
      continue;
    }
    // The report's reader rolls back too (on a copy, so that op-replay still finds the journal).
    const fs::path copy = dir / "copy";
    fs::copy(db.parent_path(), copy);
    const auto summary = run({OPSCOPE_PATH, "summary", copy.string()});
    EXPECT_EQ(summary.exit_code, 0) << summary.all();
    EXPECT_THAT(summary.out, HasSubstr("capture.db"));
    EXPECT_FALSE(fs::exists(copy / "capture.db-journal"));
    const auto list = run({OP_REPLAY_PATH, db.string(), "--list"});
    ASSERT_EQ(list.exit_code, 0) << list.all();
    EXPECT_THAT(list.err, HasSubstr("was cut off in the middle of a write"));
    EXPECT_FALSE(fs::exists(db.string() + "-journal"));
    const auto last = linesStartingWith(list.out, "");
    ASSERT_GE(last.size(), 3u) << list.out;  // the header, at least one op, "N ops in <path>"
    const std::string ops = last.back().substr(0, last.back().find(' '));
    const auto check = run({"/usr/bin/sqlite3", db.string(),
                            "PRAGMA integrity_check; SELECT count(*) FROM ops; SELECT max(op_id) FROM ops"});
    ASSERT_EQ(check.exit_code, 0) << check.all();
    const auto rows = linesStartingWith(check.out, "");
    ASSERT_EQ(rows.size(), 3u) << check.out;
    EXPECT_EQ(rows[0], "ok");
    EXPECT_EQ(rows[1], ops);
    EXPECT_GT(std::stoi(ops), 0);
    const auto replay = run({OP_REPLAY_PATH, db.string(), "--op-id", rows[2], "--acc_check"});
    EXPECT_EQ(replay.exit_code, 0) << replay.all();
    EXPECT_THAT(replay.out, Not(HasSubstr("was cut off")));
    fs::remove_all(dir);
    return;
  }
  FAIL() << "in 10 runs the program was never killed inside a transaction";
}
