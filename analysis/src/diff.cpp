// opscope diff: two runs' statistics aligned call by call (diff.h says how).
#include <opscope/analysis/diff.h>

#include <opscope/results/capture_db.h>

#include <opscope/compare/metrics.h>
#include <opscope/tensor_snapshot.h>
#include <opscope/text.h>
#include <opscope/tolerance.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace fs = std::filesystem;

namespace opscope::analysis {

using results::CaptureDb;
using results::columnText;

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Tensor {
  std::string role, name, dtype, shape, checksum;
  std::int64_t arg_index = 0, numel = 0, nan = 0, inf = 0;
  double min = 0, max = 0, mean = 0, l2 = 0;  // stats mode
  std::int64_t blob = -1, nbytes = 0;         // tensors mode: where its bytes are
};

struct Call {
  std::uint64_t seq = 0;
  std::string op;
  std::string site;  // capture.db schema 4's sites: where the program called it
  std::vector<Tensor> tensors;
};

// The capture.db of a run given as the file or as its result directory.
fs::path databaseOf(const fs::path& run) {
  std::error_code ec;
  const fs::path db = fs::is_directory(run, ec) ? run / "capture.db" : run;
  // A folder or file that cannot be looked into (permissions) is said so, not taken for one without a run.
  static_cast<void>(fs::status(db, ec));
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw DiffError(fmt::format("{}: cannot read it: {}", db.string(), ec.message()));
  }
  if (::access(db.c_str(), R_OK) != 0 && errno == EACCES) {
    throw DiffError(fmt::format("{}: cannot read it: {}", db.string(), std::strerror(errno)));
  }
  if (!fs::is_regular_file(db, ec)) {
    throw DiffError(
        fmt::format("{}: no capture.db there (capture the run with opscope run --capture, "
                    "--capture-mode=stats for every op of a long run; or profile both runs, --profile, to "
                    "compare their time, or check both, --memcheck, to compare their memory)",
                    run.string()));
  }
  return db;
}

// A row of tensor_stats as opscope writes it, or a DiffError naming the call: min, max and mean are of the
// finite elements, so finite numbers; L2 a number, finite below float64; the counts whole and not negative.
// A row that lies (an Inf min against a finite one would take the tolerance with it) is not compared.
void checkStatistics(sqlite3_stmt* s, const fs::path& path) {
  const auto number = [s](int column) {
    const int type = sqlite3_column_type(s, column);
    return type == SQLITE_FLOAT || type == SQLITE_INTEGER;
  };
  std::string wrong;
  for (const auto& [column, name] : {std::pair{10, "min"}, {11, "max"}, {12, "mean"}, {13, "L2"}}) {
    const double v = sqlite3_column_double(s, column);
    const bool may_be_infinite = column == 13 && columnText(s, 7) == "float64";
    if (!number(column) || std::isnan(v) || (std::isinf(v) && !may_be_infinite)) {
      wrong = fmt::format("{} {}", name, number(column) ? fmt::format("{}", v) : std::string("not a number"));
      break;
    }
  }
  for (const auto& [column, name] : {std::pair{9, "numel"}, {14, "NaN count"}, {15, "Inf count"}}) {
    if (!wrong.empty()) break;
    if (sqlite3_column_type(s, column) != SQLITE_INTEGER || sqlite3_column_int64(s, column) < 0)
      wrong = fmt::format("{} {}", name, printable(columnText(s, column)).substr(0, 40));
  }
  if (wrong.empty()) {
    const std::int64_t numel = sqlite3_column_int64(s, 9), nan = sqlite3_column_int64(s, 14);
    if (nan > numel || sqlite3_column_int64(s, 15) > numel - nan) wrong = "more NaN and Inf than elements";
  }
  if (!wrong.empty()) {
    throw DiffError(fmt::format(
        "{}: call {} {}: {} {}: statistics opscope does not write ({}): the capture.db is damaged or not "
        "opscope's",
        path.string(), sqlite3_column_int64(s, 1), printable(columnText(s, 2)).substr(0, 64),
        printable(columnText(s, 4)).substr(0, 16), printable(columnText(s, 6)).substr(0, 64), wrong));
  }
}

