#include "rank_consistency.h"
#include "ticker.h"

#include <opscope/bytes.h>
#include <opscope/consistency.h>
#include <opscope/private_file.h>
#include <opscope/rundb/capture_args.h>
#include <opscope/rundb/writer.h>
#include <opscope/tensor_snapshot.h>

#include <mlu/op_args.h>

#include <fmt/format.h>
#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace opscope::recorder {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using rundb::CapturedOp;
using rundb::TensorRecord;

// How often the ranks' files are read and compared.
constexpr auto kPoll = std::chrono::milliseconds(20);
// The steps whose optimizer calls are kept at most (the oldest let go first): the ranks run in step with
// each other through their all-reduces, so the comparison is normally one step behind.
constexpr std::size_t kKeepSteps = 4;
// A rank's records held for comparison at most (about 16 MiB; a rank whose peers never write theirs is no
// longer read past it).
constexpr std::size_t kMaxHeldRecords = std::size_t{1} << 16;
// How much of a rank's file one poll reads at most.
constexpr std::size_t kReadChunk = std::size_t{4} << 20;

struct Planned {
  TensorRecord record;
  mlu::TensorView view;
};

// The tensors of args that the op reads (inputs) or writes (!inputs), to be copied on the queue.
template <typename Args>
std::vector<Planned> plan(const Args& args, bool inputs) {
  std::vector<Planned> out;
  int index = 0;
  args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
    const int arg_index = index++;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
      if (!value.present || (inputs ? !meta.reads() : !meta.writes())) return;
      out.push_back(
          {rundb::tensorRecord(inputs ? "input" : "output", arg_index, meta.name, value, {}), value});
    }
  });
  return out;
}

// A host function running work left for its queue (owned by it).
void runWork(void* data) {
  std::unique_ptr<RankConsistency::Work>(static_cast<RankConsistency::Work*>(data))->run();
}

// Work put on queue in a host function of its own; run here once the queue is idle when the runtime refuses
// one.
void launchWork(mlurtQueue_t queue, std::unique_ptr<RankConsistency::Work> work) {
  if (!work) return;
  if (mlurtLaunchHostFunc(queue, &runWork, work.get()) == MLURT_SUCCESS) {
    work.release();
  } else {
    mlurtQueueSync(queue);
    work->run();
  }
}

}  // namespace

struct RankConsistency::Impl : std::enable_shared_from_this<RankConsistency::Impl> {
  // An optimizer call kept: its inputs, copied on its queue right before it ran, and its outputs' records
  // without data (each output is an input of the same parameter's next call: read from there when needed,
  // which halves the copying).
  struct KeptCall {
    CapturedOp op;                      // with its inputs
    std::vector<TensorRecord> outputs;  // without data
    const void* param = nullptr;        // the parameter's device address
  };
  // A call being kept: planned on the calling thread, copied and stored by host functions on its queue.
  struct KeepJob {
    std::shared_ptr<Impl> impl;
    KeptCall call;
    std::vector<Planned> inputs;
    consistency::Key key{-1, -1};  // its parameters' record
    std::string op;                // the op's name, for the record
    std::string where;             // where in the program it ran (consistency::Record::where)
    std::size_t param_bytes = 0;
    bool ok = true;  // false: a copy failed, or the call did
  };
  // The first difference, once found, until this rank's call of it is written: that needs the same
  // parameter's next call, whose inputs are the call's outputs.
  struct Awaiting {
    consistency::Difference difference;
    std::string hash;  // this rank's hash of the record
  };
  // A buffer to hash once its queue gets there.
  struct HashJob {
    std::shared_ptr<Impl> impl;
    consistency::Key key;
    const char* kind = "";
    std::string op;
    std::string where;
    std::uint64_t seq = 0;
    const void* data = nullptr;
    std::size_t bytes = 0;
  };
  // Work left for a queue: it must run there after what is queued so far (the parameters' hash of an
  // optimizer call that has run, an all-reduce's result hash), and it rides on the next host function put on
  // that queue anyway (the next optimizer call's copy, the flight recorder's marks around a collective), so
  // that calls in a row share one: each host function is a task of the queue, which on a loaded machine
  // (ranks sharing cores) costs more than the work in it. Queued on its own before any other op or runtime
  // call of the program, and at each step's end.
  struct Deferred final : RankConsistency::Work {
    std::vector<std::unique_ptr<HashJob>> hashes;
    std::vector<std::unique_ptr<KeepJob>> finishes;  // their parameters hashed, the calls stored
    std::vector<std::pair<const void*, std::size_t>> reads;
    KeepJob* copy = nullptr;  // then the next optimizer call's inputs copied (its job owned elsewhere)
    bool ran = false;

