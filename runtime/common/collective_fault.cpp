#include "collective_fault.h"

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace mlu {
namespace {

constexpr std::array<std::string_view, 7> kCollectives = {
    "allreduce", "broadcast", "allgather", "reduce_scatter", "send", "recv", "barrier"};
constexpr double kMaxDelayMs = 3600.0 * 1000;

bool parseWhole(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t* out) {
  if (text.starts_with('+')) text.remove_prefix(1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc{} && end == text.data() + text.size() && !text.empty() && *out >= lo && *out <= hi;
}

}  // namespace

std::string_view trimFaultText(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool parseFaultNumber(std::string_view text, double* out) {
  const std::string copy(text);  // strtod needs a terminated string
  if (copy.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && std::isfinite(*out);
}

bool isCollectiveName(std::string_view name) {
  for (std::string_view c : kCollectives)
    if (c == name) return true;
  return false;
}

std::variant<CollectiveFault, std::string> parseCollectiveFault(std::string_view item) {
  auto bad = [&](std::string_view why) { return fmt::format("MLU_SIM_FAULT item '{}': {}", item, why); };
  const std::size_t colon = item.find(':');
  if (colon == std::string_view::npos) return bad("expected collective:kind[=value][@rank=R][@call=N]");
  CollectiveFault f;
  f.collective = std::string(trimFaultText(item.substr(0, colon)));
  if (!isCollectiveName(f.collective))
    return bad(
        fmt::format("unknown op or collective '{}' (collectives: allreduce, broadcast, allgather, "
                    "reduce_scatter, send, recv, barrier)",
                    f.collective));
  std::string_view rest = trimFaultText(item.substr(colon + 1));

  // The kind, then '@'-separated qualifiers.
  const std::size_t at = rest.find('@');
  const std::string_view head = trimFaultText(rest.substr(0, at));
  std::string_view quals = at == std::string_view::npos ? std::string_view{} : rest.substr(at + 1);
  std::string_view kind = head, value;
  bool has_value = false;
  if (const std::size_t eq = head.find('='); eq != std::string_view::npos) {
    kind = trimFaultText(head.substr(0, eq));
    value = trimFaultText(head.substr(eq + 1));
    has_value = true;
  }
  bool has_fraction = false;
  while (at != std::string_view::npos) {
    const std::size_t next = quals.find('@');
    const std::string_view q = trimFaultText(quals.substr(0, next));
    std::int64_t n = 0;
    if (q.starts_with("rank=")) {
      if (!parseWhole(q.substr(5), 0, 1 << 20, &n)) return bad("'@rank=' needs a rank number (0 or more)");
      f.rank = static_cast<int>(n);
    } else if (q.starts_with("call=")) {
      if (!parseWhole(q.substr(5), 1, std::int64_t{1} << 62, &n))
        return bad("'@call=' needs a call number (1 or more)");
      f.call = n;
    } else if (parseFaultNumber(q, &f.fraction)) {
      if (f.fraction <= 0 || f.fraction > 1) return bad("the fraction after '@' must be a number in (0, 1]");
      has_fraction = true;
    } else {
      return bad(fmt::format("unknown qualifier '@{}' (rank=R, call=N or a fraction)", q));
    }
    if (next == std::string_view::npos) break;
    quals = quals.substr(next + 1);
  }

  auto noValue = [&]() -> std::string {
    if (has_value) return bad(fmt::format("'{}' takes no value", kind));
    return {};
  };
  std::string error;
  if (kind == "hang" || kind == "skip") {
    f.kind = kind == "hang" ? CollectiveFaultKind::kHang : CollectiveFaultKind::kSkip;
    error = noValue();
  } else if (kind == "count") {
    f.kind = CollectiveFaultKind::kCount;
    std::int64_t d = -1;
    if (has_value && (!parseWhole(value, -(std::int64_t{1} << 40), std::int64_t{1} << 40, &d) || d == 0))
      error = bad("'count' needs =DELTA, a whole number other than 0");
    f.value = static_cast<double>(d);
  } else if (kind == "dtype") {
    f.kind = CollectiveFaultKind::kDtype;
    const mluopDataType_t t = dtypeOfName(value);
    if (!has_value || t == MLUOP_DTYPE_INVALID)
      error =
          bad("'dtype' needs =NAME (float32, float16, bfloat16, float64, int8, int16, int32, int64, "
              "uint8, bool)");
    f.value = static_cast<double>(t);
  } else if (kind == "nan") {
    f.kind = CollectiveFaultKind::kNan;
    if (!has_fraction) f.fraction = 1e-3;
    error = noValue();
  } else if (kind == "delay") {
    f.kind = CollectiveFaultKind::kDelay;
    if (!has_value || !parseFaultNumber(value, &f.value) || f.value < 0 || f.value > kMaxDelayMs)
      error = bad("'delay' needs =MILLISECONDS (from 0 to 3600000)");
  } else {
    error = bad(fmt::format("unknown kind '{}' (hang, skip, count, dtype, nan, delay)", kind));
  }
  if (error.empty() && has_fraction && f.kind != CollectiveFaultKind::kNan)
    error = bad("only 'nan' takes a fraction");
  if (!error.empty()) return error;
  return f;
}

}  // namespace mlu
