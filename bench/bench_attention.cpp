// Benchmarks of attention and adamw (filled in by issue 4).
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
