// Tests of the indexing, joining and comparison family: embedding_forward/backward, index_select, gather,
// scatter_add, concat, split, where, eq, lt, gt. For every op: the device against the CPU reference for
// each dtype over shapes including size 0, odd sizes, broadcasting (where, eq, lt, gt) and non-contiguous
// inputs and outputs; the reference against hand-worked values; embedding_backward against central finite
// differences of embedding_forward in float64 (with duplicate indices and padding_idx); out-of-range
// indices giving the documented result on both sides; every BAD_PARAM path with its message; float64
// refused by the device.
#include "elementwise_util.h"
#include "reduce_util.h"

#include <gmock/gmock.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using optest::Dims;
using optest::expectNear;
using optest::expectSame;
using optest::Handle;
using optest::numel;
using optest::randomValues;
using optest::Tensor;
using reducetest::dtypeLabel;
using reducetest::kDeviceDtypes;
using reducetest::lastError;
using reducetest::makePair;
using reducetest::Pair;
using reducetest::permutedStrides;
using testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT;
constexpr mluopDataType_t kF16 = MLUOP_DTYPE_HALF;
constexpr mluopDataType_t kF64 = MLUOP_DTYPE_DOUBLE;
constexpr mluopDataType_t kI64 = MLUOP_DTYPE_INT64;
constexpr mluopDataType_t kI32 = MLUOP_DTYPE_INT32;
constexpr mluopDataType_t kBool = MLUOP_DTYPE_BOOL;
constexpr mluopDataType_t kU8 = MLUOP_DTYPE_UINT8;

// The dtypes of the ops that move or compare elements of any dtype.
const std::vector<mluopDataType_t> kAnyDtypes = {
    kF32, kF16, MLUOP_DTYPE_BFLOAT16, kI64, kI32, MLUOP_DTYPE_INT8, kU8, kBool};

bool isFloat(mluopDataType_t t) { return t == kF32 || t == kF16 || t == MLUOP_DTYPE_BFLOAT16 || t == kF64; }

// Values a tensor of dtype can hold exactly enough: floats in [-2, 2), small integers, 0/1 for bool.
std::vector<double> valuesFor(mluopDataType_t dtype, std::int64_t n, std::uint32_t seed) {
  if (isFloat(dtype)) return randomValues(n, seed, -2.0, 2.0);
  std::vector<double> v = randomValues(n, seed, 0.0, 1.0);
  for (double& x : v) {
    if (dtype == kBool) {
      x = x < 0.5 ? 0 : 1;
    } else if (dtype == kU8) {
      x = std::floor(x * 40);
    } else {
      x = std::floor(x * 40) - 20;
    }
  }
  return v;
}

// Integer index values in [lo, hi).
std::vector<double> indexValues(std::int64_t n, std::uint32_t seed, std::int64_t lo, std::int64_t hi) {
  std::vector<double> v = randomValues(n, seed, 0.0, 1.0);
  for (double& x : v)
    x = static_cast<double>(lo + static_cast<std::int64_t>(x * static_cast<double>(hi - lo)));
  return v;
}

void expectOk(const mlu::Status& status) { ASSERT_TRUE(status.ok()) << status.message; }

// A device call and the reference's run on the same arguments were both refused with BAD_PARAM and
// `message` (the device's prefixed with the op name).
void expectBad(mluopStatus_t dev, const mlu::Status& ref, const std::string& op, const std::string& message) {
  EXPECT_EQ(dev, MLUOP_STATUS_BAD_PARAM) << op << ": " << message;
  EXPECT_THAT(lastError(), HasSubstr(op + ": " + message));
  EXPECT_EQ(ref.code, MLUOP_STATUS_BAD_PARAM) << op << ": " << message;
  EXPECT_THAT(ref.message, HasSubstr(message));
}

// A descriptor over another tensor's memory (for the overlap checks), or a tensor's own.
class View {
 public:
  View(const Tensor& base, mluopDataType_t dtype, const Dims& dims, const Dims& strides = {},
       std::ptrdiff_t byte_offset = 0) {
    const Dims st = strides.empty() ? optest::contiguousStrides(dims) : strides;
    EXPECT_EQ(mluopCreateTensorDescriptor(&desc_), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(mluopSetTensorDescriptorEx(desc_, MLUOP_LAYOUT_ARRAY, dtype, static_cast<int>(dims.size()),
                                         dims.data(), st.data()),
              MLUOP_STATUS_SUCCESS);
    view_.dtype = dtype;
    view_.ndim = static_cast<int>(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) {
      view_.dims[i] = dims[i];
      view_.strides[i] = st[i];
    }
    view_.data = static_cast<char*>(base.data()) + byte_offset;
    view_.present = true;
  }
  ~View() { mluopDestroyTensorDescriptor(desc_); }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  mluopTensorDescriptor_t desc() const { return desc_; }
  void* data() const { return view_.data; }
  const mlu::TensorView& view() const { return view_; }

 private:
  mluopTensorDescriptor_t desc_ = nullptr;
  mlu::TensorView view_;
};

// A tensor argument: a Tensor or a View.
struct Arg {
  mluopTensorDescriptor_t desc;
  void* data;
  mlu::TensorView view;
  Arg(const Tensor& t) : desc(t.desc()), data(t.data()), view(t.view()) {}  // NOLINT: implicit on purpose
  Arg(const View& v) : desc(v.desc()), data(v.data()), view(v.view()) {}    // NOLINT
};

// ---- one device call and one reference call per op ----

mluopStatus_t devEmbedding(const Handle& h, Arg w, Arg idx, Arg y) {
  return mluopEmbeddingForward(h, w.desc, w.data, idx.desc, idx.data, y.desc, y.data);
}
mlu::Status refEmbedding(Arg w, Arg idx, Arg y) {
  mlu::embedding_forward_args a;
  a.weight = w.view;
  a.indices = idx.view;
  a.y = y.view;
  return mlu::reference::run(a);
}
mluopStatus_t devEmbeddingBackward(const Handle& h, std::int64_t padding_idx, Arg go, Arg idx, Arg gw) {
  return mluopEmbeddingBackward(h, padding_idx, go.desc, go.data, idx.desc, idx.data, gw.desc, gw.data);
}
mlu::Status refEmbeddingBackward(std::int64_t padding_idx, Arg go, Arg idx, Arg gw) {
  mlu::embedding_backward_args a;
  a.padding_idx = padding_idx;
  a.grad_output = go.view;
  a.indices = idx.view;
  a.grad_weight = gw.view;
  return mlu::reference::run(a);
}
mluopStatus_t devIndexSelect(const Handle& h, int dim, Arg x, Arg idx, Arg y) {
  return mluopIndexSelect(h, dim, x.desc, x.data, idx.desc, idx.data, y.desc, y.data);
}
mlu::Status refIndexSelect(int dim, Arg x, Arg idx, Arg y) {
  mlu::index_select_args a;
  a.dim = dim;
  a.x = x.view;
  a.index = idx.view;
  a.y = y.view;
  return mlu::reference::run(a);
}
mluopStatus_t devGather(const Handle& h, int dim, Arg x, Arg idx, Arg y) {
  return mluopGather(h, dim, x.desc, x.data, idx.desc, idx.data, y.desc, y.data);
}
mlu::Status refGather(int dim, Arg x, Arg idx, Arg y) {
  mlu::gather_args a;
  a.dim = dim;
  a.x = x.view;
  a.index = idx.view;
  a.y = y.view;
  return mlu::reference::run(a);
}
mluopStatus_t devScatterAdd(const Handle& h, int dim, Arg y, Arg idx, Arg src) {
  return mluopScatterAdd(h, dim, y.desc, y.data, idx.desc, idx.data, src.desc, src.data);
}
mlu::Status refScatterAdd(int dim, Arg y, Arg idx, Arg src) {
  mlu::scatter_add_args a;
  a.dim = dim;
  a.y = y.view;
  a.index = idx.view;
  a.src = src.view;
  return mlu::reference::run(a);
}
mluopStatus_t devConcat(const Handle& h, int dim, Arg a, Arg b, Arg y) {
  return mluopConcat(h, dim, a.desc, a.data, b.desc, b.data, y.desc, y.data);
}
mlu::Status refConcat(int dim, Arg a, Arg b, Arg y) {
  mlu::concat_args args;
  args.dim = dim;
  args.a = a.view;
  args.b = b.view;
  args.y = y.view;
  return mlu::reference::run(args);
}
mluopStatus_t devSplit(const Handle& h, int dim, Arg x, Arg a, Arg b) {
  return mluopSplit(h, dim, x.desc, x.data, a.desc, a.data, b.desc, b.data);
}
mlu::Status refSplit(int dim, Arg x, Arg a, Arg b) {
  mlu::split_args args;
  args.dim = dim;
  args.x = x.view;
  args.a = a.view;
  args.b = b.view;
  return mlu::reference::run(args);
}
mluopStatus_t devWhere(const Handle& h, Arg cond, Arg a, Arg b, Arg y) {
  return mluopWhere(h, cond.desc, cond.data, a.desc, a.data, b.desc, b.data, y.desc, y.data);
}
mlu::Status refWhere(Arg cond, Arg a, Arg b, Arg y) {
  mlu::where_args args;
  args.condition = cond.view;
  args.a = a.view;
  args.b = b.view;
  args.y = y.view;
  return mlu::reference::run(args);
}

enum class Cmp { kEq, kLt, kGt };
const char* cmpName(Cmp op) { return op == Cmp::kEq ? "eq" : op == Cmp::kLt ? "lt" : "gt"; }

mluopStatus_t devCompare(const Handle& h, Cmp op, Arg a, Arg b, Arg c) {
  switch (op) {
    case Cmp::kEq:
      return mluopEq(h, a.desc, a.data, b.desc, b.data, c.desc, c.data);
    case Cmp::kLt:
      return mluopLt(h, a.desc, a.data, b.desc, b.data, c.desc, c.data);
    case Cmp::kGt:
      break;
  }
  return mluopGt(h, a.desc, a.data, b.desc, b.data, c.desc, c.data);
}
mlu::Status refCompare(Cmp op, Arg a, Arg b, Arg c) {
  const auto fill = [&](auto& args) {
    args.a = a.view;
    args.b = b.view;
    args.c = c.view;
    return mlu::reference::run(args);
  };
  if (op == Cmp::kEq) {
    mlu::eq_args args;
    return fill(args);
  }
  if (op == Cmp::kLt) {
    mlu::lt_args args;
    return fill(args);
  }
  mlu::gt_args args;
  return fill(args);
}

// An output pair (device and host) of one layout, zero-filled.
Pair outputPair(mluopDataType_t dtype, const Dims& dims, const Dims& strides = {}) {
  return makePair(dtype, dims, {}, strides);
}

std::string shapeLabel(const Dims& dims, const Dims& strides = {}) {
  return testing::PrintToString(dims) +
         (strides.empty() ? "" : " strides " + testing::PrintToString(strides));
}

// ================================ embedding ================================

struct EmbeddingCase {
  Dims weight;
  Dims weight_strides;
  Dims indices;
  Dims indices_strides;
  Dims y_strides;  // of y (forward) and grad_output (backward)
  Dims grad_weight_strides;
};

const std::vector<EmbeddingCase>& embeddingCases() {
  static const std::vector<EmbeddingCase> cases = {
      {{7, 5}, {}, {6}, {}, {}, {}},
      {{7, 5},
       permutedStrides({7, 5}, {1, 0}),
       {2, 3},
       {},
       {},
       permutedStrides({7, 5}, {1, 0})},  // transposed
      {{11, 3},
       {4, 1},
       {3, 2},
       permutedStrides({3, 2}, {1, 0}),
       permutedStrides({3, 2, 3}, {2, 0, 1}),
       {5, 1}},                               // padded rows, transposed indices and y
      {{4, 9}, {}, {}, {}, {}, {}},           // 0-d indices: y is [9]
      {{4, 9}, {}, {0}, {}, {}, {}},          // no indices: grad_weight is all zero
      {{3, 0}, {}, {5}, {}, {}, {}},          // embedding_dim 0
      {{13, 1}, {}, {17}, {2}, {}, {}},       // strided indices, many duplicates
      {{300, 64}, {}, {4, 150}, {}, {}, {}},  // medium: several chunks per core
  };
  return cases;
}

Dims embeddingRows(const EmbeddingCase& c) {
  Dims y = c.indices;
  y.push_back(c.weight[1]);
  return y;
}

TEST(Embedding, ForwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 1;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const EmbeddingCase& c : embeddingCases()) {
      for (const mluopDataType_t idx_dtype : {kI64, kI32}) {
        const std::string what = dtypeLabel(dtype) + " weight " + shapeLabel(c.weight, c.weight_strides) +
                                 " indices " + shapeLabel(c.indices, c.indices_strides) + " " +
                                 dtypeLabel(idx_dtype);
        const Pair w = makePair(dtype, c.weight, valuesFor(dtype, numel(c.weight), seed++), c.weight_strides);
        const Pair idx = makePair(idx_dtype, c.indices, indexValues(numel(c.indices), seed++, 0, c.weight[0]),
                                  c.indices_strides);
        Pair y = outputPair(dtype, embeddingRows(c), c.y_strides);
        ASSERT_EQ(devEmbedding(h, w.dev, idx.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
        expectOk(refEmbedding(w.host, idx.host, y.host));
        h.sync();
        expectSame(y.dev.values(), y.host.values(), what);
      }
    }
  }
}

TEST(Embedding, BackwardDeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 100;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    for (const EmbeddingCase& c : embeddingCases()) {
      for (const std::int64_t padding_idx : {std::int64_t{-1}, std::int64_t{1}}) {
        if (padding_idx >= c.weight[0]) continue;
        const mluopDataType_t idx_dtype = padding_idx < 0 ? kI64 : kI32;
        const std::string what = dtypeLabel(dtype) + " weight " + shapeLabel(c.weight) + " indices " +
                                 shapeLabel(c.indices, c.indices_strides) + " padding_idx " +
                                 std::to_string(padding_idx);
        const Dims rows = embeddingRows(c);
        const Pair go = makePair(dtype, rows, valuesFor(dtype, numel(rows), seed++), c.y_strides);
        const Pair idx = makePair(idx_dtype, c.indices, indexValues(numel(c.indices), seed++, 0, c.weight[0]),
                                  c.indices_strides);
        // grad_weight starts non-zero: the op overwrites it.
        Pair gw = makePair(dtype, c.weight, valuesFor(dtype, numel(c.weight), seed++), c.grad_weight_strides);
        ASSERT_EQ(devEmbeddingBackward(h, padding_idx, go.dev, idx.dev, gw.dev), MLUOP_STATUS_SUCCESS)
            << lastError();
        expectOk(refEmbeddingBackward(padding_idx, go.host, idx.host, gw.host));
        h.sync();
        const std::int64_t dupes =
            std::max<std::int64_t>(1, numel(c.indices) / std::max<std::int64_t>(1, c.weight[0]));
        expectNear(gw.dev.values(), gw.host.values(), reducetest::reductionTolerance(dtype, 4 * dupes), what);
      }
    }
  }
}

