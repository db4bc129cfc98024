// Tests of the sequence, sorting and selection ops: arange, cumsum, sort, topk. The reference and the
// device against hand-worked values (NaN above every number, ties kept in index order, int64 values past
// 2^53, integer sums widened to int64 and wrapping); the device against the CPU reference for every dtype
// over 0-d, empty, odd-sized, strided and multi-core shapes along every dim; in-place cumsum; every
// BAD_PARAM path with its message; float64 refused by the device.
#include "elementwise_util.h"

#include <gmock/gmock.h>

#include <mlu/op_invoke.h>
#include <mlu/reference.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using optest::Dims;
using optest::expectBadParam;
using optest::expectSame;
using optest::Handle;
using optest::numel;
using optest::randomValues;
using optest::Tensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr mluopDataType_t kF32 = MLUOP_DTYPE_FLOAT, kF16 = MLUOP_DTYPE_HALF, kBF16 = MLUOP_DTYPE_BFLOAT16,
                          kF64 = MLUOP_DTYPE_DOUBLE, kI8 = MLUOP_DTYPE_INT8, kI32 = MLUOP_DTYPE_INT32,
                          kI64 = MLUOP_DTYPE_INT64, kU8 = MLUOP_DTYPE_UINT8, kBool = MLUOP_DTYPE_BOOL;
const std::vector<mluopDataType_t> kDtypes = {kF32, kF16, kBF16, kI8, kI32, kI64, kU8, kBool};

bool isFloat(mluopDataType_t t) { return t == kF32 || t == kF16 || t == kBF16 || t == kF64; }
std::string name(mluopDataType_t t) { return mluopGetNameOfDataType(t); }
std::string lastError() { return mluopGetLastErrorMessage(); }

// Values with many ties for the integer dtypes and bool, few for the floats.
std::vector<double> valuesFor(mluopDataType_t t, std::int64_t n, std::uint32_t seed) {
  std::vector<double> v = randomValues(n, seed, -4.0, 4.0);
  if (isFloat(t)) return v;
  for (double& x : v) {
    x = std::floor(x);
    if (t == kU8) x = std::fabs(x);
    if (t == kBool) x = x > 0 ? 1 : 0;
  }
  return v;
}

// ---- hand-worked ----

