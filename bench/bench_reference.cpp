// bench_reference — the CPU reference (mluref, what auto-compare, fallback and op-replay run) on the demos'
// real shapes, beside OpenBLAS on the same products:
//  - conv2d forward / backward-data / backward-filter of the MNIST net's second convolution (x [N, 32, 26,
//    26], w [64, 32, 3, 3]) at the training batch 32 and the evaluation batch 500, and its first (x [N, 1,
//    28, 28], w [32, 1, 3, 3]) at batch 32;
//  - linear of the MNIST net's fc1 (x [32, 9216], w [128, 9216]) and a Llama projection as matmul ([1024,
//    128] x [128, 384]);
//  - scaled_dot_product_attention forward and backward at the Llama demo's shape ([16, 4, 64, 32], causal);
//  - softmax over [500, 10] and [1024, 64], rms_norm and layer_norm over [1024, 128];
//  - cblas_dgemm and cblas_sgemm of the GEMM each convolution lowers to (M = cout, N = batch·ho·wo, K =
//    cin·kh·kw), the floor the reference's float64 products stand on.
// GFLOP/s counters count 2 flops per multiply-add. The device's kernels on these shapes are in bench_gemm
// (BM_DeviceConv2dForwardMnist) and bench_attention; bench/compare_cost.sh runs all of them side by side
// and PyTorch's float64 CPU convolution on the evaluation shape as the anchor.
#include <mlu/op_args.h>
#include <mlu/reference.h>

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Dims = std::vector<std::int64_t>;

// A contiguous float32 tensor in host memory, filled with small deterministic values.
class HostTensor {
 public:
  explicit HostTensor(const Dims& dims, mluopDataType_t dtype = MLUOP_DTYPE_FLOAT) {
    view_.dtype = dtype;
    view_.ndim = static_cast<int>(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) view_.dims[i] = dims[i];
    view_.setContiguousStrides();
    view_.present = true;
    data_.resize(static_cast<std::size_t>(view_.numel()));
    for (std::size_t i = 0; i < data_.size(); ++i)
      data_[i] = static_cast<float>((i * 7919 % 1000) / 1000.0 - 0.5);
    view_.data = data_.data();
  }
  const mlu::TensorView& view() const { return view_; }

 private:
  std::vector<float> data_;
  mlu::TensorView view_;
};

template <typename Args>
void runReference(benchmark::State& state, const Args& args, double flops) {
  for (auto _ : state) {
    const mlu::Status s = mlu::reference::run(args);
    if (!s.ok()) {
      std::fprintf(stderr, "bench_reference: %s refused: %s\n", std::string(Args::kName).c_str(),
                   s.message.c_str());
      std::exit(1);
    }
  }
  if (flops > 0) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                   benchmark::Counter::kIsRate);
  }
}

struct ConvShape {
  std::int64_t n, c, h, w, cout, k;
  std::int64_t ho() const { return h - k + 1; }
  std::int64_t wo() const { return w - k + 1; }
  double flops() const { return 2.0 * static_cast<double>(n * cout * ho() * wo() * c * k * k); }
};
// arg 0: which shape.
constexpr ConvShape kConvShapes[] = {
    {32, 32, 26, 26, 64, 3},   // conv2, training batch
    {500, 32, 26, 26, 64, 3},  // conv2, evaluation batch
    {32, 1, 28, 28, 32, 3},    // conv1, training batch
};
void convArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("shape")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
}

void BM_RefConv2dForward(benchmark::State& state) {
  const ConvShape s = kConvShapes[state.range(0)];
  HostTensor x({s.n, s.c, s.h, s.w}), w({s.cout, s.c, s.k, s.k}), bias({s.cout}),
      y({s.n, s.cout, s.ho(), s.wo()});
  mlu::conv2d_forward_args a;
  a.x = x.view();
  a.w = w.view();
  a.bias = bias.view();
  a.y = y.view();
  runReference(state, a, s.flops());
}
BENCHMARK(BM_RefConv2dForward)->Apply(convArgs);

void BM_RefConv2dBackwardData(benchmark::State& state) {
  const ConvShape s = kConvShapes[state.range(0)];
  HostTensor gy({s.n, s.cout, s.ho(), s.wo()}), w({s.cout, s.c, s.k, s.k}), gx({s.n, s.c, s.h, s.w});
  mlu::conv2d_backward_data_args a;
  a.grad_output = gy.view();
  a.w = w.view();
  a.grad_input = gx.view();
  runReference(state, a, s.flops());
}
BENCHMARK(BM_RefConv2dBackwardData)->Apply(convArgs);

void BM_RefConv2dBackwardFilter(benchmark::State& state) {
  const ConvShape s = kConvShapes[state.range(0)];
  HostTensor x({s.n, s.c, s.h, s.w}), gy({s.n, s.cout, s.ho(), s.wo()}), gw({s.cout, s.c, s.k, s.k});
  mlu::conv2d_backward_filter_args a;
  a.x = x.view();
  a.grad_output = gy.view();
  a.grad_w = gw.view();
  runReference(state, a, s.flops());
}
BENCHMARK(BM_RefConv2dBackwardFilter)->Apply(convArgs);

