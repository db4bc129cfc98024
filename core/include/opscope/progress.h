// progress.h — one self-updating status line for long work ("op-replay: 120/431 ops, 14.2 s"), shown on a
// terminal only: when the stream is not a tty (a pipe, a log file, CI) nothing is written, so logs stay
// clean. The line appears once the work has run for `delay`, is redrawn at most every `interval`, and is
// erased by clear() (and on destruction) so later output starts on a clean line. Not thread-safe: callers
// that update from several threads hold their own lock.
#pragma once

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <string>

namespace opscope {

class ProgressLine {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ProgressLine(std::FILE* out, std::chrono::milliseconds delay = std::chrono::seconds(3),
                        std::chrono::milliseconds interval = std::chrono::milliseconds(250))
      : out_(out), tty_(out != nullptr && isatty(fileno(out)) == 1), delay_(delay), interval_(interval) {}
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return tty_; }
  double elapsedSeconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Redraws the line with make_text() when it is due; make_text is not called otherwise.
  template <typename MakeText>
  void update(MakeText&& make_text) {
    if (!tty_) return;
    const Clock::time_point now = Clock::now();
    if (now - start_ < delay_ || (shown_ && now - last_ < interval_)) return;
    const std::string text = make_text();
    // The cursor goes back to the line's start: whatever else writes to the terminal next (the program
    // under the hook) starts there and overwrites the status instead of following it.
    std::fprintf(out_, "\r%s\033[K\r", text.c_str());
    std::fflush(out_);
    shown_ = true;
    last_ = now;
  }

  // Erases the line, if one is shown.
  void clear() {
    if (!shown_) return;
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
    shown_ = false;
  }

 private:
  std::FILE* out_;
  bool tty_;
  std::chrono::milliseconds delay_, interval_;
  Clock::time_point start_ = Clock::now(), last_{};
  bool shown_ = false;
};

}  // namespace opscope