TEST(SortOps, SortPutsNanLastAndKeepsTiesInOrder) {
  const Handle handle;
  for (const bool descending : {false, true}) {
    const std::vector<double> x = {3, kNaN, 1, 2, 1};
    const std::vector<double> want_values =
        descending ? std::vector<double>{kNaN, 3, 2, 1, 1} : std::vector<double>{1, 1, 2, 3, kNaN};
    const std::vector<double> want_indices =
        descending ? std::vector<double>{1, 0, 3, 2, 4} : std::vector<double>{2, 4, 3, 0, 1};
    Tensor dx = Tensor::device(kF32, {5}, x), dv = Tensor::device(kF32, {5}), di = Tensor::device(kI64, {5});
    ASSERT_EQ(
        mluopSort(handle, 0, descending, dx.desc(), dx.data(), dv.desc(), dv.data(), di.desc(), di.data()),
        MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    expectSame(dv.values(), want_values, "device values");
    expectSame(di.values(), want_indices, "device indices");
    Tensor hx = Tensor::host(kF32, {5}, x), hv = Tensor::host(kF32, {5}), hi = Tensor::host(kI64, {5});
    mlu::sort_args a;
    a.dim = -1;
    a.descending = descending;
    a.x = hx.view();
    a.values = hv.view();
    a.indices = hi.view();
    ASSERT_TRUE(mlu::reference::run(a).ok());
    expectSame(hv.values(), want_values, "reference values");
    expectSame(hi.values(), want_indices, "reference indices");
  }
}

TEST(SortOps, SortComparesInt64Exactly) {
  // 2^60 + 1 and 2^60 are the same double: a sort through float64 would keep their order.
  const Handle handle;
  Tensor dx = Tensor::device(kI64, {3}), dv = Tensor::device(kI64, {3}), di = Tensor::device(kI64, {3});
  auto* raw = static_cast<std::int64_t*>(dx.data());
  raw[0] = (std::int64_t{1} << 60) + 1;
  raw[1] = std::int64_t{1} << 60;
  raw[2] = -5;
  ASSERT_EQ(mluopSort(handle, 0, false, dx.desc(), dx.data(), dv.desc(), dv.data(), di.desc(), di.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  expectSame(di.values(), {2, 1, 0});
  EXPECT_EQ(static_cast<const std::int64_t*>(dv.data())[2], (std::int64_t{1} << 60) + 1);
}

TEST(SortOps, TopkTakesTheLargestOrSmallestSorted) {
  const Handle handle;
  const std::vector<double> x = {1, 5, 5, kNaN, 2, -1};
  struct Case {
    std::int64_t k;
    bool largest;
    std::vector<double> values, indices;
  };
  for (const Case& c : std::vector<Case>{{2, true, {kNaN, 5}, {3, 1}},
                                         {3, true, {kNaN, 5, 5}, {3, 1, 2}},
                                         {3, false, {-1, 1, 2}, {5, 0, 4}},
                                         {6, false, {-1, 1, 2, 5, 5, kNaN}, {5, 0, 4, 1, 2, 3}},
                                         {0, true, {}, {}}}) {
    const std::string what = "k " + std::to_string(c.k) + (c.largest ? " largest" : " smallest");
    Tensor dx = Tensor::device(kF32, {6}, x), dv = Tensor::device(kF32, {c.k}),
           di = Tensor::device(kI64, {c.k});
    ASSERT_EQ(mluopTopk(handle, c.k, 0, c.largest, dx.desc(), dx.data(), dv.desc(), dv.data(), di.desc(),
                        di.data()),
              MLUOP_STATUS_SUCCESS)
        << what << ": " << lastError();
    handle.sync();
    expectSame(dv.values(), c.values, what + " values");
    expectSame(di.values(), c.indices, what + " indices");
  }
  // Along dim 0 of a [3, 2] tensor: each column on its own.
  Tensor dx = Tensor::device(kI32, {3, 2}, {4, -1, 9, 7, 0, 7}), dv = Tensor::device(kI32, {2, 2}),
         di = Tensor::device(kI64, {2, 2});
  ASSERT_EQ(mluopTopk(handle, 2, 0, true, dx.desc(), dx.data(), dv.desc(), dv.data(), di.desc(), di.data()),
            MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  expectSame(dv.values(), {9, 7, 4, 7});
  expectSame(di.values(), {1, 1, 0, 2});
}

TEST(SortOps, CumsumAlongEitherDimWidensIntegersAndWorksInPlace) {
  const Handle handle;
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};
  for (const int dim : {0, 1, -1}) {
    const std::vector<double> want =
        dim == 0 ? std::vector<double>{1, 2, 3, 5, 7, 9} : std::vector<double>{1, 3, 6, 4, 9, 15};
    Tensor dx = Tensor::device(kF32, {2, 3}, x), dy = Tensor::device(kF32, {2, 3});
    ASSERT_EQ(mluopCumsum(handle, dim, dx.desc(), dx.data(), dy.desc(), dy.data()), MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    expectSame(dy.values(), want, "dim " + std::to_string(dim));
    // In place: y is x.
    ASSERT_EQ(mluopCumsum(handle, dim, dx.desc(), dx.data(), dx.desc(), dx.data()), MLUOP_STATUS_SUCCESS)
        << lastError();
    handle.sync();
    expectSame(dx.values(), want, "in place, dim " + std::to_string(dim));
  }
  // int8 sums go past int8 in an int64 y; bool counts; an int8 y wraps as PyTorch's int8 cumsum does.
  Tensor i8 = Tensor::device(kI8, {3}, {100, 100, 100}), wide = Tensor::device(kI64, {3}),
         narrow = Tensor::device(kI8, {3});
  ASSERT_EQ(mluopCumsum(handle, 0, i8.desc(), i8.data(), wide.desc(), wide.data()), MLUOP_STATUS_SUCCESS);
  ASSERT_EQ(mluopCumsum(handle, 0, i8.desc(), i8.data(), narrow.desc(), narrow.data()), MLUOP_STATUS_SUCCESS);
  Tensor flags = Tensor::device(kBool, {4}, {1, 0, 1, 1}), counts = Tensor::device(kI64, {4});
  ASSERT_EQ(mluopCumsum(handle, 0, flags.desc(), flags.data(), counts.desc(), counts.data()),
            MLUOP_STATUS_SUCCESS);
  handle.sync();
  expectSame(wide.values(), {100, 200, 300});
  expectSame(narrow.values(), {100, -56, 44});
  expectSame(counts.values(), {1, 1, 2, 3});
}

TEST(SortOps, ArangeFillsStartPlusIStep) {
  const Handle handle;
  Tensor f = Tensor::device(kF32, {5}), i = Tensor::device(kI64, {4}),
         strided = Tensor::device(kF16, {3}, {}, {2});
  ASSERT_EQ(mluopArange(handle, 0.5, 0.25, f.desc(), f.data()), MLUOP_STATUS_SUCCESS) << lastError();
  ASSERT_EQ(mluopArange(handle, -3, 2, i.desc(), i.data()), MLUOP_STATUS_SUCCESS) << lastError();
  ASSERT_EQ(mluopArange(handle, 10, -0.5, strided.desc(), strided.data()), MLUOP_STATUS_SUCCESS)
      << lastError();
  handle.sync();
  expectSame(f.values(), {0.5, 0.75, 1, 1.25, 1.5});
  expectSame(i.values(), {-3, -1, 1, 3});
  expectSame(strided.values(), {10, 9.5, 9});
  // 0.1 steps: start + i * step in float64, rounded once (not a running float32 sum).
  Tensor tenths = Tensor::device(kF32, {30});
  ASSERT_EQ(mluopArange(handle, 0, 0.1, tenths.desc(), tenths.data()), MLUOP_STATUS_SUCCESS);
  handle.sync();
  std::vector<double> want;
  for (int k = 0; k < 30; ++k) want.push_back(static_cast<float>(k * 0.1));
  expectSame(tenths.values(), want);
}

// ---- the device against the reference ----

struct Shape {
  Dims dims, strides;
  int dim;
};

std::vector<Shape> shapes() {
  return {{{}, {}, 0},
          {{0}, {}, 0},
          {{5}, {}, 0},
          {{7, 13}, {}, 1},
          {{7, 13}, {}, 0},
          {{7, 13}, {1, 7}, 1},
          {{2, 3, 4}, {24, 8, 2}, 1},
          {{3, 0, 2}, {}, 2},
          {{64, 300}, {}, 1},
          {{300, 64}, {}, 0}};
}

template <typename Args, typename Build>
void expectDeviceMatchesReference(const std::string& what, Build build) {
  const Handle handle;
  std::vector<Tensor> dev, host;
  Args da{}, ha{};
  build(dev, da, true);
  build(host, ha, false);
  ASSERT_EQ(mlu::invoke(handle, da), MLUOP_STATUS_SUCCESS) << what << ": " << lastError();
  const mlu::Status hs = mlu::reference::run(ha);
  ASSERT_TRUE(hs.ok()) << what << ": " << hs.message;
  handle.sync();
  for (std::size_t k = 0; k < dev.size(); ++k) {
    if (isFloat(dev[k].view().dtype)) {
      optest::expectNear(dev[k].values(), host[k].values(), optest::toleranceFor(dev[k].view().dtype),
                         what + " tensor " + std::to_string(k));
    } else {
      expectSame(dev[k].values(), host[k].values(), what + " tensor " + std::to_string(k));
    }
  }
}

TEST(SortOps, DeviceMatchesReference) {
  std::uint32_t seed = 1;
  for (const mluopDataType_t t : kDtypes) {
    for (const Shape& s : shapes()) {
      const std::string what =
          name(t) + " " + testing::PrintToString(s.dims) + " dim " + std::to_string(s.dim);
      const std::int64_t n = numel(s.dims);
      const std::vector<double> x = valuesFor(t, n, ++seed);
      const std::int64_t size = s.dims.empty() ? 1 : s.dims[static_cast<std::size_t>(s.dim)];
      for (const bool flag : {false, true}) {
        expectDeviceMatchesReference<mlu::sort_args>(
            what + (flag ? " descending" : ""), [&](std::vector<Tensor>& ts, mlu::sort_args& a, bool device) {
              auto make = device ? &Tensor::device : &Tensor::host;
              ts.push_back(make(t, s.dims, {}, {}));
              ts.push_back(make(kI64, s.dims, {}, {}));
              ts.push_back(make(t, s.dims, x, s.strides));
              a.dim = s.dim;
              a.descending = flag;
              a.values = ts[0].view();
              a.indices = ts[1].view();
              a.x = ts[2].view();
            });
        const std::int64_t k = std::min<std::int64_t>(size, 3);
        Dims out = s.dims;
        if (!out.empty()) out[static_cast<std::size_t>(s.dim)] = k;
        expectDeviceMatchesReference<mlu::topk_args>(
            what + (flag ? " largest" : " smallest"),
            [&](std::vector<Tensor>& ts, mlu::topk_args& a, bool device) {
              auto make = device ? &Tensor::device : &Tensor::host;
              ts.push_back(make(t, out, {}, {}));
              ts.push_back(make(kI64, out, {}, {}));
              ts.push_back(make(t, s.dims, x, s.strides));
              a.k = k;
              a.dim = s.dim;
              a.largest = flag;
              a.values = ts[0].view();
              a.indices = ts[1].view();
              a.x = ts[2].view();
            });
      }
      const mluopDataType_t sum_type = isFloat(t) ? t : kI64;
      expectDeviceMatchesReference<mlu::cumsum_args>(
          what + " cumsum", [&](std::vector<Tensor>& ts, mlu::cumsum_args& a, bool device) {
            auto make = device ? &Tensor::device : &Tensor::host;
            ts.push_back(make(sum_type, s.dims, {}, {}));
            ts.push_back(make(t, s.dims, x, s.strides));
            a.dim = s.dim;
            a.y = ts[0].view();
            a.x = ts[1].view();
          });
    }
    if (t == kBool) continue;
    const bool narrow = t == kI8 || t == kU8;
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{7}, std::int64_t{100}, std::int64_t{40000}}) {
      if (narrow && n > 100) continue;  // 3 + 99 is the last that fits
      expectDeviceMatchesReference<mlu::arange_args>(
          name(t) + " arange " + std::to_string(n),
          [&](std::vector<Tensor>& ts, mlu::arange_args& a, bool device) {
            ts.push_back((device ? &Tensor::device : &Tensor::host)(t, {n}, {}, {}));
            a.start = isFloat(t) ? -1.25 : 3;
            a.step = isFloat(t) ? 0.001 : (narrow ? 1 : 7);
            a.y = ts[0].view();
          });
    }
  }
}

// ---- bad arguments ----

TEST(SortOps, BadParams) {
  const Handle handle;
  Tensor x = Tensor::device(kF32, {4, 5}), v = Tensor::device(kF32, {4, 5}), i = Tensor::device(kI64, {4, 5});
  Tensor i32 = Tensor::device(kI32, {4, 5}), small = Tensor::device(kF32, {4, 2}),
         small_i = Tensor::device(kI64, {4, 2});
  expectBadParam(mluopSort(handle, 2, false, x.desc(), x.data(), v.desc(), v.data(), i.desc(), i.data()),
                 "sort: dim = 2 is out of range for x with 2 dims");
  expectBadParam(mluopSort(handle, 1, false, x.desc(), x.data(), v.desc(), v.data(), i32.desc(), i32.data()),
                 "sort: indices is int32; expected int64");
  expectBadParam(mluopSort(handle, 1, false, x.desc(), x.data(), x.desc(), x.data(), i.desc(), i.data()),
                 "sort: values overlaps x in memory");
  expectBadParam(mluopTopk(handle, 6, 1, true, x.desc(), x.data(), v.desc(), v.data(), i.desc(), i.data()),
                 "topk: k = 6 is out of range for dim 1 of x [4, 5] (size 5; expected 0 to 5)");
  expectBadParam(mluopTopk(handle, 3, 1, true, x.desc(), x.data(), small.desc(), small.data(), small_i.desc(),
                           small_i.data()),
                 "topk: values has shape [4, 2]");
  Tensor y_bool = Tensor::device(kBool, {4, 5}), ints = Tensor::device(kI32, {4, 5});
  expectBadParam(mluopCumsum(handle, 0, ints.desc(), ints.data(), y_bool.desc(), y_bool.data()),
                 "cumsum: y is bool for int32 x; expected x's dtype, or int64 for an integer or bool x");
  expectBadParam(mluopCumsum(handle, 0, x.desc(), x.data(), i.desc(), i.data()),
                 "cumsum: y is int64 for float32 x");
  Tensor line = Tensor::device(kF32, {3}), grid = Tensor::device(kF32, {2, 2}),
         b = Tensor::device(kBool, {3}), i8 = Tensor::device(kI8, {200});
  expectBadParam(mluopArange(handle, 0, 0, line.desc(), line.data()),
                 "arange: step is 0; expected a nonzero step");
  expectBadParam(mluopArange(handle, 0, 1, grid.desc(), grid.data()),
                 "arange: y has shape [2, 2]; expected 1 dim");
  expectBadParam(mluopArange(handle, 0, 1, b.desc(), b.data()), "arange: y is bool");
  expectBadParam(mluopArange(handle, 0, std::numeric_limits<double>::infinity(), line.desc(), line.data()),
                 "expected finite numbers");
  expectBadParam(mluopArange(handle, 0, 1, i8.desc(), i8.data()),
                 "arange: the sequence from 0 to 199 leaves int8's range [-128, 127]");
  Tensor i64 = Tensor::device(kI64, {3});
  expectBadParam(mluopArange(handle, 0.5, 1, i64.desc(), i64.data()),
                 "an integer sequence needs whole numbers");
  // float64: the reference's only.
  Tensor d = Tensor::device(kF64, {3}), dv = Tensor::device(kF64, {3}), di = Tensor::device(kI64, {3});
  optest::expectError(
      mluopSort(handle, 0, false, d.desc(), d.data(), dv.desc(), dv.data(), di.desc(), di.data()),
      MLUOP_STATUS_NOT_SUPPORTED, "float64");
}

}  // namespace
