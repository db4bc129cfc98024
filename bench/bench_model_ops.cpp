// The ops that top the profiles of the PyTorch examples (torchvision's ResNet-18 at batch 16 on 64x64
// images; the GPT-2-style decoder of examples/torch_gpt: batch 8 of 64 characters, width 128, 4 heads), on
// their shapes, through PyTorch's ATen as a program calls them: each op once on PyTorch's CPU backend and
// once on the simulated MLU (torch_mlu's native kernels, waiting for the device), side by side in one run,
// on the same thread count (both default to every core). The device's op is faster where its time is at
// most the CPU's; compare each .../mlu row with the .../cpu row above it (times per call, of 8 calls in a
// row).
//   build/bin/bench_model_ops --benchmark_min_time=0.2
#include <ATen/ATen.h>
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace {

const c10::Device kMlu(c10::DeviceType::PrivateUse1, 0);

// The tensors of a case, made on the CPU (seeded) and copied to the device.
using Maker = std::function<std::vector<at::Tensor>()>;
using Op = std::function<void(const std::vector<at::Tensor>&)>;

// Calls of an op per timed iteration: the device runs them back to back, as in a training step, and is
// waited for once (a wait per call would time the queue's wake-up, not the op). Reported per call.
constexpr int kCallsPerIteration = 8;

void run(benchmark::State& state, const Maker& make, const Op& op, bool mlu) {
  at::manual_seed(0);
  std::vector<at::Tensor> inputs = make();
  if (mlu) {
    for (at::Tensor& t : inputs) t = t.to(kMlu);
  }
  op(inputs);  // warm-up: the caching allocator's segments, the kernels' workspaces
  if (mlu) mlurtDeviceSynchronize();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCallsPerIteration; ++i) op(inputs);
    if (mlu) mlurtDeviceSynchronize();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(elapsed.count() / kCallsPerIteration);
  }
}

void add(const std::string& name, const Maker& make, const Op& op) {
  for (const bool mlu : {false, true}) {
    benchmark::RegisterBenchmark((name + (mlu ? "/mlu" : "/cpu")).c_str(),
                                 [=](benchmark::State& s) { run(s, make, op, mlu); })
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
  }
}

// ResNet-18's convolutions at batch 16 of 64x64 images: forward, backward data and backward filter.
void addConvolution(const std::string& name, int64_t c, int64_t k, int64_t hw, int64_t kernel, int64_t stride,
                    int64_t pad) {
  const Maker make = [=] {
    return std::vector<at::Tensor>{
        at::randn({16, c, hw, hw}), at::randn({k, c, kernel, kernel}),
        at::randn({16, k, (hw + 2 * pad - kernel) / stride + 1, (hw + 2 * pad - kernel) / stride + 1})};
  };
  add("conv_forward " + name, make, [=](const std::vector<at::Tensor>& t) {
    benchmark::DoNotOptimize(at::conv2d(t[0], t[1], {}, stride, pad));
  });
  add("conv_backward_data " + name, make, [=](const std::vector<at::Tensor>& t) {
    benchmark::DoNotOptimize(at::convolution_backward(t[2], t[0], t[1], c10::nullopt, {stride, stride},
                                                      {pad, pad}, {1, 1}, false, {0, 0}, 1,
                                                      {true, false, false}));
  });
  add("conv_backward_filter " + name, make, [=](const std::vector<at::Tensor>& t) {
    benchmark::DoNotOptimize(at::convolution_backward(t[2], t[0], t[1], c10::nullopt, {stride, stride},
                                                      {pad, pad}, {1, 1}, false, {0, 0}, 1,
                                                      {false, true, false}));
  });
}

