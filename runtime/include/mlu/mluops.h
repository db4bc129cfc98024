/*
 * mluops.h — the simulated MLU kernel library (libmluops.so), a CNNL-shaped C API.
 *
 * A handle is bound to a runtime queue; every op validates its arguments (MLUOP_STATUS_BAD_PARAM with a
 * message from mluopGetLastErrorMessage saying what was wrong) and enqueues its kernel on the handle's
 * queue: ops never block the caller. Tensors are described by descriptors (layout, dtype, 0-8 dims,
 * strides in elements) and passed as device pointers from mlurtMalloc. The ops themselves are declared
 * from the op schema (mlu/mluops_schema.h), one row per op.
 *
 * Environment (read when the library is loaded; a malformed value stops the program, exit 2):
 *  MLU_SIM_FAULT  comma-separated op:kind[=value][@fraction] items planting known bugs (see docs/kernels.md).
 */
#ifndef MLU_MLUOPS_H_
#define MLU_MLUOPS_H_

#include <mlu/mluops_schema.h>
#include <mlu/mlurt.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MLUOP_API __attribute__((visibility("default")))
#else
#define MLUOP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Result of every kernel-library call. */
typedef enum mluopStatus_t {
  MLUOP_STATUS_SUCCESS = 0,          /* the call succeeded (the kernel is enqueued) */
  MLUOP_STATUS_NOT_INITIALIZED = 1,  /* NULL or destroyed handle or descriptor */
  MLUOP_STATUS_ALLOC_FAILED = 2,     /* host or device memory could not be allocated */
  MLUOP_STATUS_BAD_PARAM = 3,        /* an argument is invalid: see mluopGetLastErrorMessage */
  MLUOP_STATUS_INTERNAL_ERROR = 4,   /* a bug in the library */
  MLUOP_STATUS_EXECUTION_FAILED = 5, /* the runtime refused to run the kernel */
  MLUOP_STATUS_NOT_SUPPORTED = 6     /* valid, but the device cannot do it (e.g. float64) */
} mluopStatus_t;

/* Element types. float64 is described but NOT_SUPPORTED by device ops (the CPU reference has it). */
typedef enum mluopDataType_t {
  MLUOP_DTYPE_INVALID = 0,
  MLUOP_DTYPE_FLOAT = 1,    /* float32 */
  MLUOP_DTYPE_HALF = 2,     /* IEEE float16 */
  MLUOP_DTYPE_BFLOAT16 = 3, /* bfloat16 */
  MLUOP_DTYPE_DOUBLE = 4,   /* float64 */
  MLUOP_DTYPE_INT8 = 5,
  MLUOP_DTYPE_INT16 = 6,
  MLUOP_DTYPE_INT32 = 7,
  MLUOP_DTYPE_INT64 = 8,
  MLUOP_DTYPE_UINT8 = 9,
  MLUOP_DTYPE_BOOL = 10
} mluopDataType_t;

/* Tensor layouts: NCHW/NHWC for 4-d image tensors, ARRAY for anything else. */
typedef enum mluopTensorLayout_t {
  MLUOP_LAYOUT_ARRAY = 0,
  MLUOP_LAYOUT_NCHW = 1,
  MLUOP_LAYOUT_NHWC = 2
} mluopTensorLayout_t;

/* Loss reductions. */
typedef enum mluopReduction_t {
  MLUOP_REDUCTION_NONE = 0,
  MLUOP_REDUCTION_MEAN = 1,
  MLUOP_REDUCTION_SUM = 2
} mluopReduction_t;

#define MLUOP_DIM_MAX 8

typedef struct mluopContext* mluopHandle_t;
typedef struct mluopTensorStruct* mluopTensorDescriptor_t;
typedef struct mluopConvolutionStruct* mluopConvolutionDescriptor_t;

/* ---- errors ---- */

/* Name of a status, e.g. "MLUOP_STATUS_BAD_PARAM". */
MLUOP_API const char* mluopGetErrorString(mluopStatus_t status);
/* What was wrong with the calling thread's last failing call ("" if none); valid until its next failure. */
MLUOP_API const char* mluopGetLastErrorMessage(void);

/* ---- dtypes ---- */

/* Bytes per element of a dtype (0 for INVALID or an unknown value). */
MLUOP_API size_t mluopGetSizeOfDataType(mluopDataType_t dtype);
/* Lower-case name of a dtype: "float32", "float16", "bfloat16", ... ("invalid" for unknown values). */
MLUOP_API const char* mluopGetNameOfDataType(mluopDataType_t dtype);
/* float32 -> float16 bits, rounding to nearest even (overflow gives inf, NaN stays NaN). */
MLUOP_API uint16_t mluopFloatToHalf(float value);
/* float16 bits -> float32 (exact). */
MLUOP_API float mluopHalfToFloat(uint16_t bits);
/* float32 -> bfloat16 bits, rounding to nearest even (NaN stays NaN). */
MLUOP_API uint16_t mluopFloatToBfloat16(float value);
/* bfloat16 bits -> float32 (exact). */
MLUOP_API float mluopBfloat16ToFloat(uint16_t bits);

