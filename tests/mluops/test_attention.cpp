// Tests of scaled_dot_product_attention (forward and backward): the device against the CPU reference for
// float32/bfloat16/float16, with and without the causal mask, over sequence lengths 1, 7, 64 and 257,
// Sq != Sk, Dv != D, non-contiguous [B, S, H, D]-memory views (outputs too), an explicit scale and size-0
// shapes, grouped-query attention (Hkv < H key/value heads, down to one); the reference against a
// hand-worked 2x2 case; grouped-query attention against multi-head attention on key/value heads repeated per
// group; the backward against central finite differences of the forward in float64; the interleaved
// fused-buffer pattern; every BAD_PARAM path with its message.
#include "reduce_util.h"

#include <gmock/gmock.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using optest::Dims;
using optest::expectClose;
using optest::Handle;
using optest::randomValues;
using optest::Tensor;
using reducetest::dtypeLabel;
using reducetest::lastError;
using reducetest::makePair;
using reducetest::Pair;
using testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT;
constexpr mluopDataType_t kF64 = MLUOP_DTYPE_DOUBLE;
constexpr mluopDataType_t kBF16 = MLUOP_DTYPE_BFLOAT16;
constexpr mluopDataType_t kF16 = MLUOP_DTYPE_HALF;

void expectBadParam(mluopStatus_t status, const std::string& message) {
  EXPECT_EQ(status, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(lastError(), HasSubstr(message));
}

void expectOk(const mlu::Status& status) { ASSERT_TRUE(status.ok()) << status.message; }

// The problem: q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv].
struct Case {
  std::int64_t b, h, sq, sk, d, dv;
  bool bshd = false;     // every tensor a [B, H, S, X] view of [B, S, H, X] memory (lse of [B, Sq, H])
  double scale = 0.0;    // <= 0: the default 1/sqrt(D)
  std::int64_t hkv = 0;  // key/value heads; 0: h (multi-head attention)

  std::int64_t kvHeads() const { return hkv > 0 ? hkv : h; }
  Dims qDims() const { return {b, h, sq, d}; }
  Dims kDims() const { return {b, kvHeads(), sk, d}; }
  Dims vDims() const { return {b, kvHeads(), sk, dv}; }
  Dims oDims() const { return {b, h, sq, dv}; }
  Dims lseDims() const { return {b, h, sq}; }
  // Strides of a [B, H, S, X] view of [B, S, H, X] memory (H: heads), or contiguous.
  Dims strides(std::int64_t s, std::int64_t x, std::int64_t heads) const {
    return bshd ? Dims{s * heads * x, x, heads * x, 1} : Dims{};
  }
  Dims strides(std::int64_t s, std::int64_t x) const { return strides(s, x, h); }
  Dims kvStrides(std::int64_t x) const { return strides(sk, x, kvHeads()); }
  Dims lseStrides() const { return bshd ? Dims{sq * h, 1, h} : Dims{}; }
  std::string label() const {
    return "B" + std::to_string(b) + " H" + std::to_string(h) +
           (kvHeads() != h ? " Hkv" + std::to_string(kvHeads()) : "") + " Sq" + std::to_string(sq) + " Sk" +
           std::to_string(sk) + " D" + std::to_string(d) + " Dv" + std::to_string(dv) +
           (bshd ? " bshd" : "") + (scale > 0 ? " scale " + std::to_string(scale) : "");
  }
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {1, 1, 1, 1, 8, 8},              // seq 1
      {2, 3, 7, 7, 5, 5},              // seq 7, B*H = 6 (one task per head when the cores are fewer)
      {1, 2, 64, 64, 16, 16},          // seq 64: exactly one block
      {1, 1, 257, 257, 8, 8},          // seq 257: 5 blocks, the last of 1 row
      {1, 2, 5, 9, 8, 8},              // Sq < Sk
      {1, 1, 70, 33, 8, 8},            // Sq > Sk: causal rows past Sk see every key
      {2, 1, 33, 130, 8, 6},           // Sq < Sk over several key blocks, Dv != D
      {1, 2, 20, 20, 8, 5},            // Dv != D
      {1, 1, 65, 65, 3, 17},           // Dv > D, odd sizes
      {1, 1, 17, 17, 33, 33},          // D over two register-tile widths
      {2, 3, 19, 19, 8, 8, true},      // [B, S, H, D] memory views
      {1, 2, 100, 100, 16, 16, true},  // views over two blocks
      {1, 2, 9, 11, 4, 4, false, 0.7},
      {1, 1, 0, 5, 4, 4},  // no queries
      {1, 1, 5, 0, 4, 4},  // no keys: o = 0, lse = -inf, grads 0
      {0, 2, 3, 3, 4, 4},  // no batch
      // grouped-query attention
      {2, 4, 9, 9, 8, 8, false, 0.0, 2},     // groups of 2; B*Hkv = 4 (one task per key/value head)
      {1, 6, 70, 70, 8, 8, false, 0.0, 2},   // groups of 3 over two blocks (key/query-block tasks)
      {1, 4, 33, 130, 8, 6, false, 0.0, 1},  // one key/value head (multi-query), Sq < Sk, Dv != D
      {2, 4, 19, 19, 8, 8, true, 0.0, 2},    // [B, S, H, D] memory views, k/v of [B, S, Hkv, D]
      {1, 4, 5, 0, 4, 4, false, 0.0, 2},     // no keys
  };
  return all;
}

mluopStatus_t deviceForward(const Handle& h, bool causal, double scale, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& o, const Tensor& lse) {
  return mluopScaledDotProductAttentionForward(h, causal, scale, q.desc(), q.data(), k.desc(), k.data(),
                                               v.desc(), v.data(), o.desc(), o.data(), lse.desc(),
                                               lse.data());
}

mlu::Status referenceForward(bool causal, double scale, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& o, const Tensor& lse) {
  mlu::scaled_dot_product_attention_forward_args a;
  a.causal = causal;
  a.scale = scale;
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.o = o.view();
  a.lse = lse.view();
  return mlu::reference::run(a);
}

struct Grads {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
};

mluopStatus_t deviceBackward(const Handle& h, bool causal, double scale, const Tensor& go, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const Grads& g) {
  return mluopScaledDotProductAttentionBackward(h, causal, scale, go.desc(), go.data(), q.desc(), q.data(),
                                                k.desc(), k.data(), v.desc(), v.data(), o.desc(), o.data(),
                                                lse.desc(), lse.data(), g.q.desc(), g.q.data(), g.k.desc(),
                                                g.k.data(), g.v.desc(), g.v.data());
}

mlu::Status referenceBackward(bool causal, double scale, const Tensor& go, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& o, const Tensor& lse, const Grads& g) {
  mlu::scaled_dot_product_attention_backward_args a;
  a.causal = causal;
  a.scale = scale;
  a.grad_o = go.view();
  a.q = q.view();
  a.k = k.view();
  a.v = v.view();
  a.o = o.view();
  a.lse = lse.view();
  a.grad_q = g.q.view();
  a.grad_k = g.k.view();
  a.grad_v = g.v.view();
  return mlu::reference::run(a);
}

