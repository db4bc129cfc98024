// Argument checks of the fill, copy/cast, permute, broadcasting binary, unary and their backward, random
// (Philox) ops, sgd ops.
#include "validate.h"

namespace mlu {

Status validate(const fill_args&) { return notSupported("not implemented yet"); }

Status validate(const copy_args&) { return notSupported("not implemented yet"); }

Status validate(const permute_args&) { return notSupported("not implemented yet"); }

Status validate(const add_args&) { return notSupported("not implemented yet"); }

Status validate(const sub_args&) { return notSupported("not implemented yet"); }

Status validate(const mul_args&) { return notSupported("not implemented yet"); }

Status validate(const div_args&) { return notSupported("not implemented yet"); }

Status validate(const maximum_args&) { return notSupported("not implemented yet"); }

Status validate(const minimum_args&) { return notSupported("not implemented yet"); }

Status validate(const add_scalar_args&) { return notSupported("not implemented yet"); }

Status validate(const mul_scalar_args&) { return notSupported("not implemented yet"); }

Status validate(const neg_args&) { return notSupported("not implemented yet"); }

Status validate(const abs_args&) { return notSupported("not implemented yet"); }

Status validate(const exp_args&) { return notSupported("not implemented yet"); }

Status validate(const log_args&) { return notSupported("not implemented yet"); }

Status validate(const sqrt_args&) { return notSupported("not implemented yet"); }

Status validate(const rsqrt_args&) { return notSupported("not implemented yet"); }

Status validate(const tanh_args&) { return notSupported("not implemented yet"); }

Status validate(const sigmoid_args&) { return notSupported("not implemented yet"); }

Status validate(const relu_args&) { return notSupported("not implemented yet"); }

Status validate(const relu_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const sigmoid_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const tanh_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const dropout_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const dropout_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const uniform_args&) { return notSupported("not implemented yet"); }

Status validate(const normal_args&) { return notSupported("not implemented yet"); }

Status validate(const sgd_step_args&) { return notSupported("not implemented yet"); }

}  // namespace mlu