    Deferred() = default;
    Deferred(const Deferred&) = delete;
    Deferred& operator=(const Deferred&) = delete;
    ~Deferred() override {
      if (ran) return;
      // Never run (its queue went away): what it was counted for given back.
      for (const auto& h : hashes) h->impl->pending.fetch_sub(1, std::memory_order_release);
      for (const auto& f : finishes)
        if (f->key.first >= 0) f->impl->pending.fetch_sub(1, std::memory_order_release);
    }
    void run() override {
      ran = true;
      for (auto& h : hashes) hashBuffer(h.release());
      for (auto& f : finishes) finishOptimizer(f.release());
      if (copy != nullptr) copyInputs(copy);
    }
    bool reads_from(const void* data, std::size_t bytes) const {
      return std::any_of(reads.begin(), reads.end(),
                         [&](const auto& r) { return bytesOverlap(r.first, r.second, data, bytes); });
    }
  };

  // Another rank's consistency.jsonl (this rank's too), as read so far.
  struct Peer {
    fs::path path;
    std::uintmax_t offset = 0;
    consistency::LineSplitter lines;
    consistency::Records records;
    std::map<std::int64_t, std::int64_t> ends;  // step -> its records
    bool given_up = false;
  };

  RunInfo run;
  fs::path folder;
  std::string path;

  // consistency.jsonl
  std::mutex log_mutex;
  UniqueFile file;
  std::atomic<std::int64_t> pending{0};  // hashes queued, not written yet

  std::mutex step_mutex;  // guards step and index
  std::int64_t step = 0;
  std::int64_t index = 0;

  // The optimizer calls kept, by their parameters' record.
  std::mutex keep_mutex;
  std::map<consistency::Key, KeptCall> kept;
  // The memory of calls let go, by capacity, for the next copies (fresh memory would be mapped and faulted
  // in for every tensor of every step). At most what kKeepSteps steps keep.
  std::multimap<std::size_t, Bytes> spare;
  std::int64_t let_go_through = -1;     // the last step whose calls were let go uncompared
  std::atomic<bool> keeping{true};      // false once the call of the difference is written (or at exit)
  std::int64_t keep_until = INT64_MAX;  // the last step whose calls are kept (the difference's next)

  // The comparison (the exchange thread; finish() once it has stopped).
  std::vector<Peer> peers;
  std::int64_t next_step = 0;
  bool differed = false;
  std::optional<Awaiting> awaiting;
  mutable std::mutex findings_mutex;
  json found = nullptr;

  Ticker exchange;
  bool exchanging = false;  // set once, before any op is seen

  // The work left for each queue.
  std::mutex deferred_mutex;
  std::map<mlurtQueue_t, std::unique_ptr<Deferred>> deferred;
  std::atomic<bool> any_deferred{false};

