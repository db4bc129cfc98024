#include <opscope/call_sample.h>
#include <opscope/config.h>
#include <opscope/text.h>

#include <fmt/format.h>
#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <type_traits>
#include <vector>

namespace opscope {

namespace {

// A whole decimal number in [1, 10^12], or nothing.
std::optional<std::uint64_t> count(std::string_view s, std::uint64_t min) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < min || v > 1'000'000'000'000)
    return std::nullopt;
  return v;
}

}  // namespace

SampleSpec SampleSpec::parse(const std::string& variable, const std::string& value) {
  SampleSpec spec;
  spec.variable = variable;
  spec.text = trim(value);
  auto bad = [&](const std::string& item, const char* why) {
    return ConfigError(fmt::format(
        "{}: '{}' {} (use first:N, every:K or steps:A-B, or several joined by commas: steps:10-19,first:2)",
        variable, item, why));
  };
  for (const std::string& item : listItems(value)) {
    const auto [kind, arg] = keyValue(item);
    if (kind == "first" || kind == "every") {
      auto& slot = kind == "first" ? spec.first : spec.every;
      if (slot) throw bad(item, "repeats a kind already given");
      slot = count(arg, 1);
      if (!slot) throw bad(item, "needs a whole number of at least 1");
    } else if (kind == "steps") {
      if (spec.steps) throw bad(item, "repeats a kind already given");
      const std::size_t dash = arg.find('-');
      const auto a = count(trim(arg.substr(0, dash)), 0);
      const auto b = dash == std::string::npos ? a : count(trim(arg.substr(dash + 1)), 0);
      if (!a || !b) throw bad(item, "needs steps A-B, whole numbers from 0");
      if (*b < *a) throw bad(item, "ends before it starts");
      spec.steps = std::pair{*a, *b};
    } else {
      throw bad(item, "is not a sampling");
    }
  }
  if (!spec.samples()) throw bad(value, "says no sampling");
  return spec;
}

std::string SampleSpec::describe() const {
  std::vector<std::string> parts;
  if (steps) {
    parts.push_back(steps->first == steps->second ? fmt::format("step {}", steps->first)
                                                  : fmt::format("steps {}-{}", steps->first, steps->second));
  }
  if (every) {
    const std::uint64_t k = *every;
    const char* suffix = k % 100 >= 11 && k % 100 <= 13 ? "th"
                         : k % 10 == 1                  ? "st"
                         : k % 10 == 2                  ? "nd"
                         : k % 10 == 3                  ? "rd"
                                                        : "th";
    parts.push_back(k == 1 ? std::string("every step")
                           : fmt::format("every {}{} step (steps 0, {}, {}, ...)", k, suffix, k, 2 * k));
  }
  if (first) {
    parts.push_back(fmt::format("the first {} call{} of each op signature", *first, *first == 1 ? "" : "s"));
  }
  std::string text;
  for (const std::string& p : parts) text += (text.empty() ? "" : ", ") + p;
  return text;
}

std::uint64_t opSignature(const OpCall& call) {
  std::vector<std::int64_t> words;
  words.reserve(64);
  words.push_back(static_cast<std::int64_t>(call.op));
  if (call.args != nullptr) {
    call.withArgs([&](const auto& args) {
      args.visit([&](const mlu::ArgMeta&, const auto& value) {
        using V = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<V, mlu::TensorView>) {
          words.push_back(value.present ? 1 + static_cast<std::int64_t>(value.dtype) : 0);
          words.push_back(value.ndim);
          for (int i = 0; i < value.ndim; ++i) {
            words.push_back(value.dim(i));
            words.push_back(value.stride(i));
          }
        } else if constexpr (std::is_same_v<V, mlu::IntList>) {
          words.push_back(static_cast<std::int64_t>(value.size()));
          words.insert(words.end(), value.begin(), value.end());
        } else if constexpr (std::is_same_v<V, bool> || std::is_integral_v<V> || std::is_enum_v<V>) {
          words.push_back(static_cast<std::int64_t>(value));
        }
        // Floating-point scalars (a learning rate, a fill value) and pointers are not part of it.
      });
    });
  }
  return XXH3_64bits(words.data(), words.size() * sizeof(std::int64_t));
}

bool CallSampler::take(const OpCall& call) {
  if (!spec_.samples()) return true;
  const std::uint64_t step = step_.load(std::memory_order_relaxed);
  bool take = true;
  if (spec_.steps && (step < spec_.steps->first || step > spec_.steps->second)) take = false;
  if (take && spec_.every && step % *spec_.every != 0) take = false;
  if (take && spec_.first) {
    const std::uint64_t signature = opSignature(call);
    std::lock_guard lock(mutex_);
    std::uint64_t& calls = seen_[signature];
    if (calls >= *spec_.first) {
      take = false;
    } else {
      ++calls;
    }
  }
  (take ? taken_ : skipped_).fetch_add(1, std::memory_order_relaxed);
  return take;
}

std::size_t CallSampler::signatures() const {
  std::lock_guard lock(mutex_);
  return seen_.size();
}

nlohmann::json samplingFindings(const CallSampler& sampler) {
  nlohmann::json j = {{"sample", sampler.spec().text},
                      {"what", sampler.spec().describe()},
                      {"taken", sampler.taken()},
                      {"skipped", sampler.skipped()},
                      {"steps", sampler.steps()}};
  if (sampler.spec().first) j["signatures"] = sampler.signatures();
  return j;
}

std::string samplingLine(const CallSampler& sampler, std::string_view verb) {
  const SampleSpec& spec = sampler.spec();
  return fmt::format("{}={} ({}): {} calls {}, {} not ({}{} steps)", spec.variable, spec.text,
                     spec.describe(), sampler.taken(), verb, sampler.skipped(),
                     spec.first ? fmt::format("{} op signatures, ", sampler.signatures()) : std::string(),
                     sampler.steps());
}

}  // namespace opscope