// Forward and backward of one case on the device and in the reference, compared.
void checkCase(const Handle& h, mluopDataType_t dtype, const Case& c, bool causal, std::uint32_t seed) {
  const std::string what = dtypeLabel(dtype) + (causal ? " causal " : " ") + c.label();
  const Pair q =
      makePair(dtype, c.qDims(), randomValues(optest::numel(c.qDims()), seed), c.strides(c.sq, c.d));
  const Pair k =
      makePair(dtype, c.kDims(), randomValues(optest::numel(c.kDims()), seed + 1), c.kvStrides(c.d));
  const Pair v =
      makePair(dtype, c.vDims(), randomValues(optest::numel(c.vDims()), seed + 2), c.kvStrides(c.dv));
  Tensor o = Tensor::device(dtype, c.oDims(), {}, c.strides(c.sq, c.dv));
  Tensor lse = Tensor::device(kF32, c.lseDims(), {}, c.lseStrides());
  Tensor o_ref = Tensor::host(dtype, c.oDims(), {}, c.strides(c.sq, c.dv));
  Tensor lse_ref = Tensor::host(kF32, c.lseDims(), {}, c.lseStrides());
  ASSERT_EQ(deviceForward(h, causal, c.scale, q.dev, k.dev, v.dev, o, lse), MLUOP_STATUS_SUCCESS)
      << lastError();
  expectOk(referenceForward(causal, c.scale, q.host, k.host, v.host, o_ref, lse_ref));
  h.sync();
  const std::int64_t keys = std::max<std::int64_t>(c.sk, 1);
  expectClose(o.values(), o_ref.values(), reducetest::reductionTolerance(dtype, keys), what + " o");
  expectClose(lse.values(), lse_ref.values(), reducetest::reductionTolerance(kF32, keys), what + " lse");

  // The backward from the same o and lse on both sides (the reference's).
  const Pair go =
      makePair(dtype, c.oDims(), randomValues(optest::numel(c.oDims()), seed + 3), c.strides(c.sq, c.dv));
  const Pair o_in = makePair(dtype, c.oDims(), o_ref.values(), c.strides(c.sq, c.dv));
  const Pair lse_in = makePair(kF32, c.lseDims(), lse_ref.values(), c.lseStrides());
  Tensor gq = Tensor::device(dtype, c.qDims(), {}, c.strides(c.sq, c.d));
  Tensor gk = Tensor::device(dtype, c.kDims(), {}, c.kvStrides(c.d));
  Tensor gv = Tensor::device(dtype, c.vDims(), {}, c.kvStrides(c.dv));
  Tensor gq_ref = Tensor::host(dtype, c.qDims(), {}, c.strides(c.sq, c.d));
  Tensor gk_ref = Tensor::host(dtype, c.kDims(), {}, c.kvStrides(c.d));
  Tensor gv_ref = Tensor::host(dtype, c.vDims(), {}, c.kvStrides(c.dv));
  // Garbage in the device's gradients: every element must be written.
  gq.setValues(std::vector<double>(static_cast<std::size_t>(gq.numel()), 7.0));
  gk.setValues(std::vector<double>(static_cast<std::size_t>(gk.numel()), 7.0));
  gv.setValues(std::vector<double>(static_cast<std::size_t>(gv.numel()), 7.0));
  ASSERT_EQ(
      deviceBackward(h, causal, c.scale, go.dev, q.dev, k.dev, v.dev, o_in.dev, lse_in.dev, {gq, gk, gv}),
      MLUOP_STATUS_SUCCESS)
      << lastError();
  expectOk(referenceBackward(causal, c.scale, go.host, q.host, k.host, v.host, o_in.host, lse_in.host,
                             {gq_ref, gk_ref, gv_ref}));
  h.sync();
  // (A key/value head's gradients sum over its group's queries.)
  const auto tol =
      reducetest::reductionTolerance(dtype, std::max<std::int64_t>({c.sq * (c.h / c.kvHeads()), c.sk, 1}));
  expectClose(gq.values(), gq_ref.values(), tol, what + " grad_q");
  expectClose(gk.values(), gk_ref.values(), tol, what + " grad_k");
  expectClose(gv.values(), gv_ref.values(), tol, what + " grad_v");
}

TEST(Attention, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 1;
  for (const mluopDataType_t dtype : {kF32, kBF16, kF16}) {
    for (const Case& c : cases()) {
      for (const bool causal : {false, true}) {
        checkCase(h, dtype, c, causal, seed);
        seed += 4;
      }
    }
  }
}

// A head computed alone (one (batch, head): the backward splits it into key- and query-block tasks when
// there are several cores) and among many heads (one task per head) gives bit-identical results.
TEST(Attention, ResultsDoNotDependOnTheWorkSplit) {
  Handle h;
  const std::int64_t s = 150, d = 16, heads = 8;
  const Dims one{1, 1, s, d}, many{1, heads, s, d};
  const std::vector<double> qv = randomValues(heads * s * d, 11), kv = randomValues(heads * s * d, 12),
                            vv = randomValues(heads * s * d, 13), gov = randomValues(heads * s * d, 14);
  const auto head0 = [&](const std::vector<double>& x) {
    return std::vector<double>(x.begin(), x.begin() + s * d);
  };
  struct Run {
    std::vector<double> o, lse, gq, gk, gv;
  };
  const auto run = [&](const Dims& dims, const std::vector<double>& q_values,
                       const std::vector<double>& k_values, const std::vector<double>& v_values,
                       const std::vector<double>& go_values) {
    const Tensor q = Tensor::device(kF32, dims, q_values), k = Tensor::device(kF32, dims, k_values),
                 v = Tensor::device(kF32, dims, v_values), go = Tensor::device(kF32, dims, go_values);
    Tensor o = Tensor::device(kF32, dims), lse = Tensor::device(kF32, {dims[0], dims[1], s});
    Tensor gq = Tensor::device(kF32, dims), gk = Tensor::device(kF32, dims), gv = Tensor::device(kF32, dims);
    EXPECT_EQ(deviceForward(h, true, 0.0, q, k, v, o, lse), MLUOP_STATUS_SUCCESS) << lastError();
    EXPECT_EQ(deviceBackward(h, true, 0.0, go, q, k, v, o, lse, {gq, gk, gv}), MLUOP_STATUS_SUCCESS)
        << lastError();
    h.sync();
    const auto first = [](const std::vector<double>& x, std::int64_t n) {
      return std::vector<double>(x.begin(), x.begin() + n);
    };
    return Run{first(o.values(), s * d), first(lse.values(), s), first(gq.values(), s * d),
               first(gk.values(), s * d), first(gv.values(), s * d)};
  };
  const Run alone = run(one, head0(qv), head0(kv), head0(vv), head0(gov));
  const Run among = run(many, qv, kv, vv, gov);
  EXPECT_EQ(alone.o, among.o);
  EXPECT_EQ(alone.lse, among.lse);
  EXPECT_EQ(alone.gq, among.gq);
  EXPECT_EQ(alone.gk, among.gk);
  EXPECT_EQ(alone.gv, among.gv);
}