// A run read call by call in call order, with statistics (stats mode) or with its tensors (tensors mode: the
// captured calls' inputs and outputs). Only the call being read is held: two runs of millions of calls are
// compared side by side (diffRuns).
class RunReader {
 public:
  explicit RunReader(const fs::path& path) : path_(path) {
    try {
      db_ = std::make_unique<CaptureDb>(path);
      CaptureDb& db = *db_;
      const auto table = [&](const char* name) {
        bool has = false;
        db.query(fmt::format("SELECT count(*) FROM sqlite_master WHERE name = '{}' AND type = 'table'", name),
                 [&](sqlite3_stmt* s) { has = sqlite3_column_int64(s, 0) > 0; });
        return has;
      };
      bool has_stats = table("tensor_stats");
      // A capture in tensors mode has the table (every capture.db does), but no row in it.
      if (has_stats) {
        db.query("SELECT EXISTS (SELECT 1 FROM tensor_stats)",
                 [&](sqlite3_stmt* s) { has_stats = sqlite3_column_int64(s, 0) != 0; });
      }
      whole_ = !has_stats;
      // Where the program called each call (schema 4's sites; nothing in an older capture.db): untrusted
      // text, made printable and bounded. Sites are few (one per module and line), calls many.
      const bool has_sites = table("sites");
      if (has_sites) {
        db.query("SELECT site_id, module, source, forward_op FROM sites", [&](sqlite3_stmt* s) {
          sites_[sqlite3_column_int64(s, 0)] =
              printable(siteText(columnText(s, 1), columnText(s, 2), columnText(s, 3))).substr(0, 1000);
        });
      }
      // ops is the outer loop (CROSS JOIN), walked in call order by its index on seq, and each call's rows
      // come from the index on op_id: no sort of the whole capture. A call's tensors are ordered here.
      const std::string site = has_sites ? "o.site_id" : "NULL";
      rows_ = std::make_unique<CaptureDb::Rows>(db.rows(
          whole_ ? "SELECT o.op_id, o.seq, o.name, " + site +
                       ", r.role, r.arg_index, r.arg_name, r.dtype, r.shape, r.nbytes, r.blob_id, b.hash, "
                       "b.nbytes FROM ops o CROSS JOIN tensor_refs r ON r.op_id = o.op_id JOIN blobs b ON "
                       "b.blob_id = r.blob_id WHERE o.captured AND r.role IN ('input', 'output') ORDER BY "
                       "o.seq, o.op_id"
                 : "SELECT o.op_id, o.seq, o.name, " + site +
                       ", s.role, s.arg_index, s.arg_name, s.dtype, s.shape, s.numel, s.min, s.max, s.mean, "
                       "s.l2, s.nan, s.inf, s.checksum FROM ops o CROSS JOIN tensor_stats s ON s.op_id = "
                       "o.op_id ORDER BY o.seq, o.op_id"));
      pending_ = rows_->step();
      if (whole_ && !pending_) {
        throw DiffError(
            fmt::format("{}: neither statistics (tensor_stats) nor captured tensors in it: capture both runs "
                        "with opscope run --capture (--capture-mode=stats for every op of a long run)",
                        path.string()));
      }
    } catch (const DiffError&) {
      throw;
    } catch (const std::exception& e) {
      throw DiffError(fmt::format("{}: {}", path.string(), e.what()));
    }
  }

  bool whole() const { return whole_; }
  CaptureDb& db() { return *db_; }

  // The next call (false: the end). Throws DiffError naming the run.
  bool next(Call& call) {
    if (!pending_) return false;
    try {
      sqlite3_stmt* s = rows_->row();
      const std::int64_t op_id = sqlite3_column_int64(s, 0);
      call.seq = static_cast<std::uint64_t>(sqlite3_column_int64(s, 1));
      call.op = columnText(s, 2);
      call.site.clear();
      if (sqlite3_column_type(s, 3) == SQLITE_INTEGER) {
        if (const auto it = sites_.find(sqlite3_column_int64(s, 3)); it != sites_.end())
          call.site = it->second;
      }
      call.tensors.clear();
      do {
        call.tensors.push_back(whole_ ? wholeTensor(s) : statistics(s));
      } while ((pending_ = rows_->step()) && sqlite3_column_int64(s, 0) == op_id);
      std::sort(call.tensors.begin(), call.tensors.end(), [](const Tensor& x, const Tensor& y) {
        return std::tie(x.role, x.arg_index) < std::tie(y.role, y.arg_index);
      });
      ++calls_;
      return true;
    } catch (const DiffError&) {
      throw;
    } catch (const std::exception& e) {  // a database damaged in the middle: which run, after which call
      throw DiffError(fmt::format("{}: after {} calls: {}", path_.string(), calls_, e.what()));
    }
  }