  Deferred& deferredFor(mlurtQueue_t queue) {  // under deferred_mutex
    std::unique_ptr<Deferred>& d = deferred[queue];
    if (!d) d = std::make_unique<Deferred>();
    any_deferred.store(true, std::memory_order_relaxed);
    return *d;
  }
  std::unique_ptr<Deferred> take(mlurtQueue_t queue) {
    std::lock_guard lock(deferred_mutex);
    const auto it = deferred.find(queue);
    if (it == deferred.end()) return nullptr;
    std::unique_ptr<Deferred> d = std::move(it->second);
    deferred.erase(it);
    any_deferred.store(!deferred.empty(), std::memory_order_relaxed);
    return d;
  }
  void defer(mlurtQueue_t queue, std::unique_ptr<HashJob> job) {
    std::lock_guard lock(deferred_mutex);
    Deferred& d = deferredFor(queue);
    d.reads.emplace_back(job->data, job->bytes);
    d.hashes.push_back(std::move(job));
  }
  void defer(mlurtQueue_t queue, std::unique_ptr<KeepJob> job) {
    std::lock_guard lock(deferred_mutex);
    Deferred& d = deferredFor(queue);
    d.reads.emplace_back(job->call.param, job->param_bytes);
    d.finishes.push_back(std::move(job));
  }
  void flush(mlurtQueue_t queue) {
    if (any_deferred.load(std::memory_order_relaxed)) launchWork(queue, take(queue));
  }
  void flushAll() {
    if (!any_deferred.load(std::memory_order_relaxed)) return;
    std::map<mlurtQueue_t, std::unique_ptr<Deferred>> all;
    {
      std::lock_guard lock(deferred_mutex);
      all.swap(deferred);
      any_deferred.store(false, std::memory_order_relaxed);
    }
    for (auto& [queue, work] : all) launchWork(queue, std::move(work));
  }

  explicit Impl(const RunInfo& r) : run(r), path(r.result_dir + "/" + std::string(consistency::kFile)) {
    file = createPrivateFile(path);
    if (!file) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    std::fputs(consistency::headerLine().c_str(), file.get());
    if (!r.run_folder.empty()) folder = fs::path(r.result_dir).parent_path();
  }

  void start() {
    if (run.world_size <= 1 || run.rank < 0 || run.rank >= run.world_size || folder.empty())
      return;  // nobody to compare with
    peers.resize(static_cast<std::size_t>(run.world_size));
    peers[static_cast<std::size_t>(run.rank)].path = path;
    exchange.start("rank consistency", kPoll, [this] { poll(); });
    exchanging = true;
  }

  // A line into consistency.jsonl. The other ranks read it while the run goes on: a step's end is flushed at
  // once, the hashes (written by the queues, maybe after their step's end) by the exchange's next tick.
  void writeLine(const std::string& line, bool flush) {
    std::lock_guard lock(log_mutex);
    if (!file) return;
    std::fputs(line.c_str(), file.get());
    if (flush) std::fflush(file.get());
  }
  void flushLines() {
    std::lock_guard lock(log_mutex);
    if (file) std::fflush(file.get());
  }

  consistency::Key nextKey() {
    std::lock_guard lock(step_mutex);
    return {step, index++};
  }

  // Hashes data[0, bytes) into the record key of consistency.jsonl.
  void writeRecord(consistency::Key key, const char* kind, const std::string& op, const std::string& where,
                   std::uint64_t seq, const void* data, std::size_t bytes) {
    const std::string hash = fmt::format("{:016x}", XXH3_64bits(data, bytes));
    writeLine(consistency::recordLine(key.first, key.second, kind, op, where, seq, bytes, hash), false);
    pending.fetch_sub(1, std::memory_order_release);
  }

  static void hashBuffer(void* data) {
    const std::unique_ptr<HashJob> j(static_cast<HashJob*>(data));
    j->impl->writeRecord(j->key, j->kind, j->op, j->where, j->seq, j->data, j->bytes);
  }

  // Hashes data[0, bytes) on queue after the work queued so far, as the step's next record (left for the
  // queue's next host function).
  void queueHash(mlurtQueue_t queue, const char* kind, std::string op, std::string where, std::uint64_t seq,
                 const void* data, std::size_t bytes) {
    auto job = std::make_unique<HashJob>(
        HashJob{shared_from_this(), nextKey(), kind, std::move(op), std::move(where), seq, data, bytes});
    pending.fetch_add(1, std::memory_order_relaxed);
    defer(queue, std::move(job));
  }

