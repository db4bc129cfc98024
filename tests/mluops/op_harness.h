// op_harness.h — helpers for kernel-library tests: device tensors made from host values, read back as
// float64, host tensors for the CPU reference, and comparison with per-dtype tolerances.
#pragma once

#include <mlu/mluops.h>
#include <mlu/mlurt.h>
#include <mlu/op_args.h>
#include <mlu/reference.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace optest {

using Dims = std::vector<std::int64_t>;

inline std::int64_t numel(const Dims& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

// Encodes a float64 value as one element of dtype into dst.
inline void encode(mluopDataType_t dtype, double v, void* dst) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT: {
      float f = static_cast<float>(v);
      std::memcpy(dst, &f, 4);
      break;
    }
    case MLUOP_DTYPE_HALF: {
      std::uint16_t h = mlu::floatToHalf(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
      break;
    }
    case MLUOP_DTYPE_BFLOAT16: {
      std::uint16_t h = mlu::floatToBfloat16(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
      break;
    }
    case MLUOP_DTYPE_DOUBLE:
      std::memcpy(dst, &v, 8);
      break;
    case MLUOP_DTYPE_INT8: {
      auto x = static_cast<std::int8_t>(static_cast<std::int64_t>(v));
      std::memcpy(dst, &x, 1);
      break;
    }
    case MLUOP_DTYPE_INT16: {
      auto x = static_cast<std::int16_t>(static_cast<std::int64_t>(v));
      std::memcpy(dst, &x, 2);
      break;
    }
    case MLUOP_DTYPE_INT32: {
      auto x = static_cast<std::int32_t>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case MLUOP_DTYPE_INT64: {
      auto x = static_cast<std::int64_t>(v);
      std::memcpy(dst, &x, 8);
      break;
    }
    case MLUOP_DTYPE_UINT8: {  // (through int64: a negative value wraps, as the bits are; a direct cast is
                               // UB)
      auto x = static_cast<std::uint8_t>(static_cast<std::int64_t>(v));
      std::memcpy(dst, &x, 1);
      break;
    }
    case MLUOP_DTYPE_BOOL: {
      std::uint8_t x = v != 0 ? 1 : 0;
      std::memcpy(dst, &x, 1);
      break;
    }
    default:
      ADD_FAILURE() << "encode: bad dtype";
  }
}

// Decodes one element of dtype at src as float64.
inline double decode(mluopDataType_t dtype, const void* src) {
  switch (dtype) {
    case MLUOP_DTYPE_FLOAT: {
      float f;
      std::memcpy(&f, src, 4);
      return f;
    }
    case MLUOP_DTYPE_HALF: {
      std::uint16_t h;
      std::memcpy(&h, src, 2);
      return mlu::halfToFloat(h);
    }
    case MLUOP_DTYPE_BFLOAT16: {
      std::uint16_t h;
      std::memcpy(&h, src, 2);
      return mlu::bfloat16ToFloat(h);
    }
    case MLUOP_DTYPE_DOUBLE: {
      double d;
      std::memcpy(&d, src, 8);
      return d;
    }
    case MLUOP_DTYPE_INT8: {
      std::int8_t x;
      std::memcpy(&x, src, 1);
      return x;
    }
    case MLUOP_DTYPE_INT16: {
      std::int16_t x;
      std::memcpy(&x, src, 2);
      return x;
    }
    case MLUOP_DTYPE_INT32: {
      std::int32_t x;
      std::memcpy(&x, src, 4);
      return x;
    }
    case MLUOP_DTYPE_INT64: {
      std::int64_t x;
      std::memcpy(&x, src, 8);
      return static_cast<double>(x);
    }
    case MLUOP_DTYPE_UINT8: {
      std::uint8_t x;
      std::memcpy(&x, src, 1);
      return x;
    }
    case MLUOP_DTYPE_BOOL: {
      std::uint8_t x;
      std::memcpy(&x, src, 1);
      return x != 0;
    }
    default:
      ADD_FAILURE() << "decode: bad dtype";
      return 0;
  }
}

// Contiguous strides for dims.
inline Dims contiguousStrides(const Dims& dims) {
  Dims s(dims.size());
  std::int64_t acc = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

// A tensor whose storage is either simulated device memory (mlurtMalloc) or host memory, with a
// descriptor. Values are given and read in row-major order of the logical shape, whatever the strides.
class Tensor {
 public:
  // strides empty: contiguous. values empty: left uninitialized (device) / zero (host).
  static Tensor device(mluopDataType_t dtype, const Dims& dims, const std::vector<double>& values = {},
                       const Dims& strides = {}) {
    return Tensor(true, dtype, dims, values, strides);
  }
  static Tensor host(mluopDataType_t dtype, const Dims& dims, const std::vector<double>& values = {},
                     const Dims& strides = {}) {
    return Tensor(false, dtype, dims, values, strides);
  }

  Tensor(Tensor&& o) noexcept { *this = std::move(o); }
  Tensor& operator=(Tensor&& o) noexcept {
    std::swap(desc_, o.desc_);
    std::swap(data_, o.data_);
    std::swap(on_device_, o.on_device_);
    host_storage_ = std::move(o.host_storage_);
    view_ = o.view_;
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() {
    if (desc_ != nullptr) mluopDestroyTensorDescriptor(desc_);
    if (on_device_ && data_ != nullptr) mlurtFree(data_);
  }

  mluopTensorDescriptor_t desc() const { return desc_; }
  void* data() const { return data_; }
  // The view the C++ side (mlu::reference::run) takes.
  const mlu::TensorView& view() const { return view_; }
  std::int64_t numel() const { return view_.numel(); }

  // All elements in row-major order, as float64 (device memory is host-addressable in the simulation;
  // synchronize the queue first).
  std::vector<double> values() const {
    std::vector<double> out(static_cast<std::size_t>(numel()));
    const std::size_t es = view_.elementSize();
    for (std::int64_t i = 0; i < numel(); ++i) {
      out[static_cast<std::size_t>(i)] =
          decode(view_.dtype, static_cast<const char*>(data_) + static_cast<std::size_t>(offset(i)) * es);
    }
    return out;
  }

  void setValues(const std::vector<double>& values) {
    ASSERT_EQ(static_cast<std::int64_t>(values.size()), numel());
    const std::size_t es = view_.elementSize();
    for (std::int64_t i = 0; i < numel(); ++i) {
      encode(view_.dtype, values[static_cast<std::size_t>(i)],
             static_cast<char*>(data_) + static_cast<std::size_t>(offset(i)) * es);
    }
  }

 private:
  Tensor(bool on_device, mluopDataType_t dtype, const Dims& dims, const std::vector<double>& values,
         const Dims& strides)
      : on_device_(on_device) {
    const Dims st = strides.empty() ? contiguousStrides(dims) : strides;
    EXPECT_EQ(mluopCreateTensorDescriptor(&desc_), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(mluopSetTensorDescriptorEx(desc_, MLUOP_LAYOUT_ARRAY, dtype, static_cast<int>(dims.size()),
                                         dims.data(), st.data()),
              MLUOP_STATUS_SUCCESS)
        << mluopGetLastErrorMessage();
    view_.dtype = dtype;
    view_.ndim = static_cast<int>(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) {
      view_.dims[i] = dims[i];
      view_.strides[i] = st[i];
    }
    view_.present = true;
    const std::size_t bytes = std::max<std::size_t>(view_.extentBytes(), 1);
    if (on_device_) {
      EXPECT_EQ(mlurtMalloc(&data_, bytes), MLURT_SUCCESS) << mlurtGetLastErrorMessage();
      std::memset(data_, 0, bytes);
    } else {
      host_storage_.assign(bytes, 0);
      data_ = host_storage_.data();
    }
    view_.data = data_;
    if (!values.empty()) setValues(values);
  }

  std::int64_t offset(std::int64_t linear) const {
    std::int64_t off = 0;
    for (int d = view_.ndim - 1; d >= 0; --d) {
      off += (linear % view_.dim(d)) * view_.stride(d);
      linear /= view_.dim(d);
    }
    return off;
  }

  mluopTensorDescriptor_t desc_ = nullptr;
  void* data_ = nullptr;
  bool on_device_ = false;
  std::vector<unsigned char> host_storage_;
  mlu::TensorView view_;
};

// A handle on device 0 with a queue of its own.
class Handle {
 public:
  Handle() {
    EXPECT_EQ(mlurtQueueCreate(&queue_), MLURT_SUCCESS);
    EXPECT_EQ(mluopCreate(&handle_), MLUOP_STATUS_SUCCESS);
    EXPECT_EQ(mluopSetQueue(handle_, queue_), MLUOP_STATUS_SUCCESS);
  }
  ~Handle() {
    mluopDestroy(handle_);
    mlurtQueueDestroy(queue_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  mluopHandle_t get() const { return handle_; }
  operator mluopHandle_t() const { return handle_; }
  void sync() const { ASSERT_EQ(mlurtQueueSync(queue_), MLURT_SUCCESS) << mlurtGetLastErrorMessage(); }

 private:
  mlurtQueue_t queue_ = nullptr;
  mluopHandle_t handle_ = nullptr;
};

// Deterministic values in [lo, hi).
inline std::vector<double> randomValues(std::int64_t n, std::uint32_t seed, double lo = -1.0,
                                        double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

// Default comparison tolerances per dtype (atol, rtol), as DESIGN.md's autocompare defaults.
struct Tolerance {
  double atol;
  double rtol;
};
inline Tolerance toleranceFor(mluopDataType_t dtype) {
  switch (dtype) {
    case MLUOP_DTYPE_HALF:
      return {1e-3, 1e-3};
    case MLUOP_DTYPE_BFLOAT16:
      return {1e-2, 1e-2};
    case MLUOP_DTYPE_DOUBLE:
      return {1e-12, 1e-12};
    default:
      return {1e-5, 1e-5};
  }
}

// Expects |actual - expected| <= atol + rtol * |expected| elementwise (NaN equals NaN).
inline void expectClose(const std::vector<double>& actual, const std::vector<double>& expected, Tolerance tol,
                        const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    if ((std::isnan(a) && std::isnan(e)) || a == e) continue;  // equal infinities too
    if (!(std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e))) {
      ADD_FAILURE() << what << " element " << i << ": got " << a << ", expected " << e;
      if (++reported >= 5) return;
    }
  }
}

// d loss / d x_i for every i by central differences: (loss(x + h e_i) - loss(x - h e_i)) / 2h.
inline std::vector<double> numericalGradient(const std::function<double(const std::vector<double>&)>& loss,
                                             std::vector<double> x, double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = loss(x);
    x[i] = saved - h;
    const double minus = loss(x);
    x[i] = saved;
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// A host tensor with the same dtype and shape as t (contiguous), for the reference's outputs.
inline Tensor hostLike(const Tensor& t) {
  Dims dims(t.view().dims.begin(), t.view().dims.begin() + t.view().ndim);
  return Tensor::host(t.view().dtype, dims);
}

}  // namespace optest