 private:
  // Columns 4 on: role, arg_index, arg_name, dtype, shape, then the mode's own.
  Tensor statistics(sqlite3_stmt* s) const {
    checkStatistics(s, path_);
    auto integer = [s](int column) { return sqlite3_column_int64(s, column); };
    auto real = [s](int column) { return sqlite3_column_double(s, column); };
    return Tensor{.role = columnText(s, 4),
                  .name = columnText(s, 6),
                  .dtype = columnText(s, 7),
                  .shape = columnText(s, 8),
                  .checksum = columnText(s, 16),
                  .arg_index = integer(5),
                  .numel = integer(9),
                  .nan = integer(14),
                  .inf = integer(15),
                  .min = real(10),
                  .max = real(11),
                  .mean = real(12),
                  .l2 = real(13)};
  }

  static Tensor wholeTensor(sqlite3_stmt* s) {
    auto integer = [s](int column) { return sqlite3_column_int64(s, column); };
    const std::string dtype = columnText(s, 7);
    const std::size_t size = mlu::dtypeSize(mlu::dtypeOfName(dtype));
    const std::int64_t nbytes = integer(9);
    return Tensor{
        .role = columnText(s, 4),
        .name = columnText(s, 6),
        .dtype = dtype,
        .shape = columnText(s, 8),
        // The blob's content hash (XXH3-128's low half) and size: equal bytes, equal text; a blob
        // without a hash has none (its bytes are compared).
        .checksum = sqlite3_column_type(s, 11) == SQLITE_INTEGER
                        ? fmt::format("{:016x}/{}", static_cast<std::uint64_t>(integer(11)), integer(12))
                        : std::string(),
        .arg_index = integer(5),
        .numel = size > 0 && nbytes > 0 ? nbytes / static_cast<std::int64_t>(size) : 0,
        .blob = integer(10),
        .nbytes = nbytes};
  }

  fs::path path_;
  std::unique_ptr<CaptureDb> db_;
  std::unique_ptr<CaptureDb::Rows> rows_;
  std::unordered_map<std::int64_t, std::string> sites_;
  bool whole_ = false, pending_ = false;
  std::uint64_t calls_ = 0;
};

// A tensor's bytes (tensors mode), checked against the size its row gives.
std::vector<std::byte> bytesOf(CaptureDb& db, const Tensor& t, const std::string& where) {
  std::vector<std::byte> data;
  bool found = false;
  db.renewDeadline();
  try {
    db.query(fmt::format("SELECT data FROM blobs WHERE blob_id = {}", t.blob), [&](sqlite3_stmt* s) {
      const auto* p = static_cast<const std::byte*>(sqlite3_column_blob(s, 0));
      const int n = sqlite3_column_bytes(s, 0);
      if (p != nullptr && n > 0) data.assign(p, p + n);
      found = true;
    });
  } catch (const DiffError&) {
    throw;
  } catch (const std::exception& e) {  // a database damaged in the middle: which run, which call, why
    throw DiffError(fmt::format("{}: {} {} cannot be read: {}", where, t.role, t.name, e.what()));
  }
  const std::size_t size = mlu::dtypeSize(mlu::dtypeOfName(t.dtype));
  if (!found || size == 0 || data.size() != static_cast<std::size_t>(t.nbytes) || data.size() % size != 0) {
    throw DiffError(fmt::format("{}: {} {} has {} bytes of data where its row says {} of {}", where, t.role,
                                t.name, data.size(), t.nbytes, t.dtype));
  }
  return data;
}

// Auto-compare's default tolerance of a dtype by its name (opscope/tolerance.h); integers and bool exact.
Tolerance toleranceOf(const std::string& dtype) { return defaultTolerance(mlu::dtypeOfName(dtype)); }
Tolerance looser(Tolerance a, Tolerance b) { return {std::max(a.atol, b.atol), std::max(a.rtol, b.rtol)}; }
bool exact(Tolerance t) { return t.atol == 0 && t.rtol == 0; }

// How far two statistics of one tensor are apart, relative to the tensor's magnitude (its largest absolute
// value or RMS, whichever is larger: a mean near zero is not compared to itself).
double relative(double a, double b, double magnitude) {
  if (a == b) return 0;
  return magnitude > 0 ? std::fabs(a - b) / magnitude : kInfinity;
}