  Bytes buffer(std::size_t bytes) {
    std::lock_guard lock(keep_mutex);
    const auto it = spare.lower_bound(bytes);  // the smallest that holds it
    if (it == spare.end()) return {};
    Bytes b = std::move(it->second);
    spare.erase(it);
    return b;
  }

  void recycle(KeptCall& call) {  // under keep_mutex
    for (TensorRecord& t : call.op.tensors)
      if (t.data.capacity() > 0) spare.emplace(t.data.capacity(), std::move(t.data));
  }

  void copy(std::vector<Planned>& tensors, CapturedOp& op) {
    for (Planned& t : tensors) {
      const std::size_t bytes = static_cast<std::size_t>(t.view.numel()) * t.view.elementSize();
      t.record.data = packTensor(t.view, t.view.data, buffer(bytes), CopyStores::kStreaming);
      op.tensors.push_back(std::move(t.record));
    }
  }

  static void copyInputs(void* data) {
    auto* job = static_cast<KeepJob*>(data);
    try {
      job->impl->copy(job->inputs, job->call.op);
    } catch (const std::exception&) {
      job->ok = false;
    }
  }

  // Behind the call: its parameters hashed (their record), the call kept under that record.
  static void finishOptimizer(void* data) {
    std::unique_ptr<KeepJob> job(static_cast<KeepJob*>(data));
    Impl& self = *job->impl;
    if (job->key.first < 0) return;
    self.writeRecord(job->key, "param", job->op, job->where, job->call.op.seq, job->call.param,
                     job->param_bytes);
    if (job->ok) self.store(job->key, std::move(job->call));
  }

  void store(consistency::Key key, KeptCall call) {
    std::lock_guard lock(keep_mutex);
    if (!keeping.load(std::memory_order_acquire) || key.first > keep_until) return recycle(call);
    kept[key] = std::move(call);
    // The oldest steps let go past kKeepSteps.
    std::vector<std::int64_t> steps;
    for (const auto& entry : kept)
      if (steps.empty() || steps.back() != entry.first.first) steps.push_back(entry.first.first);
    if (steps.size() <= kKeepSteps) return;
    const std::int64_t oldest = steps.front();
    for (auto it = kept.begin(); it != kept.end() && it->first.first == oldest;) {
      recycle(it->second);
      it = kept.erase(it);
    }
    let_go_through = std::max(let_go_through, oldest);
  }

  // The calls of the steps up to `through` let go (compared, alike).
  void release(std::int64_t through) {
    std::lock_guard lock(keep_mutex);
    for (auto it = kept.begin(); it != kept.end() && it->first.first <= through;) {
      recycle(it->second);
      it = kept.erase(it);
    }
  }

  // ---- the exchange: the ranks' files read and compared

  void poll() {
    flushLines();
    if (awaiting) writeAwaited(false);
    if (differed) return;
    locatePeers();
    for (Peer& p : peers) readPeer(p);
    compareSteps();
  }

  // The other ranks' files: <run folder>/<stamp>-rank<R>-<pid>-<XXXXXX>/consistency.jsonl.
  void locatePeers() {
    if (std::none_of(peers.begin(), peers.end(), [](const Peer& p) { return p.path.empty(); })) return;
    std::error_code ec;
    for (const fs::directory_entry& d : fs::directory_iterator(folder, ec)) {
      const std::string name = d.path().filename().string();
      const std::size_t at = name.find("-rank");
      if (at == std::string::npos || !d.is_directory(ec) || d.is_symlink(ec)) continue;
      char* end = nullptr;
      const long r = std::strtol(name.c_str() + at + 5, &end, 10);
      if (end == name.c_str() + at + 5 || *end != '-' || r < 0 || r >= run.world_size) continue;
      Peer& p = peers[static_cast<std::size_t>(r)];
      const fs::path file = d.path() / consistency::kFile;
      if (p.path.empty() && fs::is_regular_file(fs::symlink_status(file, ec)) && sameJob(d.path()))
        p.path = file;
    }
  }

