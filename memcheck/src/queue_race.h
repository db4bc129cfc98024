// queue_race.h — MEM_CHECK_RACE's happens-before over the MLU's queues and the program's host threads, and
// the device bytes each access touched: two accesses to overlapping bytes, one a write, that neither orders
// before the other are a race.
//
// Each queue and each host thread has a vector clock. What orders what:
//   - a queue runs its work in order, after what the host thread that enqueued it had done (enqueue joins
//     the thread's clock into the queue's);
//   - a notifier placed on a queue holds the queue's clock then; a queue that waits on it, or a host thread
//     that syncs on it (or finds it complete), joins that clock;
//   - a queue sync (or a query that finds it idle) joins the queue's clock into the thread's; a device sync
//     and a free (which waits for the device) join every queue's;
//   - a blocking copy or memset runs on the default queue and the thread waits for it;
//   - a host function enqueued on a queue is an event of that queue: what it touches is seen when it says so
//     (opscope_host_access), as is what a thread's host code touches.
// Accesses are byte ranges (a tensor's whole extent). Plain data, no lock: the tool holds one over it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace opscope::memcheck {

class QueueRace {
 public:
  // What an access was, for the report: "relu #12 reads x", and its queue or thread.
  struct Access {
    std::uint32_t entity = 0;  // the queue or thread that made it
    std::uint32_t clock = 0;   // its clock's own component then
    std::uint32_t what = 0;    // index into descriptions()
  };
  struct Race {
    std::uint32_t first = 0, second = 0;  // descriptions()
    std::uintptr_t begin = 0, end = 0;    // the bytes both touch
  };

  // An entity: a queue (by its runtime id, mlurtQueueGetId) or a host thread (by the hook's number).
  std::uint32_t queue(std::uint64_t id);
  std::uint32_t thread(std::uint32_t t);

  // Work the thread enqueues on the queue (an op, an asynchronous copy, a host function): returns the
  // entity and clock of the work, after the queue joined what the thread had done.
  std::pair<std::uint32_t, std::uint32_t> enqueue(std::uint32_t thread, std::uint32_t queue);
  // The thread's own access now (its host code's: opscope_host_access): the entity and clock to access()
  // with.
  std::pair<std::uint32_t, std::uint32_t> threadNow(std::uint32_t thread);
  void threadWaitsQueue(std::uint32_t thread, std::uint32_t queue);
  void threadWaitsAll(std::uint32_t thread);
  void placeNotifier(const void* notifier, std::uint32_t thread, std::uint32_t queue);
  void queueWaitsNotifier(std::uint32_t thread, std::uint32_t queue, const void* notifier);
  void threadWaitsNotifier(std::uint32_t thread, const void* notifier);

  // An access of [p, p + bytes) by the work (entity, clock) that enqueue() returned; what describes it.
  // Returns the races it makes with earlier accesses (each earlier access at most once).
  std::vector<Race> access(std::uintptr_t p, std::size_t bytes, bool write, std::uint32_t entity,
                           std::uint32_t clock, std::string what);
  // The bytes [p, p + bytes) are no longer the program's (freed to the runtime): their accesses are gone.
  void forget(std::uintptr_t p, std::size_t bytes);

  const std::string& description(std::uint32_t i) const { return descriptions_[i]; }
  const std::string& entityName(std::uint32_t e) const { return names_[e]; }

 private:
  using Clock = std::vector<std::uint32_t>;
  struct Segment {
    std::uintptr_t end = 0;
    Access write;  // what == 0 and clock == 0: none
    bool written = false;
    std::vector<Access> reads;  // one per entity at most
  };
  std::uint32_t entity(std::uint64_t key, const std::string& name);
  static void join(Clock& into, const Clock& from);
  bool ordered(const Access& before, std::uint32_t entity) const;
  void split(std::uintptr_t at);

  std::map<std::uint64_t, std::uint32_t> entities_;
  std::vector<std::string> names_;
  std::vector<Clock> clocks_;
  std::map<const void*, Clock> notifiers_;
  std::map<std::uintptr_t, Segment> segments_;  // by start, disjoint
  std::vector<std::string> descriptions_;
  std::map<std::string, std::uint32_t> description_index_;
};

}  // namespace opscope::memcheck