// The tolerance two tensors are compared at (floor: the loosest of two runs made in different floating
// dtypes, diffRuns), or nothing when they are not the same tensor: another shape, or one dtype floating and
// the other not (two floating dtypes, a float32 run against a bfloat16 one, are compared at the looser one's
// tolerance). Then `d` says why.
std::optional<Tolerance> comparable(const Tensor& a, const Tensor& b, Tolerance floor, TensorDifference& d) {
  d.tensor = a.role + " " + a.name;
  Tolerance tolerance = looser(toleranceOf(a.dtype), toleranceOf(b.dtype));
  if (!exact(tolerance)) tolerance = looser(tolerance, floor);
  if (a.shape != b.shape ||
      (a.dtype != b.dtype && (exact(toleranceOf(a.dtype)) || exact(toleranceOf(b.dtype))))) {
    d.what = fmt::format("{}{} vs {}{}", a.dtype, a.shape, b.dtype, b.shape);
    d.relative = kInfinity;
    d.diverges = true;
    return std::nullopt;
  }
  return tolerance;
}

// Two whole tensors (tensors mode) by auto-compare's metrics (compare/metrics.h) at the tolerance: they
// diverge when they are not allclose. Two dtypes are compared as float64 values.
TensorDifference compareWhole(CaptureDb& db_a, const Tensor& a, CaptureDb& db_b, const Tensor& b,
                              Tolerance floor, const std::string& where) {
  TensorDifference d;
  const std::optional<Tolerance> tolerance = comparable(a, b, floor, d);
  if (!tolerance) return d;
  const std::vector<std::byte> x = bytesOf(db_a, a, where + " in A"), y = bytesOf(db_b, b, where + " in B");
  const mluopDataType_t ta = mlu::dtypeOfName(a.dtype), tb = mlu::dtypeOfName(b.dtype);
  if (a.numel != b.numel) {
    d.what = fmt::format("{} vs {} elements", a.numel, b.numel);
    d.relative = kInfinity;
    d.diverges = true;
    return d;
  }
  compare::Metrics m;
  if (ta == tb) {
    m = compare::compareTensors(ta, x.data(), y.data(), a.numel, *tolerance);
  } else {
    std::vector<double> dx(static_cast<std::size_t>(a.numel)), dy(dx.size());
    for (std::size_t i = 0; i < dx.size(); ++i) {
      dx[i] = elementAsDouble(ta, x.data(), i);
      dy[i] = elementAsDouble(tb, y.data(), i);
    }
    m = compare::compareTensors(MLUOP_DTYPE_DOUBLE, dx.data(), dy.data(), a.numel, *tolerance);
  }
  d.diverges = !m.allclose;
  d.relative = m.max_rel_diff;
  d.what = fmt::format(
      "max_abs_diff {:.3g}, max_rel_diff {:.3g}, mismatch_ratio {:.3g}, cosine {:.9g}, NaN {} vs {} ({} "
      "tolerance {:g},{:g})",
      m.max_abs_diff, m.max_rel_diff, m.mismatch_ratio, m.cosine, m.dev_nan, m.ref_nan,
      a.dtype == b.dtype ? a.dtype : a.dtype + " vs " + b.dtype, tolerance->atol, tolerance->rtol);
  return d;
}

// Two tensors' statistics (stats mode).
TensorDifference compareTensor(const Tensor& a, const Tensor& b, Tolerance floor) {
  TensorDifference d;
  const std::optional<Tolerance> comparable_at = comparable(a, b, floor, d);
  if (!comparable_at) return d;
  const Tolerance tolerance = *comparable_at;
  const std::string dtypes = a.dtype == b.dtype ? a.dtype : a.dtype + " vs " + b.dtype;
  if (a.nan != b.nan || a.inf != b.inf) {
    d.what = fmt::format("NaN {} vs {}, Inf {} vs {}", a.nan, b.nan, a.inf, b.inf);
    d.relative = kInfinity;
    d.diverges = true;
    return d;
  }
  auto rms = [](const Tensor& t) {
    return t.numel > 0 ? t.l2 / std::sqrt(static_cast<double>(t.numel)) : 0.0;
  };
  const double magnitude =
      std::max({std::fabs(a.min), std::fabs(a.max), std::fabs(b.min), std::fabs(b.max), rms(a), rms(b)});
  d.relative = std::max({relative(a.min, b.min, magnitude), relative(a.max, b.max, magnitude),
                         relative(a.mean, b.mean, magnitude), relative(a.l2, b.l2, std::max(a.l2, b.l2))});
  // The dtype's tolerance as auto-compare applies it (atol and rtol): min, max and mean may
  // move by atol + rtol x the tensor's magnitude (as every element may), the L2 norm by rtol of itself (which
  // a planted 0.1 % error in 5 % of a tensor's elements exceeds, while float32 sums in another order do not).
  // Different bytes of an integer tensor are different values, whatever the statistics say.
  const double bound = tolerance.atol + tolerance.rtol * magnitude;
  d.diverges = exact(tolerance) || std::fabs(a.min - b.min) > bound || std::fabs(a.max - b.max) > bound ||
               std::fabs(a.mean - b.mean) > bound ||
               std::fabs(a.l2 - b.l2) > tolerance.rtol * std::max(a.l2, b.l2);
  d.what = fmt::format(
      "mean {:.6g} vs {:.6g}, L2 {:.6g} vs {:.6g}, min {:.6g} vs {:.6g}, max {:.6g} vs {:.6g} "
      "(relative {:.3g}; {} tolerance {:g},{:g})",
      a.mean, b.mean, a.l2, b.l2, a.min, b.min, a.max, b.max, d.relative, dtypes, tolerance.atol,
      tolerance.rtol);
  return d;
}

