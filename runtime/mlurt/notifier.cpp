#include "notifier.h"

namespace mlurt {

std::uint64_t Notifier::place() {
  std::lock_guard lock(mutex_);
  return ++placed_;
}

void Notifier::complete(std::uint64_t generation, std::uint64_t ns) {
  {
    std::lock_guard lock(mutex_);
    if (generation <= completed_) return;
    completed_ = generation;
    timestamp_ns_ = ns;
  }
  completed_cv_.notify_all();
}

std::uint64_t Notifier::placed() const {
  std::lock_guard lock(mutex_);
  return placed_;
}

bool Notifier::done() const {
  std::lock_guard lock(mutex_);
  return completed_ >= placed_;
}

void Notifier::waitFor(std::uint64_t generation) const {
  std::unique_lock lock(mutex_);
  completed_cv_.wait(lock, [&] { return completed_ >= generation; });
}

Notifier::Stamp Notifier::stamp() const {
  std::lock_guard lock(mutex_);
  return {placed_, placed_ > 0 && completed_ >= placed_, timestamp_ns_};
}

}  // namespace mlurt
