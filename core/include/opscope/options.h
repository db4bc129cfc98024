// options.h — every environment variable opscope reads, one row each (in the manner of the op schema and of
// compiler-rt's sanitizer_flags.inc): name, kind, default, range and a one-line help. parseConfig takes
// the defaults and ranges from here, `opscope env` prints the table, a test checks that README.md and
// docs/DESIGN.md list exactly these names, and a variable that is not here but close to one of these
// names (OP_CAPTUER) is a warning naming the one meant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace opscope {

enum class OptionKind : std::uint8_t {
  kFlag,       // 1/0, true/false, on/off, yes/no
  kNumber,     // a whole number in [min, max]
  kList,       // comma-separated op names, C symbols or RE2 regular expressions
  kText,       // free text (a path)
  kTolerance,  // atol,rtol
  kSchedule,   // skip_first,wait,warmup,active,repeat
  kLauncher,   // read by the `opscope` launcher only, not by the hook
};

struct Option {
  std::string_view name;  // <DTYPE> and <OP> stand for a dtype's and an op's upper-cased name
  OptionKind kind;
  std::uint64_t fallback;  // kFlag (0/1) and kNumber: the value when the variable is unset
  std::uint64_t min;       // kNumber: the range
  std::uint64_t max;
  std::string_view shown_default;  // the default as the docs show it
  std::string_view help;
  // The `opscope run` flag that sets it, if any: a flag takes no value (--overflow-check sets 1), the others
  // one (--trace-max-mb=N). The launcher handles every such row; `opscope env` shows them.
  std::string_view run_flag = {};
};

inline constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};