  // Whether the rank directory dir is of this rank's job (its run.json's "job"; the folder may hold an
  // earlier job's ranks, or another job's running now). Not yet known (no run.json yet): not now.
  bool sameJob(const fs::path& dir) const {
    if (run.job.empty()) return true;
    std::error_code ec;
    const fs::path file = dir / "run.json";
    if (!fs::is_regular_file(fs::symlink_status(file, ec)) || fs::file_size(file, ec) > (1u << 20))
      return false;
    std::ifstream in(file, std::ios::binary);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    return j.is_object() && j.contains("job") && j["job"].is_string() &&
           j["job"].get<std::string>() == run.job;
  }

  // What the rank wrote since the last poll: whole lines parsed, the records of steps not compared yet held.
  void readPeer(Peer& p) {
    if (p.path.empty() || p.given_up) return;
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(p.path, ec);
    if (ec || size <= p.offset) return;  // nothing new (or the file shrank: not ours to follow)
    std::ifstream in(p.path, std::ios::binary);
    if (!in) return;
    in.seekg(static_cast<std::streamoff>(p.offset));
    std::string chunk(static_cast<std::size_t>(std::min<std::uintmax_t>(size - p.offset, kReadChunk)), '\0');
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<std::size_t>(in.gcount()));
    p.offset += chunk.size();
    p.lines.feed(chunk, [&](std::string_view line) { take(p, line); });
  }

  void take(Peer& p, std::string_view line) {
    auto parsed = consistency::parseLine(line);
    if (auto* r = std::get_if<consistency::Record>(&parsed)) {
      if (r->step < next_step) return;
      if (p.records.size() >= kMaxHeldRecords) {
        p.given_up = true;
        std::fprintf(stderr, "opscope: rank consistency: %s: over %zu records not compared; no longer read\n",
                     p.path.string().c_str(), kMaxHeldRecords);
        return;
      }
      const consistency::Key key{r->step, r->index};
      p.records[key] = std::move(*r);
    } else if (auto* e = std::get_if<consistency::StepEnd>(&parsed)) {
      p.ends[e->step] = e->records;
    } else if (auto* h = std::get_if<consistency::Header>(&parsed);
               h && h->format_version > consistency::kFormatVersion) {
      p.given_up = true;
      std::fprintf(
          stderr,
          "opscope: rank consistency: %s is in format version %lld, newer than this opscope reads (%lld): "
          "not compared\n",
          p.path.string().c_str(), static_cast<long long>(h->format_version),
          static_cast<long long>(consistency::kFormatVersion));
    }
  }

  // Whether rank p has written step s whole: its end line and as many records as that says.
  bool complete(const Peer& p, std::int64_t s) const {
    const auto end = p.ends.find(s);
    if (end == p.ends.end()) return false;
    const auto first = p.records.lower_bound({s, 0});
    const auto last = p.records.lower_bound({s + 1, 0});
    return std::distance(first, last) >= end->second;
  }

  void compareSteps() {
    while (!differed) {
      const std::int64_t s = next_step;
      if (!std::all_of(peers.begin(), peers.end(), [&](const Peer& p) { return complete(p, s); })) return;
      std::vector<consistency::Records> of_step(peers.size());
      std::vector<std::pair<int, const consistency::Records*>> ranks;
      for (std::size_t r = 0; r < peers.size(); ++r) {
        auto& held = peers[r].records;
        const auto first = held.lower_bound({s, 0}), last = held.lower_bound({s + 1, 0});
        of_step[r].insert(std::make_move_iterator(first), std::make_move_iterator(last));
        held.erase(first, last);
        peers[r].ends.erase(s);
        ranks.emplace_back(static_cast<int>(r), &of_step[r]);
      }
      const consistency::Comparison c = consistency::compare(ranks);
      if (c.first) {
        differed = true;
        const auto mine =
            of_step[static_cast<std::size_t>(run.rank)].find({c.first->record.step, c.first->record.index});
        {
          std::lock_guard lock(keep_mutex);
          keep_until = c.first->record.step + 1;
        }
        awaiting = Awaiting{
            *c.first, mine != of_step[static_cast<std::size_t>(run.rank)].end() ? mine->second.hash : ""};
        writeAwaited(false);
        return;
      }
      release(s);
      ++next_step;
    }
  }

  // The first difference: this rank's call of it written for op-replay (once the same parameter's next call
  // is kept too, unless `final`), a line on stderr, the findings.
  void writeAwaited(bool final) {
    const consistency::Difference& d = awaiting->difference;
    const consistency::Key key{d.record.step, d.record.index};
    std::optional<CapturedOp> call;
    std::string why, outputs_why;
    {
      std::lock_guard lock(keep_mutex);
      const auto it = kept.find(key);
      const KeptCall* next = nullptr;
      if (it != kept.end()) {
        for (auto n = kept.lower_bound({key.first + 1, 0});
             n != kept.end() && n->first.first == key.first + 1; ++n)
          if (n->second.param == it->second.param && n->second.op.op == it->second.op.op) next = &n->second;
        if (next == nullptr && !final) return;  // not run yet
        call = std::move(it->second.op);
        if (next == nullptr) {
          outputs_why = "the run ended before the parameters' next update, which holds them";
        } else if (!sameParameters(*next, awaiting->hash)) {
          outputs_why = "the parameters changed between their two updates";
        } else {
          for (TensorRecord out : it->second.outputs) {
            for (const TensorRecord& in : next->op.tensors) {
              if (in.arg_index != out.arg_index) continue;
              out.data.assign(in.data.begin(), in.data.end());
              call->tensors.push_back(std::move(out));
              break;
            }
          }
        }
      } else if (d.record.kind != "param") {
        why = "an all-reduce's result is not kept (capture the run with OP_CAPTURE=1 to have it)";
      } else if (d.record.step <= let_go_through) {
        why = fmt::format("the call was let go: the ranks' comparison fell more than {} steps behind",
                          kKeepSteps);
      } else {
        why = "the call was not kept (not a contiguous parameter, or it failed)";
      }
      keeping.store(false, std::memory_order_release);
      kept.clear();
      spare.clear();
    }
    std::string kept_file;
    if (call) {
      const std::string db = run.result_dir + "/consistency_capture.db";
      try {
        auto writer = rundb::CaptureWriter::open(db, rundb::runRecord(run, {{"OP_RANK_CONSISTENCY", "1"}}),
                                                 std::uint64_t{1} << 40, 0);
        writer->submit(std::move(*call));
        writer->close();
        kept_file = db;
      } catch (const std::exception& e) {
        why = fmt::format("cannot keep the call: {}", e.what());
      }
    }
    std::fprintf(stderr, "opscope: rank %d: replicas differ first at step %lld: %s; %s%s\n", run.rank,
                 static_cast<long long>(d.record.step), consistency::describe(d).c_str(),
                 kept_file.empty()
                     ? why.c_str()
                     : fmt::format("this rank's call is kept for op-replay in {}", kept_file).c_str(),
                 outputs_why.empty() ? "" : fmt::format(" (without its outputs: {})", outputs_why).c_str());
    std::lock_guard lock(findings_mutex);
    found = {{"first",
              {{"step", d.record.step},
               {"index", d.record.index},
               {"kind", d.record.kind},
               {"op", d.record.op},
               {"seq", d.record.seq},
               {"ranks", d.ranks},
               {"others", d.others}}},
             {"kept", kept_file.empty() ? json(nullptr) : json("consistency_capture.db")},
             {"not_kept_because", why.empty() ? json(nullptr) : json(why)},
             {"outputs_not_kept_because", outputs_why.empty() ? json(nullptr) : json(outputs_why)}};
    awaiting.reset();
  }

  // Whether the next call's parameters (its input "param") are what this rank hashed after the call.
  static bool sameParameters(const KeptCall& next, const std::string& hash) {
    for (const TensorRecord& in : next.op.tensors)
      if (in.arg_name == "param")
        return fmt::format("{:016x}", XXH3_64bits(in.data.data(), in.data.size())) == hash;
    return false;
  }
};