void registerAll() {
  addConvolution("conv1 3->64 7x7/2 64x64", 3, 64, 64, 7, 2, 3);
  addConvolution("layer1 64->64 3x3 16x16", 64, 64, 16, 3, 1, 1);
  addConvolution("layer2 128->128 3x3 8x8", 128, 128, 8, 3, 1, 1);
  addConvolution("layer3 256->256 3x3 4x4", 256, 256, 4, 3, 1, 1);
  addConvolution("layer4 512->512 3x3 2x2", 512, 512, 2, 3, 1, 1);
  add(
      "batch_norm_train [16,64,16,16]",
      [] {
        return std::vector<at::Tensor>{at::randn({16, 64, 16, 16}), at::ones({64}), at::zeros({64})};
      },
      [](const std::vector<at::Tensor>& t) {
        benchmark::DoNotOptimize(at::batch_norm(t[0], t[1], t[2], {}, {}, true, 0.1, 1e-5, false));
      });
  // The GPT decoder's: its linears (x [512, 128] through c_attn, c_fc, c_proj), attention and MLP.
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{128, 384}, {128, 512}, {512, 128}}) {
    add(
        "linear [512," + std::to_string(in) + "]->" + std::to_string(out),
        [=] {
          return std::vector<at::Tensor>{at::randn({512, in}), at::randn({out, in}), at::randn({out})};
        },
        [](const std::vector<at::Tensor>& t) { benchmark::DoNotOptimize(at::linear(t[0], t[1], t[2])); });
  }
  add(
      "matmul q@k^T [8,4,64,32]x[8,4,32,64]",
      [] {
        return std::vector<at::Tensor>{at::randn({8, 4, 64, 32}), at::randn({8, 4, 32, 64})};
      },
      [](const std::vector<at::Tensor>& t) { benchmark::DoNotOptimize(at::matmul(t[0], t[1])); });
  add(
      "masked_fill + softmax [8,4,64,64]",
      [] {
        return std::vector<at::Tensor>{at::randn({8, 4, 64, 64}),
                                       at::tril(at::ones({64, 64})).view({1, 1, 64, 64})};
      },
      [](const std::vector<at::Tensor>& t) {
        benchmark::DoNotOptimize(at::softmax(t[0].masked_fill(t[1] == 0, -INFINITY), -1));
      });
  add(
      "gelu [8,64,512]",
      [] {
        return std::vector<at::Tensor>{at::randn({8, 64, 512})};
      },
      [](const std::vector<at::Tensor>& t) { benchmark::DoNotOptimize(at::gelu(t[0])); });
  add(
      "gelu_backward [8,64,512]",
      [] {
        return std::vector<at::Tensor>{at::randn({8, 64, 512}), at::randn({8, 64, 512})};
      },
      [](const std::vector<at::Tensor>& t) { benchmark::DoNotOptimize(at::gelu_backward(t[0], t[1])); });
  add(
      "layer_norm [8,64,128]",
      [] {
        return std::vector<at::Tensor>{at::randn({8, 64, 128}), at::randn({128}), at::randn({128})};
      },
      [](const std::vector<at::Tensor>& t) {
        benchmark::DoNotOptimize(at::layer_norm(t[0], {128}, t[1], t[2]));
      });
  add(
      "layer_norm_backward [8,64,128]",
      [] {
        return std::vector<at::Tensor>{at::randn({8, 64, 128}), at::randn({8, 64, 128}), at::randn({128}),
                                       at::randn({128})};
      },
      [](const std::vector<at::Tensor>& t) {
        const auto [y, mean, rstd] = at::native_layer_norm(t[1], {128}, t[2], t[3], 1e-5);
        benchmark::DoNotOptimize(
            at::native_layer_norm_backward(t[0], t[1], {128}, mean, rstd, t[2], t[3], {true, true, true}));
      });
  add(
      "sum over rows (bias grad) [512,512]",
      [] {
        return std::vector<at::Tensor>{at::randn({512, 512})};
      },
      [](const std::vector<at::Tensor>& t) { benchmark::DoNotOptimize(at::sum(t[0], {0}, true)); });
  add(
      "norm (clip_grad_norm_) [512,128]",
      [] {
        return std::vector<at::Tensor>{at::randn({512, 128})};
      },
      [](const std::vector<at::Tensor>& t) { benchmark::DoNotOptimize(at::norm(t[0], 2.0)); });
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
