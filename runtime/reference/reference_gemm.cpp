// CPU reference of the matrix-product and convolution ops.
#include <mlu/reference.h>

#include "../ops/validate.h"

namespace mlu::reference {

Status run(const matmul_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const linear_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const conv2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const conv2d_backward_data_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const conv2d_backward_filter_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const conv2d_backward_bias_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

}  // namespace mlu::reference