RankConsistency::RankConsistency(const RunInfo& run) : impl_(std::make_shared<Impl>(run)) { impl_->start(); }

RankConsistency::~RankConsistency() { impl_->exchange.stop(true); }

// Where in the program an op ran, as its framework said: "aten::sqrt_ in Optimizer.step#Adam.step at
// train.py:57 in train" ("" for a program that declares nothing).
static std::string whereOf(const OpCall& call) {
  const std::string site = siteText(call.site);
  if (call.framework_op.empty()) return site;
  return site.empty() ? std::string(call.framework_op) : std::string(call.framework_op) + " in " + site;
}

// The pending keep job of the calling thread (one op at a time: the hook does not nest).
static std::unique_ptr<RankConsistency::Impl::KeepJob>& pendingKeep() {
  thread_local std::unique_ptr<RankConsistency::Impl::KeepJob> job;
  return job;
}

void RankConsistency::beforeOptimizer(const OpCall& call) {
  if (!impl_->exchanging || !impl_->keeping.load(std::memory_order_relaxed)) return;
  auto job = std::make_unique<Impl::KeepJob>();
  job->impl = impl_;
  job->call.op = rundb::opRecord(call);
  job->op = std::string(mlu::opName(call.op));
  job->where = whereOf(call);
  call.withArgs([&](const auto& args) {
    rundb::describeScalars(args, job->call.op);
    job->inputs = plan(args, true);
  });
  // The copy rides with the work left for the queue (the previous optimizer call's), unless this call writes
  // what that work reads (the same parameter twice in a row): then that goes first, on its own.
  bool writes_pending = false;
  if (impl_->any_deferred.load(std::memory_order_relaxed)) {
    std::lock_guard lock(impl_->deferred_mutex);
    if (const auto it = impl_->deferred.find(call.queue); it != impl_->deferred.end()) {
      call.withArgs([&](const auto& args) {
        args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
            if (value.present && meta.writes() &&
                it->second->reads_from(value.data,
                                       static_cast<std::size_t>(value.numel()) * value.elementSize()))
              writes_pending = true;
          }
        });
      });
    }
  }
  if (writes_pending) impl_->flush(call.queue);
  std::unique_ptr<Impl::Deferred> work = impl_->take(call.queue);
  if (!work) work = std::make_unique<Impl::Deferred>();
  work->copy = job.get();
  launchWork(call.queue, std::move(work));
  pendingKeep() = std::move(job);
}