inline constexpr Option kOptions[] = {
    {"OP_CAPTURE", OptionKind::kFlag, 0, 0, 1, "0",
     "capture the inputs and outputs of each listed op to capture.db"},
    {"OP_CAPTURE_LIST", OptionKind::kList, 0, 0, 0, "every op", "the ops to capture"},
    {"OP_CAPTURE_DISABLE_LIST", OptionKind::kList, 0, 0, 0, "none",
     "ops never captured (wins over the list)"},
    {"OP_CAPTURE_MAX_MB", OptionKind::kNumber, 4096, 1, std::uint64_t{1} << 30, "4096",
     "stop capturing, with one warning, past this much stored tensor data", "--capture-max-mb"},
    {"OP_CAPTURE_MODE", OptionKind::kText, 0, 0, 0, "tensors",
     "tensors: whole tensors of each listed op; stats: statistics of each, whole tensors only around the "
     "first "
     "NaN/Inf and each auto-compare failure",
     "--capture-mode"},
    {"OP_CAPTURE_RING", OptionKind::kNumber, 0, 0, 4096, "0",
     "stats mode: the op calls before a trigger whose whole tensors are kept too (0: the trigger's own; "
     "more costs a copy of every tensor)"},
    {"OP_CAPTURE_COLLECTIVES", OptionKind::kFlag, 1, 0, 1, "1",
     "with capture: also what each transfer of the collective library sent and received (capture.db's "
     "collectives; opscope report RUNFOLDER checks them across ranks)"},
    {"OP_AUTOCOMPARE", OptionKind::kFlag, 0, 0, 1, "0", "compare each listed op against the CPU reference"},
    {"OP_AUTOCOMPARE_LIST", OptionKind::kList, 0, 0, 0, "every op", "the ops to compare"},
    {"OP_AUTOCOMPARE_DISABLE_LIST", OptionKind::kList, 0, 0, 0, "none", "ops never compared"},
    {"AUTOCOMPARE_ERROR_TOLERANCE", OptionKind::kTolerance, 0, 0, 0, "per dtype",
     "atol,rtol for every dtype"},
    {"AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>", OptionKind::kTolerance, 0, 0, 0, "per dtype",
     "atol,rtol for one dtype (FLOAT32, FLOAT16, BFLOAT16, ...)"},
    {"<OP>_AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>", OptionKind::kTolerance, 0, 0, 0, "none",
     "atol,rtol for one op and dtype (the op's name upper-cased)"},
    {"OP_FALLBACK_LIST", OptionKind::kList, 0, 0, 0, "none", "run the listed ops on the CPU reference"},
    {"OP_FALLBACK_DISABLE_LIST", OptionKind::kList, 0, 0, 0, "none",
     "run every op but these on the CPU reference"},
    {"OP_AUTO_FALLBACK", OptionKind::kFlag, 1, 0, 1, "1",
     "run an op on the CPU when the device answers NOT_SUPPORTED"},
    {"OP_TIME_MEASURE", OptionKind::kFlag, 0, 0, 1, "0",
     "time each listed op on the host and the device: trace.json, summary.txt, time_measure.csv"},
    {"OP_TIME_MEASURE_LIST", OptionKind::kList, 0, 0, 0, "every op", "the ops given spans of their own"},
    {"OP_TIME_MEASURE_DISABLE_LIST", OptionKind::kList, 0, 0, 0, "none", "ops not given spans of their own"},
    {"OP_TRACE_MAX_MB", OptionKind::kNumber, 1024, 1, std::uint64_t{1} << 30, "1024",
     "leave events out of the trace, with one warning, past this size", "--trace-max-mb"},
    {"OP_TRACE_GZIP", OptionKind::kFlag, 0, 0, 1, "0",
     "write the trace gzip-compressed (trace.json.gz, about 10x smaller; Perfetto and chrome://tracing open "
     "it)",
     "--trace-gzip"},
    {"OP_TRACE_SEGMENT_MB", OptionKind::kNumber, 256, 1, std::uint64_t{1} << 30, "256",
     "go on in a new trace file (trace.1.json, trace.2.json, ...), each complete, past this size",
     "--trace-segment-mb"},
    {"OP_TIME_MEASURE_SCHEDULE", OptionKind::kSchedule, 0, 0, 0, "the whole run",
     "skip_first,wait,warmup,active,repeat: profile only those steps (opscope_step())", "--schedule"},
    {"OP_OVERFLOW_CHECK", OptionKind::kFlag, 0, 0, 1, "0",
     "name the first op whose outputs hold NaN/Inf while its inputs do not", "--overflow-check"},
    {"OP_DUMP_ARGS", OptionKind::kNumber, 0, 0, 3, "0",
     "print each op: 1 its one-line form, 2 its arguments, 3 its tensors' values"},
    {"OP_SYNC_EXEC", OptionKind::kFlag, 0, 0, 1, "0", "synchronize the op's queue after every op"},
    {"OP_FLIGHT_RECORDER", OptionKind::kFlag, 1, 0, 1, "1 (in a rank of several)",
     "record the last collectives of each communicator (flight_recorder.json: at exit, on a timeout, an "
     "error, "
     "a fatal signal, SIGUSR1); on in a process that is one of several ranks"},
    {"OP_COLLECTIVE_RING", OptionKind::kNumber, 2000, 1, 1000000, "2000",
     "the flight recorder's collectives kept per communicator"},
    {"OP_COLLECTIVE_TIMEOUT_S", OptionKind::kNumber, 300, 0, 31536000, "300",
     "a collective not completed after this long dumps every rank's flight recorder (0: never)"},
    {"OP_COLLECTIVE_TIMEOUT_ACTION", OptionKind::kText, 0, 0, 0, "abort",
     "after such a dump: abort (naming the collective) or dump (only)"},
    {"OP_RANK_CONSISTENCY", OptionKind::kFlag, 0, 0, 1, "0",
     "in a rank of several: hash what data parallelism keeps identical (parameters after each optimizer op, "
     "gradients after each all-reduce) into consistency.jsonl; opscope analyze finds where replicas differ"},
    {"MEM_CHECK", OptionKind::kFlag, 0, 0, 1, "0",
     "check device memory: leaks, bad frees, writes past an allocation, use after free"},
    {"MEM_CHECK_ENABLE_BACKTRACE", OptionKind::kFlag, 0, 0, 1, "0", "record a backtrace at every allocation"},
    {"MEM_CHECK_BACKTRACE_DEPTH", OptionKind::kNumber, 32, 1, 256, "32", "frames per backtrace"},
    {"MEM_CHECK_REDZONE", OptionKind::kNumber, 64, 0, std::uint64_t{1} << 20, "64",
     "red-zone bytes after each device allocation"},
    {"MEM_CHECK_ABORT_ON_ERROR", OptionKind::kFlag, 0, 0, 1, "0", "abort at the first memory error"},
    {"MEM_CHECK_QUARANTINE_MB", OptionKind::kNumber, 64, 0, std::uint64_t{1} << 20, "64",
     "freed device memory held back, so that use after free is seen"},
    {"OPSCOPE_RESULT_DIR", OptionKind::kText, 0, 0, 0, "./opscope_results", "where result directories go"},
    {"OPSCOPE_HOOK_LIB", OptionKind::kLauncher, 0, 0, 0, "next to opscope",
     "the libopscope.so that `opscope run` preloads"},
    {"OPSCOPE_RUN_FOLDER", OptionKind::kLauncher, 0, 0, 0, "set by opscope run",
     "the folder the ranks of one multi-process job write their result directories into"},
    {"OPSCOPE_JOB_ID", OptionKind::kLauncher, 0, 0, 0, "set by opscope run",
     "the job the ranks are part of, which keeps two jobs that share a run folder apart"},
};

// The row whose `opscope run` flag is flag ("--overflow-check"), or nullptr.
constexpr const Option* findRunFlag(std::string_view flag) {
  for (const Option& o : kOptions) {
    if (!o.run_flag.empty() && o.run_flag == flag) return &o;
  }
  return nullptr;
}

// The row of name (a plain name, not a <DTYPE>/<OP> pattern), or nullptr.
constexpr const Option* findOption(std::string_view name) {
  for (const Option& o : kOptions) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// The default of a flag or number (a compile error, in a constant expression, for a name not in the table).
constexpr std::uint64_t optionDefault(std::string_view name) { return findOption(name)->fallback; }

// The row of name; a name missing from the table is a programming error (std::logic_error).
const Option& option(std::string_view name);

// For an environment variable that is not one of opscope's but is within two edits of one of its names
// (a typo: OP_CAPTUER, MEM_CHEK), that name; empty otherwise.
std::string closeOptionName(std::string_view name);

// `opscope env`: the table as text, one variable a line with its default and help.
std::string optionsListing();

}  // namespace opscope
