#include "fault.h"

#include "../common/collective_fault.h"

#include <mlu/dtype.h>
#include <mlu/op_args.h>

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace mlu {
namespace {

constexpr double kMaxOobBytes = 1 << 20;
constexpr double kMaxDelayMs = 3600.0 * 1000;

const std::set<std::string, std::less<>>& opNames() {
  static const auto names = [] {
    std::set<std::string, std::less<>> s;
    forEachOp([&]<typename Args>() { s.emplace(Args::kName); });
    return s;
  }();
  return names;
}

}  // namespace

std::variant<FaultTable, std::string> parseFaults(std::string_view spec) {
  FaultTable table;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = trimFaultText(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    auto bad = [&](std::string_view why) { return fmt::format("MLU_SIM_FAULT item '{}': {}", item, why); };

    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) return bad("expected op[/dtype]:kind[=value][@fraction]");
    std::string_view op = trimFaultText(item.substr(0, colon));
    int dtype = -1;
    if (const std::size_t slash = op.find('/'); slash != std::string_view::npos) {
      const std::string_view name = trimFaultText(op.substr(slash + 1));
      const mluopDataType_t t = dtypeOfName(name);
      if (t == MLUOP_DTYPE_INVALID)
        return bad(fmt::format("unknown dtype '{}' after '/' (float32, float16, bfloat16, ...)", name));
      dtype = static_cast<int>(t);
      op = trimFaultText(op.substr(0, slash));
    }
    std::string_view rest = trimFaultText(item.substr(colon + 1));
    if (isCollectiveName(op)) {  // a collective's fault: libmlucl applies it; checked here all the same
      auto parsed = parseCollectiveFault(item);
      if (auto* error = std::get_if<std::string>(&parsed)) return *error;
      continue;
    }
    if (!opNames().contains(op))
      return bad(
          fmt::format("unknown op '{}' (see the op schema; collectives: allreduce, broadcast, "
                      "allgather, reduce_scatter, send, recv, barrier)",
                      op));

    Fault fault{};
    fault.dtype = dtype;
    bool has_fraction = false;
    if (const std::size_t at = rest.find('@'); at != std::string_view::npos) {
      if (!parseFaultNumber(rest.substr(at + 1), &fault.fraction) || fault.fraction <= 0 ||
          fault.fraction > 1) {
        return bad("the fraction after '@' must be a number in (0, 1]");
      }
      has_fraction = true;
      rest = rest.substr(0, at);
    }
    std::string_view kind = rest;
    std::string_view value;
    bool has_value = false;
    if (const std::size_t eq = rest.find('='); eq != std::string_view::npos) {
      kind = rest.substr(0, eq);
      value = rest.substr(eq + 1);
      has_value = true;
    }
    auto needValue = [&](double lo, const char* what, double hi = INFINITY) -> std::string {
      if (!has_value || !parseFaultNumber(value, &fault.value) || fault.value < lo || fault.value > hi) {
        return bad(fmt::format("'{}' needs ={}", kind, what));
      }
      return {};
    };
    std::string error;
    if (kind == "nan") {
      fault.kind = FaultKind::kNan;
      if (!has_fraction) fault.fraction = 1e-3;
      if (has_value) error = bad("'nan' takes no value (use @fraction)");
    } else if (kind == "scale") {
      fault.kind = FaultKind::kScale;
      error = needValue(-INFINITY, "FACTOR");
    } else if (kind == "offset") {
      fault.kind = FaultKind::kOffset;
      error = needValue(-INFINITY, "AMOUNT");
    } else if (kind == "noncontig" || kind == "notsupported") {
      fault.kind = kind == "noncontig" ? FaultKind::kNonContig : FaultKind::kNotSupported;
      if (has_value || has_fraction) error = bad(fmt::format("'{}' takes no value or fraction", kind));
    } else if (kind == "oob") {
      fault.kind = FaultKind::kOob;
      // At most 1 MiB past the end: enough to cross any red zone, and never so far that the write leaves
      // the simulated device's memory and crashes the host process (oob=1e11 did).
      error = needValue(1, "BYTES (a whole number from 1 to 1048576)", kMaxOobBytes);
      if (error.empty() && fault.value != std::floor(fault.value))
        error = bad("'oob' needs a whole number of bytes");
    } else if (kind == "delay") {
      fault.kind = FaultKind::kDelay;
      // At most an hour: a larger value (delay=1e300) overflowed the sleep and did nothing.
      error = needValue(0, "MILLISECONDS (from 0 to 3600000)", kMaxDelayMs);
    } else if (kind == "unstable") {
      fault.kind = FaultKind::kUnstable;
      if (has_value || has_fraction) error = bad("'unstable' takes no value or fraction");
      if (op != "softmax_forward" && op != "log_softmax_forward")
        error = bad("'unstable' applies to softmax_forward and log_softmax_forward");
    } else {
      error = bad(fmt::format(
          "unknown kind '{}' (nan, scale, offset, noncontig, oob, notsupported, delay, unstable)", kind));
    }
    if (!error.empty()) return error;
    table[std::string(op)].push_back(fault);
  }
  return table;
}

const FaultTable& faults() {
  static const FaultTable table = [] {
    const char* spec = std::getenv("MLU_SIM_FAULT");
    if (spec == nullptr || *spec == '\0') return FaultTable{};  // empty means unset
    auto parsed = parseFaults(spec);
    if (auto* error = std::get_if<std::string>(&parsed)) {
      std::fprintf(stderr, "mluops: %s\n", error->c_str());
      std::exit(2);
    }
    auto& t = std::get<FaultTable>(parsed);
    for (const auto& [op, list] : t)
      std::fprintf(stderr, "mluops: MLU_SIM_FAULT planted %zu fault(s) in %s\n", list.size(), op.c_str());
    return t;
  }();
  return table;
}

std::vector<Fault> faultsFor(const std::vector<Fault>* faults, int dtype) {
  std::vector<Fault> out;
  if (faults == nullptr) return out;
  for (const Fault& f : *faults)
    if (f.dtype < 0 || f.dtype == dtype) out.push_back(f);
  return out;
}

bool faultSelects(std::uint64_t i, double fraction) {
  if (fraction >= 1.0) return true;
  // splitmix64 of the index: a fixed, well-spread subset.
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 < fraction;
}

}  // namespace mlu
