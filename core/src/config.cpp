#include <opscope/config.h>
#include <opscope/run_info.h>
#include <opscope/text.h>

#include <mlu/dtype.h>

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include <unistd.h>

namespace opscope {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Reads the variables and remembers which were set.
class Reader {
 public:
  Reader(const std::function<const char*(const char*)>& getenv, Config& config)
      : getenv_(getenv), config_(config) {}

  std::optional<std::string> text(const char* name) {
    static_cast<void>(option(name));  // every variable read has its row in options.h
    const char* v = getenv_(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    config_.set_options.emplace_back(name, v);
    return std::string(v);
  }

  // A flag or a number takes its default and range from its row of options.h.
  bool flag(const char* name) {
    const auto v = text(name);
    if (!v) return option(name).fallback != 0;
    const std::string t = upper(trim(*v));
    if (t == "1" || t == "TRUE" || t == "ON" || t == "YES") return true;
    if (t == "0" || t == "FALSE" || t == "OFF" || t == "NO") return false;
    throw ConfigError(fmt::format("{}: '{}' is not a boolean (use 1 or 0)", name, *v));
  }

  std::uint64_t number(const char* name) {
    const Option& row = option(name);
    const std::uint64_t lo = row.min, hi = row.max;
    const auto v = text(name);
    if (!v) return row.fallback;
    const std::string t = trim(*v);
    if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw ConfigError(fmt::format("{}: '{}' is not a whole number", name, *v));
    }
    errno = 0;
    const unsigned long long x = std::strtoull(t.c_str(), nullptr, 10);
    if (errno == ERANGE || x < lo || x > hi) {
      throw ConfigError(fmt::format("{}: {} is out of range ({} to {})", name, t, lo, hi));
    }
    return x;
  }

 private:
  const std::function<const char*(const char*)>& getenv_;
  Config& config_;
};

Tolerance parseTolerance(const std::string& name, const std::string& value) {
  const auto comma = value.find(',');
  auto number = [&](std::string_view item) {
    const std::string t = trim(item);
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(t.c_str(), &end);
    const bool parsed = !t.empty() && *end == '\0';
    if (parsed && errno == ERANGE && std::fabs(x) < 1.0) {  // underflow: subnormal (kept) or 0
      if (x == 0) {                                         // 1e-400: a number, but below any double
        throw ConfigError(fmt::format(
            "{}: '{}' is too small to represent (the smallest tolerance above 0 is about 5e-324; 0 is exact)",
            name, t));
      }
      errno = 0;
    }
    if (!parsed || errno == ERANGE || !std::isfinite(x) || x < 0) {
      throw ConfigError(
          fmt::format("{}: '{}' is not a non-negative number (expected atol,rtol as in 1e-5,1e-5)", name, t));
    }
    return x;
  };
  if (comma == std::string::npos || value.find(',', comma + 1) != std::string::npos) {
    throw ConfigError(fmt::format("{}: '{}' is not atol,rtol (two numbers, as in 1e-5,1e-5)", name, value));
  }
  return {number(std::string_view(value).substr(0, comma)),
          number(std::string_view(value).substr(comma + 1))};
}

ProfileSchedule parseSchedule(const std::string& name, const std::string& value) {
  std::vector<std::uint64_t> items;
  std::size_t start = 0;
  while (start <= value.size()) {
    const auto end = std::min(value.find(',', start), value.size());
    const std::string t = trim(std::string_view(value).substr(start, end - start));
    if (t.empty() || t.size() > 9 ||
        !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw ConfigError(
          fmt::format("{}: '{}' is not a whole number (expected skip_first,wait,warmup,active,repeat "
                      "as in 0,1,1,3,2)",
                      name, t));
    }
    items.push_back(std::stoull(t));
    start = end + 1;
  }
  if (items.size() != 5) {
    throw ConfigError(fmt::format("{}: '{}' has {} numbers; expected 5: skip_first,wait,warmup,active,repeat",
                                  name, value, items.size()));
  }
  if (items[3] == 0) throw ConfigError(fmt::format("{}: active must be at least 1", name));
  return {items[0], items[1], items[2], items[3], items[4]};
}

// FLOAT32 / FLOAT16 / BFLOAT16 / FLOAT64 / INT8 ... / BOOL, and the aliases FLOAT, HALF, DOUBLE.
std::optional<mluopDataType_t> dtypeFromUpper(std::string_view name) {
  if (name == "FLOAT") return MLUOP_DTYPE_FLOAT;
  if (name == "HALF") return MLUOP_DTYPE_HALF;
  if (name == "DOUBLE") return MLUOP_DTYPE_DOUBLE;
  for (int d = MLUOP_DTYPE_FLOAT; d <= MLUOP_DTYPE_BOOL; ++d) {
    const auto dtype = static_cast<mluopDataType_t>(d);
    if (upper(mlu::dtypeName(dtype)) == name) return dtype;
  }
  return std::nullopt;
}

constexpr std::string_view kToleranceVar = "AUTOCOMPARE_ERROR_TOLERANCE";

// AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE> and <OP>_AUTOCOMPARE_ERROR_TOLERANCE_<DTYPE>.
void parseToleranceVariables(const std::vector<std::string>& environ_entries, Config& config) {
  for (const auto& entry : environ_entries) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    const std::string value = entry.substr(eq + 1);
    if (value.empty()) continue;  // empty means unset, as for every variable
    const auto at = name.find(kToleranceVar);
    if (at == std::string::npos || name == kToleranceVar) continue;
    const std::string_view rest = std::string_view(name).substr(at + kToleranceVar.size());
    if (!rest.starts_with("_")) continue;
    const std::string_view dtype_name = rest.substr(1);
    const auto dtype = dtypeFromUpper(dtype_name);
    if (!dtype) {
      throw ConfigError(
          fmt::format("{}: unknown dtype '{}' (FLOAT32, FLOAT16, BFLOAT16, FLOAT64, INT8, INT16, "
                      "INT32, INT64, UINT8, BOOL)",
                      name, dtype_name));
    }
    config.set_options.emplace_back(name, value);
    const Tolerance tolerance = parseTolerance(name, value);
    if (at == 0) {
      config.dtype_tolerance[*dtype] = tolerance;
      continue;
    }
    // <OP>_ prefix: the op name upper-cased.
    const std::string_view op_upper = std::string_view(name).substr(0, at);
    if (!op_upper.ends_with("_")) {
      throw ConfigError(fmt::format("{}: expected <OP>_{}_<DTYPE>", name, kToleranceVar));
    }
    const std::string wanted(op_upper.substr(0, op_upper.size() - 1));
    bool found = false;
    for (std::size_t i = 0; i < mlu::kOpCount && !found; ++i) {
      const auto op = static_cast<mlu::OpId>(i);
      if (upper(mlu::opName(op)) == wanted) {
        config.op_tolerance[{op, *dtype}] = tolerance;
        found = true;
      }
    }
    if (!found) throw ConfigError(fmt::format("{}: no op is named '{}' (see `opscope ops`)", name, wanted));
  }
}

}  // namespace

