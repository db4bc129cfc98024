// A notifier: a point in a queue's work that completes, and takes a timestamp, when the worker reaches it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace mlurt {

class Notifier {
 public:
  explicit Notifier(bool timing) : timing_(timing) {}

  bool timing() const { return timing_; }

  // Starts a new placement; returns its generation, which complete() must be given.
  std::uint64_t place();
  // Marks placement `generation` complete at time ns (later placements supersede earlier ones).
  void complete(std::uint64_t generation, std::uint64_t ns);

  // The generation of the latest placement (0: never placed).
  std::uint64_t placed() const;
  // True when the latest placement has completed (or there was none).
  bool done() const;
  // Waits until placement `generation` (or a later one) has completed.
  void waitFor(std::uint64_t generation) const;

  struct Stamp {
    std::uint64_t placed = 0;  // latest placement, 0 if none
    bool done = false;         // it has completed
    std::uint64_t ns = 0;      // timestamp of the completed placement
  };
  Stamp stamp() const;

 private:
  const bool timing_;
  mutable std::mutex mutex_;
  mutable std::condition_variable completed_cv_;
  std::uint64_t placed_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t timestamp_ns_ = 0;
};

}  // namespace mlurt