CallPair comparePair(const std::string& op, std::uint64_t call, const Call& a, const Call& b, Tolerance floor,
                     RunReader& run_a, RunReader& run_b) {
  CallPair p;
  p.op = op;
  p.call = call;
  p.seq_a = a.seq;
  p.seq_b = b.seq;
  p.site = a.site;
  auto key = [](const Tensor& t) { return std::make_pair(t.role, t.arg_index); };
  for (const Tensor& ta : a.tensors) {
    const auto tb =
        std::find_if(b.tensors.begin(), b.tensors.end(), [&](const Tensor& t) { return key(t) == key(ta); });
    if (tb == b.tensors.end()) {
      p.tensors.push_back({ta.role + " " + ta.name, "only in A", kInfinity, true});
    } else if (ta.checksum.empty() || ta.checksum != tb->checksum) {  // no checksum: not known equal
      p.tensors.push_back(run_a.whole() ? compareWhole(run_a.db(), ta, run_b.db(), *tb, floor,
                                                       fmt::format("{} call {}", op, call))
                                        : compareTensor(ta, *tb, floor));
    }
  }
  for (const Tensor& tb : b.tensors) {
    if (std::none_of(a.tensors.begin(), a.tensors.end(), [&](const Tensor& t) { return key(t) == key(tb); }))
      p.tensors.push_back({tb.role + " " + tb.name, "only in B", kInfinity, true});
  }
  for (const TensorDifference& t : p.tensors) {
    p.relative = std::max(p.relative, t.relative);
    p.diverges = p.diverges || t.diverges;
  }
  return p;
}

std::string relativeText(double r) { return std::isinf(r) ? std::string("—") : fmt::format("{:.3g}", r); }

// A run's calls in order, read on a thread of their own when `ahead` (statistics: the two runs are read at
// once, one core each) and handed over in batches; else read when asked (whole tensors, whose bytes the
// comparison reads through the same connection).
class CallSource {
 public:
  CallSource(RunReader& reader, bool ahead) : reader_(reader) {
    if (ahead) thread_ = std::thread([this] { readAhead(); });
  }
  CallSource(const CallSource&) = delete;
  CallSource& operator=(const CallSource&) = delete;
  ~CallSource() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // The next call (false: the end). Throws what the reader threw (DiffError).
  bool next(Call& call) {
    if (!thread_.joinable()) {
      if (!reader_.next(call)) return false;
      ++calls_;
      return true;
    }
    if (at_ == batch_.size()) {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return !ready_.empty() || done_; });
      if (ready_.empty()) {
        if (error_) std::rethrow_exception(error_);
        return false;
      }
      batch_ = std::move(ready_.front());
      ready_.pop_front();
      at_ = 0;
      cv_.notify_all();
    }
    call = std::move(batch_[at_++]);
    ++calls_;
    return true;
  }

  std::uint64_t calls() const { return calls_; }  // handed out so far

 private:
  static constexpr std::size_t kBatch = 512, kBatchesAhead = 4;

  void readAhead() {
    try {
      for (bool more = true; more;) {
        std::vector<Call> batch;
        batch.reserve(kBatch);
        Call call;
        while (batch.size() < kBatch && (more = reader_.next(call))) batch.push_back(std::move(call));
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return ready_.size() < kBatchesAhead || stop_; });
        if (stop_) return;
        if (!batch.empty()) ready_.push_back(std::move(batch));
        done_ = !more;
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      done_ = true;
      cv_.notify_all();
    }
  }

  RunReader& reader_;
  std::vector<Call> batch_;  // the consumer's
  std::size_t at_ = 0;
  std::uint64_t calls_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::vector<Call>> ready_;
  bool done_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // the last member: started when the others are
};