namespace {

// Levenshtein distance of a and b, case-insensitive (a list item against an op name).
std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The row of a plain option name (not a <DTYPE>/<OP> pattern) within two edits of name, or nullptr.
const Option* closestOption(std::string_view name) {
  const Option* best = nullptr;
  std::size_t best_distance = 3;
  for (const Option& o : kOptions) {
    if (o.name.find('<') != std::string_view::npos) continue;
    const std::size_t d = editDistance(name.substr(0, 64), o.name);
    if (d < best_distance) {
      best = &o;
      best_distance = d;
    }
  }
  return best;
}

// The three op names closest to item, "a, b, c".
std::string closestOps(std::string_view item) {
  std::vector<std::pair<std::size_t, std::string_view>> by_distance;
  for (std::size_t i = 0; i < mlu::kOpCount; ++i) {
    const std::string_view name = mlu::opName(static_cast<mlu::OpId>(i));
    by_distance.emplace_back(editDistance(item.substr(0, 64), name), name);
  }
  std::sort(by_distance.begin(), by_distance.end());
  std::string out;
  for (std::size_t k = 0; k < 3 && k < by_distance.size(); ++k)
    out += fmt::format("{}{}", k ? ", " : "", by_distance[k].second);
  return out;
}

}  // namespace

const Option& option(std::string_view name) {
  const Option* o = findOption(name);
  if (o == nullptr) throw std::logic_error(fmt::format("{} has no row in options.h", name));
  return *o;
}

std::string closeOptionName(std::string_view name) {
  if (name.size() < 6 || findOption(name) != nullptr) return "";
  if (name.find(kToleranceVar) != std::string_view::npos) return "";  // the tolerance patterns' own checks
  const Option* close = closestOption(name);
  return close == nullptr ? "" : std::string(close->name);
}

