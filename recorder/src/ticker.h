// ticker.h — a thread that calls a function at a fixed period until it is stopped: the flight recorder's
// watchdog and the rank consistency exchange. An exception from the function is printed with the owner's
// name and the ticks go on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace opscope::recorder {

class Ticker {
 public:
  Ticker() = default;
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;
  ~Ticker() { stop(true); }

  // Starts the thread: tick() every period, first after one period.
  void start(const char* name, std::chrono::milliseconds period, std::function<void()> tick) {
    thread_ = std::thread([this, name, period, tick = std::move(tick)] {
      std::unique_lock lock(mutex_);
      while (!cv_.wait_for(lock, period, [&] { return stop_; })) {
        lock.unlock();
        try {
          tick();
        } catch (const std::exception& e) {
          std::fprintf(stderr, "opscope: %s: %s\n", name, e.what());
        }
        lock.lock();
      }
    });
  }

  bool started() const { return thread_.joinable(); }

  // Stops the ticks: join waits for the thread (unless called from it); !join lets it go (on a fatal signal,
  // when it may be the thread that is stuck).
  void stop(bool join) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (!thread_.joinable()) return;
    if (!join) {
      thread_.detach();
    } else if (thread_.get_id() != std::this_thread::get_id()) {
      thread_.join();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace opscope::recorder
