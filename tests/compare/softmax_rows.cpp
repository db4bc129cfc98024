// softmax_rows — a plain program (no opscope API) for the perturbation-check tests: in float16, bfloat16
// and float32, the softmax and log-softmax of 64 rows of 1,024 logits (normal, standard deviation 3: long
// rows, where a kernel that sums in its storage dtype drifts), then add and maximum of two such tensors
// (commutative: their operands may be swapped). Prints each dtype's sum of the softmax (about 64).
//
// usage: softmax_rows
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr std::int64_t kRows = 64, kCols = 1024, kCount = kRows * kCols;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "softmax_rows: %s failed: %s %s\n", what, mlurtGetLastErrorMessage(),
                 mluopGetLastErrorMessage());
    std::exit(1);
  }
}

// Normal values, standard deviation 3, from a fixed seed (Box-Muller on a 64-bit LCG).
std::vector<float> logits(std::uint64_t seed) {
  std::vector<float> out(kCount);
  auto uniform = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(seed >> 11) + 0.5) * 0x1p-53;
  };
  for (float& v : out)
    v = static_cast<float>(3 * std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
  return out;
}

std::vector<std::uint16_t> bits(const std::vector<float>& values, mluopDataType_t dtype) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    out[i] = dtype == MLUOP_DTYPE_HALF ? mluopFloatToHalf(values[i]) : mluopFloatToBfloat16(values[i]);
  return out;
}

float valueOf(const std::vector<std::uint8_t>& bytes, std::size_t i, mluopDataType_t dtype) {
  if (dtype == MLUOP_DTYPE_FLOAT) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return dtype == MLUOP_DTYPE_HALF ? mluopHalfToFloat(h) : mluopBfloat16ToFloat(h);
}

}  // namespace

int main() {
  mluopHandle_t handle = nullptr;
  check(mluopCreate(&handle) == MLUOP_STATUS_SUCCESS, "mluopCreate");
  for (const mluopDataType_t dtype : {MLUOP_DTYPE_HALF, MLUOP_DTYPE_BFLOAT16, MLUOP_DTYPE_FLOAT}) {
    const std::size_t size = mluopGetSizeOfDataType(dtype);
    const std::size_t bytes = static_cast<std::size_t>(kCount) * size;
    void *a = nullptr, *b = nullptr, *y = nullptr, *c = nullptr;
    check(mlurtMalloc(&a, bytes) == MLURT_SUCCESS && mlurtMalloc(&b, bytes) == MLURT_SUCCESS &&
              mlurtMalloc(&y, bytes) == MLURT_SUCCESS && mlurtMalloc(&c, bytes) == MLURT_SUCCESS,
          "mlurtMalloc");
    const std::vector<float> xa = logits(1), xb = logits(2);
    if (dtype == MLUOP_DTYPE_FLOAT) {
      check(mlurtMemcpy(a, xa.data(), bytes, MLURT_MEMCPY_HOST_TO_DEVICE) == MLURT_SUCCESS, "copy a");
      check(mlurtMemcpy(b, xb.data(), bytes, MLURT_MEMCPY_HOST_TO_DEVICE) == MLURT_SUCCESS, "copy b");
    } else {
      check(mlurtMemcpy(a, bits(xa, dtype).data(), bytes, MLURT_MEMCPY_HOST_TO_DEVICE) == MLURT_SUCCESS,
            "copy a");
      check(mlurtMemcpy(b, bits(xb, dtype).data(), bytes, MLURT_MEMCPY_HOST_TO_DEVICE) == MLURT_SUCCESS,
            "copy b");
    }
    mluopTensorDescriptor_t desc = nullptr;
    check(mluopCreateTensorDescriptor(&desc) == MLUOP_STATUS_SUCCESS, "descriptor");
    const std::int64_t dims[] = {kRows, kCols}, strides[] = {kCols, 1};
    check(
        mluopSetTensorDescriptorEx(desc, MLUOP_LAYOUT_ARRAY, dtype, 2, dims, strides) == MLUOP_STATUS_SUCCESS,
        "descriptor");
    check(mluopLogSoftmaxForward(handle, 1, desc, a, desc, c) == MLUOP_STATUS_SUCCESS, "log_softmax");
    check(mluopAdd(handle, 1.0f, desc, a, desc, b, desc, c) == MLUOP_STATUS_SUCCESS, "add");
    check(mluopMaximum(handle, desc, a, desc, b, desc, c) == MLUOP_STATUS_SUCCESS, "maximum");
    check(mluopSoftmaxForward(handle, 1, desc, a, desc, y) == MLUOP_STATUS_SUCCESS, "softmax");
    std::vector<std::uint8_t> out(bytes);
    check(mlurtMemcpy(out.data(), y, bytes, MLURT_MEMCPY_DEVICE_TO_HOST) == MLURT_SUCCESS, "copy y");
    double sum = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(kCount); ++i) sum += valueOf(out, i, dtype);
    std::printf("%s softmax sum %.4f\n", mluopGetNameOfDataType(dtype), sum);
    mluopDestroyTensorDescriptor(desc);
    for (void* p : {a, b, y, c}) mlurtFree(p);
  }
  mluopDestroy(handle);
  return 0;
}