std::string runFlagUsage(const Option& o) {
  switch (o.kind) {
    case OptionKind::kFlag:
      return std::string(o.run_flag);
    case OptionKind::kList:
      return fmt::format("{}{}", o.run_flag, o.run_also.empty() ? "=LIST" : "[=LIST]");
    case OptionKind::kNumber:
      return fmt::format("{}=N", o.run_flag);
    default:
      return fmt::format("{}=VALUE", o.run_flag);
  }
}

std::string optionsListing() {
  static constexpr std::string_view kKinds[] = {"flag",      "number",   "op list", "text",
                                                "atol,rtol", "schedule", "launcher"};
  std::string out = fmt::format("{:<42} {:<13} {:<18} {}\n", "variable", "kind", "default", "what it does");
  for (const Option& o : kOptions) {
    std::string kind(kKinds[static_cast<std::size_t>(o.kind)]);
    if (o.kind == OptionKind::kNumber) kind = fmt::format("{}-{}", o.min, o.max);
    out += fmt::format("{:<42} {:<13} {:<18} {}{}\n", o.name, kind, o.shown_default, o.help,
                       o.run_flag.empty() ? "" : fmt::format(" (opscope run {})", runFlagUsage(o)));
  }
  out +=
      "Empty values mean unset. Lists: op names, C symbols or RE2 regular expressions, comma-separated;\n"
      "aten::REGEX matches the calls inside a matching PyTorch op, module:REGEX those in a matching\n"
      "nn.Module path.\n";
  return out;
}

namespace {

constexpr std::string_view kAtenPrefix = "aten::";
constexpr std::string_view kModulePrefix = "module:";

bool isFrameworkItem(std::string_view item) {
  return item.starts_with(kAtenPrefix) || item.starts_with(kModulePrefix);
}

// Each non-empty item of a list, trimmed, with its number from 1 (for messages); too long an item throws.
template <typename F>
void forEachItem(const std::string& variable, const std::string& list, F&& f) {
  std::size_t start = 0;
  int index = 0;
  while (start <= list.size()) {
    const auto end = std::min(list.find(',', start), list.size());
    const std::string item = trim(std::string_view(list).substr(start, end - start));
    ++index;
    start = end + 1;
    if (item.empty()) continue;
    if (item.size() > kMaxListItemLength) {
      throw ConfigError(fmt::format("{}: item {} is {} characters long (at most {}): '{:.40}...'", variable,
                                    index, item.size(), kMaxListItemLength, item));
    }
    f(item, index);
  }
}

std::unique_ptr<RE2> compile(const std::string& variable, const std::string& item, std::string_view pattern,
                             int index) {
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    throw ConfigError(
        fmt::format("{}: invalid regular expression '{}' (item {}): {}", variable, item, index, re->error()));
  }
  return re;
}

}  // namespace

std::bitset<mlu::kOpCount> matchList(const std::string& variable, const std::string& list,
                                     std::vector<std::string>* warnings) {
  std::bitset<mlu::kOpCount> result;
  forEachItem(variable, list, [&](const std::string& item, int index) {
    if (isFrameworkItem(item)) return;  // OpFilter's
    // A name or a C symbol (mluopConvolutionForward) names its op.
    if (mlu::OpId op; mlu::findOp(item, &op)) {
      result.set(static_cast<std::size_t>(op));
      return;
    }
    const auto re = compile(variable, item, item, index);
    bool any = false;
    for (std::size_t i = 0; i < mlu::kOpCount; ++i) {
      const std::string_view name = mlu::opName(static_cast<mlu::OpId>(i));
      if (RE2::FullMatch(re2::StringPiece(name.data(), name.size()), *re)) {
        result.set(i);
        any = true;
      }
    }
    if (!any && warnings != nullptr) {
      warnings->push_back(
          fmt::format("{}: '{}' (item {}) matches no op (closest: {}; `opscope ops` lists them)", variable,
                      item, index, closestOps(item)));
    }
  });
  return result;
}

// One list of a filter: its kernel ops, its framework items, and whether it matched a call yet.
struct FilterList {
  struct FrameworkItem {
    std::string text;  // as written: "module:layer1\..*"
    bool module = false;
    std::unique_ptr<RE2> re;
    mutable std::atomic<bool> hit{false};
  };
  bool set = false;
  std::string variable;
  std::string value;
  std::bitset<mlu::kOpCount> ops;
  std::vector<std::unique_ptr<FrameworkItem>> framework;
  mutable std::atomic<bool> hit{false};

