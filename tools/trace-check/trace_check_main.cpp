// trace-check FILE... — checks Chrome Trace Event Format files (trace.json) against the rules of
// trace_check.h. Exit status: 0 when every file passes, 1 when any has errors, 2 on a usage error.
// trace-check --repair TMP [OUT] — makes the trace.json.tmp a killed program left into a complete trace.
#include "trace_check.h"

#include <opscope/gunzip.h>
#include <opscope/private_file.h>
#include <opscope/trace_repair.h>

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
      "       trace-check --repair TRACE.json.tmp [OUT]\n"
      "Checks Chrome Trace Event Format JSON files against the rules Perfetto's JSON importer applies\n"
      "(required fields, X durations, B/E balance, strict slice nesting per thread, numeric counters,\n"
      "metadata names) and that every flow s/f binds to a slice in both Perfetto and Chrome DevTools.\n"
      "Prints one line per file (for a good file: its events, tracks, flows, size and bytes per event)\n"
      "and, for a file with errors, the first {} of them.\n"
      "Exit status: 0 all files pass, 1 some file has errors, 2 usage error.\n"
      "--repair: a program killed with SIGKILL leaves its trace cut short as trace.json.tmp; this writes\n"
      "every event written whole as a complete trace, OUT (default: the name without .tmp; an existing\n"
      "file is not replaced), then checks it. Exit status 0 when written, 1 when it cannot be.\n",
      kErrorsShown);
}

int repair(const std::string& in, std::string out) {
  if (out.empty()) out = in.ends_with(".tmp") ? in.substr(0, in.size() - 4) : in + ".repaired.json";
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(out, ec))) {
    fmt::print(stderr, "trace-check: {} exists; not replaced (give another OUT)\n", out);
    return 1;
  }
  const bool gzip =
      in.ends_with(".gz") || in.ends_with(".gz.tmp");  // OP_TRACE_GZIP: inflated as far as it goes
  opscope::RepairedTrace repaired;
  try {
    std::string text;
    if (gzip) {
      text = opscope::gunzipFile(in, std::size_t{4} << 30).text;
    } else {
      std::ifstream file(in, std::ios::binary);
      if (!file) throw std::runtime_error("cannot read it");
      text.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    repaired = opscope::repairTrace(text);
  } catch (const std::exception& e) {
    fmt::print(stderr, "trace-check: cannot repair {}: {}\n", in, e.what());
    return 1;
  }
  // Written straight to OUT (which does not exist), never through OUT.tmp: that is the input's name.
  opscope::UniqueFile f = opscope::createPrivateFile(out);
  if (f == nullptr) {
    fmt::print(stderr, "trace-check: cannot write {}: {}\n", out, std::strerror(errno));
    return 1;
  }
  bool written = true;
  if (out.ends_with(".gz")) {
    const int fd = dup(fileno(f.get()));
    gzFile gz = fd < 0 ? nullptr : gzdopen(fd, "wb6");
    written =
        gz != nullptr && gzwrite(gz, repaired.json.data(), static_cast<unsigned>(repaired.json.size())) ==
                             static_cast<int>(repaired.json.size());
    if (gz != nullptr) {
      written = gzclose(gz) == Z_OK && written;
    } else if (fd >= 0) {
      ::close(fd);
    }
  } else {
    std::fwrite(repaired.json.data(), 1, repaired.json.size(), f.get());
  }
  if (std::string error = opscope::closeChecked(std::move(f), out); !error.empty() || !written) {
    if (error.empty()) error = "cannot write " + out + ": the compressed write failed";
    fmt::print(stderr, "trace-check: {}\n", error);
    std::filesystem::remove(out, ec);
    return 1;
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
  return 0;
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
