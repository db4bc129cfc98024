// demo_runs.h — the demos (mnist_train, llama_train) as the accuracy tools' tests run them: short command
// lines, their printed losses, and what a run left in its result directory (autocompare.csv).
#pragma once

#include "subprocess.h"
#include "test_paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace opscope_test {

// env plus LD_PRELOAD of the built hook.
inline Env preload(Env env = {}) {
  env.emplace_back("LD_PRELOAD", LIBOPSCOPE_PATH);
  return env;
}

// A short mnist_train run: steps of batch images, no evaluation, a loss line per step.
inline std::vector<std::string> mnistCommand(const std::string& path, int steps, int batch,
                                             const std::string& dtype = "float32") {
  return {path,
          "--steps",
          std::to_string(steps),
          "--batch-size",
          std::to_string(batch),
          "--no-eval",
          "--log-interval",
          "1",
          "--dtype",
          dtype};
}

// A small llama_train model (the default width, one held-out batch), a loss line per step.
inline std::vector<std::string> llamaCommand(const std::string& path, int steps,
                                             const std::string& dtype = "float32") {
  return {path,
          "--steps",
          std::to_string(steps),
          "--batch-size",
          "4",
          "--seq-len",
          "32",
          "--eval-batches",
          "1",
          "--log-interval",
          "1",
          "--dtype",
          dtype};
}

// A command with more arguments.
inline std::vector<std::string> withArgs(std::vector<std::string> command,
                                         const std::vector<std::string>& more) {
  command.insert(command.end(), more.begin(), more.end());
  return command;
}

// The training losses a program printed, in order: mnist_train's "Loss: x", llama_train's "step N  loss x",
// the Python examples' "step N loss x" (--print-losses) and "Train Epoch ... Loss: x".
inline std::vector<double> losses(const std::string& out) {
  std::vector<double> values;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    for (const char* key : {"Loss: ", " loss "}) {
      const auto at = line.find(key);
      if (at != std::string::npos && (line.rfind("Train Epoch", 0) == 0 || line.rfind("step ", 0) == 0)) {
        values.push_back(std::strtod(line.c_str() + at + std::string(key).size(), nullptr));
      }
    }
  }
  return values;
}

// The one result directory a run made under root ("" when there is not exactly one).
inline std::filesystem::path onlyResultDir(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> dirs;
  if (std::filesystem::exists(root)) {
    for (const auto& e : std::filesystem::directory_iterator(root)) {
      if (e.is_directory()) dirs.push_back(e.path());
    }
  }
  return dirs.size() == 1 ? dirs[0] : std::filesystem::path();
}

// A row of autocompare.csv (the columns the tests look at).
struct CompareRow {
  long long seq = 0;
  std::string op, tensor, verdict;
  long long dev_nan = 0;
  std::string module, forward_op;  // the call's site (forward_op: a backward call's forward op)
  std::string region;              // the program's region (opscope.compare()), "" outside every region
  std::string op_class;            // compare/op_class.h: exact, elementwise, reduction, random
  double max_ulp = 0;
};

inline std::vector<CompareRow> readAutocompareCsv(const std::filesystem::path& csv) {
  std::vector<CompareRow> rows;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    // Fields never hold commas except the quoted ones (shape, module, source, forward_op).
    std::vector<std::string> f;
    std::string cur;
    bool quoted = false;
    for (char c : line) {
      if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted) {
        f.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    f.push_back(cur);
    if (f.size() != 31)
      continue;  // ... verdict, module, source, forward_op, region, op_class, max_ulp, mean_ulp
    rows.push_back({std::atoll(f[0].c_str()), f[1], f[5], f[23], std::atoll(f[17].c_str()), f[24], f[26],
                    f[27], f[28], std::strtod(f[29].c_str(), nullptr)});
  }
  return rows;
}

}  // namespace opscope_test