  void parse(const std::string& name, const std::string& list, std::vector<std::string>* warnings) {
    set = true;
    variable = name;
    value = list;
    ops = matchList(name, list, warnings);
    forEachItem(name, list, [&](const std::string& item, int index) {
      if (!isFrameworkItem(item)) return;
      auto f = std::make_unique<FrameworkItem>();
      f->text = item;
      f->module = item.starts_with(kModulePrefix);
      // aten::REGEX matches the whole op name, prefix included; module:REGEX the path after the prefix.
      f->re =
          compile(name, item, f->module ? std::string_view(item).substr(kModulePrefix.size()) : item, index);
      framework.push_back(std::move(f));
    });
  }
  // Whether one of the framework items matches the call's stack or module (and each that does is marked).
  bool frameworkMatches(std::string_view stack, std::string_view module) const {
    bool any = false;
    for (const auto& f : framework) {
      bool m = false;
      if (f->module) {
        m = !module.empty() && RE2::FullMatch(re2::StringPiece(module.data(), module.size()), *f->re);
      } else {
        std::string_view rest = stack;
        while (!rest.empty() && !m) {
          const auto sep = rest.find(" > ");
          const std::string_view name = rest.substr(0, sep);
          m = RE2::FullMatch(re2::StringPiece(name.data(), name.size()), *f->re);
          rest = sep == std::string_view::npos ? std::string_view() : rest.substr(sep + 3);
        }
      }
      if (m) f->hit.store(true, std::memory_order_relaxed);
      any = any || m;
    }
    return any;
  }
  void unmatched(std::vector<std::string>& out) const {
    if (!set) return;
    if (!hit.load(std::memory_order_relaxed)) {
      out.push_back(fmt::format("{}='{}' matched no call of this run", variable, value));
      return;
    }
    for (const auto& f : framework) {
      if (!f->hit.load(std::memory_order_relaxed))
        out.push_back(fmt::format("{}: '{}' matched no call of this run", variable, f->text));
    }
  }
};

struct OpFilter::State {
  FilterList list;
  FilterList disable;
  bool framework = false;  // some item of either list is a framework item
  mutable std::atomic<bool> offered{false};
  // (stack, module) -> whether the list's and the disable list's framework items match, for the stacks
  // seen so far (bounded: past the limit each call is matched afresh).
  struct Decision {
    bool in = false;
    bool out = false;
  };
  static constexpr std::size_t kMaxCached = 65536;
  mutable std::mutex mutex;
  mutable std::unordered_map<std::string, Decision> cache;

  Decision decide(std::string_view stack, std::string_view module) const {
    thread_local std::string key;
    key.assign(stack).append(1, '\0').append(module);
    {
      const std::lock_guard lock(mutex);
      if (auto it = cache.find(key); it != cache.end()) return it->second;
    }
    const Decision d{list.frameworkMatches(stack, module), disable.frameworkMatches(stack, module)};
    const std::lock_guard lock(mutex);
    if (cache.size() < kMaxCached) cache.emplace(key, d);
    return d;
  }
};

OpFilter OpFilter::parse(const std::string& list_variable, const std::optional<std::string>& list,
                         const std::string& disable_variable, const std::optional<std::string>& disable,
                         std::vector<std::string>* warnings) {
  OpFilter f;
  if (!list && !disable) return f;
  auto state = std::make_shared<State>();
  if (list) state->list.parse(list_variable, *list, warnings);
  if (disable) state->disable.parse(disable_variable, *disable, warnings);
  state->framework = !state->list.framework.empty() || !state->disable.framework.empty();
  if (list) f.matches_ = state->list.ops;
  f.matches_ &= ~state->disable.ops;
  f.state_ = std::move(state);
  return f;
}

bool OpFilter::hasFrameworkItems() const { return state_ != nullptr && state_->framework; }

bool OpFilter::matchesCall(const OpCall& call) const {
  const State& s = *state_;
  if (!s.offered.load(std::memory_order_relaxed)) s.offered.store(true, std::memory_order_relaxed);
  const auto op = static_cast<std::size_t>(call.op);
  bool in = !s.list.set || s.list.ops.test(op);
  bool out = s.disable.ops.test(op);
  if (s.framework && !(in && out)) {
    const std::string_view module = call.site != nullptr ? std::string_view(call.site->module) : "";
    if (!call.framework_op.empty() || !module.empty()) {
      const State::Decision d = s.decide(call.framework_op, module);
      in = in || d.in;
      out = out || d.out;
    }
  }
  if (s.list.set && in && !s.list.hit.load(std::memory_order_relaxed))
    s.list.hit.store(true, std::memory_order_relaxed);
  if (out && !s.disable.hit.load(std::memory_order_relaxed))
    s.disable.hit.store(true, std::memory_order_relaxed);
  return in && !out;
}

