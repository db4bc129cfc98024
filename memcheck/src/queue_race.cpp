#include "queue_race.h"

#include <algorithm>
#include <iterator>

namespace opscope::memcheck {

std::uint32_t QueueRace::entity(std::uint64_t key, const std::string& name) {
  const auto [it, added] = entities_.emplace(key, static_cast<std::uint32_t>(names_.size()));
  if (added) {
    names_.push_back(name);
    clocks_.emplace_back();
  }
  return it->second;
}

std::uint32_t QueueRace::queue(std::uint64_t id) { return entity(id << 1, "queue " + std::to_string(id)); }

std::uint32_t QueueRace::thread(std::uint32_t t) {
  return entity((std::uint64_t{t} << 1) | 1, "host thread " + std::to_string(t));
}

void QueueRace::join(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

std::pair<std::uint32_t, std::uint32_t> QueueRace::enqueue(std::uint32_t thread, std::uint32_t queue) {
  Clock& q = clocks_[queue];
  join(q, clocks_[thread]);
  if (q.size() <= queue) q.resize(queue + 1, 0);
  ++q[queue];
  Clock& t = clocks_[thread];  // the thread goes on: its later work is not before this one's
  if (t.size() <= thread) t.resize(thread + 1, 0);
  ++t[thread];
  return {queue, q[queue]};
}

std::pair<std::uint32_t, std::uint32_t> QueueRace::threadNow(std::uint32_t thread) {
  Clock& t = clocks_[thread];
  if (t.size() <= thread) t.resize(thread + 1, 0);
  if (t[thread] == 0) t[thread] = 1;  // 0 is "before everything": an access is after the thread's start
  return {thread, t[thread]};
}

void QueueRace::threadWaitsQueue(std::uint32_t thread, std::uint32_t queue) {
  join(clocks_[thread], Clock(clocks_[queue]));
}

void QueueRace::threadWaitsAll(std::uint32_t thread) {
  for (std::size_t e = 0; e < clocks_.size(); ++e)
    if (e != thread) join(clocks_[thread], Clock(clocks_[e]));
}

void QueueRace::placeNotifier(const void* notifier, std::uint32_t thread, std::uint32_t queue) {
  enqueue(thread, queue);
  notifiers_[notifier] = clocks_[queue];
}

void QueueRace::queueWaitsNotifier(std::uint32_t thread, std::uint32_t queue, const void* notifier) {
  join(clocks_[queue], clocks_[thread]);
  if (const auto it = notifiers_.find(notifier); it != notifiers_.end()) join(clocks_[queue], it->second);
}

void QueueRace::threadWaitsNotifier(std::uint32_t thread, const void* notifier) {
  if (const auto it = notifiers_.find(notifier); it != notifiers_.end()) join(clocks_[thread], it->second);
}

bool QueueRace::ordered(const Access& before, std::uint32_t entity) const {
  if (before.entity == entity) return true;  // program order of one queue or thread
  const Clock& c = clocks_[entity];
  return before.entity < c.size() && c[before.entity] >= before.clock;
}

void QueueRace::split(std::uintptr_t at) {
  auto it = segments_.upper_bound(at);
  if (it == segments_.begin()) return;
  --it;
  if (it->first >= at || it->second.end <= at) return;
  Segment right = it->second;
  it->second.end = at;
  segments_.emplace(at, std::move(right));
}

std::vector<QueueRace::Race> QueueRace::access(std::uintptr_t p, std::size_t bytes, bool write,
                                               std::uint32_t entity, std::uint32_t clock, std::string what) {
  std::vector<Race> races;
  if (bytes == 0) return races;
  const auto [d, added] = description_index_.emplace(std::move(what), descriptions_.size());
  if (added) descriptions_.push_back(d->first);
  const Access self{entity, clock, d->second};
  const std::uintptr_t end = p + bytes;
  split(p);
  split(end);
  // The gaps in [p, end) become segments too.
  std::uintptr_t at = p;
  auto it = segments_.lower_bound(p);
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> gaps;
  for (auto scan = it; at < end; ++scan) {
    const std::uintptr_t next = scan == segments_.end() ? end : std::min(end, scan->first);
    if (next > at) gaps.emplace_back(at, next);
    if (scan == segments_.end() || scan->first >= end) break;
    at = scan->second.end;
  }
  for (const auto& [b, e] : gaps) segments_[b].end = e;
  auto report = [&](const Access& earlier, std::uintptr_t b, std::uintptr_t e) {
    for (Race& r : races) {
      if (r.first == earlier.what) {
        r.begin = std::min(r.begin, b);
        r.end = std::max(r.end, e);
        return;
      }
    }
    races.push_back({earlier.what, self.what, b, e});
  };
  for (it = segments_.lower_bound(p); it != segments_.end() && it->first < end; ++it) {
    Segment& s = it->second;
    if (s.written && !ordered(s.write, entity)) report(s.write, it->first, s.end);
    if (write) {
      for (const Access& r : s.reads)
        if (!ordered(r, entity)) report(r, it->first, s.end);
      s.write = self;
      s.written = true;
      s.reads.clear();
    } else {
      const auto same =
          std::find_if(s.reads.begin(), s.reads.end(), [&](const Access& r) { return r.entity == entity; });
      if (same != s.reads.end()) {
        *same = self;
      } else {
        s.reads.push_back(self);
      }
    }
  }
  return races;
}

void QueueRace::forget(std::uintptr_t p, std::size_t bytes) {
  split(p);
  split(p + bytes);
  segments_.erase(segments_.lower_bound(p), segments_.lower_bound(p + bytes));
}

}  // namespace opscope::memcheck
