// report.h — memcheck's findings as the user reads them: leaks grouped by allocation site (largest first),
// memory errors, the peak of each device's memory in use; as memcheck.txt (LeakSanitizer's layout),
// memcheck.json, and the lines printed on stderr.
#pragma once

#include <opscope/stacks.h>
#include <opscope/symbolizer.h>
#include "allocation.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace opscope::memcheck {

struct LeakGroup {
  StackId stack = 0;
  int device = 0;
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  LiveAllocation first;  // the earliest of the group (its pointer, thread, time)
  // A growth leak (splitGrowth): the steps it holds allocations of, and their bytes per step.
  std::uint32_t steps = 0;
  std::uint64_t bytes_per_step = 0;
};

// Leaks by (allocation stack, site, place), largest first (then by stack id, for a stable order).
std::vector<LeakGroup> groupLeaks(const std::vector<LiveAllocation>& live);

// What a program that declared its end (opscope_program_end) still holds, split: the growth leaks, memory
// allocated step after step from one site and still held (allocations of at least 3 of the steps 1 ..
// steps - 2, and of at least three quarters of them: the setup before the first step mark and the last two
// steps do not count), and the rest, held at exit and not a leak (the model, the optimizer's state, the
// last batch).
struct Held {
  std::vector<LeakGroup> growth;
  std::vector<LeakGroup> held;
};
Held splitGrowth(const std::vector<LiveAllocation>& live, std::uint32_t steps);

struct ReportInput {
  std::string command;
  long pid = 0;
  bool backtraces = false;
  std::vector<LeakGroup> leaks;
  // The program declared its end (opscope_program_end): leaks are its growth leaks, and held what it still
  // held then; steps: the steps it marked.
  bool program_ended = false;
  std::vector<LeakGroup> held;
  std::uint32_t steps = 0;
  std::vector<MemoryError> errors;  // in the order found
  std::vector<Peak> peaks;
  // The peaks of the pieces a program's own allocator handed out (opscope_pool_alloc: tensors under
  // torch_mlu), with the module that reached each and the bytes by module then.
  std::vector<Peak> piece_peaks;
  // Each marked step's peak and end, of the device memory and of the program allocator's pieces
  // (AllocationTable::markStep), and the marks not kept.
  std::vector<StepMark> step_marks, piece_step_marks;
  std::uint64_t steps_dropped = 0;
  double ns_per_tick = 1.0;  // LiveAllocation::time's unit (TickClock)
};

struct Reports {
  std::string text;     // memcheck.txt
  std::string json;     // memcheck.json
  std::string summary;  // for stderr at exit
};

using SymbolizeStack = std::function<std::vector<Frame>(StackId)>;

Reports buildReports(const ReportInput& input, const SymbolizeStack& symbolize);

// An error as printed when it is found (and in memcheck.txt):
//   opscope memcheck: ERROR: double-free of 0x... (...)
//       #0 ...
//     freed before at:  / allocated at:
std::string formatError(const MemoryError& error, const SymbolizeStack& symbolize);

// "opscope memcheck: N bytes leaked in M allocations from K sites"
std::string leakSummaryLine(const std::vector<LeakGroup>& leaks);

// A symbolized backtrace as memcheck.json writes it (memory_snapshot.json too).
nlohmann::json framesJson(const std::vector<Frame>& frames);

}  // namespace opscope::memcheck
