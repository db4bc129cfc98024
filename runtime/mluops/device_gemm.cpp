// Device kernels of the matrix-product and convolution ops.
#include "device.h"

namespace mlu {

Status device(const Launch&, const matmul_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const linear_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const conv2d_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const conv2d_backward_data_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const conv2d_backward_filter_args&) {
  return notSupported("not implemented yet");
}

Status device(const Launch&, const conv2d_backward_bias_args&) { return notSupported("not implemented yet"); }

}  // namespace mlu

extern "C" {

MLUOP_API mluopStatus_t mluopGetConvolutionForwardWorkspaceSize(mluopHandle_t,
                                                                const mluopConvolutionDescriptor_t,
                                                                const mluopTensorDescriptor_t,
                                                                const mluopTensorDescriptor_t,
                                                                const mluopTensorDescriptor_t, size_t* size) {
  if (size != nullptr) *size = 0;
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopGetConvolutionBackwardDataWorkspaceSize(
    mluopHandle_t, const mluopConvolutionDescriptor_t, const mluopTensorDescriptor_t,
    const mluopTensorDescriptor_t, const mluopTensorDescriptor_t, size_t* size) {
  if (size != nullptr) *size = 0;
  return MLUOP_STATUS_SUCCESS;
}

MLUOP_API mluopStatus_t mluopGetConvolutionBackwardFilterWorkspaceSize(
    mluopHandle_t, const mluopConvolutionDescriptor_t, const mluopTensorDescriptor_t,
    const mluopTensorDescriptor_t, const mluopTensorDescriptor_t, size_t* size) {
  if (size != nullptr) *size = 0;
  return MLUOP_STATUS_SUCCESS;
}

}  // extern "C"