std::vector<std::string> OpFilter::unmatched() const {
  std::vector<std::string> out;
  if (state_ == nullptr || !state_->offered.load(std::memory_order_relaxed)) return out;
  state_->list.unmatched(out);
  state_->disable.unmatched(out);
  return out;
}

std::uint64_t Config::number(std::string_view name) const {
  if (const auto it = values.find(name); it != values.end()) return it->second;
  const Option& row = option(name);             // throws for a name with no row
  if (row.kind == OptionKind::kList) return 0;  // a list that was not set
  return row.fallback;                          // a Config not made by parseConfig: the table's default
}

const OpFilter& Config::ops(std::string_view list_name) const {
  static const OpFilter kEveryOp;
  if (const auto it = filters.find(list_name); it != filters.end()) return it->second;
  static_cast<void>(option(list_name));  // throws for a name with no row
  return kEveryOp;
}

namespace {

// An OPSCOPE_OPTION row's member from the parsed values: a flag, a number (in the row's range, so it fits
// the member's type) or an op list with its disable list.
template <class T>
T memberValue(const Config& c, std::string_view name) {
  if constexpr (std::is_same_v<T, bool>) {
    return c.flag(name);
  } else if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<T>(c.number(name));
  } else {
    return c.ops(name);
  }
}

}  // namespace

std::vector<std::string> environEntries() {
  std::vector<std::string> entries;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) entries.emplace_back(*e);
  return entries;
}

Config configFromEnvironment() {
  return parseConfig([](const char* name) { return static_cast<const char*>(std::getenv(name)); },
                     environEntries());
}

namespace {

// OP_DTYPE_CAST=FROM:TO,...: float16 or bfloat16 (fp16, half, bf16) run as float32 (fp32, float).
std::map<mluopDataType_t, mluopDataType_t> parseDtypeCast(const std::string& variable,
                                                          const std::string& value) {
  auto dtypeOf = [](std::string_view name) {
    if (name == "fp16" || name == "float16" || name == "half") return MLUOP_DTYPE_HALF;
    if (name == "bf16" || name == "bfloat16") return MLUOP_DTYPE_BFLOAT16;
    if (name == "fp32" || name == "float32" || name == "float") return MLUOP_DTYPE_FLOAT;
    return MLUOP_DTYPE_INVALID;
  };
  std::map<mluopDataType_t, mluopDataType_t> casts;
  for (const std::string& item : listItems(value)) {
    const auto [from_name, to_name] = keyValue(item);
    const auto from = dtypeOf(from_name);
    const auto to = item.find(':') == std::string::npos ? MLUOP_DTYPE_INVALID : dtypeOf(to_name);
    if (from != MLUOP_DTYPE_HALF && from != MLUOP_DTYPE_BFLOAT16) {
      throw ConfigError(
          fmt::format("{}: '{}' does not cast fp16 or bf16 (use fp16:fp32,bf16:fp32)", variable, item));
    }
    if (to != MLUOP_DTYPE_FLOAT) {
      throw ConfigError(
          fmt::format("{}: '{}' does not cast to fp32, the device's widest float (use "
                      "fp16:fp32,bf16:fp32)",
                      variable, item));
    }
    casts[from] = to;
  }
  if (casts.empty()) throw ConfigError(fmt::format("{}: no cast given (use fp16:fp32,bf16:fp32)", variable));
  return casts;
}

}  // namespace

