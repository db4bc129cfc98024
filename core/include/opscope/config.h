// config.h — the hook layer's configuration: every environment variable of DESIGN.md's table, read once
// at load, validated, and shared read-only by the tools.
#pragma once

#include <mlu/mluops.h>
#include <mlu/op_args.h>
#include <opscope/call_sample.h>
#include <opscope/op_call.h>
#include <opscope/options.h>
#include <opscope/tolerance.h>

#include <bitset>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace opscope {

// A malformed variable: the message names the variable and the bad item.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which op calls a tool applies to: LIST and DISABLE_LIST, comma-separated items, whitespace-trimmed. An item
//   - "aten::REGEX" matches a call made inside a framework op whose name REGEX matches whole, at any depth
//     of the call's framework stack (OpCall::framework_op: "aten::linear > aten::addmm");
//   - "module:REGEX" matches a call made in a module whose path REGEX matches whole (OpCall::site's module:
//     "layer1.0.conv1"; a backward call is in its forward op's module);
//   - anything else matches an op when it equals the op's name or its C symbol (mluopConvolutionForward),
//     or, as a regular expression, matches the whole name.
// Regular expressions are RE2's (linear time: no pattern can hang the program). The disable list wins; a
// disable list alone means "every call except these". Kernel-op items are decided per op once, at start;
// framework items per distinct framework stack and module (cached). A filter copied (the tools keep copies of
// the configuration's) shares what matched, for the end-of-run warning of a list that matched nothing.
class OpFilter {
 public:
  OpFilter() { matches_.set(); }
  // variable names are for messages. list == nullopt means "not set" (every op).
  // An item that matches no op adds a warning naming the closest op names to *warnings.
  static OpFilter parse(const std::string& list_variable, const std::optional<std::string>& list,
                        const std::string& disable_variable, const std::optional<std::string>& disable,
                        std::vector<std::string>* warnings = nullptr);
  // By the kernel-op items alone (framework items left out): the ops the filter can take at all.
  bool matches(mlu::OpId op) const { return matches_.test(static_cast<std::size_t>(op)); }
  // Whether the filter takes this call (and it is remembered that the lists were offered a call, and what
  // matched).
  bool matches(const OpCall& call) const { return state_ == nullptr ? matches(call.op) : matchesCall(call); }
  std::size_t count() const { return matches_.count(); }
  // Whether an item of either list is an aten:: or module: item.
  bool hasFrameworkItems() const;
  // After a run: each list, or framework item, that was offered calls and matched none of them, as
  // "OP_CAPTURE_LIST: 'aten::adm' matched no call of this run".
  std::vector<std::string> unmatched() const;

 private:
  struct State;
  bool matchesCall(const OpCall& call) const;
  std::bitset<mlu::kOpCount> matches_;
  std::shared_ptr<State> state_;  // null: no list set (every call)
};

// The longest list item: a longer one is refused (an op name is under 40 characters).
inline constexpr std::size_t kMaxListItemLength = 1000;

// Ops by name, C symbol or regex, for one list variable (its aten:: and module: items are left out). Throws
// ConfigError for an item that is too long or not a valid regex; an item that matches no op adds
// "VARIABLE: 'item' matches no op (closest: a, b, c)" to *warnings.
std::bitset<mlu::kOpCount> matchList(const std::string& variable, const std::string& list,
                                     std::vector<std::string>* warnings = nullptr);

// OP_TIME_MEASURE_SCHEDULE=skip_first,wait,warmup,active,repeat, with the PyTorch profiler's meaning: steps
// (counted by opscope_step()) 0..skip_first-1 are not profiled; then each cycle is wait steps off, warmup
// steps off (the profiler's own warm-up: nothing to do here), active steps recorded into one trace
// (trace_step<N>.json, N the cycle's first active step); repeat cycles, or forever when repeat is 0.
struct ProfileSchedule {
  std::uint64_t skip_first = 0;
  std::uint64_t wait = 0;
  std::uint64_t warmup = 0;
  std::uint64_t active = 1;
  std::uint64_t repeat = 0;

  // Whether step (from 0) is recorded, and the first step of its active window.
  bool recorded(std::uint64_t step, std::uint64_t* window_start = nullptr) const {
    if (step < skip_first) return false;
    const std::uint64_t cycle = wait + warmup + active;
    const std::uint64_t rel = step - skip_first;
    if (repeat != 0 && rel / cycle >= repeat) return false;
    const std::uint64_t in_cycle = rel % cycle;
    if (in_cycle < wait + warmup) return false;
    if (window_start != nullptr) *window_start = step - (in_cycle - wait - warmup);
    return true;
  }
};