// The two runs read side by side, each op's calls of one run waiting for the same op's calls of the other:
// the k-th call of an op in A meets the k-th in B, and what is held is only what one run is ahead of the
// other (nothing, when both made the same calls in the same order).
class Aligner {
 public:
  Aligner(RunReader& a, RunReader& b, std::size_t top, std::optional<Tolerance> fixed_floor)
      : a_(a),
        b_(b),
        calls_a_(a, !a.whole()),
        calls_b_(b, !b.whole()),
        top_(top),
        floor_(fixed_floor.value_or(Tolerance{})),
        fixed_(fixed_floor.has_value()) {}

  void run(RunDiff& d) {
    bool done_a = false, done_b = false;
    Call call;
    while (!done_a || !done_b) {
      // The run that is behind reads: the two stay within a call of each other where they agree.
      const bool from_a = !done_a && (done_b || calls_a_.calls() <= calls_b_.calls());
      if (!(from_a ? calls_a_.next(call) : calls_b_.next(call))) {
        (from_a ? done_a : done_b) = true;
        // The other run's waiting calls will meet nothing now: only their count is kept.
        for (auto& [op, waiting] : ops_) (from_a ? waiting.b : waiting.a).clear();
        continue;
      }
      Waiting& w = ops_[call.op];
      ++(from_a ? w.count_a : w.count_b);
      std::deque<Call>& theirs = from_a ? w.b : w.a;
      if (!theirs.empty()) {
        const Call other = std::move(theirs.front());
        theirs.pop_front();
        pair(from_a ? call : other, from_a ? other : call, ++w.pairs, d);
      } else if (!(from_a ? done_b : done_a)) {
        (from_a ? w.a : w.b).push_back(std::move(call));
      }
    }
    for (const auto& [op, w] : ops_) {
      if (w.count_a != w.count_b) d.only[op] = {w.count_a - w.pairs, w.count_b - w.pairs};
    }
    d.calls_a = calls_a_.calls();
    d.calls_b = calls_b_.calls();
    d.diverging = diverging_;
    d.first = std::move(first_);
    trim(top_);
    d.largest = std::move(largest_);
  }

  // Whether a pair was judged at a tighter floor than the one the whole diff ends with.
  bool judgedTooTight() const { return judged_too_tight_; }
  Tolerance floor() const { return floor_; }

 private:
  struct Waiting {
    std::deque<Call> a, b;
    std::uint64_t count_a = 0, count_b = 0, pairs = 0;
  };

  void pair(const Call& a, const Call& b, std::uint64_t k, RunDiff& d) {
    // Two runs made in different floating dtypes (float32 against bfloat16) are judged, every floating
    // tensor, at the looser dtype's tolerance: a float32 tensor of the bfloat16 run (a loss's logits, a
    // norm's rstd) inherits the rounding of the bfloat16 tensors it was computed from. The floor is that of
    // every aligned pair: a pair judged before it loosened is judged again (diffRuns).
    if (!fixed_) {
      for (const Tensor& ta : a.tensors) {
        for (const Tensor& tb : b.tensors) {
          if (ta.role == tb.role && ta.arg_index == tb.arg_index && ta.dtype != tb.dtype) {
            const Tolerance looser_floor =
                looser(floor_, looser(toleranceOf(ta.dtype), toleranceOf(tb.dtype)));
            if (looser_floor.atol != floor_.atol || looser_floor.rtol != floor_.rtol) {
              judged_too_tight_ = judged_too_tight_ || judged_ > 0;
              floor_ = looser_floor;
            }
          }
        }
      }
    }
    CallPair p = comparePair(a.op, k, a, b, floor_, a_, b_);
    ++d.aligned;
    if (p.tensors.empty()) {
      ++d.identical;
      return;
    }
    ++judged_;
    if (!p.diverges) return;
    ++diverging_;
    if (!first_ || p.seq_a < first_->seq_a) first_ = p;
    largest_.push_back(std::move(p));
    if (largest_.size() >= 2 * top_ + 1024) trim(top_);
  }

  // The `top` largest divergences, largest first (ties: by op and call).
  void trim(std::size_t top) {
    const auto larger = [](const CallPair& x, const CallPair& y) {
      if (x.relative != y.relative) return x.relative > y.relative;
      return std::tie(x.op, x.call) < std::tie(y.op, y.call);
    };
    const std::size_t keep = std::min(top, largest_.size());
    std::partial_sort(largest_.begin(), largest_.begin() + static_cast<std::ptrdiff_t>(keep), largest_.end(),
                      larger);
    largest_.resize(keep);
  }