/* ---- handle ---- */

/* Creates a handle on the calling thread's current device, bound to its default queue. */
MLUOP_API mluopStatus_t mluopCreate(mluopHandle_t* handle);
/* Destroys a handle (it does not wait for its queue). */
MLUOP_API mluopStatus_t mluopDestroy(mluopHandle_t handle);
/* Binds the handle to a queue (NULL: the default queue of the handle's device). */
MLUOP_API mluopStatus_t mluopSetQueue(mluopHandle_t handle, mlurtQueue_t queue);
/* The queue the handle enqueues on. */
MLUOP_API mluopStatus_t mluopGetQueue(mluopHandle_t handle, mlurtQueue_t* queue);

/* ---- tensor descriptors ---- */

/* Creates an empty tensor descriptor (set it before use). */
MLUOP_API mluopStatus_t mluopCreateTensorDescriptor(mluopTensorDescriptor_t* desc);
/* Destroys a tensor descriptor. */
MLUOP_API mluopStatus_t mluopDestroyTensorDescriptor(mluopTensorDescriptor_t desc);
/* Sets layout, dtype and dims (0-8; a 0-d tensor is a scalar) with contiguous row-major strides. */
MLUOP_API mluopStatus_t mluopSetTensorDescriptor(mluopTensorDescriptor_t desc, mluopTensorLayout_t layout,
                                                 mluopDataType_t dtype, int dimNb, const int64_t dims[]);
/* Sets layout, dtype, dims and strides (in elements, non-negative; any overlap-free or broadcast view). */
MLUOP_API mluopStatus_t mluopSetTensorDescriptorEx(mluopTensorDescriptor_t desc, mluopTensorLayout_t layout,
                                                   mluopDataType_t dtype, int dimNb, const int64_t dims[],
                                                   const int64_t strides[]);
/* Reads a descriptor back; dims and strides (may be NULL) receive dimNb values each. */
MLUOP_API mluopStatus_t mluopGetTensorDescriptor(const mluopTensorDescriptor_t desc,
                                                 mluopTensorLayout_t* layout, mluopDataType_t* dtype,
                                                 int* dimNb, int64_t dims[], int64_t strides[]);
/* Number of elements (product of dims) of a descriptor. */
MLUOP_API mluopStatus_t mluopGetTensorElementCount(const mluopTensorDescriptor_t desc, int64_t* count);

/* ---- convolution descriptor ---- */

/* Creates a convolution descriptor (defaults: padding 0, stride 1, dilation 1, groups 1). */
MLUOP_API mluopStatus_t mluopCreateConvolutionDescriptor(mluopConvolutionDescriptor_t* desc);
/* Destroys a convolution descriptor. */
MLUOP_API mluopStatus_t mluopDestroyConvolutionDescriptor(mluopConvolutionDescriptor_t desc);
/* Sets padding {top/bottom, left/right}, stride {h, w}, dilation {h, w} and groups of a 2-d convolution. */
MLUOP_API mluopStatus_t mluopSetConvolutionDescriptor(mluopConvolutionDescriptor_t desc, const int padding[2],
                                                      const int stride[2], const int dilation[2], int groups);
/* Reads a convolution descriptor back. */
MLUOP_API mluopStatus_t mluopGetConvolutionDescriptor(const mluopConvolutionDescriptor_t desc, int padding[2],
                                                      int stride[2], int dilation[2], int* groups);

/* ---- workspace sizes ---- */

/* Scratch bytes mluopConvolutionForward needs for these shapes. */
MLUOP_API mluopStatus_t mluopGetConvolutionForwardWorkspaceSize(
    mluopHandle_t handle, const mluopConvolutionDescriptor_t conv_desc, const mluopTensorDescriptor_t x_desc,
    const mluopTensorDescriptor_t w_desc, const mluopTensorDescriptor_t y_desc, size_t* size);
/* Scratch bytes mluopConvolutionBackwardData needs. */
MLUOP_API mluopStatus_t mluopGetConvolutionBackwardDataWorkspaceSize(
    mluopHandle_t handle, const mluopConvolutionDescriptor_t conv_desc,
    const mluopTensorDescriptor_t grad_output_desc, const mluopTensorDescriptor_t w_desc,
    const mluopTensorDescriptor_t grad_input_desc, size_t* size);
/* Scratch bytes mluopConvolutionBackwardFilter needs. */
MLUOP_API mluopStatus_t mluopGetConvolutionBackwardFilterWorkspaceSize(
    mluopHandle_t handle, const mluopConvolutionDescriptor_t conv_desc, const mluopTensorDescriptor_t x_desc,
    const mluopTensorDescriptor_t grad_output_desc, const mluopTensorDescriptor_t grad_w_desc, size_t* size);

/* ---- ops, declared from the schema ---- */

#define MLUOP_DECLARE_OP(name, Symbol, ARGS) \
  MLUOP_API mluopStatus_t Symbol(mluopHandle_t handle MLUOP_PARAMS(ARGS));
MLUOP_FOR_EACH_OP(MLUOP_DECLARE_OP)
#undef MLUOP_DECLARE_OP

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLU_MLUOPS_H_ */
