// fault_probe — runs one op under whatever MLU_SIM_FAULT the environment holds and prints what happened,
// for the fault-injection tests (which must set the variable before the library loads).
//   fault_probe add|copy_strided N
// prints: "status <mluopStatus_t name>", "values <N output values>", "slack_changed <bytes>", "ms <kernel
// time>"
#include <mlu/mluops.h>
#include <mlu/mlurt.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kSlack =
    64;  // bytes after the output inside its allocation, to catch writes past the end

mluopTensorDescriptor_t vectorDesc(std::int64_t n, std::int64_t stride) {
  mluopTensorDescriptor_t d = nullptr;
  mluopCreateTensorDescriptor(&d);
  mluopSetTensorDescriptorEx(d, MLUOP_LAYOUT_ARRAY, MLUOP_DTYPE_FLOAT, 1, &n, &stride);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fault_probe add|copy_strided N\n");
    return 2;
  }
  const std::string op = argv[1];
  const std::int64_t n = std::atoll(argv[2]);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);

  // Input: 2n floats 0, 1, 2, ...; the op reads either all of it densely or every second one.
  std::vector<float> host(static_cast<std::size_t>(2 * n));
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  void* in = nullptr;
  void* ones = nullptr;
  void* out = nullptr;
  mlurtMalloc(&in, 2 * bytes);
  mlurtMalloc(&ones, bytes);
  mlurtMalloc(&out, bytes + kSlack);
  mlurtMemcpy(in, host.data(), 2 * bytes, MLURT_MEMCPY_HOST_TO_DEVICE);
  std::vector<float> one(static_cast<std::size_t>(n), 1.0f);
  mlurtMemcpy(ones, one.data(), bytes, MLURT_MEMCPY_HOST_TO_DEVICE);
  mlurtMemset(out, 0, bytes + kSlack);

  mluopHandle_t h = nullptr;
  mluopCreate(&h);
  mluopTensorDescriptor_t dense = vectorDesc(n, 1);
  mluopTensorDescriptor_t strided = vectorDesc(n, 2);
  const auto start = std::chrono::steady_clock::now();
  mluopStatus_t status = MLUOP_STATUS_BAD_PARAM;
  if (op == "add") {
    status = mluopAdd(h, 1.0f, dense, in, dense, ones, dense, out);  // out[i] = i + 1
  } else if (op == "copy_strided") {
    status = mluopCopy(h, strided, in, dense, out);  // out[i] = 2i (i if the strides are ignored)
  }
  std::printf("status %s\n", mluopGetErrorString(status));
  if (status != MLUOP_STATUS_SUCCESS) std::printf("message %s\n", mluopGetLastErrorMessage());
  mlurtDeviceSynchronize();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::vector<unsigned char> result(bytes + kSlack);
  mlurtMemcpy(result.data(), out, bytes + kSlack, MLURT_MEMCPY_DEVICE_TO_HOST);
  std::printf("values");
  for (std::int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, result.data() + i * 4, 4);
    std::printf(" %g", static_cast<double>(v));
  }
  std::size_t changed = 0;
  for (std::size_t i = bytes; i < bytes + kSlack; ++i) changed += result[i] != 0;
  std::printf("\nslack_changed %zu\nms %.1f\n", changed, ms);

  mluopDestroyTensorDescriptor(dense);
  mluopDestroyTensorDescriptor(strided);
  mluopDestroy(h);
  mlurtFree(in);
  mlurtFree(ones);
  mlurtFree(out);
  return 0;
}