// Grouped-query attention (H = 4 query heads on Hkv = 2 key/value heads) is multi-head attention on the
// key/value heads repeated per group (head h on key/value head h / 2): the same o, lse and grad_q, and each
// key/value head's gradient the sum of its two query heads' — bit for bit in the float64 reference (summed in
// head order, as it does), within float32 rounding on the device (which sums inside its accumulator).
TEST(Attention, GroupedQueryIsMultiHeadOnRepeatedKeysAndValues) {
  Handle h;
  const std::int64_t b = 2, heads = 4, kv_heads = 2, s = 70, d = 8;
  const Dims q_dims{b, heads, s, d}, kv_dims{b, kv_heads, s, d};
  const std::vector<double> qv = randomValues(optest::numel(q_dims), 31),
                            kv = randomValues(optest::numel(kv_dims), 32),
                            vv = randomValues(optest::numel(kv_dims), 33),
                            gov = randomValues(optest::numel(q_dims), 34);
  // [B, Hkv, S, D] -> [B, H, S, D], head h a copy of key/value head h / 2.
  const auto repeat = [&](const std::vector<double>& x) {
    std::vector<double> out;
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t hi = 0; hi < heads; ++hi) {
        const auto from = x.begin() + ((bi * kv_heads + hi / 2) * s * d);
        out.insert(out.end(), from, from + s * d);
      }
    return out;
  };
  // [B, H, S, D] -> [B, Hkv, S, D], the sum of each group's heads (in head order).
  const auto sumGroups = [&](const std::vector<double>& x) {
    std::vector<double> out(static_cast<std::size_t>(b * kv_heads * s * d), 0.0);
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t hi = 0; hi < heads; ++hi)
        for (std::int64_t e = 0; e < s * d; ++e)
          out[static_cast<std::size_t>((bi * kv_heads + hi / 2) * s * d + e)] +=
              x[static_cast<std::size_t>((bi * heads + hi) * s * d + e)];
    return out;
  };
  struct Result {
    std::vector<double> o, lse, gq, gk, gv;
  };
  const auto run = [&](bool on_device, mluopDataType_t dtype, const std::vector<double>& k_values,
                       const std::vector<double>& v_values, const Dims& k_dims) {
    const auto make = [&](const Dims& dims, const std::vector<double>& values) {
      return on_device ? Tensor::device(dtype, dims, values) : Tensor::host(dtype, dims, values);
    };
    const auto empty = [&](mluopDataType_t type, const Dims& dims) {
      return on_device ? Tensor::device(type, dims) : Tensor::host(type, dims);
    };
    const Tensor q = make(q_dims, qv), k = make(k_dims, k_values), v = make(k_dims, v_values),
                 go = make(q_dims, gov);
    Tensor o = empty(dtype, q_dims), lse = empty(kF32, {b, heads, s});
    Tensor gq = empty(dtype, q_dims), gk = empty(dtype, k_dims), gv = empty(dtype, k_dims);
    if (on_device) {
      EXPECT_EQ(deviceForward(h, true, 0.0, q, k, v, o, lse), MLUOP_STATUS_SUCCESS) << lastError();
      EXPECT_EQ(deviceBackward(h, true, 0.0, go, q, k, v, o, lse, {gq, gk, gv}), MLUOP_STATUS_SUCCESS)
          << lastError();
      h.sync();
    } else {
      expectOk(referenceForward(true, 0.0, q, k, v, o, lse));
      expectOk(referenceBackward(true, 0.0, go, q, k, v, o, lse, {gq, gk, gv}));
    }
    return Result{o.values(), lse.values(), gq.values(), gk.values(), gv.values()};
  };
  for (const bool on_device : {false, true}) {
    const mluopDataType_t dtype = on_device ? kF32 : kF64;
    const std::string what = on_device ? "device" : "reference";
    const Result grouped = run(on_device, dtype, kv, vv, kv_dims);
    const Result multi = run(on_device, dtype, repeat(kv), repeat(vv), q_dims);
    EXPECT_EQ(grouped.o, multi.o) << what;
    EXPECT_EQ(grouped.lse, multi.lse) << what;
    EXPECT_EQ(grouped.gq, multi.gq) << what;
    if (on_device) {
      expectClose(grouped.gk, sumGroups(multi.gk), reducetest::reductionTolerance(kF32, 2 * s),
                  what + " grad_k");
      expectClose(grouped.gv, sumGroups(multi.gv), reducetest::reductionTolerance(kF32, 2 * s),
                  what + " grad_v");
    } else {
      EXPECT_EQ(grouped.gk, sumGroups(multi.gk)) << what;
      EXPECT_EQ(grouped.gv, sumGroups(multi.gv)) << what;
    }
  }
}

// q = k = I (2x2), scale 1: row 0 scores [1, 0], row 1 [0, 1]. v = [[1, 2], [3, 4]].
TEST(Attention, ReferenceHandWorked2x2) {
  const Tensor q = Tensor::host(kF64, {1, 1, 2, 2}, {1, 0, 0, 1});
  const Tensor k = Tensor::host(kF64, {1, 1, 2, 2}, {1, 0, 0, 1});
  const Tensor v = Tensor::host(kF64, {1, 1, 2, 2}, {1, 2, 3, 4});
  const double e = std::exp(1.0);
  const double w = e / (e + 1), u = 1 / (e + 1);  // softmax([1, 0])
  Tensor o = Tensor::host(kF64, {1, 1, 2, 2});
  Tensor lse = Tensor::host(kF64, {1, 1, 2});
  expectOk(referenceForward(false, 1.0, q, k, v, o, lse));
  expectClose(o.values(), {w * 1 + u * 3, w * 2 + u * 4, u * 1 + w * 3, u * 2 + w * 4}, {1e-15, 1e-15}, "o");
  expectClose(lse.values(), {std::log(e + 1), std::log(e + 1)}, {1e-15, 1e-15}, "lse");
  // Causal: query 0 sees key 0 only (o = v[0], lse = its score 1); query 1 sees both.
  expectOk(referenceForward(true, 1.0, q, k, v, o, lse));
  expectClose(o.values(), {1, 2, u * 1 + w * 3, u * 2 + w * 4}, {1e-15, 1e-15}, "causal o");
  expectClose(lse.values(), {1, std::log(e + 1)}, {1e-15, 1e-15}, "causal lse");
  // The default scale is 1/sqrt(2): row 0 scores [1/sqrt(2), 0].
  expectOk(referenceForward(false, 0.0, q, k, v, o, lse));
  const double s = 1 / std::sqrt(2.0);
  const double ws = std::exp(s) / (std::exp(s) + 1), us = 1 / (std::exp(s) + 1);
  expectClose(o.values(), {ws * 1 + us * 3, ws * 2 + us * 4, us * 1 + ws * 3, us * 2 + ws * 4},
              {1e-15, 1e-15}, "default scale o");
  // Backward with grad_o = [[1, 0], [0, 0]] (d loss / d o[0][0]), non-causal, scale 1: dV = P^T dO, so
  // dV[0] = [w, 0], dV[1] = [u, 0]; dS_0 = P_0 (dP_0 - D_0) with dP_0 = [1, 3], D_0 = w + 3u.
  expectOk(referenceForward(false, 1.0, q, k, v, o, lse));
  const Tensor go = Tensor::host(kF64, {1, 1, 2, 2}, {1, 0, 0, 0});
  Tensor gq = Tensor::host(kF64, {1, 1, 2, 2}), gk = Tensor::host(kF64, {1, 1, 2, 2}),
         gv = Tensor::host(kF64, {1, 1, 2, 2});
  expectOk(referenceBackward(false, 1.0, go, q, k, v, o, lse, {gq, gk, gv}));
  const double d0 = w + 3 * u;
  const double ds0 = w * (1 - d0), ds1 = u * (3 - d0);  // = -2wu, 2wu
  expectClose(gv.values(), {w, 0, u, 0}, {1e-15, 1e-15}, "grad_v");
  // dQ_0 = ds0 k_0 + ds1 k_1 = [ds0, ds1]; dK_j = ds_j q_0 = [ds_j, 0].
  expectClose(gq.values(), {ds0, ds1, 0, 0}, {1e-15, 1e-15}, "grad_q");
  expectClose(gk.values(), {ds0, 0, ds1, 0}, {1e-15, 1e-15}, "grad_k");
}

// The backward against central differences of loss = sum(grad_o ∘ o(q, k, v)), all in float64.
TEST(Attention, BackwardMatchesFiniteDifferences) {
  const std::vector<Case> small = {
      {1, 2, 3, 4, 3, 2}, {1, 1, 5, 3, 2, 3, false, 0.9}, {2, 1, 4, 4, 3, 3, true}};
  std::uint32_t seed = 100;
  for (const Case& c : small) {
    for (const bool causal : {false, true}) {
      const std::string what = std::string(causal ? "causal " : "") + c.label();
      const auto qs = c.strides(c.sq, c.d), ks = c.strides(c.sk, c.d), vs = c.strides(c.sk, c.dv),
                 os = c.strides(c.sq, c.dv);
      const std::vector<double> qv = randomValues(optest::numel(c.qDims()), seed++),
                                kv = randomValues(optest::numel(c.kDims()), seed++),
                                vv = randomValues(optest::numel(c.vDims()), seed++),
                                gov = randomValues(optest::numel(c.oDims()), seed++);
      const auto forward = [&](const std::vector<double>& q_values, const std::vector<double>& k_values,
                               const std::vector<double>& v_values, Tensor& o, Tensor& lse) {
        const Tensor q = Tensor::host(kF64, c.qDims(), q_values, qs),
                     k = Tensor::host(kF64, c.kDims(), k_values, ks),
                     v = Tensor::host(kF64, c.vDims(), v_values, vs);
        expectOk(referenceForward(causal, c.scale, q, k, v, o, lse));
      };
      const auto loss = [&](const std::vector<double>& q_values, const std::vector<double>& k_values,
                            const std::vector<double>& v_values) {
        Tensor o = Tensor::host(kF64, c.oDims(), {}, os), lse = Tensor::host(kF64, c.lseDims());
        forward(q_values, k_values, v_values, o, lse);
        return optest::dot(o.values(), gov);
      };
      Tensor o = Tensor::host(kF64, c.oDims(), {}, os), lse = Tensor::host(kF64, c.lseDims());
      forward(qv, kv, vv, o, lse);
      const Tensor q = Tensor::host(kF64, c.qDims(), qv, qs), k = Tensor::host(kF64, c.kDims(), kv, ks),
                   v = Tensor::host(kF64, c.vDims(), vv, vs), go = Tensor::host(kF64, c.oDims(), gov, os);
      Tensor gq = Tensor::host(kF64, c.qDims(), {}, qs), gk = Tensor::host(kF64, c.kDims(), {}, ks),
             gv = Tensor::host(kF64, c.vDims(), {}, vs);
      expectOk(referenceBackward(causal, c.scale, go, q, k, v, o, lse, {gq, gk, gv}));
      const auto tol = reducetest::finiteDifferenceTolerance();
      expectClose(gq.values(),
                  reducetest::numericalGradient(qv, [&](const auto& x) { return loss(x, kv, vv); }), tol,
                  what + " grad_q");
      expectClose(gk.values(),
                  reducetest::numericalGradient(kv, [&](const auto& x) { return loss(qv, x, vv); }), tol,
                  what + " grad_k");
      expectClose(gv.values(),
                  reducetest::numericalGradient(vv, [&](const auto& x) { return loss(qv, kv, x); }), tol,
                  what + " grad_v");
    }
  }
}

