// trace-check FILE... — checks Chrome Trace Event Format files (trace.json) against the rules of
// trace_check.h. Exit status: 0 when every file passes, 1 when any has errors, 2 on a usage error.
// trace-check --repair TMP [OUT] — makes the trace.json.tmp a killed program left into a complete trace.
#include "trace_check.h"

#include <opscope/gunzip.h>
#include <opscope/private_file.h>
#include <opscope/results/trace_file.h>
#include <opscope/trace_repair_file.h>

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kErrorsShown = 20;

void usage(std::FILE* out) {
  fmt::print(
      out,
      "usage: trace-check FILE...\n"
      "       trace-check --repair TRACE.json.tmp [OUT] | --repair RESULT_DIR\n"
      "Checks Chrome Trace Event Format JSON files against the rules Perfetto's JSON importer applies\n"
      "(required fields, X durations, B/E balance, strict slice nesting per thread, numeric counters,\n"
      "metadata names) and that every flow s/f binds to a slice in both Perfetto and Chrome DevTools.\n"
      "Prints one line per file (for a good file: its events, tracks, flows, size and bytes per event)\n"
      "and, for a file with errors, the first {} of them.\n"
      "Exit status: 0 all files pass, 1 some file has errors, 2 usage error.\n"
      "--repair: a program killed with SIGKILL leaves its trace cut short as trace.json.tmp; this writes\n"
      "every event written whole as a complete trace, OUT (default: the name without .tmp; an existing\n"
      "file is not replaced), then checks it; given a result directory, each of its *.json.tmp traces\n"
      "without its finished file. Exit status 0 when written, 1 when it cannot be.\n",
      kErrorsShown);
}

// Repairs one file into out, checks it and says what it did; false when it could not.
bool repairOne(const std::string& in, std::string out) {
  if (out.empty()) out = opscope::repairedTraceName(in);
  opscope::RepairedTrace repaired;
  if (const std::string error = opscope::repairTraceFile(in, out, &repaired); !error.empty()) {
    fmt::print(stderr, "trace-check: {}{}\n", error,
               error.ends_with("not replaced") ? " (give another OUT)" : "");
    return false;
  }
  const auto report = opscope::tracecheck::checkFile(out);
  fmt::print(
      "trace-check: {}: {}; {} events in {} ({} bytes of a cut-off event and {} flow starts whose ends were "
      "lost left out)\n",
      in, repaired.was_complete ? "already whole" : "repaired", report.events, out, repaired.lost_bytes,
      repaired.dangling_flows);
  if (!report.ok()) {
    // What the kept events themselves break (a file not written by opscope's profiler, or damaged): said.
    fmt::print("trace-check: {}: {} rule errors (the first: {})\n", out, report.error_count,
               report.errors.empty() ? "" : report.errors.front());
  }
  return true;
}

// --repair IN [OUT]: IN a trace file, or a result directory, whose killed traces (*.json.tmp and
// *.json.gz.tmp without their finished file) are each repaired beside it.
int repair(const std::string& in, const std::string& out) {
  std::error_code ec;
  if (!std::filesystem::is_directory(in, ec)) return repairOne(in, out) ? 0 : 1;
  if (!out.empty()) {
    fmt::print(stderr,
               "trace-check: --repair {}: a directory takes no OUT (each trace is repaired beside it)\n", in);
    return 2;
  }
  std::vector<std::string> cut;
  for (const auto& entry : std::filesystem::directory_iterator(in, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || !opscope::results::isUnfinishedTrace(name)) continue;
    if (std::filesystem::exists(opscope::repairedTraceName(entry.path().string()), ec)) {
      fmt::print("trace-check: {}: {} is there already; left alone\n", entry.path().string(),
                 opscope::repairedTraceName(name));
      continue;
    }
    cut.push_back(entry.path().string());
  }
  if (cut.empty()) {
    fmt::print(stderr, "trace-check: {}: no trace to repair (no *.json.tmp without its finished file)\n", in);
    return 1;
  }
  std::sort(cut.begin(), cut.end());
  bool all = true;
  for (const std::string& file : cut) all = repairOne(file, "") && all;
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  if (argc >= 2 && std::string(argv[1]) == "--repair") {
    if (argc < 3 || argc > 4) {
      usage(stderr);
      return 2;
    }
    return repair(argv[2], argc == 4 ? argv[3] : "");
  }
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
