// trace-check FILE... — checks Chrome Trace Event Format files (trace.json) against the rules of
// trace_check.h. Exit status: 0 when every file passes, 1 when any has errors, 2 on a usage error.
#include "trace_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kErrorsShown = 20;

void usage(std::FILE* out) {
  fmt::print(
      out,
      "usage: trace-check FILE...\n"
      "Checks Chrome Trace Event Format JSON files against the rules Perfetto's JSON importer applies\n"
      "(required fields, X durations, B/E balance, strict slice nesting per thread, numeric counters,\n"
      "metadata names) and that every flow s/f binds to a slice in both Perfetto and Chrome DevTools.\n"
      "Prints one line per file (for a good file: its events, tracks, flows, size and bytes per event)\n"
      "and, for a file with errors, the first {} of them.\n"
      "Exit status: 0 all files pass, 1 some file has errors, 2 usage error.\n",
      kErrorsShown);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    if (arg == "--") {
      files.insert(files.end(), argv + i + 1, argv + argc);
      break;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      fmt::print(stderr, "trace-check: unknown option {}\n", arg);
      usage(stderr);
      return 2;
    }
    files.push_back(arg);
  }
  if (files.empty()) {
    usage(stderr);
    return 2;
  }
  bool all_ok = true;
  for (const std::string& file : files) {
    const auto report = opscope::tracecheck::checkFile(file);
    if (report.ok()) {
      // The file's size per event: what a trace costs on disk, for the profiler's size figures.
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(file, ec);
      fmt::print(
          "trace-check: {}: ok ({} events, {} tracks, {} flows, {} bytes, {:.1f} bytes/event)\n", file,
          report.events, report.tracks, report.flows, ec ? 0 : bytes,
          report.events > 0 && !ec ? static_cast<double>(bytes) / static_cast<double>(report.events) : 0.0);
      continue;
    }
    all_ok = false;
    fmt::print("trace-check: {}: {} errors\n", file, report.error_count);
    const std::size_t shown = std::min(kErrorsShown, report.errors.size());
    for (std::size_t i = 0; i < shown; ++i) fmt::print("  {}\n", report.errors[i]);
    if (report.error_count > shown) fmt::print("  ... and {} more\n", report.error_count - shown);
  }
  return all_ok ? 0 : 1;
}