// No keys: o = 0 and lse = -inf; the backward gives zero gradients (and an lse of -inf zeroes its row).
TEST(Attention, RowsWithoutKeys) {
  Handle h;
  const Case c{1, 2, 3, 0, 4, 4};
  const Tensor q = Tensor::device(kF32, c.qDims(), randomValues(24, 5)), k = Tensor::device(kF32, c.kDims()),
               v = Tensor::device(kF32, c.vDims());
  Tensor o = Tensor::device(kF32, c.oDims(), std::vector<double>(24, 9.0)),
         lse = Tensor::device(kF32, c.lseDims());
  ASSERT_EQ(deviceForward(h, false, 0.0, q, k, v, o, lse), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  EXPECT_EQ(o.values(), std::vector<double>(24, 0.0));
  EXPECT_EQ(lse.values(), std::vector<double>(6, -kInf));
  const Tensor go = Tensor::device(kF32, c.oDims(), randomValues(24, 6));
  Tensor gq = Tensor::device(kF32, c.qDims(), std::vector<double>(24, 9.0)),
         gk = Tensor::device(kF32, c.kDims()), gv = Tensor::device(kF32, c.vDims());
  ASSERT_EQ(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq, gk, gv}), MLUOP_STATUS_SUCCESS)
      << lastError();
  h.sync();
  EXPECT_EQ(gq.values(), std::vector<double>(24, 0.0));
  // With keys, but lse = -inf given for every row: P = 0 on device and reference alike.
  const Case d{1, 1, 4, 4, 2, 2};
  const Pair q2 = makePair(kF32, d.qDims(), randomValues(8, 7)),
             k2 = makePair(kF32, d.kDims(), randomValues(8, 8)),
             v2 = makePair(kF32, d.vDims(), randomValues(8, 9)),
             go2 = makePair(kF32, d.oDims(), randomValues(8, 10)),
             o2 = makePair(kF32, d.oDims(), randomValues(8, 11)),
             lse2 = makePair(kF32, d.lseDims(), std::vector<double>(4, -kInf));
  Tensor gq2 = Tensor::device(kF32, d.qDims()), gk2 = Tensor::device(kF32, d.kDims()),
         gv2 = Tensor::device(kF32, d.vDims());
  Tensor gq2_ref = Tensor::host(kF32, d.qDims()), gk2_ref = Tensor::host(kF32, d.kDims()),
         gv2_ref = Tensor::host(kF32, d.vDims());
  ASSERT_EQ(deviceBackward(h, true, 0.0, go2.dev, q2.dev, k2.dev, v2.dev, o2.dev, lse2.dev, {gq2, gk2, gv2}),
            MLUOP_STATUS_SUCCESS);
  expectOk(referenceBackward(true, 0.0, go2.host, q2.host, k2.host, v2.host, o2.host, lse2.host,
                             {gq2_ref, gk2_ref, gv2_ref}));
  h.sync();
  for (const Tensor* t : {&gq2, &gk2, &gv2, &gq2_ref, &gk2_ref, &gv2_ref}) {
    EXPECT_EQ(t->values(), std::vector<double>(8, 0.0));
  }
}

// A NaN in one query row makes that row's o and lse NaN, on the device and in the reference; others stay.
TEST(Attention, NaNQueryRow) {
  Handle h;
  const Case c{1, 1, 3, 5, 2, 2};
  std::vector<double> qv = randomValues(6, 21);
  qv[2] = std::numeric_limits<double>::quiet_NaN();  // row 1
  const Pair q = makePair(kF32, c.qDims(), qv), k = makePair(kF32, c.kDims(), randomValues(10, 22)),
             v = makePair(kF32, c.vDims(), randomValues(10, 23));
  Tensor o = Tensor::device(kF32, c.oDims()), lse = Tensor::device(kF32, c.lseDims());
  Tensor o_ref = Tensor::host(kF32, c.oDims()), lse_ref = Tensor::host(kF32, c.lseDims());
  ASSERT_EQ(deviceForward(h, false, 0.0, q.dev, k.dev, v.dev, o, lse), MLUOP_STATUS_SUCCESS);
  expectOk(referenceForward(false, 0.0, q.host, k.host, v.host, o_ref, lse_ref));
  h.sync();
  for (const Tensor* t : {&o, &o_ref}) {
    const auto x = t->values();
    EXPECT_TRUE(std::isfinite(x[0]) && std::isnan(x[2]) && std::isnan(x[3]) && std::isfinite(x[4]));
  }
  for (const Tensor* t : {&lse, &lse_ref}) {
    const auto x = t->values();
    EXPECT_TRUE(std::isfinite(x[0]) && std::isnan(x[1]) && std::isfinite(x[2]));
  }
}

// llama_train's pattern: q, k, v (and their gradients) as interleaved [B, H, S, D] views of one fused
// [B, S, 3, H, D] buffer. The views share byte ranges but no element, so they are accepted, and give the
// results of separate tensors.
class Fused {
 public:
  Fused(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) : b_(b), s_(s), h_(h), d_(d) {
    EXPECT_EQ(mlurtMalloc(&data_, static_cast<std::size_t>(b * s * 3 * h * d) * 4), MLURT_SUCCESS);
    for (auto& desc : desc_) {
      EXPECT_EQ(mluopCreateTensorDescriptor(&desc), MLUOP_STATUS_SUCCESS);
      const Dims dims{b, h, s, d}, strides{s * 3 * h * d, d, 3 * h * d, 1};
      EXPECT_EQ(mluopSetTensorDescriptorEx(desc, MLUOP_LAYOUT_ARRAY, kF32, 4, dims.data(), strides.data()),
                MLUOP_STATUS_SUCCESS);
    }
  }
  ~Fused() {
    for (auto& desc : desc_) mluopDestroyTensorDescriptor(desc);
    mlurtFree(data_);
  }
  Fused(const Fused&) = delete;
  Fused& operator=(const Fused&) = delete;
  mluopTensorDescriptor_t desc(int part) const { return desc_[static_cast<std::size_t>(part)]; }
  float* data(int part) const { return static_cast<float*>(data_) + part * h_ * d_; }
  // Values of part (0 q, 1 k, 2 v) in [B, H, S, D] order.
  void set(int part, const std::vector<double>& values) {
    for (std::int64_t i = 0; i < b_ * h_ * s_ * d_; ++i)
      data(part)[offset(i)] = static_cast<float>(values[static_cast<std::size_t>(i)]);
  }
  std::vector<double> get(int part) const {
    std::vector<double> out(static_cast<std::size_t>(b_ * h_ * s_ * d_));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = data(part)[offset(static_cast<std::int64_t>(i))];
    return out;
  }

