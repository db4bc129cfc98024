// What the capture writer spends per GiB of tensor data before the disk: hashing each tensor to find the
// ones stored already, and the whole duplicate path (hash, lookup, one tensor_refs row) through the real
// CaptureWriter on a real file. Anchors in the same run: memcpy of the same bytes, and xxHash's published
// XXH3 speed (31.5 GB/s on its authors' machine, 3.4x memcpy's there; README of Cyan4973/xxHash).
//   BM_Memcpy            copying 64 MiB (the machine's memory bandwidth)
//   BM_ContentHash       XXH3-128 of 64 MiB (what the writer computes per tensor)
//   BM_StatsChecksum     the stats mode's checksum of a 1 MiB float32 tensor in cache
//   BM_StatsFloat        its statistics of the same tensor
//   BM_WriterDuplicates  ops of one 16 MiB input each, all with the same content, through
//                        CaptureWriter::submit and close: stored once, then only hashed and referenced
// bytes_per_second of each is per byte of tensor data.
#include <opscope/bytes.h>
#include <opscope/rundb/stats.h>
#include <opscope/rundb/writer.h>

#include <benchmark/benchmark.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <random>

namespace {

constexpr std::size_t kBlock = std::size_t{64} << 20;

opscope::Bytes randomBytes(std::size_t n) {
  opscope::Bytes b(n);
  std::mt19937_64 rng(42);
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(b.data() + i, &v, 8);
  }
  return b;
}

// n float32 values of a normal distribution, as activations are.
opscope::Bytes randomFloats(std::size_t n) {
  opscope::Bytes b(n * 4);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    std::memcpy(b.data() + i * 4, &v, 4);
  }
  return b;
}

void BM_Memcpy(benchmark::State& state) {
  const opscope::Bytes src = randomBytes(kBlock);
  opscope::Bytes dst(kBlock);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBlock);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBlock));
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);

void BM_ContentHash(benchmark::State& state) {
  const opscope::Bytes data = randomBytes(kBlock);
  for (auto _ : state) {
    XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
    benchmark::DoNotOptimize(h);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBlock));
}
BENCHMARK(BM_ContentHash)->Unit(benchmark::kMillisecond);

// The stats mode's two passes over a tensor the size of a GPT-2-small activation (1 MiB of float32, in
// cache as it is after the op wrote it): its checksum, and its statistics (min, max, mean, l2, NaN, Inf).
void BM_StatsChecksum(benchmark::State& state) {
  const opscope::Bytes data = randomFloats(std::size_t{1} << 18);
  for (auto _ : state) benchmark::DoNotOptimize(opscope::rundb::tensorChecksum(data.data(), data.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_StatsChecksum);

void BM_StatsFloat(benchmark::State& state) {
  const opscope::Bytes data = randomFloats(std::size_t{1} << 18);
  for (auto _ : state)
    benchmark::DoNotOptimize(opscope::rundb::tensorStats(MLUOP_DTYPE_FLOAT, data.data(), data.size(), 0));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_StatsFloat);

void BM_WriterDuplicates(benchmark::State& state) {
  constexpr std::size_t kTensor = std::size_t{16} << 20;
  constexpr int kOps = 64;  // 1 GiB of tensor data per iteration, 16 MiB stored
  const opscope::Bytes content = randomBytes(kTensor);
  const auto dir = std::filesystem::temp_directory_path() / "opscope_bench_capture";
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::vector<opscope::rundb::CapturedOp> ops(kOps);
    for (int i = 0; i < kOps; ++i) {
      auto& op = ops[static_cast<std::size_t>(i)];
      op.seq = static_cast<std::uint64_t>(i + 1);
      op.name = "copy";
      op.symbol = "mluopCopy";
      opscope::rundb::TensorRecord t;
      t.role = "input";
      t.arg_name = "x";
      t.dtype = MLUOP_DTYPE_FLOAT;
      t.shape = {static_cast<std::int64_t>(kTensor / 4)};
      t.strides = {1};
      t.data = content;
      op.tensors.push_back(std::move(t));
    }
    auto writer =
        opscope::rundb::CaptureWriter::open((dir / "capture.db").string(), {}, std::uint64_t{1} << 40);
    state.ResumeTiming();
    for (auto& op : ops) writer->submit(std::move(op));
    const auto summary = writer->close();
    state.PauseTiming();
    if (summary.stored_bytes != kTensor) state.SkipWithError("the duplicates were not stored once");
    writer.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kOps * kTensor));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_WriterDuplicates)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
