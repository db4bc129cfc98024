// memory_diff.h — `opscope diff RUN_A RUN_B` of two memcheck runs (heaptrack_print --diff's question): which
// allocation sites leak more or less from one run to the other, how each place's peak in use moved, and the
// memory errors of each, from each run's memcheck.json. A site is its backtrace as memcheck symbolized it
// (function, file and line of each frame, or module and offset where there is no line): the same code in two
// runs is one site whatever addresses it was loaded at. memcheck.json may come from anyone: it is read
// bounded (results/json_input.h), and an entry that is not what memcheck writes is skipped and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace opscope::analysis {

// Leaked bytes and allocations of one site.
struct MemoryLine {
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
};

// One memcheck run's figures.
struct MemoryProfile {
  std::string path;                             // its memcheck.json
  std::map<std::string, MemoryLine> leaks;      // by site (its frames, as text)
  std::map<std::string, std::string> labels;    // site -> its innermost frames, for people
  std::map<std::string, std::uint64_t> peaks;   // by place ("MLU 0", "pinned host memory")
  std::map<std::string, std::uint64_t> errors;  // by kind ("double-free"), counted
  std::size_t odd = 0;                          // entries skipped
};

// Whether `run` is a memcheck run: a result directory holding memcheck.json, or a file named so.
bool isMemcheckRun(const std::filesystem::path& run);

// Reads a memcheck run (as isMemcheckRun). Throws DiffError (diff.h) when it cannot be read.
MemoryProfile loadMemoryProfile(const std::filesystem::path& run);

struct MemoryChange {
  std::string what;  // a site's label, a place, an error's kind
  MemoryLine a, b;
  std::int64_t change() const {
    return static_cast<std::int64_t>(b.bytes) - static_cast<std::int64_t>(a.bytes);
  }
};

struct MemoryDiff {
  std::string run_a, run_b;
  MemoryLine leaked_a, leaked_b;                 // all sites
  std::vector<MemoryChange> grew, shrank;        // sites, largest change first (at most `top` each)
  std::size_t grew_count = 0, shrank_count = 0;  // how many sites in all
  std::vector<MemoryChange> peaks;               // every place either run has (bytes: the peak)
  std::vector<MemoryChange> errors;              // every kind either run has (allocations: the count)
  std::size_t odd_a = 0, odd_b = 0;
};

MemoryDiff diffMemory(const MemoryProfile& a, const MemoryProfile& b, std::size_t top = 10);

// The comparison as text; its sections of a page (ids "memory-leaks", "memory-peaks"); a whole page.
std::string renderMemoryDiff(const MemoryDiff& d);
std::string renderMemoryDiffSections(const MemoryDiff& d);
std::string renderMemoryDiffHtml(const MemoryDiff& d, std::string_view style);

}  // namespace opscope::analysis