 private:
  std::int64_t offset(std::int64_t i) const {
    const std::int64_t x = i % d_, si = (i / d_) % s_, hi = (i / (d_ * s_)) % h_, bi = i / (d_ * s_ * h_);
    return bi * s_ * 3 * h_ * d_ + si * 3 * h_ * d_ + hi * d_ + x;
  }
  std::int64_t b_, s_, h_, d_;
  void* data_ = nullptr;
  std::array<mluopTensorDescriptor_t, 3> desc_{};
};

TEST(Attention, InterleavedFusedBuffers) {
  Handle h;
  const std::int64_t b = 2, s = 21, heads = 3, d = 8;
  const Dims dims{b, heads, s, d};
  const std::int64_t n = optest::numel(dims);
  Fused qkv(b, s, heads, d), grads(b, s, heads, d);
  const std::vector<double> qv = randomValues(n, 31), kv = randomValues(n, 32), vv = randomValues(n, 33),
                            gov = randomValues(n, 34);
  qkv.set(0, qv);
  qkv.set(1, kv);
  qkv.set(2, vv);
  const Tensor q = Tensor::device(kF32, dims, qv), k = Tensor::device(kF32, dims, kv),
               v = Tensor::device(kF32, dims, vv), go = Tensor::device(kF32, dims, gov);
  Tensor o = Tensor::device(kF32, dims), lse = Tensor::device(kF32, {b, heads, s});
  Tensor o2 = Tensor::device(kF32, dims), lse2 = Tensor::device(kF32, {b, heads, s});
  ASSERT_EQ(deviceForward(h, true, 0.0, q, k, v, o, lse), MLUOP_STATUS_SUCCESS) << lastError();
  ASSERT_EQ(mluopScaledDotProductAttentionForward(h, true, 0.0, qkv.desc(0), qkv.data(0), qkv.desc(1),
                                                  qkv.data(1), qkv.desc(2), qkv.data(2), o2.desc(), o2.data(),
                                                  lse2.desc(), lse2.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  Tensor gq = Tensor::device(kF32, dims), gk = Tensor::device(kF32, dims), gv = Tensor::device(kF32, dims);
  ASSERT_EQ(deviceBackward(h, true, 0.0, go, q, k, v, o, lse, {gq, gk, gv}), MLUOP_STATUS_SUCCESS)
      << lastError();
  ASSERT_EQ(mluopScaledDotProductAttentionBackward(
                h, true, 0.0, go.desc(), go.data(), qkv.desc(0), qkv.data(0), qkv.desc(1), qkv.data(1),
                qkv.desc(2), qkv.data(2), o.desc(), o.data(), lse.desc(), lse.data(), grads.desc(0),
                grads.data(0), grads.desc(1), grads.data(1), grads.desc(2), grads.data(2)),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  h.sync();
  EXPECT_EQ(o2.values(), o.values());
  EXPECT_EQ(lse2.values(), lse.values());
  EXPECT_EQ(grads.get(0), gq.values());
  EXPECT_EQ(grads.get(1), gk.values());
  EXPECT_EQ(grads.get(2), gv.values());
  // The same views as outputs over the inputs' fused buffer: refused.
  expectBadParam(mluopScaledDotProductAttentionBackward(
                     h, true, 0.0, go.desc(), go.data(), qkv.desc(0), qkv.data(0), qkv.desc(1), qkv.data(1),
                     qkv.desc(2), qkv.data(2), o.desc(), o.data(), lse.desc(), lse.data(), qkv.desc(0),
                     qkv.data(0), grads.desc(1), grads.data(1), grads.desc(2), grads.data(2)),
                 "scaled_dot_product_attention_backward: grad_q shares memory with the input q");
  // Two gradients on one view: refused.
  expectBadParam(mluopScaledDotProductAttentionBackward(
                     h, true, 0.0, go.desc(), go.data(), q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                     v.data(), o.desc(), o.data(), lse.desc(), lse.data(), grads.desc(0), grads.data(0),
                     grads.desc(1), grads.data(1), grads.desc(1), grads.data(1)),
                 "grad_k and grad_v share memory; outputs must not overlap");
}

TEST(Attention, ForwardBadParams) {
  Handle h;
  const Tensor q = Tensor::device(kF32, {2, 3, 5, 4}), k = Tensor::device(kF32, {2, 3, 7, 4}),
               v = Tensor::device(kF32, {2, 3, 7, 6});
  Tensor o = Tensor::device(kF32, {2, 3, 5, 6}), lse = Tensor::device(kF32, {2, 3, 5});
  const std::string op = "scaled_dot_product_attention_forward: ";
  ASSERT_EQ(deviceForward(h, true, 0.0, q, k, v, o, lse), MLUOP_STATUS_SUCCESS) << lastError();

  const Tensor q3 = Tensor::device(kF32, {3, 5, 4});
  expectBadParam(deviceForward(h, false, 0.0, q3, k, v, o, lse),
                 op + "q has shape [3, 5, 4]; expected 4 dims [B, H, Sq, D]");
  const Tensor k3 = Tensor::device(kF32, {2, 7, 4});
  expectBadParam(deviceForward(h, false, 0.0, q, k3, v, o, lse),
                 "k has shape [2, 7, 4]; expected 4 dims [B, Hkv, Sk, D]");
  const Tensor v5 = Tensor::device(kF32, {2, 3, 7, 6, 1});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v5, o, lse),
                 "v has shape [2, 3, 7, 6, 1]; expected 4 dims [B, Hkv, Sk, Dv]");
  const Tensor k_batch = Tensor::device(kF32, {1, 3, 7, 4});
  expectBadParam(
      deviceForward(h, false, 0.0, q, k_batch, v, o, lse),
      "k has shape [1, 3, 7, 4] but q has shape [2, 3, 5, 4]; expected k [B, Hkv, Sk, D] = [2, Hkv, Sk, 4]");
  const Tensor k_heads = Tensor::device(kF32, {2, 2, 7, 4}), v_heads = Tensor::device(kF32, {2, 2, 7, 6});
  expectBadParam(deviceForward(h, false, 0.0, q, k_heads, v_heads, o, lse),
                 "k has 2 heads and q 3: grouped-query attention needs the query heads H a multiple of the "
                 "key/value heads Hkv");
  const Tensor k_none = Tensor::device(kF32, {2, 0, 7, 4});
  expectBadParam(deviceForward(h, false, 0.0, q, k_none, v, o, lse), "k has 0 heads and q 3");
  const Tensor k_one = Tensor::device(kF32, {2, 1, 7, 4});
  expectBadParam(
      deviceForward(h, false, 0.0, q, k_one, v, o, lse),
      "v has shape [2, 3, 7, 6] but q has shape [2, 3, 5, 4] and k [2, 1, 7, 4]; expected v [B, Hkv, "
      "Sk, Dv] = [2, 1, 7, Dv]");
  const Tensor k_dim = Tensor::device(kF32, {2, 3, 7, 5});
  expectBadParam(deviceForward(h, false, 0.0, q, k_dim, v, o, lse),
                 "k has shape [2, 3, 7, 5] but q has shape");
  const Tensor v_keys = Tensor::device(kF32, {2, 3, 8, 6});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v_keys, o, lse),
                 "v has shape [2, 3, 8, 6] but q has shape [2, 3, 5, 4] and k [2, 3, 7, 4]; expected v [B, "
                 "Hkv, Sk, Dv] = "
                 "[2, 3, 7, Dv]");
  const Tensor q0 = Tensor::device(kF32, {2, 3, 5, 0}), k0 = Tensor::device(kF32, {2, 3, 7, 0});
  expectBadParam(deviceForward(h, false, 0.0, q0, k0, v, o, lse),
                 "q has shape [2, 3, 5, 0]: head dim D = 0; attention needs D >= 1");
  Tensor o_bad = Tensor::device(kF32, {2, 3, 5, 4});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v, o_bad, lse),
                 op + "o has shape [2, 3, 5, 4] but the result has shape [2, 3, 5, 6]");
  Tensor lse_bad = Tensor::device(kF32, {2, 3, 5, 1});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v, o, lse_bad),
                 "lse has shape [2, 3, 5, 1] but the result has shape [2, 3, 5]");
  Tensor lse_bf16 = Tensor::device(kBF16, {2, 3, 5});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v, o, lse_bf16),
                 op + "lse is bfloat16; expected float32");
  const Tensor k_bf16 = Tensor::device(kBF16, {2, 3, 7, 4});
  expectBadParam(deviceForward(h, false, 0.0, q, k_bf16, v, o, lse),
                 "k is bfloat16 but q is float32; they must have the same dtype");
  Tensor o_bf16 = Tensor::device(kBF16, {2, 3, 5, 6});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v, o_bf16, lse), "o is bfloat16 but q is float32");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expectBadParam(deviceForward(h, false, nan, q, k, v, o, lse),
                 op + "scale = nan must be finite (a value <= 0 selects the default 1/sqrt(D))");
  expectBadParam(deviceForward(h, false, kInf, q, k, v, o, lse), "scale = inf must be finite");
  // Outputs: a broadcast o, o over an input, o and lse over each other.
  Tensor o_broadcast = Tensor::device(kF32, {2, 3, 5, 6}, {}, {0, 6, 0, 1});
  expectBadParam(deviceForward(h, false, 0.0, q, k, v, o_broadcast, lse),
                 "o (shape [2, 3, 5, 6], strides [0, 6, 0, 1]) overlaps itself");
  expectBadParam(
      mluopScaledDotProductAttentionForward(h, false, 0.0, q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                                            o.data(), o.desc(), o.data(), lse.desc(), lse.data()),
      op + "o shares memory with the input v; outputs must not overlap inputs");
  expectBadParam(
      mluopScaledDotProductAttentionForward(h, false, 0.0, q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                                            v.data(), o.desc(), o.data(), lse.desc(), o.data()),
      "o and lse share memory; outputs must not overlap");
  // Not floating: NOT_SUPPORTED; float64 on the device: NOT_SUPPORTED.
  const Tensor qi = Tensor::device(MLUOP_DTYPE_INT32, {2, 3, 5, 4});
  EXPECT_EQ(deviceForward(h, false, 0.0, qi, k, v, o, lse), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("q is int32, which is not supported"));
  const Tensor q64 = Tensor::device(kF64, {2, 3, 5, 4}), k64 = Tensor::device(kF64, {2, 3, 7, 4}),
               v64 = Tensor::device(kF64, {2, 3, 7, 6});
  Tensor o64 = Tensor::device(kF64, {2, 3, 5, 6}), lse64 = Tensor::device(kF64, {2, 3, 5});
  EXPECT_EQ(deviceForward(h, false, 0.0, q64, k64, v64, o64, lse), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("float64, which the device does not support"));
  // The reference checks alike; with float64 q it also takes a float64 lse, and it reports missing tensors.
  Tensor o_host = Tensor::host(kF32, {2, 3, 5, 6}), lse_host = Tensor::host(kBF16, {2, 3, 5});
  const Tensor qh = Tensor::host(kF32, {2, 3, 5, 4}), kh = Tensor::host(kF32, {2, 3, 7, 4}),
               vh = Tensor::host(kF32, {2, 3, 7, 6});
  const mlu::Status s = referenceForward(false, 0.0, qh, kh, vh, o_host, lse_host);
  EXPECT_EQ(s.code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(s.message, HasSubstr("lse is bfloat16; expected float32"));
  const Tensor q64h = Tensor::host(kF64, {2, 3, 5, 4}), k64h = Tensor::host(kF64, {2, 3, 7, 4}),
               v64h = Tensor::host(kF64, {2, 3, 7, 6});
  Tensor o64h = Tensor::host(kF64, {2, 3, 5, 6}), lse64h = Tensor::host(kF64, {2, 3, 5}),
         lse16h = Tensor::host(kF16, {2, 3, 5});
  expectOk(referenceForward(false, 0.0, q64h, k64h, v64h, o64h, lse64h));
  EXPECT_THAT(referenceForward(false, 0.0, q64h, k64h, v64h, o64h, lse16h).message,
              HasSubstr("lse is float16; expected float32 or float64"));
  mlu::scaled_dot_product_attention_forward_args missing;
  missing.k = kh.view();
  EXPECT_EQ(mlu::reference::run(missing).code, MLUOP_STATUS_BAD_PARAM);
  EXPECT_THAT(mlu::reference::run(missing).message, HasSubstr("q is missing"));
}

