// The kernel library's C API apart from the ops: errors, dtypes, handles, descriptors, workspace sizes.
#include "context.h"
#include "cpu_features.h"
#include "fault.h"

#include "../common/raw_enum.h"

#include <mlu/dtype.h>

#include <fmt/format.h>

#include <memory>
#include <new>

namespace mlu {
namespace {

// Per thread by contract, as mlurtGetLastErrorMessage.
thread_local std::string tl_last_message;

template <typename Body>
mluopStatus_t guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return recordError(MLUOP_STATUS_ALLOC_FAILED, fmt::format("{}: out of host memory", function));
  } catch (const std::exception& e) {
    return recordError(MLUOP_STATUS_INTERNAL_ERROR,
                       fmt::format("{}: internal error: {}", function, e.what()));
  }
}

bool knownDtype(const mluopDataType_t& dtype) {
  const int raw = rawEnum(dtype);
  return raw > MLUOP_DTYPE_INVALID && raw <= MLUOP_DTYPE_BOOL;
}

mluopStatus_t nullArgument(const char* function, const char* argument) {
  return recordError(MLUOP_STATUS_BAD_PARAM, fmt::format("{}: {} is NULL", function, argument));
}

mluopStatus_t notInitialized(const char* function, const char* what) {
  return recordError(MLUOP_STATUS_NOT_INITIALIZED, fmt::format("{}: {} is NULL", function, what));
}

// Creates a C object owned by the caller until its Destroy function takes it back.
template <typename T>
T* createOwned() {
  return std::make_unique<T>().release();
}
template <typename T>
void destroyOwned(T* p) {
  std::unique_ptr<T> owned(p);
}

mluopStatus_t setTensor(const char* function, mluopTensorDescriptor_t desc, mluopTensorLayout_t layout,
                        mluopDataType_t dtype, int dimNb, const int64_t dims[], const int64_t strides[]) {
  if (desc == nullptr) return notInitialized(function, "desc");
  if (layout < MLUOP_LAYOUT_ARRAY || layout > MLUOP_LAYOUT_NHWC) {
    return recordError(MLUOP_STATUS_BAD_PARAM,
                       fmt::format("{}: unknown layout {}", function, static_cast<int>(layout)));
  }
  if (dtypeSize(dtype) == 0) {
    return recordError(MLUOP_STATUS_BAD_PARAM,
                       fmt::format("{}: unknown dtype {}", function, static_cast<int>(dtype)));
  }
  if (dimNb < 0 || dimNb > MLUOP_DIM_MAX) {
    return recordError(MLUOP_STATUS_BAD_PARAM,
                       fmt::format("{}: {} dims; a tensor has 0 to {}", function, dimNb, MLUOP_DIM_MAX));
  }
  if (dimNb > 0 && dims == nullptr) return nullArgument(function, "dims");
  if (layout != MLUOP_LAYOUT_ARRAY && dimNb != 4) {
    return recordError(MLUOP_STATUS_BAD_PARAM,
                       fmt::format("{}: layout {} needs 4 dims, got {}", function,
                                   layout == MLUOP_LAYOUT_NCHW ? "NCHW" : "NHWC", dimNb));
  }
  TensorView v;
  v.dtype = dtype;
  v.layout = layout;
  v.ndim = dimNb;
  for (int i = 0; i < dimNb; ++i) {
    if (dims[i] < 0) {
      return recordError(MLUOP_STATUS_BAD_PARAM,
                         fmt::format("{}: dims[{}] = {} is negative", function, i, dims[i]));
    }
    v.dims[static_cast<std::size_t>(i)] = dims[i];
    if (strides != nullptr) {
      if (strides[i] < 0) {
        return recordError(MLUOP_STATUS_BAD_PARAM,
                           fmt::format("{}: strides[{}] = {} is negative", function, i, strides[i]));
      }
      v.strides[static_cast<std::size_t>(i)] = strides[i];
    }
  }
  if (strides == nullptr) v.setContiguousStrides();
  desc->view = v;
  desc->set = true;
  return MLUOP_STATUS_SUCCESS;
}

}  // namespace

mluopStatus_t recordError(mluopStatus_t code, std::string message) {
  tl_last_message = std::move(message);
  return code;
}

mluopStatus_t recordError(const Status& status) { return recordError(status.code, status.message); }

}  // namespace mlu

using namespace mlu;