Config parseConfig(const std::function<const char*(const char*)>& getenv,
                   const std::vector<std::string>& environ_entries) {
  Config c;
  Reader r(getenv, c);
  // Every row in the table's order: flags and numbers into c.values, each op list with its disable list
  // into c.filters, the others by their own rules below.
  std::map<std::string, std::string, std::less<>> texts;
  for (const Option& o : kOptions) {
    const std::string name(o.name);
    switch (o.kind) {
      case OptionKind::kFlag:
        c.values[name] = r.flag(name.c_str()) ? 1 : 0;
        break;
      case OptionKind::kNumber:
        c.values[name] = r.number(name.c_str());
        break;
      case OptionKind::kList: {
        if (name.ends_with("_DISABLE_LIST")) break;  // read with its list
        const std::string disable = name.substr(0, name.size() - 5) + "_DISABLE_LIST";
        const bool has_disable = findOption(disable) != nullptr;
        const auto l = r.text(name.c_str());
        const auto d = has_disable ? r.text(disable.c_str()) : std::nullopt;
        c.filters[name] = OpFilter::parse(name, l, disable, d, &c.warnings);
        if (l || d) c.values[name] = 1;  // set (fallback: either list turns it on)
        break;
      }
      case OptionKind::kText:
      case OptionKind::kTolerance:
      case OptionKind::kSchedule:
        if (name.find('<') != std::string::npos) break;  // a pattern: parseToleranceVariables
        if (const auto v = r.text(name.c_str())) texts[name] = *v;
        break;
      case OptionKind::kLauncher:
        break;
    }
  }
  auto text = [&](std::string_view name) -> const std::string* {
    const auto it = texts.find(name);
    return it == texts.end() ? nullptr : &it->second;
  };

  // Each OPSCOPE_OPTION row's member, from what was read.
#define OPSCOPE_OPTION(name, kind, type, member, ...) c.member = memberValue<type>(c, name);
#define OPSCOPE_OPTION_BY_HAND(...)
#include <opscope/options.inc>
#undef OPSCOPE_OPTION
#undef OPSCOPE_OPTION_BY_HAND

  // The rows read by hand, and what rows mean together.
  if (const auto* mode = text("OP_CAPTURE_MODE")) {
    if (*mode != "tensors" && *mode != "stats") {
      throw ConfigError(
          fmt::format("OP_CAPTURE_MODE: '{}' is not a capture mode (use tensors or stats)", *mode));
    }
    c.capture_stats = *mode == "stats";
  }
  if (const auto* verdict = text("OP_AUTOCOMPARE_VERDICT")) {
    if (*verdict != "class" && *verdict != "tolerance") {
      throw ConfigError(
          fmt::format("OP_AUTOCOMPARE_VERDICT: '{}' is not a verdict (use class or tolerance)", *verdict));
    }
    c.verdict_tolerance_only = *verdict == "tolerance";
  }
  if (const auto* v = text("OP_AUTOCOMPARE_SAMPLE"))
    c.autocompare_sample = SampleSpec::parse("OP_AUTOCOMPARE_SAMPLE", *v);
  if (const auto* v = text("OP_CAPTURE_SAMPLE"))
    c.capture_sample = SampleSpec::parse("OP_CAPTURE_SAMPLE", *v);
  if (const auto* cast = text("OP_DTYPE_CAST")) c.dtype_cast = parseDtypeCast("OP_DTYPE_CAST", *cast);
  if (const auto* t = text("AUTOCOMPARE_ERROR_TOLERANCE")) {
    c.tolerance = parseTolerance("AUTOCOMPARE_ERROR_TOLERANCE", *t);
  }
  parseToleranceVariables(environ_entries, c);
  c.fallback = c.flag("OP_FALLBACK_LIST");  // either list set
  // The uninitialized-read and race checks are memcheck's.
  c.mem_check = c.mem_check || c.mem_check_init || c.mem_check_race;
  if (const auto* v = text("OP_TIME_MEASURE_SCHEDULE"))
    c.schedule = parseSchedule("OP_TIME_MEASURE_SCHEDULE", *v);
  {
    const auto [rank, world] = rankAndWorldSize(getenv);
    c.flight_recorder = c.flight_recorder && rank >= 0 && world > 1;
    c.rank_consistency = c.rank_consistency && rank >= 0 && world > 1;
  }
  if (const auto* action = text("OP_COLLECTIVE_TIMEOUT_ACTION")) {
    if (*action != "abort" && *action != "dump") {
      throw ConfigError(
          fmt::format("OP_COLLECTIVE_TIMEOUT_ACTION: '{}' is not an action (use abort or dump)", *action));
    }
    c.collective_timeout_abort = *action == "abort";
  }
  if (const auto* dir = text("OPSCOPE_RESULT_DIR")) c.result_root = *dir;

  // A variable one or two edits from one of ours is most likely a typo that would silently do nothing.
  for (const auto& entry : environ_entries) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (const std::string meant = closeOptionName(name); !meant.empty()) {
      c.warnings.push_back(
          fmt::format("{} is not an opscope variable; did you mean {}? (`opscope env` lists "
                      "them)",
                      name, meant));
    }
  }
  return c;
}

}  // namespace opscope
