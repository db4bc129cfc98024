// bench_metrics — auto-compare's per-tensor cost: compareTensors (device result against its reference) and
// identicalTensors (an input the op must not change) on float32 tensors of 2^16 and 2^20 elements, in the
// cases a training gives:
//  - exact: the device and the reference agree bit for bit on every element (most elementwise ops);
//  - close: every element differs by a few ulps (products and reductions);
//  - identical: an unchanged input checked against its snapshot.
// The anchor is memcmp of the same two buffers (the floor: both tensors read once). Bytes/s counts both.
#include <opscope/compare/metrics.h>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

struct Pair {
  std::vector<float> device, reference;
};

Pair makePair(std::int64_t n, bool exact) {
  Pair p;
  p.device.resize(static_cast<std::size_t>(n));
  p.reference.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(std::sin(static_cast<double>(i) * 0.001));
    p.reference[static_cast<std::size_t>(i)] = v;
    p.device[static_cast<std::size_t>(i)] = exact ? v : std::nextafter(v, 2.0f);
  }
  return p;
}

void setBytes(benchmark::State& state, std::int64_t n) {
  state.SetBytesProcessed(state.iterations() * n * 2 * static_cast<std::int64_t>(sizeof(float)));
}

void BM_CompareTensors(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const Pair p = makePair(n, state.range(1) != 0);
  const opscope::Tolerance tol = opscope::compare::defaultTolerance(MLUOP_DTYPE_FLOAT);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        opscope::compare::compareTensors(MLUOP_DTYPE_FLOAT, p.device.data(), p.reference.data(), n, tol));
  setBytes(state, n);
}
BENCHMARK(BM_CompareTensors)
    ->ArgNames({"n", "exact"})
    ->ArgsProduct({{1 << 16, 1 << 20}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_IdenticalTensors(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const Pair p = makePair(n, true);
  const opscope::Tolerance tol = opscope::compare::defaultTolerance(MLUOP_DTYPE_FLOAT);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        opscope::compare::identicalTensors(MLUOP_DTYPE_FLOAT, p.device.data(), p.reference.data(), n, tol));
  setBytes(state, n);
}
BENCHMARK(BM_IdenticalTensors)->ArgName("n")->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

void BM_Memcmp(benchmark::State& state) {  // the anchor: both buffers read once
  const std::int64_t n = state.range(0);
  const Pair p = makePair(n, true);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        std::memcmp(p.device.data(), p.reference.data(), static_cast<std::size_t>(n) * sizeof(float)));
  setBytes(state, n);
}
BENCHMARK(BM_Memcmp)->ArgName("n")->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