  RunReader &a_, &b_;
  CallSource calls_a_, calls_b_;
  std::size_t top_;
  Tolerance floor_;
  bool fixed_;
  bool judged_too_tight_ = false;
  std::uint64_t judged_ = 0, diverging_ = 0;
  std::unordered_map<std::string, Waiting> ops_;
  std::optional<CallPair> first_;
  std::vector<CallPair> largest_;
};

}  // namespace

RunDiff diffRuns(const fs::path& a, const fs::path& b, std::size_t top) {
  const fs::path db_a = databaseOf(a), db_b = databaseOf(b);
  auto compare = [&](std::optional<Tolerance> floor) {
    RunDiff d;
    d.run_a = db_a.string();
    d.run_b = db_b.string();
    RunReader run_a(db_a), run_b(db_b);
    if (run_a.whole() != run_b.whole()) {
      throw DiffError(fmt::format(
          "{} holds {} and {} {}: capture both runs the same way (both --capture-mode=stats, or both whole "
          "tensors)",
          d.run_a, run_a.whole() ? "whole tensors" : "statistics", d.run_b,
          run_b.whole() ? "whole tensors" : "statistics"));
    }
    d.whole = run_a.whole();
    Aligner aligner(run_a, run_b, top, floor);
    aligner.run(d);
    return std::pair{std::move(d), aligner.judgedTooTight() ? std::optional(aligner.floor()) : std::nullopt};
  };
  auto [d, floor] = compare(std::nullopt);
  // Runs in two dtypes whose floor loosened after a pair was judged at a tighter one (rare: the first
  // pair in two dtypes usually comes first): read both again at the floor of every pair.
  if (floor) d = compare(floor).first;
  return d;
}

std::string renderDiff(const RunDiff& d) {
  std::string out;
  auto it = std::back_inserter(out);
  const char* calls = d.whole ? "captured calls" : "calls with statistics";
  fmt::format_to(it, "opscope diff\n  A: {} ({} {})\n  B: {} ({} {})\n", d.run_a, d.calls_a, calls, d.run_b,
                 d.calls_b, calls);
  fmt::format_to(it, "  aligned by op name and call order: {} pairs, {} bit-identical, {} diverging\n",
                 d.aligned, d.identical, d.diverging);
  for (const auto& [op, counts] : d.only) {
    fmt::format_to(it, "  {}: {} calls only in {}\n", op, counts.first > 0 ? counts.first : counts.second,
                   counts.first > 0 ? "A" : "B");
  }
  if (!d.first) {
    out += d.only.empty() ? "no divergence: every aligned call is within its dtype's tolerance\n"
                          : "no divergence in the aligned calls (but the runs' calls differ, above)\n";
    return out;
  }
  const CallPair& f = *d.first;
  fmt::format_to(it, "first divergence: {} call {} (A #{}, B #{}){}\n", f.op, f.call, f.seq_a, f.seq_b,
                 f.site.empty() ? "" : "\n  in " + f.site);
  for (const TensorDifference& t : f.tensors) {
    if (t.diverges) fmt::format_to(it, "  {}: {}\n", t.tensor, t.what);
  }
  fmt::format_to(it, "largest divergences:\n  {:>10} {:<28} {:>6} {:>8} {:>8}  {}\n", "relative", "op",
                 "call", "A seq", "B seq", "tensor");
  for (const CallPair& p : d.largest) {
    std::string tensors;
    for (const TensorDifference& t : p.tensors) {
      if (t.diverges) tensors += (tensors.empty() ? "" : ", ") + t.tensor;
    }
    fmt::format_to(it, "  {:>10} {:<28} {:>6} {:>8} {:>8}  {}\n", relativeText(p.relative), p.op, p.call,
                   p.seq_a, p.seq_b, tensors);
  }
  return out;
}

