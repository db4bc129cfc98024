// subprocess.h — runs a program as a child process with extra environment variables (LD_PRELOAD of the
// built hook among them) and collects its exit status and output, for the hook, capture and tool tests.
#pragma once

#include <fcntl.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace opscope_test {

struct Run {
  int exit_code = -1;  // -1 when killed by a signal (see signal)
  int signal = 0;
  std::string out;  // stdout
  std::string err;  // stderr
  std::string all() const { return out + err; }
};

using Env = std::vector<std::pair<std::string, std::string>>;

// For children that crash or fork on purpose: under AddressSanitizer the signal must reach the program's
// (the hook's) handler, and a forked child's view of its parent's threads is not a leak. run() gives
// ThreadSanitizer the same signal settings (kTsanCrashOptions) when it sees these. No effect in normal
// builds.
inline const std::pair<std::string, std::string> kSanitizerCrashOptions = {
    "ASAN_OPTIONS", "verify_asan_link_order=0:handle_segv=0:handle_abort=0:detect_leaks=0"};
inline const std::pair<std::string, std::string> kTsanCrashOptions = {"TSAN_OPTIONS",
                                                                      "handle_segv=0:handle_abort=0"};

// In a forked child: env added to (or replacing in) the current environment, then argv in place of the
// child. Under LD_PRELOAD an AddressSanitizer build must not insist on being first in the library list.
[[noreturn]] inline void execWith(const std::vector<std::string>& argv, const Env& env) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  setenv("ASAN_OPTIONS",
         (std::string(asan != nullptr ? asan : "") + (asan != nullptr && *asan ? ":" : "") +
          "verify_asan_link_order=0")
             .c_str(),
         1);
  for (const auto& [name, value] : env) {
    setenv(name.c_str(), value.c_str(), 1);
    if (std::pair(name, value) == kSanitizerCrashOptions) {
      setenv(kTsanCrashOptions.first.c_str(), kTsanCrashOptions.second.c_str(), 1);
    }
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Starts argv with env in the background, its output discarded, for a test that watches what it writes and
// kills it: its pid (-1 when it could not start). The caller reaps it (waitpid).
inline pid_t spawn(const std::vector<std::string>& argv, const Env& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    close(null);
    execWith(argv, env);
  }
  return pid;
}

// Runs argv with env added to (or replacing in) the current environment, and collects its output.
inline Run run(const std::vector<std::string>& argv, const Env& env = {}) {
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    execWith(argv, env);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Both pipes are read as data arrives, so neither can fill up and stall the child.
  Run r;
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  bool out_open = true, err_open = true;
  std::array<char, 65536> buf;
  while (out_open || err_open) {
    fd_set fds;
    FD_ZERO(&fds);
    if (out_open) FD_SET(out_pipe[0], &fds);
    if (err_open) FD_SET(err_pipe[0], &fds);
    if (select(std::max(out_pipe[0], err_pipe[0]) + 1, &fds, nullptr, nullptr, nullptr) < 0) break;
    for (auto [fd, open, text] : {std::tuple<int, bool*, std::string*>{out_pipe[0], &out_open, &r.out},
                                  std::tuple<int, bool*, std::string*>{err_pipe[0], &err_open, &r.err}}) {
      if (!*open || !FD_ISSET(fd, &fds)) continue;
      const ssize_t n = read(fd, buf.data(), buf.size());
      if (n > 0) {
        text->append(buf.data(), static_cast<std::size_t>(n));
      } else if (n == 0) {
        *open = false;
      }
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

// The lines of text that start with prefix.
inline std::vector<std::string> linesStartingWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

}  // namespace opscope_test