TEST(Attention, BackwardBadParams) {
  Handle h;
  const Tensor q = Tensor::device(kF32, {1, 2, 5, 4}), k = Tensor::device(kF32, {1, 2, 7, 4}),
               v = Tensor::device(kF32, {1, 2, 7, 3}), o = Tensor::device(kF32, {1, 2, 5, 3}),
               go = Tensor::device(kF32, {1, 2, 5, 3}), lse = Tensor::device(kF32, {1, 2, 5});
  Tensor gq = Tensor::device(kF32, {1, 2, 5, 4}), gk = Tensor::device(kF32, {1, 2, 7, 4}),
         gv = Tensor::device(kF32, {1, 2, 7, 3});
  const std::string op = "scaled_dot_product_attention_backward: ";
  ASSERT_EQ(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq, gk, gv}), MLUOP_STATUS_SUCCESS)
      << lastError();
  const Tensor go_bad = Tensor::device(kF32, {1, 2, 5, 4});
  expectBadParam(deviceBackward(h, false, 0.0, go_bad, q, k, v, o, lse, {gq, gk, gv}),
                 op + "grad_o has shape [1, 2, 5, 4] but the result has shape [1, 2, 5, 3]");
  const Tensor o_bad = Tensor::device(kF32, {1, 2, 6, 3});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o_bad, lse, {gq, gk, gv}),
                 "o has shape [1, 2, 6, 3] but the result has shape [1, 2, 5, 3]");
  const Tensor lse_bad = Tensor::device(kF32, {1, 2, 7});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse_bad, {gq, gk, gv}),
                 "lse has shape [1, 2, 7] but the result has shape [1, 2, 5]");
  const Tensor lse_f16 = Tensor::device(kF16, {1, 2, 5});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse_f16, {gq, gk, gv}),
                 "lse is float16; expected float32");
  Tensor gq_bad = Tensor::device(kF32, {1, 2, 7, 4});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq_bad, gk, gv}),
                 "grad_q has shape [1, 2, 7, 4] but the result has shape [1, 2, 5, 4]");
  Tensor gk_bad = Tensor::device(kF32, {1, 2, 5, 4});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq, gk_bad, gv}),
                 "grad_k has shape [1, 2, 5, 4] but the result has shape [1, 2, 7, 4]");
  Tensor gv_bad = Tensor::device(kF32, {1, 2, 7, 4});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq, gk, gv_bad}),
                 "grad_v has shape [1, 2, 7, 4] but the result has shape [1, 2, 7, 3]");
  Tensor gk_bf16 = Tensor::device(kBF16, {1, 2, 7, 4});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq, gk_bf16, gv}),
                 "grad_k is bfloat16 but q is float32");
  const Tensor go_bf16 = Tensor::device(kBF16, {1, 2, 5, 3});
  expectBadParam(deviceBackward(h, false, 0.0, go_bf16, q, k, v, o, lse, {gq, gk, gv}),
                 "grad_o is bfloat16 but q is float32");
  const Tensor v_bad = Tensor::device(kF32, {1, 1, 7, 3});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v_bad, o, lse, {gq, gk, gv}),
                 "v has shape [1, 1, 7, 3] but q has shape");
  expectBadParam(deviceBackward(h, false, -kInf, go, q, k, v, o, lse, {gq, gk, gv}),
                 "scale = -inf must be finite");
  Tensor gv_broadcast = Tensor::device(kF32, {1, 2, 7, 3}, {}, {42, 21, 0, 1});
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {gq, gk, gv_broadcast}),
                 "grad_v (shape [1, 2, 7, 3], strides [42, 21, 0, 1]) overlaps itself");
  // A gradient over an input (grad_o, o, lse too) or over another gradient.
  expectBadParam(deviceBackward(h, false, 0.0, go, q, k, v, o, lse, {q, gk, gv}),
                 op + "grad_q shares memory with the input q; outputs must not overlap inputs");
  expectBadParam(mluopScaledDotProductAttentionBackward(h, false, 0.0, go.desc(), go.data(), q.desc(),
                                                        q.data(), k.desc(), k.data(), v.desc(), v.data(),
                                                        o.desc(), o.data(), lse.desc(), lse.data(), gq.desc(),
                                                        gq.data(), gk.desc(), gk.data(), gv.desc(), o.data()),
                 "grad_v shares memory with the input o");
  expectBadParam(mluopScaledDotProductAttentionBackward(
                     h, false, 0.0, go.desc(), gv.data(), q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                     v.data(), o.desc(), o.data(), lse.desc(), lse.data(), gq.desc(), gq.data(), gk.desc(),
                     gk.data(), gv.desc(), gv.data()),
                 "grad_v shares memory with the input grad_o");
  expectBadParam(mluopScaledDotProductAttentionBackward(
                     h, false, 0.0, go.desc(), go.data(), q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                     v.data(), o.desc(), o.data(), lse.desc(), gq.data(), gq.desc(), gq.data(), gk.desc(),
                     gk.data(), gv.desc(), gv.data()),
                 "grad_q shares memory with the input lse");
  expectBadParam(mluopScaledDotProductAttentionBackward(
                     h, false, 0.0, go.desc(), go.data(), q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                     v.data(), o.desc(), o.data(), lse.desc(), lse.data(), gq.desc(), gq.data(), gk.desc(),
                     gq.data(), gv.desc(), gv.data()),
                 "grad_q and grad_k share memory");
}