extern "C" {

MLUOP_API const char* mluopGetErrorString(mluopStatus_t status) {
  const int raw = rawEnum(status);
  if (raw < MLUOP_STATUS_SUCCESS || raw > MLUOP_STATUS_NOT_SUPPORTED) return "MLUOP_STATUS_UNKNOWN";
  switch (status) {
    case MLUOP_STATUS_SUCCESS:
      return "MLUOP_STATUS_SUCCESS";
    case MLUOP_STATUS_NOT_INITIALIZED:
      return "MLUOP_STATUS_NOT_INITIALIZED";
    case MLUOP_STATUS_ALLOC_FAILED:
      return "MLUOP_STATUS_ALLOC_FAILED";
    case MLUOP_STATUS_BAD_PARAM:
      return "MLUOP_STATUS_BAD_PARAM";
    case MLUOP_STATUS_INTERNAL_ERROR:
      return "MLUOP_STATUS_INTERNAL_ERROR";
    case MLUOP_STATUS_EXECUTION_FAILED:
      return "MLUOP_STATUS_EXECUTION_FAILED";
    case MLUOP_STATUS_NOT_SUPPORTED:
      return "MLUOP_STATUS_NOT_SUPPORTED";
  }
  return "MLUOP_STATUS_UNKNOWN";
}

MLUOP_API const char* mluopGetLastErrorMessage(void) { return tl_last_message.c_str(); }

MLUOP_API size_t mluopGetSizeOfDataType(mluopDataType_t dtype) {
  return knownDtype(dtype) ? dtypeSize(dtype) : 0;
}
MLUOP_API const char* mluopGetNameOfDataType(mluopDataType_t dtype) {
  return knownDtype(dtype) ? dtypeName(dtype).data() : "invalid";
}
MLUOP_API uint16_t mluopFloatToHalf(float value) { return floatToHalf(value); }
MLUOP_API float mluopHalfToFloat(uint16_t bits) { return halfToFloat(bits); }
MLUOP_API uint16_t mluopFloatToBfloat16(float value) { return floatToBfloat16(value); }
MLUOP_API float mluopBfloat16ToFloat(uint16_t bits) { return bfloat16ToFloat(bits); }

MLUOP_API mluopStatus_t mluopCreate(mluopHandle_t* handle) {
  if (handle == nullptr) return nullArgument("mluopCreate", "handle");
  return guarded("mluopCreate", [&] {
#if defined(MLU_DEVICE_AVX2)
    if (!cpuHasAvx2Fma()) {
      return recordError(
          MLUOP_STATUS_NOT_SUPPORTED,
          "mluopCreate: this libmluops was built for CPUs with AVX2 and FMA (OPSCOPE_DEVICE_AVX2), "
          "which this CPU lacks; rebuild with -DOPSCOPE_DEVICE_AVX2=OFF");
    }
#endif
    int device = 0;
    mlurtDeviceProp_t prop;
    if (mlurtGetDevice(&device) != MLURT_SUCCESS ||
        mlurtGetDeviceProperties(&prop, device) != MLURT_SUCCESS) {
      return recordError(MLUOP_STATUS_EXECUTION_FAILED,
                         fmt::format("mluopCreate: the runtime failed: {}", mlurtGetLastErrorMessage()));
    }
    mluopContext* ctx = createOwned<mluopContext>();
    ctx->device = device;
    ctx->cores = prop.coreCount;
    *handle = ctx;
    return MLUOP_STATUS_SUCCESS;
  });
}

MLUOP_API mluopStatus_t mluopDestroy(mluopHandle_t handle) {
  if (handle == nullptr) return notInitialized("mluopDestroy", "handle");
  destroyOwned(handle);
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopSetQueue(mluopHandle_t handle, mlurtQueue_t queue) {
  if (handle == nullptr) return notInitialized("mluopSetQueue", "handle");
  int device = -1;
  if (queue != nullptr && mlurtQueueGetDevice(queue, &device) != MLURT_SUCCESS) {
    return recordError(MLUOP_STATUS_BAD_PARAM, fmt::format("mluopSetQueue: {}", mlurtGetLastErrorMessage()));
  }
  if (queue != nullptr && device != handle->device) {
    return recordError(MLUOP_STATUS_BAD_PARAM,
                       fmt::format("mluopSetQueue: the queue is on device {} but the handle on device {}",
                                   device, handle->device));
  }
  handle->queue = queue;
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopGetQueue(mluopHandle_t handle, mlurtQueue_t* queue) {
  if (handle == nullptr) return notInitialized("mluopGetQueue", "handle");
  if (queue == nullptr) return nullArgument("mluopGetQueue", "queue");
  if (handle->queue != nullptr) {
    *queue = handle->queue;
    return MLUOP_STATUS_SUCCESS;
  }
  if (mlurtQueueGetDefault(handle->device, queue) != MLURT_SUCCESS) {
    return recordError(MLUOP_STATUS_EXECUTION_FAILED,
                       fmt::format("mluopGetQueue: {}", mlurtGetLastErrorMessage()));
  }
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopCreateTensorDescriptor(mluopTensorDescriptor_t* desc) {
  if (desc == nullptr) return nullArgument("mluopCreateTensorDescriptor", "desc");
  return guarded("mluopCreateTensorDescriptor", [&] {
    *desc = createOwned<mluopTensorStruct>();
    return MLUOP_STATUS_SUCCESS;
  });
}

MLUOP_API mluopStatus_t mluopDestroyTensorDescriptor(mluopTensorDescriptor_t desc) {
  if (desc == nullptr) return notInitialized("mluopDestroyTensorDescriptor", "desc");
  destroyOwned(desc);
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopSetTensorDescriptor(mluopTensorDescriptor_t desc, mluopTensorLayout_t layout,
                                                 mluopDataType_t dtype, int dimNb, const int64_t dims[]) {
  return setTensor("mluopSetTensorDescriptor", desc, layout, dtype, dimNb, dims, nullptr);
}

MLUOP_API mluopStatus_t mluopSetTensorDescriptorEx(mluopTensorDescriptor_t desc, mluopTensorLayout_t layout,
                                                   mluopDataType_t dtype, int dimNb, const int64_t dims[],
                                                   const int64_t strides[]) {
  if (strides == nullptr && dimNb > 0) return nullArgument("mluopSetTensorDescriptorEx", "strides");
  return setTensor("mluopSetTensorDescriptorEx", desc, layout, dtype, dimNb, dims, strides);
}

MLUOP_API mluopStatus_t mluopGetTensorDescriptor(const mluopTensorDescriptor_t desc,
                                                 mluopTensorLayout_t* layout, mluopDataType_t* dtype,
                                                 int* dimNb, int64_t dims[], int64_t strides[]) {
  if (desc == nullptr) return notInitialized("mluopGetTensorDescriptor", "desc");
  const TensorView& v = desc->view;
  if (layout != nullptr) *layout = v.layout;
  if (dtype != nullptr) *dtype = v.dtype;
  if (dimNb != nullptr) *dimNb = v.ndim;
  for (int i = 0; i < v.ndim; ++i) {
    if (dims != nullptr) dims[i] = v.dim(i);
    if (strides != nullptr) strides[i] = v.stride(i);
  }
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopGetTensorElementCount(const mluopTensorDescriptor_t desc, int64_t* count) {
  if (desc == nullptr) return notInitialized("mluopGetTensorElementCount", "desc");
  if (count == nullptr) return nullArgument("mluopGetTensorElementCount", "count");
  *count = desc->view.numel();
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopCreateConvolutionDescriptor(mluopConvolutionDescriptor_t* desc) {
  if (desc == nullptr) return nullArgument("mluopCreateConvolutionDescriptor", "desc");
  return guarded("mluopCreateConvolutionDescriptor", [&] {
    *desc = createOwned<mluopConvolutionStruct>();
    return MLUOP_STATUS_SUCCESS;
  });
}

MLUOP_API mluopStatus_t mluopDestroyConvolutionDescriptor(mluopConvolutionDescriptor_t desc) {
  if (desc == nullptr) return notInitialized("mluopDestroyConvolutionDescriptor", "desc");
  destroyOwned(desc);
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopSetConvolutionDescriptor(mluopConvolutionDescriptor_t desc, const int padding[2],
                                                      const int stride[2], const int dilation[2],
                                                      int groups) {
  constexpr const char* kFn = "mluopSetConvolutionDescriptor";
  if (desc == nullptr) return notInitialized(kFn, "desc");
  if (padding == nullptr) return nullArgument(kFn, "padding");
  if (stride == nullptr) return nullArgument(kFn, "stride");
  if (dilation == nullptr) return nullArgument(kFn, "dilation");
  for (int i = 0; i < 2; ++i) {
    if (padding[i] < 0)
      return recordError(MLUOP_STATUS_BAD_PARAM,
                         fmt::format("{}: padding[{}] = {} is negative", kFn, i, padding[i]));
    if (stride[i] < 1)
      return recordError(MLUOP_STATUS_BAD_PARAM,
                         fmt::format("{}: stride[{}] = {} must be >= 1", kFn, i, stride[i]));
    if (dilation[i] < 1)
      return recordError(MLUOP_STATUS_BAD_PARAM,
                         fmt::format("{}: dilation[{}] = {} must be >= 1", kFn, i, dilation[i]));
  }
  if (groups < 1)
    return recordError(MLUOP_STATUS_BAD_PARAM, fmt::format("{}: groups = {} must be >= 1", kFn, groups));
  desc->params =
      ConvParams{{padding[0], padding[1]}, {stride[0], stride[1]}, {dilation[0], dilation[1]}, groups};
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopGetConvolutionDescriptor(const mluopConvolutionDescriptor_t desc, int padding[2],
                                                      int stride[2], int dilation[2], int* groups) {
  if (desc == nullptr) return notInitialized("mluopGetConvolutionDescriptor", "desc");
  const ConvParams& p = desc->params;
  for (int i = 0; i < 2; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (padding != nullptr) padding[i] = p.padding[k];
    if (stride != nullptr) stride[i] = p.stride[k];
    if (dilation != nullptr) dilation[i] = p.dilation[k];
  }
  if (groups != nullptr) *groups = p.groups;
  return MLUOP_STATUS_SUCCESS;
}

}  // extern "C"

// Validate MLU_SIM_FAULT when the library loads, so that a malformed value stops the program before main.
__attribute__((constructor)) static void mluopsLoad() { (void)mlu::faults(); }
