// bench_attention — throughput of scaled_dot_product_attention and adamw_step through the public C API
// (op call + queue sync).
//  - Attention at the Llama demo's shape: batch 1, seq 256, 4 heads of dim 32 (model dim 128), q/k/v/o and
//    the gradients as [B, H, S, D] views of [B, S, H, D] memory, float32 and bfloat16, causal and not; and
//    4 heads of dim 128 as a second case. Forward, backward and forward+backward, each with a GFLOP/s
//    counter: 2 flops per multiply-add of the products (forward 2, backward 5 of B·H·Sq·Sk·D each), halved
//    under the causal mask (the work a causal kernel must do).
//  - adamw_step over 10 M float32 parameters, without and with a bfloat16 model copy: GB/s counts the
//    bytes the step must move (param, grad, exp_avg, exp_avg_sq read; param, exp_avg, exp_avg_sq and the
//    copy written), and items/s the parameters.
#include <mlu/dtype.h>
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_attention: %s failed: %s %s\n", what, mluopGetLastErrorMessage(),
                 mlurtGetLastErrorMessage());
    std::exit(1);
  }
}

using Dims = std::vector<std::int64_t>;

// A device tensor of float32 or bfloat16 with the given strides (empty: contiguous), filled with small
// deterministic values.
class DeviceTensor {
 public:
  DeviceTensor(mluopDataType_t dtype, const Dims& dims, const Dims& strides = {}, float scale = 1.0f) {
    Dims st = strides;
    if (st.empty()) {
      st.resize(dims.size());
      std::int64_t s = 1;
      for (std::size_t i = dims.size(); i-- > 0;) {
        st[i] = s;
        s *= dims[i];
      }
    }
    std::int64_t extent = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) extent += (dims[i] - 1) * st[i];
    const std::size_t es = dtype == MLUOP_DTYPE_FLOAT ? 4 : 2;
    check(mlurtMalloc(&data_, static_cast<std::size_t>(extent) * es) == MLURT_SUCCESS, "mlurtMalloc");
    // Device memory is host-addressable in the simulation.
    for (std::int64_t i = 0; i < extent; ++i) {
      const float v =
          scale * static_cast<float>((static_cast<std::uint64_t>(i) * 7919 % 1000) / 1000.0 - 0.5);
      if (dtype == MLUOP_DTYPE_FLOAT) {
        static_cast<float*>(data_)[i] = v;
      } else {
        static_cast<std::uint16_t*>(data_)[i] = mlu::floatToBfloat16(v);
      }
    }
    check(mluopCreateTensorDescriptor(&desc_) == MLUOP_STATUS_SUCCESS, "mluopCreateTensorDescriptor");
    check(mluopSetTensorDescriptorEx(desc_, MLUOP_LAYOUT_ARRAY, dtype, static_cast<int>(dims.size()),
                                     dims.data(), st.data()) == MLUOP_STATUS_SUCCESS,
          "mluopSetTensorDescriptorEx");
  }
  ~DeviceTensor() {
    mluopDestroyTensorDescriptor(desc_);
    mlurtFree(data_);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  mluopTensorDescriptor_t desc() const { return desc_; }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  mluopTensorDescriptor_t desc_ = nullptr;
};