void RankConsistency::afterOptimizer(const OpCall& call) {
  std::unique_ptr<Impl::KeepJob> job = std::move(pendingKeep());
  if (job && (job->call.op.seq != call.seq || call.status != MLUOP_STATUS_SUCCESS)) job->ok = false;
  // The parameters: hashed once the call has run (and the call kept under their record).
  // A fused optimizer op's "param"; any other op of an optimizer step (a framework's) its first output.
  const void* param = nullptr;
  std::size_t bytes = 0;
  const bool fused = call.op == mlu::OpId::adamw_step || call.op == mlu::OpId::sgd_step;
  if (call.status == MLUOP_STATUS_SUCCESS) {
    call.withArgs([&](const auto& args) {
      bool seen = false;
      args.visit([&](const mlu::ArgMeta& meta, const auto& value) {
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, mlu::TensorView>) {
          const bool chosen = fused ? std::string_view(meta.name) == "param" : meta.writes() && !seen;
          if (value.present && chosen) {
            seen = true;
            if (value.numel() > 0 && value.contiguous()) {
              param = value.data;
              bytes = static_cast<std::size_t>(value.numel()) * value.elementSize();
            }
          }
        }
      });
      if (job && job->ok) {
        for (Planned& out : plan(args, false)) job->call.outputs.push_back(std::move(out.record));
      }
    });
  }
  if (!job) {
    if (param != nullptr)
      impl_->queueHash(call.queue, "param", std::string(mlu::opName(call.op)), whereOf(call), call.seq, param,
                       bytes);
    return;
  }
  job->call.op.status = static_cast<int>(call.status);
  job->call.op.host_start_ns = call.host_start_ns;
  job->call.op.host_dur_ns = call.host_end_ns - call.host_start_ns;
  if (param != nullptr) {
    job->call.param = param;
    job->param_bytes = bytes;
    job->key = impl_->nextKey();
    impl_->pending.fetch_add(1, std::memory_order_relaxed);
  }
  // Left for the queue even for a call that failed: copyInputs() may still be queued on the job's memory.
  impl_->defer(call.queue, std::move(job));
}