TEST(Embedding, ReferenceHandWorked) {
  const Tensor w = Tensor::host(kF64, {3, 2}, {1, 2, 3, 4, 5, 6});
  const Tensor idx = Tensor::host(kI64, {3}, {2, 0, 2});
  Tensor y = Tensor::host(kF64, {3, 2});
  expectOk(refEmbedding(w, idx, y));
  expectSame(y.values(), {5, 6, 1, 2, 5, 6}, "forward");
  const Tensor idx2 = Tensor::host(kI32, {2, 1}, {1, 1});
  Tensor y2 = Tensor::host(kF64, {2, 1, 2});
  expectOk(refEmbedding(w, idx2, y2));
  expectSame(y2.values(), {3, 4, 3, 4}, "forward, int32 [2, 1] indices");

  const Tensor go = Tensor::host(kF64, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor gw = Tensor::host(kF64, {3, 2}, {9, 9, 9, 9, 9, 9});
  expectOk(refEmbeddingBackward(-1, go, idx, gw));
  expectSame(gw.values(), {3, 4, 0, 0, 6, 8}, "backward: duplicates of row 2 accumulate, row 1 zeroed");
  expectOk(refEmbeddingBackward(2, go, idx, gw));
  expectSame(gw.values(), {3, 4, 0, 0, 0, 0}, "backward: padding_idx 2 gets no gradient");
  expectOk(refEmbeddingBackward(0, go, idx, gw));
  expectSame(gw.values(), {0, 0, 0, 0, 6, 8}, "backward: padding_idx 0");
}

TEST(Embedding, OutOfRangeIndicesGiveNaNRowsAndNoGradient) {
  Handle h;
  for (const mluopDataType_t dtype : kDeviceDtypes) {
    const std::vector<double> wv = valuesFor(dtype, 8, 7);
    const Pair w = makePair(dtype, {4, 2}, wv);
    const Pair idx = makePair(kI64, {4}, {1, -1, 4, 3});
    Pair y = outputPair(dtype, {4, 2});
    ASSERT_EQ(devEmbedding(h, w.dev, idx.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(refEmbedding(w.host, idx.host, y.host));
    h.sync();
    const std::vector<double> rw = optest::roundedTo(dtype, wv);
    const std::vector<double> expected = {rw[2], rw[3], kNaN, kNaN, kNaN, kNaN, rw[6], rw[7]};
    expectSame(y.dev.values(), expected, dtypeLabel(dtype) + " device forward");
    expectSame(y.host.values(), expected, dtypeLabel(dtype) + " reference forward");

    const Pair go = makePair(dtype, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    Pair gw = makePair(dtype, {4, 2}, {9, 9, 9, 9, 9, 9, 9, 9});
    ASSERT_EQ(devEmbeddingBackward(h, -1, go.dev, idx.dev, gw.dev), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(refEmbeddingBackward(-1, go.host, idx.host, gw.host));
    h.sync();
    const std::vector<double> grad = {0, 0, 1, 2, 0, 0, 7, 8};
    expectSame(gw.dev.values(), grad, dtypeLabel(dtype) + " device backward");
    expectSame(gw.host.values(), grad, dtypeLabel(dtype) + " reference backward");
  }
}

// d/dw of sum(embedding(w, idx) * g) by central differences of the float64 reference forward.
std::vector<double> embeddingNumericalGradient(const Dims& wdims, const std::vector<double>& w0,
                                               const Tensor& idx, const std::vector<double>& g) {
  Dims rows(idx.view().dims.begin(), idx.view().dims.begin() + idx.view().ndim);
  rows.push_back(wdims[1]);
  const auto loss = [&](const std::vector<double>& wv) {
    const Tensor w = Tensor::host(kF64, wdims, wv);
    Tensor y = Tensor::host(kF64, rows);
    EXPECT_TRUE(refEmbedding(w, idx, y).ok());
    return optest::dot(y.values(), g);
  };
  return optest::numericalGradient(loss, w0);
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  const Dims wdims = {5, 3};
  const std::vector<double> w0 = randomValues(15, 21);
  // Duplicates (1 four times, 4 twice) and an unused row (2).
  const Tensor idx = Tensor::host(kI64, {2, 4}, {1, 4, 1, 0, 3, 1, 4, 1});
  const std::vector<double> g = randomValues(24, 22);
  const std::vector<double> numeric = embeddingNumericalGradient(wdims, w0, idx, g);
  const Tensor go = Tensor::host(kF64, {2, 4, 3}, g);
  Tensor gw = Tensor::host(kF64, wdims);
  expectOk(refEmbeddingBackward(-1, go, idx, gw));
  expectNear(gw.values(), numeric, reducetest::finiteDifferenceTolerance(), "no padding");
  // padding_idx: the same gradient with that row zeroed.
  expectOk(refEmbeddingBackward(1, go, idx, gw));
  std::vector<double> padded = numeric;
  for (int k = 0; k < 3; ++k) padded[static_cast<std::size_t>(3 + k)] = 0;
  expectNear(gw.values(), padded, reducetest::finiteDifferenceTolerance(), "padding_idx 1");
  // The device (float32) agrees with the analytic float64 gradient.
  Handle h;
  const Tensor go_dev = Tensor::device(kF32, {2, 4, 3}, g);
  const Tensor idx_dev = Tensor::device(kI32, {2, 4}, {1, 4, 1, 0, 3, 1, 4, 1});
  Tensor gw_dev = Tensor::device(kF32, wdims);
  ASSERT_EQ(devEmbeddingBackward(h, 1, go_dev, idx_dev, gw_dev), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectNear(gw_dev.values(), padded, {1e-5, 1e-5}, "device");
}

TEST(Embedding, BadParams) {
  Handle h;
  const Tensor w = Tensor::device(kF32, {5, 2}, randomValues(10, 1));
  const Tensor idx = Tensor::device(kI64, {3}, {0, 1, 2});
  Tensor y = Tensor::device(kF32, {3, 2});
  const std::string fwd = "embedding_forward";
  const Tensor w_int = Tensor::device(kI32, {5, 2});
  EXPECT_EQ(devEmbedding(h, w_int, idx, y), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("weight is int32, which is not supported; use float32"));
  const Tensor y16 = Tensor::device(kF16, {3, 2});
  expectBad(devEmbedding(h, w, idx, y16), refEmbedding(w, idx, y16), fwd,
            "y is float16 but weight is float32");
  const Tensor idx_f = Tensor::device(kF32, {3});
  expectBad(devEmbedding(h, w, idx_f, y), refEmbedding(w, idx_f, y), fwd,
            "indices is float32; expected int64 or int32");
  const Tensor w1 = Tensor::device(kF32, {10});
  expectBad(devEmbedding(h, w1, idx, y), refEmbedding(w1, idx, y), fwd,
            "weight has shape [10]; expected 2 dims [num_embeddings, embedding_dim]");
  const Tensor idx8 = Tensor::device(kI64, {1, 1, 1, 1, 1, 1, 1, 1});
  expectBad(devEmbedding(h, w, idx8, y), refEmbedding(w, idx8, y), fwd,
            "indices has 8 dims; at most 7 (then y has indices' dims + [embedding_dim])");
  const Tensor y_wide = Tensor::device(kF32, {3, 4});
  expectBad(devEmbedding(h, w, idx, y_wide), refEmbedding(w, idx, y_wide), fwd,
            "y has shape [3, 4] but indices [3] and weight [5, 2] give [3, 2]");
  const Tensor y_bcast = Tensor::device(kF32, {3, 2}, {}, {0, 1});
  expectBad(devEmbedding(h, w, idx, y_bcast), refEmbedding(w, idx, y_bcast), fwd,
            "y (shape [3, 2], strides [0, 1]) overlaps itself");
  const View y_in_w(w, kF32, {3, 2});
  expectBad(devEmbedding(h, w, idx, y_in_w), refEmbedding(w, idx, y_in_w), fwd,
            "y overlaps weight in memory; an output must not share memory with an input");
  const Tensor big_idx = Tensor::device(kI64, {6});
  const View idx_head(big_idx, kI64, {3});
  const View y_in_idx(big_idx, kF32, {3, 2}, {}, 0);
  expectBad(devEmbedding(h, w, idx_head, y_in_idx), refEmbedding(w, idx_head, y_in_idx), fwd,
            "y overlaps indices in memory");
  mlu::embedding_forward_args missing;
  missing.indices = idx.view();
  missing.y = y.view();
  optest::expectBadParam(mlu::reference::run(missing), "weight is missing");

  const std::string bwd = "embedding_backward";
  const Tensor go = Tensor::device(kF32, {3, 2}, randomValues(6, 2));
  Tensor gw = Tensor::device(kF32, {5, 2});
  const Tensor go_int = Tensor::device(kI32, {3, 2});
  const Tensor gw_int = Tensor::device(kI32, {5, 2});
  EXPECT_EQ(devEmbeddingBackward(h, -1, go_int, idx, gw_int), MLUOP_STATUS_NOT_SUPPORTED);
  EXPECT_THAT(lastError(), HasSubstr("grad_output is int32, which is not supported"));
  const Tensor gw16 = Tensor::device(kF16, {5, 2});
  expectBad(devEmbeddingBackward(h, -1, go, idx, gw16), refEmbeddingBackward(-1, go, idx, gw16), bwd,
            "grad_weight is float16 but grad_output is float32");
  expectBad(devEmbeddingBackward(h, -1, go, idx_f, gw), refEmbeddingBackward(-1, go, idx_f, gw), bwd,
            "indices is float32; expected int64 or int32");
  const Tensor gw3 = Tensor::device(kF32, {5, 2, 1});
  expectBad(devEmbeddingBackward(h, -1, go, idx, gw3), refEmbeddingBackward(-1, go, idx, gw3), bwd,
            "grad_weight has shape [5, 2, 1]; expected 2 dims [num_embeddings, embedding_dim]");
  const Tensor go_bad = Tensor::device(kF32, {3, 3});
  expectBad(devEmbeddingBackward(h, -1, go_bad, idx, gw), refEmbeddingBackward(-1, go_bad, idx, gw), bwd,
            "grad_output has shape [3, 3] but indices [3] and grad_weight [5, 2] give [3, 2]");
  expectBad(devEmbeddingBackward(h, -1, go, idx8, gw), refEmbeddingBackward(-1, go, idx8, gw), bwd,
            "indices has 8 dims; at most 7 (then grad_output has");
  expectBad(devEmbeddingBackward(h, 5, go, idx, gw), refEmbeddingBackward(5, go, idx, gw), bwd,
            "padding_idx = 5 is out of range for 5 embeddings (expected 0 to 4, or -1 for none)");
  expectBad(devEmbeddingBackward(h, -2, go, idx, gw), refEmbeddingBackward(-2, go, idx, gw), bwd,
            "padding_idx = -2 is out of range for 5 embeddings");
  const Tensor gw_bcast = Tensor::device(kF32, {5, 2}, {}, {1, 0});
  expectBad(devEmbeddingBackward(h, -1, go, idx, gw_bcast), refEmbeddingBackward(-1, go, idx, gw_bcast), bwd,
            "grad_weight (shape [5, 2], strides [1, 0]) overlaps itself");
  const Tensor big = Tensor::device(kF32, {20});
  const View go_in(big, kF32, {3, 2}), gw_in(big, kF32, {5, 2}, {}, 4 * 4);
  expectBad(devEmbeddingBackward(h, -1, go_in, idx, gw_in), refEmbeddingBackward(-1, go_in, idx, gw_in), bwd,
            "grad_weight overlaps grad_output in memory");
  const View gw_in_idx(big_idx, kF32, {5, 2}, {}, 0);
  expectBad(devEmbeddingBackward(h, -1, go, idx_head, gw_in_idx),
            refEmbeddingBackward(-1, go, idx_head, gw_in_idx), bwd, "grad_weight overlaps indices in memory");
}

// ================================ index_select ================================

struct SelectCase {
  Dims x;
  Dims x_strides;
  int dim;
  Dims index;  // [m] or [] (0-d)
  Dims index_strides;
  Dims y_strides;
};

Dims selectedShape(const SelectCase& c) {
  Dims y = c.x;
  const std::size_t d = static_cast<std::size_t>(c.dim < 0 ? c.dim + static_cast<int>(c.x.size()) : c.dim);
  y[d] = numel(c.index);
  return y;
}

const std::vector<SelectCase>& selectCases() {
  static const std::vector<SelectCase> cases = {
      {{7, 5}, {}, 0, {4}, {}, {}},
      {{7, 5}, {}, -1, {9}, {}, {}},                                       // duplicates
      {{7, 5}, permutedStrides({7, 5}, {1, 0}), 1, {3}, {3}, {}},          // transposed x, strided index
      {{2, 3, 4}, {}, 1, {}, {}, {}},                                      // 0-d index
      {{2, 3, 5}, {}, 2, {7}, {}, permutedStrides({2, 3, 7}, {2, 0, 1})},  // non-contiguous y
      {{3, 4}, {}, 0, {0}, {}, {}},                                        // empty y
      {{1, 13}, {20, 1}, 1, {13}, {}, {}},
      {{64, 33}, {}, 0, {200}, {}, {}},  // medium
  };
  return cases;
}

TEST(IndexSelect, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 200;
  for (const mluopDataType_t dtype : kAnyDtypes) {
    for (const SelectCase& c : selectCases()) {
      const std::string what = dtypeLabel(dtype) + " x " + shapeLabel(c.x, c.x_strides) + " dim " +
                               std::to_string(c.dim) + " index " + shapeLabel(c.index, c.index_strides);
      const std::size_t d =
          static_cast<std::size_t>(c.dim < 0 ? c.dim + static_cast<int>(c.x.size()) : c.dim);
      const Pair x = makePair(dtype, c.x, valuesFor(dtype, numel(c.x), seed++), c.x_strides);
      const Pair idx = makePair(seed % 2 ? kI64 : kI32, c.index, indexValues(numel(c.index), seed, 0, c.x[d]),
                                c.index_strides);
      ++seed;
      Pair y = outputPair(dtype, selectedShape(c), c.y_strides);
      ASSERT_EQ(devIndexSelect(h, c.dim, x.dev, idx.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(refIndexSelect(c.dim, x.host, idx.host, y.host));
      h.sync();
      expectSame(y.dev.values(), y.host.values(), what);
    }
  }
}

TEST(IndexSelect, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::host(kF64, {2, 3});
  expectOk(refIndexSelect(1, x, Tensor::host(kI64, {3}, {2, 0, 2}), y));
  expectSame(y.values(), {3, 1, 3, 6, 4, 6}, "dim 1");
  Tensor rows = Tensor::host(kF64, {3, 3});
  expectOk(refIndexSelect(-2, x, Tensor::host(kI32, {3}, {1, 1, 0}), rows));
  expectSame(rows.values(), {4, 5, 6, 4, 5, 6, 1, 2, 3}, "dim -2");
  Tensor one = Tensor::host(kF64, {1, 3});
  expectOk(refIndexSelect(0, x, Tensor::host(kI64, {}, {1}), one));
  expectSame(one.values(), {4, 5, 6}, "0-d index");
  // A transposed x (storage [[1, 4], [2, 5], [3, 6]]).
  const Tensor xt = Tensor::host(kF64, {2, 3}, {1, 2, 3, 4, 5, 6}, {1, 2});
  expectOk(refIndexSelect(1, xt, Tensor::host(kI64, {3}, {2, 0, 2}), y));
  expectSame(y.values(), {3, 1, 3, 6, 4, 6}, "transposed x");
}

TEST(IndexSelect, OutOfRangeIndicesGiveNaNOrZero) {
  Handle h;
  for (const mluopDataType_t dtype : kAnyDtypes) {
    const Pair x = makePair(dtype, {2, 3}, {1, 0, 1, 1, 1, 0});
    const Pair idx = makePair(kI64, {4}, {2, 3, -1, 0});
    Pair y = outputPair(dtype, {2, 4});
    ASSERT_EQ(devIndexSelect(h, 1, x.dev, idx.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(refIndexSelect(1, x.host, idx.host, y.host));
    h.sync();
    const double bad = isFloat(dtype) ? kNaN : 0;
    const std::vector<double> expected = {1, bad, bad, 1, 0, bad, bad, 1};
    expectSame(y.dev.values(), expected, dtypeLabel(dtype) + " device");
    expectSame(y.host.values(), expected, dtypeLabel(dtype) + " reference");
  }
}

TEST(IndexSelect, BadParams) {
  Handle h;
  const std::string op = "index_select";
  const Tensor x = Tensor::device(kF32, {4, 3}, randomValues(12, 3));
  const Tensor idx = Tensor::device(kI64, {2}, {0, 3});
  Tensor y = Tensor::device(kF32, {2, 3});
  const Tensor y16 = Tensor::device(kF16, {2, 3});
  expectBad(devIndexSelect(h, 0, x, idx, y16), refIndexSelect(0, x, idx, y16), op,
            "y is float16 but x is float32");
  const Tensor idx_u8 = Tensor::device(kU8, {2});
  expectBad(devIndexSelect(h, 0, x, idx_u8, y), refIndexSelect(0, x, idx_u8, y), op,
            "index is uint8; expected int64 or int32");
  const Tensor x0 = Tensor::device(kF32, {}, {1});
  const Tensor y0 = Tensor::device(kF32, {});
  expectBad(devIndexSelect(h, 0, x0, idx, y0), refIndexSelect(0, x0, idx, y0), op,
            "x is 0-d; the op needs a tensor with at least 1 dim");
  expectBad(devIndexSelect(h, 2, x, idx, y), refIndexSelect(2, x, idx, y), op,
            "dim 2 is out of range for a 2-d x (expected -2 to 1)");
  expectBad(devIndexSelect(h, -3, x, idx, y), refIndexSelect(-3, x, idx, y), op,
            "dim -3 is out of range for a 2-d x");
  const Tensor idx2 = Tensor::device(kI64, {2, 1});
  expectBad(devIndexSelect(h, 0, x, idx2, y), refIndexSelect(0, x, idx2, y), op,
            "index has shape [2, 1]; expected 1 dim (or 0-d)");
  const Tensor y_bad = Tensor::device(kF32, {4, 2});
  expectBad(devIndexSelect(h, 0, x, idx, y_bad), refIndexSelect(0, x, idx, y_bad), op,
            "y has shape [4, 2] but x [4, 3] with 2 indices along dim 0 gives [2, 3]");
  const Tensor y_bcast = Tensor::device(kF32, {2, 3}, {}, {0, 1});
  expectBad(devIndexSelect(h, 0, x, idx, y_bcast), refIndexSelect(0, x, idx, y_bcast), op,
            "y (shape [2, 3], strides [0, 1]) overlaps itself");
  const View y_in_x(x, kF32, {2, 3}, {}, 8);
  expectBad(devIndexSelect(h, 0, x, idx, y_in_x), refIndexSelect(0, x, idx, y_in_x), op,
            "y overlaps x in memory");
  const Tensor idx_big = Tensor::device(kI64, {4});
  const View idx_head(idx_big, kI64, {2});
  const View y_in_idx(idx_big, kF32, {2, 3}, {}, 0);
  expectBad(devIndexSelect(h, 0, x, idx_head, y_in_idx), refIndexSelect(0, x, idx_head, y_in_idx), op,
            "y overlaps index in memory");
}

// ================================ gather ================================

struct GatherCase {
  Dims x;
  Dims x_strides;
  int dim;
  Dims index;
  Dims index_strides;
  Dims y_strides;
};

const std::vector<GatherCase>& gatherCases() {
  static const std::vector<GatherCase> cases = {
      {{4, 6}, {}, 1, {4, 3}, {}, {}},
      {{4, 6}, {}, 0, {7, 6}, {}, {}},  // index larger than x along dim
      {{4, 6}, {}, -1, {3, 9}, {}, {}},
      {{2, 3, 4},
       permutedStrides({2, 3, 4}, {2, 0, 1}),
       -2,
       {2, 5, 3},
       permutedStrides({2, 5, 3}, {1, 2, 0}),
       permutedStrides({2, 5, 3}, {2, 1, 0})},  // all non-contiguous
      {{5, 7}, {8, 1}, 0, {0, 3}, {}, {}},      // empty
      {{5, 0}, {}, 1, {5, 0}, {}, {}},
      {{9}, {}, 0, {13}, {2}, {3}},
      {{48, 40}, {}, 1, {48, 100}, {}, {}},  // medium
      // As PyTorch (DIOPI's gather and gather_0dim cases): a 0-d x or index counts as 1-d of size 1, and an
      // empty index needs no other agreement with x.
      {{8}, {}, 0, {}, {}, {}},                 // 0-d index: y is 0-d
      {{}, {}, 0, {}, {}, {}},                  // 0-d x and index
      {{}, {}, -1, {15}, {}, {}},               // 0-d x, 1-d index (its one element, 15 times)
      {{2, 0}, {}, 1, {1, 0}, {}, {}},          // empty
      {{5, 0, 9}, {}, 1, {16, 0, 14}, {}, {}},  // empty index larger than x in its other dims
      {{3, 4}, {}, 0, {0}, {}, {}},             // empty index of fewer dims
  };
  return cases;
}

TEST(Gather, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 300;
  for (const mluopDataType_t dtype : kAnyDtypes) {
    for (const GatherCase& c : gatherCases()) {
      const std::string what = dtypeLabel(dtype) + " x " + shapeLabel(c.x, c.x_strides) + " dim " +
                               std::to_string(c.dim) + " index " + shapeLabel(c.index, c.index_strides);
      const int ndim = std::max(static_cast<int>(c.x.size()), 1);  // a 0-d x counts as [1]
      const auto d = static_cast<std::size_t>(c.dim < 0 ? c.dim + ndim : c.dim);
      const std::int64_t size = c.x.empty() ? 1 : c.x[d];
      const Pair x = makePair(dtype, c.x, valuesFor(dtype, numel(c.x), seed++), c.x_strides);
      const Pair idx =
          makePair(seed % 2 ? kI64 : kI32, c.index,
                   indexValues(numel(c.index), seed, 0, std::max<std::int64_t>(size, 1)), c.index_strides);
      ++seed;
      Pair y = outputPair(dtype, c.index, c.y_strides);
      ASSERT_EQ(devGather(h, c.dim, x.dev, idx.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(refGather(c.dim, x.host, idx.host, y.host));
      h.sync();
      expectSame(y.dev.values(), y.host.values(), what);
    }
  }
}

TEST(Gather, ReferenceHandWorked) {
  const Tensor x = Tensor::host(kF64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::host(kF64, {2, 2});
  expectOk(refGather(1, x, Tensor::host(kI64, {2, 2}, {0, 0, 2, 1}), y));
  expectSame(y.values(), {1, 1, 6, 5}, "dim 1");
  Tensor y0 = Tensor::host(kF64, {1, 3});
  expectOk(refGather(0, x, Tensor::host(kI32, {1, 3}, {1, 0, 1}), y0));
  expectSame(y0.values(), {4, 2, 6}, "dim 0");
  Tensor y3 = Tensor::host(kF64, {3, 1});
  expectOk(refGather(-2, x, Tensor::host(kI64, {3, 1}, {1, 1, 0}), y3));
  expectSame(y3.values(), {4, 4, 1}, "index longer than x along dim -2");
  // 0-d: x [7] at a 0-d index 1 is 0-d 8; a 0-d x 5 at index [0, 0, 0] is [5, 5, 5].
  Tensor y_scalar = Tensor::host(kF64, {});
  expectOk(refGather(0, Tensor::host(kF64, {2}, {7, 8}), Tensor::host(kI64, {}, {1}), y_scalar));
  expectSame(y_scalar.values(), {8}, "0-d index");
  Tensor y_rep = Tensor::host(kF64, {3});
  expectOk(refGather(-1, Tensor::host(kF64, {}, {5}), Tensor::host(kI32, {3}, {0, 0, 0}), y_rep));
  expectSame(y_rep.values(), {5, 5, 5}, "0-d x");
}

TEST(Gather, OutOfRangeIndicesGiveNaNOrZero) {
  Handle h;
  for (const mluopDataType_t dtype : {kF32, MLUOP_DTYPE_BFLOAT16, kI32, kBool}) {
    const Pair x = makePair(dtype, {2, 2}, {1, 1, 0, 1});
    const Pair idx = makePair(kI32, {2, 3}, {1, 2, 0, -5, 1, 7});
    Pair y = outputPair(dtype, {2, 3});
    ASSERT_EQ(devGather(h, 1, x.dev, idx.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(refGather(1, x.host, idx.host, y.host));
    h.sync();
    const double bad = isFloat(dtype) ? kNaN : 0;
    const std::vector<double> expected = {1, bad, 1, bad, 1, bad};
    expectSame(y.dev.values(), expected, dtypeLabel(dtype) + " device");
    expectSame(y.host.values(), expected, dtypeLabel(dtype) + " reference");
  }
}

TEST(Gather, BadParams) {
  Handle h;
  const std::string op = "gather";
  const Tensor x = Tensor::device(kF32, {4, 3}, randomValues(12, 4));
  const Tensor idx = Tensor::device(kI64, {2, 3});
  Tensor y = Tensor::device(kF32, {2, 3});
  const Tensor y_i = Tensor::device(kI32, {2, 3});
  expectBad(devGather(h, 0, x, idx, y_i), refGather(0, x, idx, y_i), op, "y is int32 but x is float32");
  const Tensor idx_f = Tensor::device(kF16, {2, 3});
  expectBad(devGather(h, 0, x, idx_f, y), refGather(0, x, idx_f, y), op,
            "index is float16; expected int64 or int32");
  const Tensor x0 = Tensor::device(kF32, {}, {1});  // a 0-d x is 1-d of size 1, not 2-d
  expectBad(devGather(h, 0, x0, idx, y), refGather(0, x0, idx, y), op,
            "index has 2 dims but x has 0; they must have the same number of dims");
  const Tensor idx2 = Tensor::device(kI64, {2}, {0, 0});
  Tensor y2 = Tensor::device(kF32, {2});
  expectBad(devGather(h, 1, x0, idx2, y2), refGather(1, x0, idx2, y2), op,
            "dim 1 is out of range for a 1-d x (expected -1 to 0)");
  expectBad(devGather(h, 5, x, idx, y), refGather(5, x, idx, y), op,
            "dim 5 is out of range for a 2-d x (expected -2 to 1)");
  const Tensor idx1 = Tensor::device(kI64, {6});
  const Tensor y1 = Tensor::device(kF32, {6});
  expectBad(devGather(h, 0, x, idx1, y1), refGather(0, x, idx1, y1), op,
            "index has 1 dims but x has 2; they must have the same number of dims");
  const Tensor idx_wide = Tensor::device(kI64, {2, 4});
  const Tensor y_wide = Tensor::device(kF32, {2, 4});
  expectBad(devGather(h, 0, x, idx_wide, y_wide), refGather(0, x, idx_wide, y_wide), op,
            "index [2, 4] is larger than x [4, 3] in dim 1 (only dim 0 may be larger)");
  const Tensor y_bad = Tensor::device(kF32, {3, 2});
  expectBad(devGather(h, 0, x, idx, y_bad), refGather(0, x, idx, y_bad), op,
            "y has shape [3, 2] but index has shape [2, 3]; they must be equal");
  const Tensor y_bcast = Tensor::device(kF32, {2, 3}, {}, {1, 0});
  expectBad(devGather(h, 0, x, idx, y_bcast), refGather(0, x, idx, y_bcast), op,
            "y (shape [2, 3], strides [1, 0]) overlaps itself");
  const View y_in_x(x, kF32, {2, 3}, {}, 0);
  expectBad(devGather(h, 0, x, idx, y_in_x), refGather(0, x, idx, y_in_x), op, "y overlaps x in memory");
  const View y_in_idx(idx, kF32, {2, 3}, {}, 4);
  expectBad(devGather(h, 0, x, idx, y_in_idx), refGather(0, x, idx, y_in_idx), op,
            "y overlaps index in memory");
}

// ================================ scatter_add ================================

struct ScatterCase {
  Dims y;
  Dims y_strides;
  int dim;
  Dims index;
  Dims index_strides;
  Dims src;
  Dims src_strides;
};

const std::vector<ScatterCase>& scatterCases() {
  static const std::vector<ScatterCase> cases = {
      {{5, 4}, {}, 0, {7, 4}, {}, {8, 5}, {}},  // duplicates along dim, src larger than index
      {{3, 6}, {}, 1, {3, 10}, {}, {3, 10}, {}},
      {{3, 6}, {}, -1, {2, 3}, {}, {3, 3}, {}},  // index smaller than y in the other dim
      {{2, 3, 4},
       permutedStrides({2, 3, 4}, {2, 1, 0}),
       1,
       {2, 5, 4},
       permutedStrides({2, 5, 4}, {1, 0, 2}),
       {2, 5, 4},
       permutedStrides({2, 5, 4}, {2, 0, 1})},  // all non-contiguous
      {{4, 3}, {}, 0, {0, 3}, {}, {1, 3}, {}},  // nothing to add
      {{0, 3}, {}, 0, {2, 3}, {}, {2, 3}, {}},  // every index out of range
      {{7}, {2}, 0, {11}, {}, {11}, {3}},
      {{40, 32}, {}, 0, {300, 32}, {}, {300, 32}, {}},  // medium, many duplicates
  };
  return cases;
}

TEST(ScatterAdd, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 400;
  const std::vector<mluopDataType_t> dtypes = {kF32, kF16, MLUOP_DTYPE_BFLOAT16, kI64, kI32, kU8};
  for (const mluopDataType_t dtype : dtypes) {
    for (const ScatterCase& c : scatterCases()) {
      const std::string what = dtypeLabel(dtype) + " y " + shapeLabel(c.y, c.y_strides) + " dim " +
                               std::to_string(c.dim) + " index " + shapeLabel(c.index, c.index_strides);
      const std::size_t d =
          static_cast<std::size_t>(c.dim < 0 ? c.dim + static_cast<int>(c.y.size()) : c.dim);
      Pair y = makePair(dtype, c.y, valuesFor(dtype, numel(c.y), seed++), c.y_strides);
      const Pair idx =
          makePair(seed % 2 ? kI64 : kI32, c.index,
                   indexValues(numel(c.index), seed, 0, std::max<std::int64_t>(c.y[d], 1)), c.index_strides);
      ++seed;
      const Pair src = makePair(dtype, c.src, valuesFor(dtype, numel(c.src), seed++), c.src_strides);
      ASSERT_EQ(devScatterAdd(h, c.dim, y.dev, idx.dev, src.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(refScatterAdd(c.dim, y.host, idx.host, src.host));
      h.sync();
      if (isFloat(dtype)) {
        const std::int64_t dupes = 1 + numel(c.index) / std::max<std::int64_t>(1, numel(c.y));
        expectNear(y.dev.values(), y.host.values(), reducetest::reductionTolerance(dtype, 4 * dupes), what);
      } else {
        expectSame(y.dev.values(), y.host.values(), what);
      }
    }
  }
}

TEST(ScatterAdd, ReferenceHandWorked) {
  Tensor y = Tensor::host(kF64, {3}, {0, 10, 0});
  expectOk(refScatterAdd(0, y, Tensor::host(kI64, {5}, {0, 1, 0, 2, 0}),
                         Tensor::host(kF64, {5}, {1, 2, 3, 4, 5})));
  expectSame(y.values(), {9, 12, 4}, "1-d with duplicates");
  Tensor y2 = Tensor::host(kF64, {2, 3});
  // index [[0, 1], [1, 1]] along dim 0 with src [[1, 2, 3], [4, 5, 6]] (index [2, 2] reads src[:2, :2]).
  expectOk(refScatterAdd(0, y2, Tensor::host(kI32, {2, 2}, {0, 1, 1, 1}),
                         Tensor::host(kF64, {2, 3}, {1, 2, 3, 4, 5, 6})));
  expectSame(y2.values(), {1, 0, 0, 4, 7, 0}, "2-d along dim 0");
  Tensor y3 = Tensor::host(kI64, {2, 3});
  expectOk(refScatterAdd(1, y3, Tensor::host(kI64, {2, 2}, {2, 2, 0, 1}),
                         Tensor::host(kI64, {2, 2}, {1, 2, 3, 4})));
  expectSame(y3.values(), {0, 0, 3, 3, 4, 0}, "int64 along dim 1");
}

TEST(ScatterAdd, DuplicatesAccumulateAndOutOfRangeIsSkipped) {
  Handle h;
  for (const mluopDataType_t dtype : {kF32, kF16, MLUOP_DTYPE_BFLOAT16, kI32}) {
    Pair y = makePair(dtype, {4}, {1, 1, 1, 1});
    const Pair idx = makePair(kI64, {8}, {3, 3, -1, 3, 4, 0, 3, 100});
    const Pair src = makePair(dtype, {8}, {1, 2, 50, 3, 60, 5, 4, 70});
    ASSERT_EQ(devScatterAdd(h, 0, y.dev, idx.dev, src.dev), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(refScatterAdd(0, y.host, idx.host, src.host));
    h.sync();
    const std::vector<double> expected = {6, 1, 1, 11};
    expectSame(y.dev.values(), expected, dtypeLabel(dtype) + " device");
    expectSame(y.host.values(), expected, dtypeLabel(dtype) + " reference");
  }
  // float16: the sum is rounded once (float32 accumulation), not after every addition: 2048 + 1 + 1 + 1 + 1
  // rounded per step stays 2048 (the float16 spacing there is 2), rounded once it is 2052.
  Pair y = makePair(kF16, {1}, {2048});
  const Pair idx = makePair(kI64, {4}, {0, 0, 0, 0});
  const Pair src = makePair(kF16, {4}, {1, 1, 1, 1});
  ASSERT_EQ(devScatterAdd(h, 0, y.dev, idx.dev, src.dev), MLUOP_STATUS_SUCCESS) << lastError();
  expectOk(refScatterAdd(0, y.host, idx.host, src.host));
  h.sync();
  expectSame(y.dev.values(), {2052}, "device rounds once");
  expectSame(y.host.values(), {2052}, "reference rounds once");
}

TEST(ScatterAdd, BadParams) {
  Handle h;
  const std::string op = "scatter_add";
  Tensor y = Tensor::device(kF32, {4, 3});
  const Tensor idx = Tensor::device(kI64, {2, 3});
  const Tensor src = Tensor::device(kF32, {2, 3});
  const Tensor y_bool = Tensor::device(kBool, {4, 3});
  const Tensor src_bool = Tensor::device(kBool, {2, 3});
  expectBad(devScatterAdd(h, 0, y_bool, idx, src_bool), refScatterAdd(0, y_bool, idx, src_bool), op,
            "y is bool, which cannot be added to");
  const Tensor src16 = Tensor::device(kF16, {2, 3});
  expectBad(devScatterAdd(h, 0, y, idx, src16), refScatterAdd(0, y, idx, src16), op,
            "src is float16 but y is float32");
  const Tensor idx_f = Tensor::device(kF32, {2, 3});
  expectBad(devScatterAdd(h, 0, y, idx_f, src), refScatterAdd(0, y, idx_f, src), op,
            "index is float32; expected int64 or int32");
  const Tensor y0 = Tensor::device(kF32, {});
  expectBad(devScatterAdd(h, 0, y0, idx, src), refScatterAdd(0, y0, idx, src), op, "y is 0-d");
  expectBad(devScatterAdd(h, -3, y, idx, src), refScatterAdd(-3, y, idx, src), op,
            "dim -3 is out of range for a 2-d y (expected -2 to 1)");
  const Tensor src1 = Tensor::device(kF32, {6});
  expectBad(devScatterAdd(h, 0, y, idx, src1), refScatterAdd(0, y, idx, src1), op,
            "y, index and src have 2, 2 and 1 dims; they must have the same number of dims");
  const Tensor src_small = Tensor::device(kF32, {1, 3});
  expectBad(devScatterAdd(h, 0, y, idx, src_small), refScatterAdd(0, y, idx, src_small), op,
            "index [2, 3] is larger than src [1, 3] in dim 0");
  const Tensor idx_wide = Tensor::device(kI64, {2, 4});
  const Tensor src_wide = Tensor::device(kF32, {2, 4});
  expectBad(devScatterAdd(h, 0, y, idx_wide, src_wide), refScatterAdd(0, y, idx_wide, src_wide), op,
            "index [2, 4] is larger than y [4, 3] in dim 1 (only dim 0 may be larger)");
  const Tensor y_bcast = Tensor::device(kF32, {4, 3}, {}, {1, 0});
  expectBad(devScatterAdd(h, 0, y_bcast, idx, src), refScatterAdd(0, y_bcast, idx, src), op,
            "y (shape [4, 3], strides [1, 0]) overlaps itself");
  const View y_in_idx(idx, kF32, {4, 3}, {}, 0);
  expectBad(devScatterAdd(h, 0, y_in_idx, idx, src), refScatterAdd(0, y_in_idx, idx, src), op,
            "y overlaps index in memory");
  const View src_in_y(y, kF32, {2, 3}, {}, 12);
  expectBad(devScatterAdd(h, 0, y, idx, src_in_y), refScatterAdd(0, y, idx, src_in_y), op,
            "y overlaps src in memory");
}

// ================================ concat / split ================================

struct JoinCase {
  Dims a;
  Dims a_strides;
  Dims b;
  Dims b_strides;
  int dim;
  Dims y_strides;
};

Dims joinedShape(const JoinCase& c) {
  Dims y = c.a;
  const std::size_t d = static_cast<std::size_t>(c.dim < 0 ? c.dim + static_cast<int>(c.a.size()) : c.dim);
  y[d] += c.b[d];
  return y;
}

const std::vector<JoinCase>& joinCases() {
  static const std::vector<JoinCase> cases = {
      {{3, 4}, {}, {2, 4}, {}, 0, {}},
      {{3, 4}, {}, {3, 5}, {}, -1, {}},
      {{3, 4}, permutedStrides({3, 4}, {1, 0}), {3, 1}, {}, 1, permutedStrides({3, 5}, {1, 0})},
      {{2, 0, 3}, {}, {2, 5, 3}, {}, 1, {}},  // a empty along dim
      {{0, 3}, {}, {0, 3}, {}, 0, {}},        // everything empty
      {{2, 3, 7},
       {},
       {2, 3, 6},
       permutedStrides({2, 3, 6}, {2, 0, 1}),
       2,
       permutedStrides({2, 3, 13}, {1, 2, 0})},
      {{13}, {2}, {9}, {}, 0, {3}},
      {{100, 64}, {}, {60, 64}, {}, 0, {}},  // medium
  };
  return cases;
}

TEST(Concat, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 500;
  for (const mluopDataType_t dtype : kAnyDtypes) {
    for (const JoinCase& c : joinCases()) {
      const std::string what = dtypeLabel(dtype) + " a " + shapeLabel(c.a, c.a_strides) + " b " +
                               shapeLabel(c.b, c.b_strides) + " dim " + std::to_string(c.dim);
      const Pair a = makePair(dtype, c.a, valuesFor(dtype, numel(c.a), seed++), c.a_strides);
      const Pair b = makePair(dtype, c.b, valuesFor(dtype, numel(c.b), seed++), c.b_strides);
      Pair y = outputPair(dtype, joinedShape(c), c.y_strides);
      ASSERT_EQ(devConcat(h, c.dim, a.dev, b.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(refConcat(c.dim, a.host, b.host, y.host));
      h.sync();
      expectSame(y.dev.values(), y.host.values(), what);
    }
  }
}

TEST(Split, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 600;
  for (const mluopDataType_t dtype : kAnyDtypes) {
    for (const JoinCase& c : joinCases()) {
      const std::string what = dtypeLabel(dtype) + " a " + shapeLabel(c.a, c.a_strides) + " b " +
                               shapeLabel(c.b, c.b_strides) + " dim " + std::to_string(c.dim);
      const Dims xdims = joinedShape(c);
      const Pair x = makePair(dtype, xdims, valuesFor(dtype, numel(xdims), seed++), c.y_strides);
      Pair a = outputPair(dtype, c.a, c.a_strides);
      Pair b = outputPair(dtype, c.b, c.b_strides);
      ASSERT_EQ(devSplit(h, c.dim, x.dev, a.dev, b.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(refSplit(c.dim, x.host, a.host, b.host));
      h.sync();
      expectSame(a.dev.values(), a.host.values(), what + " a");
      expectSame(b.dev.values(), b.host.values(), what + " b");
    }
  }
}

TEST(ConcatSplit, ReferenceHandWorked) {
  const Tensor a = Tensor::host(kF64, {2, 2}, {1, 2, 3, 4});
  const Tensor b = Tensor::host(kF64, {2, 1}, {5, 6});
  Tensor y = Tensor::host(kF64, {2, 3});
  expectOk(refConcat(1, a, b, y));
  expectSame(y.values(), {1, 2, 5, 3, 4, 6}, "concat dim 1");
  Tensor rows = Tensor::host(kF64, {4, 2});
  expectOk(refConcat(-2, a, Tensor::host(kF64, {2, 2}, {7, 8, 9, 10}), rows));
  expectSame(rows.values(), {1, 2, 3, 4, 7, 8, 9, 10}, "concat dim -2");
  Tensor sa = Tensor::host(kF64, {2, 2});
  Tensor sb = Tensor::host(kF64, {2, 1});
  expectOk(refSplit(1, y, sa, sb));
  expectSame(sa.values(), {1, 2, 3, 4}, "split a");
  expectSame(sb.values(), {5, 6}, "split b");
  Tensor head = Tensor::host(kF64, {1, 2});
  Tensor tail = Tensor::host(kF64, {3, 2});
  expectOk(refSplit(0, rows, head, tail));
  expectSame(head.values(), {1, 2}, "split head");
  expectSame(tail.values(), {3, 4, 7, 8, 9, 10}, "split tail");
}

TEST(ConcatSplit, BadParams) {
  Handle h;
  const Tensor a = Tensor::device(kF32, {2, 3}, randomValues(6, 5));
  const Tensor b = Tensor::device(kF32, {4, 3}, randomValues(12, 6));
  Tensor y = Tensor::device(kF32, {6, 3});
  std::string op = "concat";
  const Tensor b16 = Tensor::device(kF16, {4, 3});
  expectBad(devConcat(h, 0, a, b16, y), refConcat(0, a, b16, y), op, "b is float16 but a is float32");
  const Tensor y_i = Tensor::device(kI64, {6, 3});
  expectBad(devConcat(h, 0, a, b, y_i), refConcat(0, a, b, y_i), op, "y is int64 but a is float32");
  const Tensor s0 = Tensor::device(kF32, {}, {1});
  const Tensor y2 = Tensor::device(kF32, {2});
  expectBad(devConcat(h, 0, s0, s0, y2), refConcat(0, s0, s0, y2), op,
            "a is 0-d; the op needs a tensor with at least 1 dim");
  expectBad(devConcat(h, 2, a, b, y), refConcat(2, a, b, y), op,
            "dim 2 is out of range for a 2-d a (expected -2 to 1)");
  expectBad(devConcat(h, 1, a, b, y), refConcat(1, a, b, y), op,
            "b has shape [4, 3] but a has shape [2, 3]; they must match in every dim but dim 1");
  const Tensor b3 = Tensor::device(kF32, {4, 3, 1});
  expectBad(devConcat(h, 0, a, b3, y), refConcat(0, a, b3, y), op,
            "b has shape [4, 3, 1] but a has shape [2, 3]");
  const Tensor y_bad = Tensor::device(kF32, {5, 3});
  expectBad(devConcat(h, 0, a, b, y_bad), refConcat(0, a, b, y_bad), op,
            "y has shape [5, 3] but a [2, 3] and b [4, 3] joined along dim 0 give [6, 3]");
  const Tensor y_bcast = Tensor::device(kF32, {6, 3}, {}, {0, 1});
  expectBad(devConcat(h, 0, a, b, y_bcast), refConcat(0, a, b, y_bcast), op,
            "y (shape [6, 3], strides [0, 1]) overlaps itself");
  const Tensor big = Tensor::device(kF32, {48});
  const View a_in(big, kF32, {2, 3}), y_over_a(big, kF32, {6, 3}, {}, 4 * 5);
  expectBad(devConcat(h, 0, a_in, b, y_over_a), refConcat(0, a_in, b, y_over_a), op,
            "y overlaps a in memory");
  const View b_in(big, kF32, {4, 3}, {}, 4 * 30), y_over_b(big, kF32, {6, 3}, {}, 4 * 20);
  expectBad(devConcat(h, 0, a, b_in, y_over_b), refConcat(0, a, b_in, y_over_b), op,
            "y overlaps b in memory");

  op = "split";
  const Tensor x = Tensor::device(kF32, {6, 3}, randomValues(18, 7));
  Tensor sa = Tensor::device(kF32, {2, 3});
  Tensor sb = Tensor::device(kF32, {4, 3});
  const Tensor sa16 = Tensor::device(kF16, {2, 3});
  expectBad(devSplit(h, 0, x, sa16, sb), refSplit(0, x, sa16, sb), op, "a is float16 but x is float32");
  const Tensor sb16 = Tensor::device(kF16, {4, 3});
  expectBad(devSplit(h, 0, x, sa, sb16), refSplit(0, x, sa, sb16), op, "b is float16 but x is float32");
  expectBad(devSplit(h, 0, s0, sa, sb), refSplit(0, s0, sa, sb), op, "x is 0-d");
  expectBad(devSplit(h, -3, x, sa, sb), refSplit(-3, x, sa, sb), op,
            "dim -3 is out of range for a 2-d x (expected -2 to 1)");
  const Tensor sa_wide = Tensor::device(kF32, {2, 4});
  expectBad(devSplit(h, 0, x, sa_wide, sb), refSplit(0, x, sa_wide, sb), op,
            "a has shape [2, 4] but x has shape [6, 3]; they must match in every dim but dim 0");
  const Tensor sb_wide = Tensor::device(kF32, {4, 2});
  expectBad(devSplit(h, 0, x, sa, sb_wide), refSplit(0, x, sa, sb_wide), op,
            "b has shape [4, 2] but x has shape [6, 3]");
  const Tensor sb_short = Tensor::device(kF32, {3, 3});
  expectBad(devSplit(h, 0, x, sa, sb_short), refSplit(0, x, sa, sb_short), op,
            "a [2, 3] and b [3, 3] have 2 + 3 = 5 elements along dim 0 but x [6, 3] has 6");
  const Tensor sa_bcast = Tensor::device(kF32, {2, 3}, {}, {1, 1});
  expectBad(devSplit(h, 0, x, sa_bcast, sb), refSplit(0, x, sa_bcast, sb), op,
            "a (shape [2, 3], strides [1, 1]) overlaps itself");
  const Tensor sb_bcast = Tensor::device(kF32, {4, 3}, {}, {0, 0});
  expectBad(devSplit(h, 0, x, sa, sb_bcast), refSplit(0, x, sa, sb_bcast), op,
            "b (shape [4, 3], strides [0, 0]) overlaps itself");
  const View x_in(big, kF32, {6, 3}), a_over_x(big, kF32, {2, 3}, {}, 4 * 17),
      b_over_x(big, kF32, {4, 3}, {}, 4 * 6);
  const View a_after(big, kF32, {2, 3}, {}, 4 * 18), b_after(big, kF32, {4, 3}, {}, 4 * 24);
  expectBad(devSplit(h, 0, x_in, a_over_x, b_after), refSplit(0, x_in, a_over_x, b_after), op,
            "a overlaps x in memory");
  expectBad(devSplit(h, 0, x_in, a_after, b_over_x), refSplit(0, x_in, a_after, b_over_x), op,
            "b overlaps x in memory");
  const View b_over_a(big, kF32, {4, 3}, {}, 4 * 20);
  expectBad(devSplit(h, 0, x_in, a_after, b_over_a), refSplit(0, x_in, a_after, b_over_a), op,
            "a overlaps b in memory");
}

// ================================ where ================================

struct WhereCase {
  Dims cond, a, b, y;
  Dims cond_strides, a_strides, y_strides;
};

const std::vector<WhereCase>& whereCases() {
  static const std::vector<WhereCase> cases = {
      {{7, 13}, {7, 13}, {7, 13}, {7, 13}, {}, {}, {}},
      {{3, 1}, {1, 4}, {3, 4}, {3, 4}, {}, {}, {}},  // broadcasting
      {{}, {5}, {2, 5}, {2, 5}, {}, {}, {}},         // 0-d condition
      {{4}, {}, {}, {4}, {}, {}, {}},                // 0-d a and b
      {{2, 0}, {2, 1}, {0}, {2, 0}, {}, {}, {}},     // empty
      {{5, 6}, {5, 6}, {6}, {5, 6}, permutedStrides({5, 6}, {1, 0}), {8, 1}, permutedStrides({5, 6}, {1, 0})},
      {{2, 3, 4}, {3, 1}, {2, 1, 4}, {2, 3, 4}, {}, {}, {}},
      {{50, 101}, {50, 101}, {101}, {50, 101}, {}, {}, {}},  // medium
  };
  return cases;
}

TEST(Where, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 700;
  for (const mluopDataType_t dtype : kAnyDtypes) {
    for (const WhereCase& c : whereCases()) {
      const mluopDataType_t cond_dtype = seed % 2 ? kBool : kU8;
      const std::string what = dtypeLabel(dtype) + " condition " + shapeLabel(c.cond, c.cond_strides) + " (" +
                               dtypeLabel(cond_dtype) + ") a " + shapeLabel(c.a, c.a_strides) + " b " +
                               shapeLabel(c.b) + " y " + shapeLabel(c.y, c.y_strides);
      const Pair cond = makePair(cond_dtype, c.cond, valuesFor(kBool, numel(c.cond), seed++), c.cond_strides);
      const Pair a = makePair(dtype, c.a, valuesFor(dtype, numel(c.a), seed++), c.a_strides);
      const Pair b = makePair(dtype, c.b, valuesFor(dtype, numel(c.b), seed++));
      Pair y = outputPair(dtype, c.y, c.y_strides);
      ASSERT_EQ(devWhere(h, cond.dev, a.dev, b.dev, y.dev), MLUOP_STATUS_SUCCESS) << lastError();
      expectOk(refWhere(cond.host, a.host, b.host, y.host));
      h.sync();
      expectSame(y.dev.values(), y.host.values(), what);
    }
  }
}

TEST(Where, ReferenceHandWorked) {
  Tensor y = Tensor::host(kF64, {3});
  expectOk(refWhere(Tensor::host(kBool, {3}, {1, 0, 1}), Tensor::host(kF64, {3}, {1, 2, 3}),
                    Tensor::host(kF64, {3}, {10, 20, 30}), y));
  expectSame(y.values(), {1, 20, 3}, "elementwise");
  Tensor y2 = Tensor::host(kF64, {2, 2});
  expectOk(refWhere(Tensor::host(kU8, {2, 1}, {0, 7}), Tensor::host(kF64, {2}, {1, 2}),
                    Tensor::host(kF64, {}, {-1}), y2));
  expectSame(y2.values(), {-1, -1, 1, 2}, "broadcast, uint8 condition (7 is true), 0-d b");
}

TEST(Where, OutputMayBeExactlyAnInput) {
  Handle h;
  const Tensor cond = Tensor::device(kBool, {2, 3}, {1, 0, 0, 1, 1, 0});
  Tensor a = Tensor::device(kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::device(kF32, {3}, {-1, -2, -3});
  ASSERT_EQ(devWhere(h, cond, a, b, a), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectSame(a.values(), {1, -2, -3, 4, 5, -3}, "in place into a");
  Tensor ra = Tensor::host(kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expectOk(refWhere(Tensor::host(kBool, {2, 3}, {1, 0, 0, 1, 1, 0}), ra,
                    Tensor::host(kF32, {3}, {-1, -2, -3}), ra));
  expectSame(ra.values(), {1, -2, -3, 4, 5, -3}, "reference in place");
}

TEST(Where, BadParams) {
  Handle h;
  const std::string op = "where";
  const Tensor cond = Tensor::device(kBool, {2, 3});
  const Tensor a = Tensor::device(kF32, {2, 3});
  const Tensor b = Tensor::device(kF32, {3});
  Tensor y = Tensor::device(kF32, {2, 3});
  const Tensor cond_f = Tensor::device(kF32, {2, 3});
  expectBad(devWhere(h, cond_f, a, b, y), refWhere(cond_f, a, b, y), op,
            "condition is float32; expected bool (or uint8)");
  const Tensor b16 = Tensor::device(kF16, {3});
  expectBad(devWhere(h, cond, a, b16, y), refWhere(cond, a, b16, y), op, "b is float16 but a is float32");
  const Tensor y16 = Tensor::device(kF16, {2, 3});
  expectBad(devWhere(h, cond, a, b, y16), refWhere(cond, a, b, y16), op, "y is float16 but a is float32");
  const Tensor b4 = Tensor::device(kF32, {4});
  expectBad(devWhere(h, cond, a, b4, y), refWhere(cond, a, b4, y), op,
            "condition [2, 3], a [2, 3] and b [4] do not broadcast");
  const Tensor cond5 = Tensor::device(kBool, {5, 1, 1});
  expectBad(devWhere(h, cond5, a, b, y), refWhere(cond5, a, b, y), op,
            "y has shape [2, 3] but condition [5, 1, 1], a [2, 3] and b [3] broadcast to [5, 2, 3]");
  const Tensor y_bcast = Tensor::device(kF32, {2, 3}, {}, {0, 1});
  expectBad(devWhere(h, cond, a, b, y_bcast), refWhere(cond, a, b, y_bcast), op,
            "y (shape [2, 3], strides [0, 1]) overlaps itself");
  const View y_shifted(a, kF32, {2, 3}, {}, 0);
  const View a_shifted(a, kF32, {2, 3}, {3, 1}, 0);
  const View a_part(a, kF32, {1, 3}, {}, 4);
  expectBad(devWhere(h, cond, a_part, b, y_shifted), refWhere(cond, a_part, b, y_shifted), op,
            "y overlaps a in memory without being the same elements");
  const View b_in_y(a, kF32, {3}, {1}, 4);
  expectBad(devWhere(h, cond, a_shifted, b_in_y, y_shifted), refWhere(cond, a_shifted, b_in_y, y_shifted), op,
            "y overlaps b in memory without being the same elements");
  const Tensor bytes = Tensor::device(kBool, {8});
  const View cond_in(bytes, kBool, {2, 3}, {}, 1), y_bool(bytes, kBool, {2, 3}, {}, 0);
  const Tensor ab = Tensor::device(kBool, {2, 3});
  expectBad(devWhere(h, cond_in, ab, ab, y_bool), refWhere(cond_in, ab, ab, y_bool), op,
            "y overlaps condition in memory without being the same elements");
}

// ================================ eq / lt / gt ================================

struct CompareCase {
  Dims a, b, c;
  Dims a_strides, c_strides;
};

const std::vector<CompareCase>& compareCases() {
  static const std::vector<CompareCase> cases = {
      {{7, 13}, {7, 13}, {7, 13}, {}, {}},
      {{3, 1}, {1, 4}, {3, 4}, {}, {}},  // broadcasting both ways
      {{7, 13}, {13}, {7, 13}, permutedStrides({7, 13}, {1, 0}), permutedStrides({7, 13}, {1, 0})},
      {{}, {5}, {5}, {}, {}},  // 0-d a
      {{}, {}, {}, {}, {}},    // 0-d everything
      {{0, 3}, {3}, {0, 3}, {}, {}},
      {{4, 5}, {4, 1}, {4, 5}, {10, 2}, {6, 1}},
      {{60, 99}, {60, 99}, {60, 99}, {}, {}},  // medium
  };
  return cases;
}

// Values on a 0.5 grid in [-2, 2] (many equal pairs) with NaN now and then for the floating dtypes.
std::vector<double> compareValues(mluopDataType_t dtype, std::int64_t n, std::uint32_t seed) {
  std::vector<double> v = valuesFor(dtype, n, seed);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!isFloat(dtype)) {
      if (dtype != kBool) v[i] = std::fmod(v[i], 4.0);
      continue;
    }
    v[i] = i % 11 == 5 ? kNaN : std::round(v[i] * 2) / 2;
  }
  return v;
}

TEST(Compare, DeviceMatchesReference) {
  Handle h;
  std::uint32_t seed = 800;
  for (const Cmp op : {Cmp::kEq, Cmp::kLt, Cmp::kGt}) {
    for (const mluopDataType_t dtype : kAnyDtypes) {
      for (const CompareCase& c : compareCases()) {
        const std::string what = std::string(cmpName(op)) + " " + dtypeLabel(dtype) + " a " +
                                 shapeLabel(c.a, c.a_strides) + " b " + shapeLabel(c.b) + " c " +
                                 shapeLabel(c.c, c.c_strides);
        const Pair a = makePair(dtype, c.a, compareValues(dtype, numel(c.a), seed++), c.a_strides);
        const Pair b = makePair(dtype, c.b, compareValues(dtype, numel(c.b), seed++));
        Pair out = outputPair(kBool, c.c, c.c_strides);
        ASSERT_EQ(devCompare(h, op, a.dev, b.dev, out.dev), MLUOP_STATUS_SUCCESS) << lastError();
        expectOk(refCompare(op, a.host, b.host, out.host));
        h.sync();
        expectSame(out.dev.values(), out.host.values(), what);
      }
    }
  }
}

TEST(Compare, ReferenceHandWorked) {
  const Tensor a = Tensor::host(kF64, {5}, {1, kNaN, 3, 2, -0.0});
  const Tensor b = Tensor::host(kF64, {5}, {1, kNaN, 2, 5, 0.0});
  Tensor c = Tensor::host(kBool, {5});
  expectOk(refCompare(Cmp::kEq, a, b, c));
  expectSame(c.values(), {1, 0, 0, 0, 1}, "eq (NaN == NaN is false, -0 == 0)");
  expectOk(refCompare(Cmp::kLt, a, b, c));
  expectSame(c.values(), {0, 0, 0, 1, 0}, "lt");
  expectOk(refCompare(Cmp::kGt, a, b, c));
  expectSame(c.values(), {0, 0, 1, 0, 0}, "gt");
  Tensor c2 = Tensor::host(kBool, {2, 3});
  expectOk(refCompare(Cmp::kLt, Tensor::host(kI32, {2, 1}, {1, 3}), Tensor::host(kI32, {3}, {0, 2, 4}), c2));
  expectSame(c2.values(), {0, 1, 1, 0, 0, 1}, "lt int32 broadcast");
}

// int64 values that float32 or float64 cannot tell apart must compare exactly on both sides.
TEST(Compare, LargeInt64ValuesCompareExactly) {
  Handle h;
  const std::int64_t big = (std::int64_t{1} << 60) + 1;
  Tensor a = Tensor::device(kI64, {2});
  Tensor b = Tensor::device(kI64, {2});
  const std::int64_t av[2] = {big, big};
  const std::int64_t bv[2] = {big - 1, big};
  std::memcpy(a.data(), av, sizeof av);
  std::memcpy(b.data(), bv, sizeof bv);
  for (const Cmp op : {Cmp::kEq, Cmp::kLt, Cmp::kGt}) {
    Tensor c = Tensor::device(kBool, {2});
    Tensor c_ref = Tensor::host(kBool, {2});
    ASSERT_EQ(devCompare(h, op, a, b, c), MLUOP_STATUS_SUCCESS) << lastError();
    expectOk(refCompare(op, a, b, c_ref));
    h.sync();
    const std::vector<double> expected = op == Cmp::kEq   ? std::vector<double>{0, 1}
                                         : op == Cmp::kLt ? std::vector<double>{0, 0}
                                                          : std::vector<double>{1, 0};
    expectSame(c.values(), expected, std::string(cmpName(op)) + " device");
    expectSame(c_ref.values(), expected, std::string(cmpName(op)) + " reference");
  }
}

TEST(Compare, OutputMayBeExactlyABoolInput) {
  Handle h;
  Tensor a = Tensor::device(kBool, {4}, {0, 1, 1, 0});
  const Tensor b = Tensor::device(kBool, {}, {1});
  ASSERT_EQ(devCompare(h, Cmp::kEq, a, b, a), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectSame(a.values(), {0, 1, 1, 0}, "a == true in place");
  ASSERT_EQ(devCompare(h, Cmp::kLt, a, b, a), MLUOP_STATUS_SUCCESS) << lastError();
  h.sync();
  expectSame(a.values(), {1, 0, 0, 1}, "a < true in place");
}

TEST(Compare, BadParams) {
  Handle h;
  for (const Cmp op : {Cmp::kEq, Cmp::kLt, Cmp::kGt}) {
    const std::string name = cmpName(op);
    const Tensor a = Tensor::device(kF32, {2, 3});
    const Tensor b = Tensor::device(kF32, {3});
    Tensor c = Tensor::device(kBool, {2, 3});
    const Tensor b_i = Tensor::device(kI32, {3});
    expectBad(devCompare(h, op, a, b_i, c), refCompare(op, a, b_i, c), name, "b is int32 but a is float32");
    const Tensor c_f = Tensor::device(kF32, {2, 3});
    expectBad(devCompare(h, op, a, b, c_f), refCompare(op, a, b, c_f), name, "c is float32; expected bool");
    const Tensor b2 = Tensor::device(kF32, {2});
    expectBad(devCompare(h, op, a, b2, c), refCompare(op, a, b2, c), name,
              "a has shape [2, 3] and b [2], which do not broadcast");
    const Tensor c_bad = Tensor::device(kBool, {3});
    expectBad(devCompare(h, op, a, b, c_bad), refCompare(op, a, b, c_bad), name,
              "c has shape [3] but a [2, 3] and b [3] broadcast to [2, 3]");
    const Tensor c_bcast = Tensor::device(kBool, {2, 3}, {}, {0, 1});
    expectBad(devCompare(h, op, a, b, c_bcast), refCompare(op, a, b, c_bcast), name,
              "c (shape [2, 3], strides [0, 1]) overlaps itself");
    const View c_in_a(a, kBool, {2, 3}, {}, 2);
    expectBad(devCompare(h, op, a, b, c_in_a), refCompare(op, a, b, c_in_a), name,
              "c overlaps a in memory without being the same elements");
    const View c_in_b(b, kBool, {2, 3}, {}, 0);
    expectBad(devCompare(h, op, a, b, c_in_b), refCompare(op, a, b, c_in_b), name,
              "c overlaps b in memory without being the same elements");
  }
}

// ================================ float64 on the device ================================

TEST(IndexFamily, Float64IsNotSupportedOnTheDevice) {
  Handle h;
  const Tensor x = Tensor::device(kF64, {2, 3}, randomValues(6, 9));
  Tensor y = Tensor::device(kF64, {2, 3});
  Tensor y2 = Tensor::device(kF64, {4, 3});
  const Tensor idx = Tensor::device(kI64, {2, 3}, {0, 1, 0, 1, 0, 1});
  const Tensor idx1 = Tensor::device(kI64, {2}, {0, 1});
  const Tensor cond = Tensor::device(kBool, {2, 3});
  Tensor c = Tensor::device(kBool, {2, 3});
  Tensor e = Tensor::device(kF64, {2, 3});
  const auto expectNotSupported = [](mluopStatus_t s, const char* op) {
    EXPECT_EQ(s, MLUOP_STATUS_NOT_SUPPORTED) << op;
    EXPECT_THAT(lastError(), HasSubstr("float64, which the device does not support")) << op;
  };
  expectNotSupported(devEmbedding(h, x, idx1, y), "embedding_forward");
  expectNotSupported(devEmbeddingBackward(h, -1, x, idx1, e), "embedding_backward");
  expectNotSupported(devIndexSelect(h, 0, x, idx1, y), "index_select");
  expectNotSupported(devGather(h, 0, x, idx, y), "gather");
  expectNotSupported(devScatterAdd(h, 0, y, idx, x), "scatter_add");
  expectNotSupported(devConcat(h, 0, x, x, y2), "concat");
  expectNotSupported(devSplit(h, 0, y2, x, y), "split");
  expectNotSupported(devWhere(h, cond, x, x, y), "where");
  for (const Cmp op : {Cmp::kEq, Cmp::kLt, Cmp::kGt})
    expectNotSupported(devCompare(h, op, x, x, c), cmpName(op));
}

}  // namespace