// ================================ variable-length attention ================================

// Packed sequences: q [Tq, H, D], k/v [Tk, Hkv, D], offsets cu (one list for q and k, as DIOPI's cases).
struct Varlen {
  std::vector<double> cu;
  std::int64_t tq, h, hkv, d;
  bool causal;
  double scale = 0;
  mluopDataType_t cu_dtype = MLUOP_DTYPE_INT64;
};

struct VarlenTensors {
  Pair q, k, v, cu_q, cu_k, go;
  Tensor o, lse, gq, gk, gv;
  Tensor o_ref, lse_ref, gq_ref, gk_ref, gv_ref;
};

VarlenTensors varlenTensors(const Varlen& c, mluopDataType_t dtype, std::uint32_t seed) {
  const Dims qd{c.tq, c.h, c.d}, kd{c.tq, c.hkv, c.d}, ld{c.h, c.tq};
  const auto n = [](const Dims& d) { return optest::numel(d); };
  const Dims cd{static_cast<std::int64_t>(c.cu.size())};
  return VarlenTensors{makePair(dtype, qd, randomValues(n(qd), seed)),
                       makePair(dtype, kd, randomValues(n(kd), seed + 1)),
                       makePair(dtype, kd, randomValues(n(kd), seed + 2)),
                       makePair(c.cu_dtype, cd, c.cu),
                       makePair(c.cu_dtype, cd, c.cu),
                       makePair(dtype, qd, randomValues(n(qd), seed + 3)),
                       Tensor::device(dtype, qd),
                       Tensor::device(kF32, ld),
                       Tensor::device(dtype, qd),
                       Tensor::device(dtype, kd),
                       Tensor::device(dtype, kd),
                       Tensor::host(dtype, qd),
                       Tensor::host(kF32, ld),
                       Tensor::host(dtype, qd),
                       Tensor::host(dtype, kd),
                       Tensor::host(dtype, kd)};
}

mluopStatus_t varlenForward(const Handle& h, const Varlen& c, const Pair& q, const Pair& k, const Pair& v,
                            const Pair& cq, const Pair& ck, const Tensor& o, const Tensor& lse) {
  return mluopAttentionVarlenForward(h, c.causal, c.scale, q.dev.desc(), q.dev.data(), k.dev.desc(),
                                     k.dev.data(), v.dev.desc(), v.dev.data(), cq.dev.desc(), cq.dev.data(),
                                     ck.dev.desc(), ck.dev.data(), o.desc(), o.data(), lse.desc(),
                                     lse.data());
}

mlu::Status varlenForwardReference(const Varlen& c, const VarlenTensors& t, const Tensor& o,
                                   const Tensor& lse) {
  mlu::attention_varlen_forward_args a;
  a.causal = c.causal;
  a.scale = c.scale;
  a.q = t.q.host.view();
  a.k = t.k.host.view();
  a.v = t.v.host.view();
  a.cu_seqlens_q = t.cu_q.host.view();
  a.cu_seqlens_k = t.cu_k.host.view();
  a.o = o.view();
  a.lse = lse.view();
  return mlu::reference::run(a);
}