class Handle {
 public:
  Handle() {
    check(mlurtQueueCreate(&queue_) == MLURT_SUCCESS, "mlurtQueueCreate");
    check(mluopCreate(&handle_) == MLUOP_STATUS_SUCCESS, "mluopCreate");
    check(mluopSetQueue(handle_, queue_) == MLUOP_STATUS_SUCCESS, "mluopSetQueue");
  }
  ~Handle() {
    mluopDestroy(handle_);
    mlurtQueueDestroy(queue_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator mluopHandle_t() const { return handle_; }
  void sync() const { check(mlurtQueueSync(queue_) == MLURT_SUCCESS, "mlurtQueueSync"); }

 private:
  mlurtQueue_t queue_ = nullptr;
  mluopHandle_t handle_ = nullptr;
};

// ---- attention ----

enum Pass { kForward, kBackward, kForwardBackward };

// Args: dtype (0 float32, 1 bfloat16), head dim, causal (0/1).
void attention(benchmark::State& state, Pass pass) {
  const mluopDataType_t dtype = state.range(0) == 0 ? MLUOP_DTYPE_FLOAT : MLUOP_DTYPE_BFLOAT16;
  const std::int64_t b = 1, s = 256, h = 4, d = state.range(1);
  const bool causal = state.range(2) != 0;
  const Dims dims{b, h, s, d}, bshd{s * h * d, d, h * d, 1};
  Handle handle;
  DeviceTensor q(dtype, dims, bshd), k(dtype, dims, bshd), v(dtype, dims, bshd), o(dtype, dims, bshd),
      go(dtype, dims, bshd, 0.01f), gq(dtype, dims, bshd), gk(dtype, dims, bshd), gv(dtype, dims, bshd);
  DeviceTensor lse(MLUOP_DTYPE_FLOAT, {b, h, s});
  const auto forward = [&] {
    check(mluopScaledDotProductAttentionForward(handle, causal, 0.0, q.desc(), q.data(), k.desc(), k.data(),
                                                v.desc(), v.data(), o.desc(), o.data(), lse.desc(),
                                                lse.data()) == MLUOP_STATUS_SUCCESS,
          "mluopScaledDotProductAttentionForward");
  };
  const auto backward = [&] {
    check(mluopScaledDotProductAttentionBackward(
              handle, causal, 0.0, go.desc(), go.data(), q.desc(), q.data(), k.desc(), k.data(), v.desc(),
              v.data(), o.desc(), o.data(), lse.desc(), lse.data(), gq.desc(), gq.data(), gk.desc(),
              gk.data(), gv.desc(), gv.data()) == MLUOP_STATUS_SUCCESS,
          "mluopScaledDotProductAttentionBackward");
  };
  forward();  // o and lse for the backward
  handle.sync();
  for (auto _ : state) {
    if (pass != kBackward) forward();
    if (pass != kForward) backward();
    handle.sync();
  }
  const double products = (pass == kForward ? 2.0 : pass == kBackward ? 5.0 : 7.0);
  const double flops = products * 2.0 * static_cast<double>(b * h * s * s * d) * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_AttentionForward(benchmark::State& state) { attention(state, kForward); }
void BM_AttentionBackward(benchmark::State& state) { attention(state, kBackward); }
void BM_AttentionForwardBackward(benchmark::State& state) { attention(state, kForwardBackward); }

void attentionArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bf16", "head_dim", "causal"});
  for (const int dtype : {0, 1}) {
    for (const int head_dim : {32, 128}) {
      for (const int causal : {1, 0}) b->Args({dtype, head_dim, causal});
    }
  }
  b->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime()->UseRealTime();
}
BENCHMARK(BM_AttentionForward)->Apply(attentionArgs);
BENCHMARK(BM_AttentionBackward)->Apply(attentionArgs);
BENCHMARK(BM_AttentionForwardBackward)->Apply(attentionArgs);

// ---- adamw ----

// Arg: 0 no model copy, 1 a bfloat16 model copy.
void BM_AdamwStep(benchmark::State& state) {
  const std::int64_t n = 10'000'000;
  const bool copy = state.range(0) != 0;
  Handle handle;
  DeviceTensor param(MLUOP_DTYPE_FLOAT, {n}), grad(MLUOP_DTYPE_FLOAT, {n}, {}, 0.01f),
      exp_avg(MLUOP_DTYPE_FLOAT, {n}, {}, 0.0f), exp_avg_sq(MLUOP_DTYPE_FLOAT, {n}, {}, 0.0f);
  DeviceTensor model(MLUOP_DTYPE_BFLOAT16, {copy ? n : 0});
  std::int64_t step = 0;
  for (auto _ : state) {
    ++step;
    check(
        mluopAdamwStep(handle, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step, 1.0f, false, param.desc(),
                       param.data(), grad.desc(), grad.data(), exp_avg.desc(), exp_avg.data(),
                       exp_avg_sq.desc(), exp_avg_sq.data(), nullptr, nullptr, copy ? model.desc() : nullptr,
                       copy ? model.data() : nullptr) == MLUOP_STATUS_SUCCESS,
        "mluopAdamwStep");
    handle.sync();
  }
  const double bytes = static_cast<double>(n) * (4 * 4 + 3 * 4 + (copy ? 2 : 0));
  state.counters["GB/s"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AdamwStep)->ArgName("bf16_copy")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
