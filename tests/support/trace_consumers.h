// trace_consumers.h — checks a trace.json the way its readers will: against the Perfetto importer's rules
// (opscope::tracecheck, in process) and by loading it in the Chrome DevTools trace engine (node running
// tools/trace-check/devtools_check.mjs). For test targets linking opscope_trace_consumers_test_support
// (the script's and node's paths come from test_paths.h).
//
// runDevtools(path) returns the script's summary (see devtools_check.mjs for its shape):
//   {"engine": "...", "events": N, "generic": true, "bounds": {"min", "max", "range"},
//    "threads": [{"pid", "tid", "process_name", "thread_name", "entries", "roots", "max_depth", "tree_nodes",
//                 "names": {name: count}}],
//    "flows": [[[pid, tid, ts, name, cat], ...], ...]}
// Not being able to run node or the engine throws (a test failure, never a skip).
#pragma once

#include "subprocess.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <trace_check.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace opscope_test {

// node: the one CMake found, else the first on PATH ("" when there is none).
inline std::string nodeExecutable() {
  const std::string configured = OPSCOPE_NODE_EXECUTABLE;
  if (!configured.empty() && access(configured.c_str(), X_OK) == 0) return configured;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/node";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// What the DevTools trace engine made of the trace at trace_path.
inline nlohmann::json runDevtools(const std::string& trace_path) {
  const std::string node = nodeExecutable();
  if (node.empty()) throw std::runtime_error("runDevtools: node is not installed (scripts/install-deps.sh)");
  const Run r = run({node, OPSCOPE_DEVTOOLS_CHECK_SCRIPT, trace_path});
  if (r.exit_code != 0) {
    throw std::runtime_error("runDevtools: " + node + " " + OPSCOPE_DEVTOOLS_CHECK_SCRIPT + " " + trace_path +
                             " exited with " + std::to_string(r.exit_code) +
                             (r.signal != 0 ? " (signal " + std::to_string(r.signal) + ")" : "") + ":\n" +
                             r.err);
  }
  try {
    return nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("runDevtools: the script's output is not JSON (" + std::string(e.what()) +
                             "):\n" + r.out + r.err);
  }
}

// The Perfetto-importer rules, checked in process.
inline opscope::tracecheck::Report checkTrace(const std::string& trace_path) {
  return opscope::tracecheck::checkFile(trace_path);
}

// EXPECT_TRUE(opscope_test::validTrace(path)): fails listing the first errors of an invalid trace.
inline ::testing::AssertionResult validTrace(const std::string& trace_path) {
  const auto report = checkTrace(trace_path);
  if (report.ok()) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  failure << trace_path << ": " << report.error_count << " errors";
  for (std::size_t i = 0; i < report.errors.size() && i < 20; ++i) failure << "\n  " << report.errors[i];
  return failure;
}

}  // namespace opscope_test
