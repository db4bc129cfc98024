// device_query: prints every simulated MLU's properties, then checks an H2D -> D2D -> D2H round trip.
#include <mlu/mlurt.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace {

// Stops the program with the runtime's message when a call fails.
void check(mlurtStatus_t status, const char* what) {
  if (status != MLURT_SUCCESS) {
    std::fprintf(stderr, "device_query: %s failed: %s\n  %s\n", what, mlurtGetErrorString(status),
                 mlurtGetLastErrorMessage());
    std::exit(1);
  }
}

}  // namespace

int main() {
  int count = 0;
  check(mlurtGetDeviceCount(&count), "mlurtGetDeviceCount");
  std::printf("%d simulated MLU device(s)\n", count);
  for (int d = 0; d < count; ++d) {
    mlurtDeviceProp_t prop;
    check(mlurtGetDeviceProperties(&prop, d), "mlurtGetDeviceProperties");
    check(mlurtSetDevice(d), "mlurtSetDevice");
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    check(mlurtMemGetInfo(&free_bytes, &total_bytes), "mlurtMemGetInfo");
    std::printf("device %d: %s\n", d, prop.name);
    std::printf("  cores            %d\n", prop.coreCount);
    std::printf("  memory           %zu bytes (%zu MiB), %zu free\n", prop.totalMem, prop.totalMem >> 20,
                free_bytes);
    std::printf("  alignment        %zu bytes\n", prop.memAlignment);
    std::printf("  address range    [%#zx, %#zx)\n", static_cast<size_t>(prop.addressBase),
                static_cast<size_t>(prop.addressLimit));
  }

  // Round trip through device memory: host -> device 0 -> last device -> host.
  constexpr size_t kCount = 1 << 20;
  std::vector<float> input(kCount);
  std::iota(input.begin(), input.end(), 0.5f);
  std::vector<float> output(kCount, -1.0f);
  const size_t bytes = kCount * sizeof(float);

  void* a = nullptr;
  void* b = nullptr;
  check(mlurtSetDevice(0), "mlurtSetDevice");
  check(mlurtMalloc(&a, bytes), "mlurtMalloc");
  check(mlurtSetDevice(count - 1), "mlurtSetDevice");
  check(mlurtMalloc(&b, bytes), "mlurtMalloc");
  check(mlurtMemcpy(a, input.data(), bytes, MLURT_MEMCPY_HOST_TO_DEVICE), "mlurtMemcpy H2D");
  check(mlurtMemcpy(b, a, bytes, MLURT_MEMCPY_DEVICE_TO_DEVICE), "mlurtMemcpy D2D");
  check(mlurtMemcpy(output.data(), b, bytes, MLURT_MEMCPY_DEVICE_TO_HOST), "mlurtMemcpy D2H");
  check(mlurtFree(a), "mlurtFree");
  check(mlurtFree(b), "mlurtFree");

  const bool same = input == output;
  std::printf("round trip H2D -> D2D (device 0 -> device %d) -> D2H of %zu bytes: %s\n", count - 1, bytes,
              same ? "OK" : "MISMATCH");
  return same ? 0 : 1;
}
