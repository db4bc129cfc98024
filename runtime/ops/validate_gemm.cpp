// Argument checks of the matrix-product and convolution ops.
#include "validate.h"

namespace mlu {

Status validate(const matmul_args&) { return notSupported("not implemented yet"); }

Status validate(const linear_args&) { return notSupported("not implemented yet"); }

Status validate(const conv2d_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const conv2d_backward_data_args&) { return notSupported("not implemented yet"); }

Status validate(const conv2d_backward_filter_args&) { return notSupported("not implemented yet"); }

Status validate(const conv2d_backward_bias_args&) { return notSupported("not implemented yet"); }

}  // namespace mlu
