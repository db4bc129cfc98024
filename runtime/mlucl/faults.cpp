#include "faults.h"

#include "../common/collective_fault.h"
#include "../common/no_destructor.h"

#include <mlu/op_args.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace mlucl {
namespace {

bool isOpName(std::string_view name) {
  bool found = false;
  mlu::forEachOp([&]<typename Args>() { found = found || name == Args::kName; });
  return found;
}

std::vector<mlu::CollectiveFault> parseEnvironment() {
  std::vector<mlu::CollectiveFault> faults;
  const char* spec = std::getenv("MLU_SIM_FAULT");
  if (spec == nullptr) return faults;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = mlu::trimFaultText(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t colon = item.find(':');
    std::string_view name =
        colon == std::string_view::npos ? item : mlu::trimFaultText(item.substr(0, colon));
    name = mlu::trimFaultText(name.substr(0, name.find('/')));  // an op's fault may name a dtype: op/dtype
    if (item.empty() || isOpName(name)) continue;  // an op's fault: libmluops checks and applies it
    auto parsed = mlu::parseCollectiveFault(item);
    if (auto* error = std::get_if<std::string>(&parsed)) {
      std::fprintf(stderr, "mlucl: %s\n", error->c_str());
      std::exit(2);
    }
    faults.push_back(std::get<mlu::CollectiveFault>(parsed));
    std::fprintf(stderr, "mlucl: MLU_SIM_FAULT planted '%.*s'\n", static_cast<int>(item.size()), item.data());
  }
  return faults;
}

const std::vector<mlu::CollectiveFault>& planted() {
  static const std::vector<mlu::CollectiveFault> faults = parseEnvironment();
  return faults;
}

// Parsed when the library loads, so a malformed value stops the program before it starts.
[[maybe_unused]] const bool kParsedAtLoad = (planted(), true);

std::atomic<std::uint64_t>& callCounter(Kind kind) {
  static mlu::NoDestructor<std::array<std::atomic<std::uint64_t>, kKindCount>> counters;
  return counters.get()[static_cast<std::size_t>(kind)];
}

}  // namespace

CallFaults faultsForCall(Kind kind, int rank, std::size_t* count, int* dtype) {
  CallFaults out;
  const auto& faults = planted();
  if (faults.empty()) return out;
  const std::uint64_t call = ++callCounter(kind);
  for (const mlu::CollectiveFault& f : faults) {
    if (f.collective != kindName(kind)) continue;
    if (f.rank >= 0 && f.rank != rank) continue;
    if (f.call != 0 && static_cast<std::uint64_t>(f.call) != call) continue;
    switch (f.kind) {
      case mlu::CollectiveFaultKind::kHang:
        out.hang = true;
        break;
      case mlu::CollectiveFaultKind::kSkip:
        out.skip = true;
        break;
      case mlu::CollectiveFaultKind::kCount: {
        const auto delta = static_cast<long long>(f.value);
        const long long c = static_cast<long long>(*count) + delta;
        *count = c < 0 ? 0 : static_cast<std::size_t>(c);
        break;
      }
      case mlu::CollectiveFaultKind::kDtype:
        *dtype = static_cast<int>(f.value);
        break;
      case mlu::CollectiveFaultKind::kNan:
        out.nan = true;
        out.nan_fraction = f.fraction;
        break;
      case mlu::CollectiveFaultKind::kDelay:
        out.delay_ms += f.value;
        break;
    }
  }
  return out;
}

}  // namespace mlucl