// A Config member's value before parseConfig sets it: the row's default (an OpFilter: every op).
template <class T>
constexpr T optionInitial(std::uint64_t fallback) {
  if constexpr (std::is_same_v<T, bool>) {
    return fallback != 0;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(fallback);
  } else {
    return T{};
  }
}

// The hook's configuration.
struct Config {
  // One member per OPSCOPE_OPTION row of options.inc (capture, capture_ops, capture_max_mb, ...; mem_check,
  // mem_check_backtrace_depth, ...), of the row's type and default, set by parseConfig.
#define OPSCOPE_OPTION(name, kind, type, member, fallback, ...) type member = optionInitial<type>(fallback);
#define OPSCOPE_OPTION_BY_HAND(...)
#include <opscope/options.inc>
#undef OPSCOPE_OPTION
#undef OPSCOPE_OPTION_BY_HAND

  // What parseConfig makes of the rows read by hand, and of rows together:
  // OP_CAPTURE_MODE=stats: statistics of every tensor, whole tensors only around triggers (a ring of the
  // last capture_ring op calls before the first NaN/Inf and before each auto-compare failure).
  bool capture_stats = false;
  // OP_AUTOCOMPARE_VERDICT=tolerance: every output within its tolerance, whatever its op's class (the
  // default, class: exact ops must match exactly; compare/op_class.h).
  bool verdict_tolerance_only = false;
  // OP_AUTOCOMPARE_SAMPLE, OP_CAPTURE_SAMPLE: which calls of a long run compare and capture take
  // (call_sample.h); unset: every call.
  SampleSpec autocompare_sample;
  SampleSpec capture_sample;
  // OP_DTYPE_CAST: the dtype each cast dtype runs in (fp16:fp32 -> {FLOAT16: FLOAT32}); empty: off.
  std::map<mluopDataType_t, mluopDataType_t> dtype_cast;
  std::optional<Tolerance> tolerance;                    // AUTOCOMPARE_ERROR_TOLERANCE
  std::map<mluopDataType_t, Tolerance> dtype_tolerance;  // AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>
  std::map<std::pair<mlu::OpId, mluopDataType_t>, Tolerance> op_tolerance;  // <OP>_AUTOCOMPARE_..._<DTYPE>
  bool fallback = false;                    // OP_FALLBACK_LIST or OP_FALLBACK_DISABLE_LIST set
  std::optional<ProfileSchedule> schedule;  // OP_TIME_MEASURE_SCHEDULE; unset: the whole run in trace.json
  // flight_recorder and rank_consistency hold only in a process that is one of several ranks.
  bool collective_timeout_abort = true;         // OP_COLLECTIVE_TIMEOUT_ACTION=abort
  std::string result_root = "opscope_results";  // OPSCOPE_RESULT_DIR

  // Every flag and number of the option table as parsed (the row's default when unset), and every op list
  // with its disable list (<NAME>_LIST with <NAME>_DISABLE_LIST): what a tool reads its own options with,
  // so that a new option needs only its row in options.h; number(<NAME>_LIST) is 1 when that list or its
  // disable list was set. A name with no row is a programming error (std::logic_error).
  bool flag(std::string_view name) const { return number(name) != 0; }
  std::uint64_t number(std::string_view name) const;
  const OpFilter& ops(std::string_view list_name) const;
  std::map<std::string, std::uint64_t, std::less<>> values;
  std::map<std::string, OpFilter, std::less<>> filters;

  // Every variable that was set, as NAME=value, in the order read (for the "option" lines and the run
  // record).
  std::vector<std::pair<std::string, std::string>> set_options;
  // What is allowed but probably not meant (a list item that matches no op), printed once at start.
  std::vector<std::string> warnings;

  // Of the tools the hook installs itself (capture, auto-compare, fallback, OP_SYNC_EXEC, OP_DUMP_ARGS; the
  // hook adds those that register themselves, hooks/src/tools.cpp): one that writes into the result
  // directory is on; one that watches runtime calls is (fallback does not); one that looks at op calls is.
  bool writesResults() const { return capture || autocompare || fallback; }
  bool installsTools() const { return capture || autocompare; }
  bool watchesOps() const { return capture || autocompare || fallback || dump_args > 0 || sync_exec; }
};

// Parses the configuration from an environment. getenv returns nullptr for unset variables; environ lists
// "NAME=value" entries (for the per-dtype and per-op tolerance variables). Throws ConfigError.
Config parseConfig(const std::function<const char*(const char*)>& getenv,
                   const std::vector<std::string>& environ_entries);

// The process's environment as "NAME=value" entries (environ).
std::vector<std::string> environEntries();

// parseConfig of the process's own environment (the hook at start-up, op-replay's verdicts).
Config configFromEnvironment();

}  // namespace opscope