// Runs forward and backward on the device and in the reference.
void runVarlen(const Handle& h, const Varlen& c, VarlenTensors& t) {
  ASSERT_EQ(varlenForward(h, c, t.q, t.k, t.v, t.cu_q, t.cu_k, t.o, t.lse), MLUOP_STATUS_SUCCESS)
      << lastError();
  expectOk(varlenForwardReference(c, t, t.o_ref, t.lse_ref));
  h.sync();
  // the backward from the reference's o and lse on both sides
  const Pair o = makePair(t.o.view().dtype, {c.tq, c.h, c.d}, t.o_ref.values());
  const Pair lse = makePair(kF32, {c.h, c.tq}, t.lse_ref.values());
  ASSERT_EQ(mluopAttentionVarlenBackward(h, c.causal, c.scale, t.go.dev.desc(), t.go.dev.data(),
                                         t.q.dev.desc(), t.q.dev.data(), t.k.dev.desc(), t.k.dev.data(),
                                         t.v.dev.desc(), t.v.dev.data(), o.dev.desc(), o.dev.data(),
                                         lse.dev.desc(), lse.dev.data(), t.cu_q.dev.desc(), t.cu_q.dev.data(),
                                         t.cu_k.dev.desc(), t.cu_k.dev.data(), t.gq.desc(), t.gq.data(),
                                         t.gk.desc(), t.gk.data(), t.gv.desc(), t.gv.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  mlu::attention_varlen_backward_args b;
  b.causal = c.causal;
  b.scale = c.scale;
  b.grad_o = t.go.host.view();
  b.q = t.q.host.view();
  b.k = t.k.host.view();
  b.v = t.v.host.view();
  b.o = o.host.view();
  b.lse = lse.host.view();
  b.cu_seqlens_q = t.cu_q.host.view();
  b.cu_seqlens_k = t.cu_k.host.view();
  b.grad_q = t.gq_ref.view();
  b.grad_k = t.gk_ref.view();
  b.grad_v = t.gv_ref.view();
  expectOk(mlu::reference::run(b));
  h.sync();
}

// DIOPI's multihead_attention_varlen and flash_attention_varlen cases (heads and head dims cut), with
// grouped-query variants, int32 and int64 offsets, zero-length sequences and padding rows past the last
// offset.
TEST(AttentionVarlen, DeviceMatchesReference) {
  Handle h;
  const std::vector<Varlen> cases = {
      {{0, 0, 0, 1, 1}, 1, 9, 9, 8, true},
      {{0, 1, 2}, 2, 4, 4, 16, false},
      {{0, 3}, 3, 8, 8, 64, true},
      {{0, 13, 66, 153, 256}, 256, 4, 4, 32, false, 0, MLUOP_DTYPE_INT32},
      {{0, 16, 48, 64}, 64, 8, 2, 32, true, 0.0883},
      {{0, 2, 7, 19, 32, 64, 96, 128}, 128, 4, 1, 16, false},
      {{0, 32, 96, 130}, 140, 2, 2, 16, true},  // rows 130..139: padding
  };
  std::uint32_t seed = 100;
  for (const mluopDataType_t dtype : {kF32, kBF16}) {
    for (const Varlen& c : cases) {
      const std::string what =
          dtypeLabel(dtype) + " cu " + testing::PrintToString(c.cu) + (c.causal ? " causal" : "");
      VarlenTensors t = varlenTensors(c, dtype, seed);
      seed += 10;
      runVarlen(h, c, t);
      const optest::Tolerance tol = reducetest::reductionTolerance(dtype, 64);
      expectClose(t.o.values(), t.o_ref.values(), tol, what + " o");
      expectClose(t.lse.values(), t.lse_ref.values(), {1e-5, 1e-5}, what + " lse");
      expectClose(t.gq.values(), t.gq_ref.values(), tol, what + " grad_q");
      expectClose(t.gk.values(), t.gk_ref.values(), tol, what + " grad_k");
      expectClose(t.gv.values(), t.gv_ref.values(), tol, what + " grad_v");
    }
  }
}

// Each packed sequence is attended as the dense op attends one batch entry: equal-length sequences packed
// give the dense op's [B, H, S, D] results (viewed as [B * S, H, D]), on the device bit for bit.
TEST(AttentionVarlen, EqualLengthsAreTheDenseOp) {
  Handle h;
  const std::int64_t b = 3, s = 20, heads = 4, d = 16;
  const Varlen c{{0, 20, 40, 60}, b * s, heads, heads, d, true};
  VarlenTensors t = varlenTensors(c, kF32, 7);
  runVarlen(h, c, t);
  // the same memory seen as [B, H, S, D]: element (b, h, i, e) at ((b * S + i) * H + h) * D + e
  const Dims bhsd{b, heads, s, d}, strides{s * heads * d, d, heads * d, 1};
  Tensor q = Tensor::device(kF32, bhsd, {}, strides), k = Tensor::device(kF32, bhsd, {}, strides),
         v = Tensor::device(kF32, bhsd, {}, strides), o = Tensor::device(kF32, bhsd, {}, strides);
  // fill the strided views from the packed values (row-major [B*S, H, D] = [B, S, H, D])
  const auto fromPacked = [&](const Pair& p, Tensor& out) {
    const std::vector<double> packed = p.dev.values();
    std::vector<double> logical(packed.size());
    for (std::int64_t bb = 0; bb < b; ++bb)
      for (std::int64_t hh = 0; hh < heads; ++hh)
        for (std::int64_t i = 0; i < s; ++i)
          for (std::int64_t e = 0; e < d; ++e)
            logical[static_cast<std::size_t>(((bb * heads + hh) * s + i) * d + e)] =
                packed[static_cast<std::size_t>(((bb * s + i) * heads + hh) * d + e)];
    out.setValues(logical);
  };
  fromPacked(t.q, q);
  fromPacked(t.k, k);
  fromPacked(t.v, v);
  Tensor lse = Tensor::device(kF32, {b, heads, s});
  ASSERT_EQ(
      mluopScaledDotProductAttentionForward(h, true, 0.0, q.desc(), q.data(), k.desc(), k.data(), v.desc(),
                                            v.data(), o.desc(), o.data(), lse.desc(), lse.data()),
      MLUOP_STATUS_SUCCESS);
  h.sync();
  // o's memory is [B, S, H, D] = the packed layout
  std::vector<double> o_packed(static_cast<std::size_t>(b * s * heads * d));
  const std::vector<double> ol = o.values();
  for (std::int64_t bb = 0; bb < b; ++bb)
    for (std::int64_t hh = 0; hh < heads; ++hh)
      for (std::int64_t i = 0; i < s; ++i)
        for (std::int64_t e = 0; e < d; ++e)
          o_packed[static_cast<std::size_t>(((bb * s + i) * heads + hh) * d + e)] =
              ol[static_cast<std::size_t>(((bb * heads + hh) * s + i) * d + e)];
  expectClose(t.o.values(), o_packed, {0, 0}, "varlen o = dense o");
}

// Padding rows (past the last offset) get o = 0, lse = -inf and zero gradients; offsets that are not
// non-decreasing within the rows make every output NaN (the call cannot report device data).
TEST(AttentionVarlen, PaddingRowsAndBadOffsets) {
  Handle h;
  const Varlen padded{{0, 2, 3}, 5, 2, 2, 8, false};
  VarlenTensors t = varlenTensors(padded, kF32, 3);
  runVarlen(h, padded, t);
  const std::vector<double> o = t.o.values(), lse = t.lse.values(), gq = t.gq.values();
  for (std::int64_t row = 3; row < 5; ++row) {
    for (std::int64_t e = 0; e < 2 * 8; ++e) {
      EXPECT_EQ(o[static_cast<std::size_t>(row * 16 + e)], 0);
      EXPECT_EQ(gq[static_cast<std::size_t>(row * 16 + e)], 0);
    }
    for (std::int64_t head = 0; head < 2; ++head)
      EXPECT_EQ(lse[static_cast<std::size_t>(head * 5 + row)], -kInf);
  }
  for (const std::vector<double>& bad : std::vector<std::vector<double>>{{0, 3, 2}, {0, 6}, {1, 3}}) {
    const Varlen c{bad, 5, 2, 2, 8, false};
    VarlenTensors b = varlenTensors(c, kF32, 4);
    if (bad[0] != 0) {  // a first offset above 0 is fine: the rows before it are padding
      runVarlen(h, c, b);
      EXPECT_EQ(b.o.values()[0], 0);
      continue;
    }
    runVarlen(h, c, b);
    for (const Tensor* out : {&b.o, &b.lse, &b.gq, &b.gk, &b.gv, &b.o_ref, &b.lse_ref, &b.gq_ref}) {
      for (const double x : out->values()) ASSERT_TRUE(std::isnan(x)) << testing::PrintToString(bad);
    }
  }
}

TEST(AttentionVarlen, BadParams) {
  Handle h;
  const Varlen c{{0, 2, 4}, 4, 4, 2, 8, false};
  VarlenTensors t = varlenTensors(c, kF32, 5);
  const auto call = [&](const Pair& q, const Pair& k, const Pair& v, const Pair& cq, const Pair& ck,
                        const Tensor& o,
                        const Tensor& lse) { return varlenForward(h, c, q, k, v, cq, ck, o, lse); };
  const Pair q4 = makePair(kF32, {1, 4, 4, 8});
  expectBadParam(call(q4, t.k, t.v, t.cu_q, t.cu_k, t.o, t.lse),
                 "attention_varlen_forward: q has shape [1, 4, 4, 8]; expected 3 dims [Tq, H, D]");
  const Pair k3 = makePair(kF32, {4, 3, 8});
  expectBadParam(call(t.q, k3, k3, t.cu_q, t.cu_k, t.o, t.lse),
                 "k has 3 heads and q 4: the query heads H must be a multiple of the key/value heads Hkv");
  const Pair cu_float = makePair(kF32, {3}, {0, 2, 4});
  expectBadParam(call(t.q, t.k, t.v, cu_float, t.cu_k, t.o, t.lse),
                 "cu_seqlens_q is float32; expected int32 or int64");
  const Pair cu_short = makePair(MLUOP_DTYPE_INT64, {2}, {0, 4});
  expectBadParam(call(t.q, t.k, t.v, t.cu_q, cu_short, t.o, t.lse),
                 "cu_seqlens_q has 3 offsets and cu_seqlens_k 2; both are [B + 1]");
  const Pair cu_empty = makePair(MLUOP_DTYPE_INT64, {0});
  expectBadParam(call(t.q, t.k, t.v, cu_empty, cu_empty, t.o, t.lse),
                 "cu_seqlens_q has shape [0]; expected [B + 1] offsets (B >= 0)");
  Tensor lse_wrong = Tensor::device(kF32, {4, 4, 1});
  expectBadParam(call(t.q, t.k, t.v, t.cu_q, t.cu_k, t.o, lse_wrong),
                 "lse has shape [4, 4, 1] but the result has shape [4, 4]");
  Tensor lse_half = Tensor::device(kF16, {4, 4});
  expectBadParam(call(t.q, t.k, t.v, t.cu_q, t.cu_k, t.o, lse_half), "lse is float16; expected float32");
  expectBadParam(call(t.q, t.k, t.v, t.cu_q, t.cu_k, t.q.dev, t.lse), "o shares memory with the input q");
}

}  // namespace
