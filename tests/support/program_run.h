// program_run.h — runs a demo program as a child process and collects its exit status and output
// (stdout and stderr together), for the example tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace examples_test {

struct ProgramRun {
  int exit_code = -1;  // -1 if it could not start or did not exit normally
  std::string output;
};

inline ProgramRun run(const std::string& program, const std::string& args) {
  ProgramRun r;
  const std::string cmd = program + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace examples_test
