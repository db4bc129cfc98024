// options.h — every environment variable opscope reads, one row each (options.inc, in the manner of the op
// schema and of compiler-rt's sanitizer_flags.inc): name, kind, default, range, a one-line help and the
// `opscope run` flag that sets it. parseConfig takes
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
  // The `opscope run` flag that sets it, if any (options.inc says which take a value), and the NAME=VALUE
  // it sets too (--capture: OP_CAPTURE=1). The launcher handles every such row; `opscope env` shows them.
  std::string_view run_flag = {};
  std::string_view run_also = {};
};

inline constexpr std::uint64_t kNoLimit = ~std::uint64_t{0};

// The table, from options.inc's rows.
inline constexpr Option kOptions[] = {
#define OPSCOPE_OPTION(name, kind, type, member, fallback, min, max, shown, help, run_flag, run_also) \
  {name, OptionKind::kind, fallback, min, max, shown, help, run_flag, run_also},
#define OPSCOPE_OPTION_BY_HAND(name, kind, fallback, min, max, shown, help, run_flag, run_also) \
  {name, OptionKind::kind, fallback, min, max, shown, help, run_flag, run_also},
#include <opscope/options.inc>
#undef OPSCOPE_OPTION
#undef OPSCOPE_OPTION_BY_HAND
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

// How a row's `opscope run` flag is written: "--overflow-check", "--capture[=LIST]", "--fallback=LIST",
// "--trace-max-mb=N", "--out=VALUE".
std::string runFlagUsage(const Option& row);

// `opscope env`: the table as text, one variable a line with its default and help.
std::string optionsListing();

}  // namespace opscope