// The GEMM a convolution lowers to, in OpenBLAS: M = cout, N = n·ho·wo, K = c·k·k.
template <typename T>
void blasConvGemm(benchmark::State& state) {
  const ConvShape s = kConvShapes[state.range(0)];
  const auto m = static_cast<int>(s.cout), n = static_cast<int>(s.n * s.ho() * s.wo()),
             k = static_cast<int>(s.c * s.k * s.k);
  std::vector<T> a(static_cast<std::size_t>(m) * k, T(0.25)), b(static_cast<std::size_t>(k) * n, T(0.5)),
      c(static_cast<std::size_t>(m) * n);
  for (auto _ : state) {
    if constexpr (sizeof(T) == 8) {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0,
                  c.data(), n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f,
                  c.data(), n);
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(s.flops() * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}
void BM_BlasDgemmOfConv(benchmark::State& state) { blasConvGemm<double>(state); }
void BM_BlasSgemmOfConv(benchmark::State& state) { blasConvGemm<float>(state); }
BENCHMARK(BM_BlasDgemmOfConv)->Apply(convArgs);
BENCHMARK(BM_BlasSgemmOfConv)->Apply(convArgs);

void BM_RefLinearFc1(benchmark::State& state) {
  HostTensor x({32, 9216}), w({128, 9216}), bias({128}), y({32, 128});
  mlu::linear_args a;
  a.x = x.view();
  a.weight = w.view();
  a.bias = bias.view();
  a.y = y.view();
  runReference(state, a, 2.0 * 32 * 128 * 9216);
}
BENCHMARK(BM_RefLinearFc1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RefMatmulLlamaQkv(benchmark::State& state) {
  HostTensor a_({1024, 128}), b({128, 384}), c({1024, 384});
  mlu::matmul_args a;
  a.a = a_.view();
  a.b = b.view();
  a.c = c.view();
  runReference(state, a, 2.0 * 1024 * 128 * 384);
}
BENCHMARK(BM_RefMatmulLlamaQkv)->Unit(benchmark::kMillisecond)->UseRealTime();

// The Llama demo's attention: batch 16, 4 heads, seq 64, head dim 32, causal (flops halved by the mask).
constexpr std::int64_t kB = 16, kH = 4, kS = 64, kD = 32;
constexpr double kAttentionFlops = 2.0 * kB * kH * kS * kS * kD / 2;

// The attention's inputs and forward outputs, and the forward's arguments over them.
struct AttentionTensors {
  HostTensor q{{kB, kH, kS, kD}}, k{{kB, kH, kS, kD}}, v{{kB, kH, kS, kD}}, o{{kB, kH, kS, kD}},
      lse{{kB, kH, kS}};
  mlu::scaled_dot_product_attention_forward_args forwardArgs() const {
    mlu::scaled_dot_product_attention_forward_args a;
    a.causal = true;
    a.q = q.view();
    a.k = k.view();
    a.v = v.view();
    a.o = o.view();
    a.lse = lse.view();
    return a;
  }
};

void BM_RefAttentionForward(benchmark::State& state) {
  AttentionTensors t;  // not const: the reference writes o and lse through its views
  runReference(state, t.forwardArgs(), 2 * kAttentionFlops);
}
BENCHMARK(BM_RefAttentionForward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RefAttentionBackward(benchmark::State& state) {
  AttentionTensors t;  // not const: the reference writes o and lse through its views
  if (!mlu::reference::run(t.forwardArgs()).ok()) std::exit(1);  // a real lse and o for the backward
  HostTensor go({kB, kH, kS, kD}), gq({kB, kH, kS, kD}), gk({kB, kH, kS, kD}), gv({kB, kH, kS, kD});
  mlu::scaled_dot_product_attention_backward_args a;
  a.causal = true;
  a.grad_o = go.view();
  a.q = t.q.view();
  a.k = t.k.view();
  a.v = t.v.view();
  a.o = t.o.view();
  a.lse = t.lse.view();
  a.grad_q = gq.view();
  a.grad_k = gk.view();
  a.grad_v = gv.view();
  runReference(state, a, 5 * kAttentionFlops);
}
BENCHMARK(BM_RefAttentionBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RefSoftmax(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  HostTensor x({rows, cols}), y({rows, cols});
  mlu::softmax_forward_args a;
  a.dim = 1;
  a.x = x.view();
  a.y = y.view();
  runReference(state, a, 0);
}
BENCHMARK(BM_RefSoftmax)->Args({500, 10})->Args({1024, 64})->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_RefRmsNorm(benchmark::State& state) {
  HostTensor x({1024, 128}), w({128}), y({1024, 128}), rstd({1024});
  mlu::rms_norm_forward_args a;
  a.normalized_ndim = 1;
  a.eps = 1e-6;
  a.x = x.view();
  a.weight = w.view();
  a.y = y.view();
  a.rstd = rstd.view();
  runReference(state, a, 0);
}
BENCHMARK(BM_RefRmsNorm)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_RefLayerNorm(benchmark::State& state) {
  HostTensor x({1024, 128}), w({128}), b({128}), y({1024, 128}), mean({1024}), rstd({1024});
  mlu::layer_norm_forward_args a;
  a.normalized_ndim = 1;
  a.eps = 1e-5;
  a.x = x.view();
  a.weight = w.view();
  a.bias = b.view();
  a.y = y.view();
  a.mean = mean.view();
  a.rstd = rstd.view();
  runReference(state, a, 0);
}
BENCHMARK(BM_RefLayerNorm)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