std::string renderDiffHtml(const RunDiff& d, std::string_view style, std::string_view more) {
  std::string out;
  auto it = std::back_inserter(out);
  const char* calls = d.whole ? "captured calls" : "calls with statistics";
  fmt::format_to(
      it,
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta "
      "name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>opscope diff</title>\n{}\n"
      "</head>\n<body>\n<nav id=\"nav\"><div class=\"in\"><span class=\"brand\">opscope diff</span><a "
      "href=\"#verdict\">Verdict</a><a href=\"#only\">Only one run</a><a href=\"#largest\">Largest "
      "divergences</a></div></nav>\n<main>\n<header><h1>Where two runs differ</h1>\n"
      "<p class=\"sub\">A: <code>{}</code> ({} {})<br>B: <code>{}</code> ({} {})</p></header>\n",
      style, escapeHtml(d.run_a), d.calls_a, calls, escapeHtml(d.run_b), d.calls_b, calls);
  // The verdict: the first divergence, or none.
  out += "<section id=\"verdict\"><h2>Verdict</h2>\n";
  if (d.first) {
    const CallPair& f = *d.first;
    fmt::format_to(it,
                   "<div class=\"banner bad\"><div class=\"headline\">First divergence: {} call {} (A #{}, B "
                   "#{}){}</div><ul>",
                   escapeHtml(f.op), f.call, f.seq_a, f.seq_b,
                   f.site.empty() ? "" : " in " + escapeHtml(f.site));
    for (const TensorDifference& t : f.tensors) {
      if (t.diverges)
        fmt::format_to(it, "<li class=\"bad\"><b>{}</b>: {}</li>", escapeHtml(t.tensor), escapeHtml(t.what));
    }
    out += "</ul></div>\n";
  } else {
    fmt::format_to(it, "<div class=\"banner {}\"><div class=\"headline\">{}</div></div>\n",
                   d.only.empty() ? "good" : "warn",
                   d.only.empty() ? "No divergence: every aligned call is within its dtype's tolerance"
                                  : "No divergence in the aligned calls (but the runs' calls differ)");
  }
  fmt::format_to(it,
                 "<div class=\"tiles\"><div class=\"tile\"><div class=\"v\">{}</div><div class=\"l\">pairs "
                 "aligned by op name and call order</div></div><div class=\"tile good\"><div "
                 "class=\"v\">{}</div><div class=\"l\">bit-identical</div></div><div class=\"tile{}\"><div "
                 "class=\"v\">{}</div><div class=\"l\">diverging</div></div><div class=\"tile{}\"><div "
                 "class=\"v\">{}</div><div class=\"l\">ops with calls only one run made</div></div></div>\n",
                 d.aligned, d.identical, d.diverging > 0 ? " bad" : "", d.diverging,
                 d.only.empty() ? "" : " warn", d.only.size());
  out +=
      "<p class=\"note\">The k-th call of an op in one run is paired with the k-th call of that op in the "
      "other; ";
  out += d.whole
             ? "tensors that are not bit-identical are compared by auto-compare's metrics at their dtype's "
               "tolerance (a pair diverges when it is not allclose).</p>\n"
             : "tensors whose checksums differ are compared by their statistics at their dtype's "
               "tolerance.</p>\n";
  out += "</section>\n<section id=\"only\"><h2>Only one run</h2>\n";
  if (d.only.empty()) {
    out += "<p class=\"missing\">Both runs made the same number of calls of every op.</p>\n";
  } else {
    out +=
        "<div class=\"scroll\"><table class=\"data compact\"><thead><tr><th>op</th><th class=\"num\">calls "
        "only in A</th><th class=\"num\">calls only in B</th></tr></thead><tbody>\n";
    for (const auto& [op, counts] : d.only) {
      fmt::format_to(it,
                     "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                     escapeHtml(op), counts.first, counts.second);
    }
    out += "</tbody></table></div>\n";
  }
  out += "</section>\n<section id=\"largest\"><h2>Largest divergences</h2>\n";
  if (d.largest.empty()) {
    out += "<p class=\"missing\">No aligned call diverges.</p>\n";
  } else {
    out +=
        "<div class=\"scroll\"><table class=\"data accuracy\"><thead><tr><th "
        "class=\"num\">relative</th><th>op</th>"
        "<th class=\"num\">call</th><th class=\"num\">A seq</th><th class=\"num\">B seq</th><th>tensor</th>"
        "<th>difference</th></tr></thead><tbody>\n";
    for (const CallPair& p : d.largest) {
      for (const TensorDifference& t : p.tensors) {
        if (!t.diverges) continue;
        fmt::format_to(
            it,
            "<tr class=\"fail\"><td class=\"num\">{}</td><td><code>{}</code></td><td "
            "class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td "
            "class=\"text\">{}</td></tr>\n",
            relativeText(t.relative), escapeHtml(p.op), p.call, p.seq_a, p.seq_b, escapeHtml(t.tensor),
            escapeHtml(t.what));
      }
    }
    out += "</tbody></table></div>\n";
  }
  out += "</section>\n";
  out += more;
  out += "</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace opscope::analysis