void RankConsistency::afterAllReduce(mlurtQueue_t queue, std::uint64_t seq, const void* recv,
                                     std::size_t bytes) {
  impl_->queueHash(queue, "grad", "allreduce", std::string(), seq, recv, bytes);
}

std::unique_ptr<RankConsistency::Work> RankConsistency::take(mlurtQueue_t queue) {
  return impl_->any_deferred.load(std::memory_order_relaxed) ? impl_->take(queue) : nullptr;
}

void RankConsistency::flush(mlurtQueue_t queue) { impl_->flush(queue); }

void RankConsistency::launch(mlurtQueue_t queue, std::unique_ptr<Work> work) {
  launchWork(queue, std::move(work));
}

void RankConsistency::beforeOther(mlurtQueue_t queue) {
  if (!impl_->any_deferred.load(std::memory_order_relaxed)) return;
  if (queue != nullptr)
    impl_->flush(queue);
  else
    impl_->flushAll();
}

void RankConsistency::onStep() {
  impl_->flushAll();
  std::int64_t step = 0, records = 0;
  {
    std::lock_guard lock(impl_->step_mutex);
    step = impl_->step++;
    records = std::exchange(impl_->index, 0);
  }
  impl_->writeLine(fmt::format("{{\"step\":{},\"records\":{}}}\n", step, records), true);
}

void RankConsistency::finish() {
  Impl& s = *impl_;
  s.flushAll();
  // The hashes still queued, given a while (a queue stuck in a collective never gets to them).
  for (int i = 0; i < 10000 && s.pending.load(std::memory_order_acquire) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  {
    std::lock_guard lock(s.step_mutex);
    if (s.index > 0) s.writeLine(fmt::format("{{\"step\":{},\"records\":{}}}\n", s.step, s.index), true);
    s.index = 0;
  }
  s.exchange.stop(true);
  if (s.exchanging) {
    try {
      s.poll();  // what the others wrote by now
      if (s.awaiting) s.writeAwaited(true);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "opscope: rank consistency: %s\n", e.what());
    }
  }
  s.keeping.store(false, std::memory_order_release);
  {
    std::lock_guard lock(s.keep_mutex);
    s.kept.clear();
    s.spare.clear();
  }
  std::lock_guard lock(s.log_mutex);
  if (!s.file) return;
  if (const std::string error = closeChecked(std::move(s.file), s.path); !error.empty())
    std::fprintf(stderr, "opscope: rank consistency: %s\n", error.c_str());
}

void RankConsistency::finishOnSignal() {
  std::unique_lock lock(impl_->log_mutex, std::try_to_lock);
  if (lock.owns_lock() && impl_->file) std::fflush(impl_->file.get());
}

json RankConsistency::findings() const {
  std::lock_guard lock(impl_->findings_mutex);
  return impl_->found;
}

}  // namespace opscope::recorder
