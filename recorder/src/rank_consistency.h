// rank_consistency.h — OP_RANK_CONSISTENCY in one rank: the buffers that data parallelism keeps identical
// across the ranks (the parameters after each optimizer op, each all-reduce's result) hashed on their queue
// into consistency.jsonl (format: opscope/consistency.h), and the ranks' files compared while the run goes
// on, each rank reading the others' from the shared run folder (a thread; not through a collective, which
// would change the program's order of collectives and hang with it).
//
// So that the call whose parameters first differ can be run again, each optimizer call of the steps not
// compared yet is kept whole (its inputs copied on the queue right before it runs, its outputs right after);
// once the ranks' hashes of a step agree, its calls are let go. The first difference is printed by every
// rank, which writes its own call of it to consistency_capture.db (capture.db's schema, for op-replay).
#pragma once

#include <opscope/op_call.h>
#include <opscope/run_info.h>

#include <mlu/mlurt.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace opscope::recorder {

class RankConsistency {
 public:
  // Creates <result dir>/consistency.jsonl; throws std::runtime_error when it cannot.
  explicit RankConsistency(const RunInfo& run);
  ~RankConsistency();
  RankConsistency(const RankConsistency&) = delete;
  RankConsistency& operator=(const RankConsistency&) = delete;

  // An optimizer op (adamw_step, sgd_step) about to be enqueued / just enqueued, on the calling thread.
  void beforeOptimizer(const OpCall& call);
  void afterOptimizer(const OpCall& call);
  // An all-reduce just enqueued on queue: its result, once the queue gets past it.
  void afterAllReduce(mlurtQueue_t queue, std::uint64_t seq, const void* recv, std::size_t bytes);
  // Work left for a queue (hashes of what ran on it, optimizer calls to finish), to run there after what is
  // queued so far: it rides on the next host function put on the queue anyway.
  class Work {
   public:
    virtual ~Work() = default;
    virtual void run() = 0;
  };
  // The work left for queue (nullptr when none), for a host function about to be queued on it; the caller
  // runs it there (or, when the runtime refuses the host function, once the queue is idle).
  std::unique_ptr<Work> take(mlurtQueue_t queue);
  // Work taken put on queue in a host function of its own (run once the queue is idle when the runtime
  // refuses one).
  void launch(mlurtQueue_t queue, std::unique_ptr<Work> work);
  // The work left for queue put on it in a host function of its own.
  void flush(mlurtQueue_t queue);
  // Another op or runtime call of the program about to be enqueued on queue (nullptr: a call bound to no
  // queue): the work left for it (for every queue) queued first.
  void beforeOther(mlurtQueue_t queue);
  // opscope_step(): the step's end line; the next records are the next step's.
  void onStep();
  // At exit: the hashes still queued written (given a while), a last comparison, the file closed.
  void finish();
  // On a fatal signal: what is written flushed, nothing waited for.
  void finishOnSignal();
  // {"first": ..., "kept": file} once the ranks differed; null before.
  nlohmann::json findings() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace opscope::recorder
