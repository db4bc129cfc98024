// ProgressLine on a real pseudo-terminal and on a pipe: drawn (and erased) on a tty only.
#include <opscope/progress.h>

#include <gtest/gtest.h>

#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

// Everything readable now from fd (non-blocking after the writer flushed).
std::string drain(int fd) {
  std::string out;
  char buf[256];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (n < static_cast<ssize_t>(sizeof buf)) break;
  }
  return out;
}

}  // namespace

TEST(ProgressLine, OnATerminalDrawsTheLineAndErasesIt) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::FILE* tty = fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  {
    opscope::ProgressLine p(tty, std::chrono::milliseconds(0), std::chrono::milliseconds(0));
    EXPECT_TRUE(p.enabled());
    p.update([] { return std::string("op-replay: 3/10 ops"); });
    const std::string drawn = drain(master);
    EXPECT_NE(drawn.find("op-replay: 3/10 ops"), std::string::npos) << drawn;
    EXPECT_NE(drawn.find("\033[K"), std::string::npos);
    p.clear();
    EXPECT_NE(drain(master).find("\033[K"), std::string::npos);
  }
  std::fclose(tty);
  close(master);
}

TEST(ProgressLine, NotATerminalWritesNothingAndNeverAsksForTheText) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::FILE* out = fdopen(fds[1], "w");
  ASSERT_NE(out, nullptr);
  bool asked = false;
  {
    opscope::ProgressLine p(out, std::chrono::milliseconds(0), std::chrono::milliseconds(0));
    EXPECT_FALSE(p.enabled());
    p.update([&] {
      asked = true;
      return std::string("x");
    });
  }
  std::fclose(out);  // EOF for the reader
  EXPECT_FALSE(asked);
  EXPECT_EQ(drain(fds[0]), "");
  close(fds[0]);
}

TEST(ProgressLine, WaitsForTheDelayBeforeDrawing) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::FILE* tty = fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  bool asked = false;
  {
    opscope::ProgressLine p(tty, std::chrono::hours(1));
    p.update([&] {
      asked = true;
      return std::string("x");
    });
  }
  EXPECT_FALSE(asked);
  std::fclose(tty);
  close(master);
}
