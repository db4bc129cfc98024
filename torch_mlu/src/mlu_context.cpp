#include "mlu_context.h"

#include "streams.h"

#include <c10/util/Exception.h>

#include <array>
#include <string>
#include <vector>

namespace torch_mlu {

void checkRuntime(mlurtStatus_t status, std::string_view call) {
  if (status == MLURT_SUCCESS) return;
  const char* message = mlurtGetLastErrorMessage();
  TORCH_CHECK(false, "torch_mlu: ", call, " failed: ", mlurtGetErrorString(status),
              (message && *message) ? std::string(": ") + message : std::string());
}

void checkOps(mluopStatus_t status, std::string_view op) {
  if (status == MLUOP_STATUS_SUCCESS) return;
  const char* message = mluopGetLastErrorMessage();
  TORCH_CHECK(false, "torch_mlu: the kernel library's ", op, " failed: ", mluopGetErrorString(status),
              (message && *message) ? std::string(": ") + message : std::string());
}

int currentDevice() {
  int device = 0;
  checkRuntime(mlurtGetDevice(&device), "mlurtGetDevice");
  return device;
}

int deviceCount() {
  int count = 0;
  if (mlurtGetDeviceCount(&count) != MLURT_SUCCESS) return 0;
  return count;
}

namespace {

// The handles of one thread, one per device, destroyed when the thread ends. The kernel library's
// handles are not shared between threads (PyTorch runs backward on a thread of its own). Each is bound to
// the thread's current stream of its device, rebound when that changes.
class ThreadHandles {
 public:
  ~ThreadHandles() {
    for (const Bound& b : handles_) {
      if (b.handle != nullptr) mluopDestroy(b.handle);
    }
  }
  mluopHandle_t get(int device) {
    if (device >= static_cast<int>(handles_.size())) handles_.resize(device + 1);
    Bound& b = handles_[device];
    if (b.handle == nullptr) checkOps(mluopCreate(&b.handle), "mluopCreate");
    const c10::StreamId stream = currentStreamId(device);
    if (b.queue == nullptr || stream != b.stream) {
      mlurtQueue_t queue = queueOf(device, stream);
      checkOps(mluopSetQueue(b.handle, queue), "mluopSetQueue");
      b.queue = queue;
      b.stream = stream;
    }
    return b.handle;
  }

 private:
  struct Bound {
    mluopHandle_t handle = nullptr;
    mlurtQueue_t queue = nullptr;  // of stream `stream` of the device
    c10::StreamId stream = 0;
  };
  std::vector<Bound> handles_;
};

}  // namespace

mluopHandle_t handle() {
  thread_local ThreadHandles handles;
  return handles.get(currentDevice());
}

std::optional<mluopDataType_t> toMluDtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return MLUOP_DTYPE_FLOAT;
    case at::kHalf:
      return MLUOP_DTYPE_HALF;
    case at::kBFloat16:
      return MLUOP_DTYPE_BFLOAT16;
    case at::kDouble:
      return MLUOP_DTYPE_DOUBLE;
    case at::kChar:
      return MLUOP_DTYPE_INT8;
    case at::kShort:
      return MLUOP_DTYPE_INT16;
    case at::kInt:
      return MLUOP_DTYPE_INT32;
    case at::kLong:
      return MLUOP_DTYPE_INT64;
    case at::kByte:
      return MLUOP_DTYPE_UINT8;
    case at::kBool:
      return MLUOP_DTYPE_BOOL;
    default:
      return std::nullopt;
  }
}

Descriptor::Descriptor(const at::Tensor& t) : Descriptor(t, t.sizes(), t.strides()) {}

Descriptor::Descriptor(const at::Tensor& t, at::IntArrayRef sizes, at::IntArrayRef strides) {
  const auto dtype = toMluDtype(t.scalar_type());
  TORCH_CHECK(dtype.has_value(), "torch_mlu: the MLU has no ", t.scalar_type(), " tensors");
  TORCH_CHECK(sizes.size() <= MLUOP_DIM_MAX, "torch_mlu: the MLU's kernels take at most ", MLUOP_DIM_MAX,
              " dimensions, got ", sizes.size());
  checkOps(mluopCreateTensorDescriptor(&desc_), "mluopCreateTensorDescriptor");
  const mluopStatus_t s = mluopSetTensorDescriptorEx(
      desc_, MLUOP_LAYOUT_ARRAY, *dtype, static_cast<int>(sizes.size()), sizes.data(), strides.data());
  if (s != MLUOP_STATUS_SUCCESS) {
    mluopDestroyTensorDescriptor(desc_);
    desc_ = nullptr;
    checkOps(s, "mluopSetTensorDescriptorEx");
  }
}

Descriptor::~Descriptor() {
  if (desc_ != nullptr) mluopDestroyTensorDescriptor(desc_);
}

}  // namespace torch_mlu
