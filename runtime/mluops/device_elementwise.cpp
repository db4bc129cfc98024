// Device kernels of the fill, copy/cast, permute, broadcasting binary, unary and their backward, random
// (Philox) ops, sgd ops.
#include "device.h"

namespace mlu {

Status device(const Launch&, const fill_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const copy_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const permute_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const add_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const sub_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const mul_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const div_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const maximum_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const minimum_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const add_scalar_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const mul_scalar_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const neg_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const abs_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const exp_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const log_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const sqrt_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const rsqrt_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const tanh_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const sigmoid_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const relu_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const relu_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const sigmoid_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const tanh_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const dropout_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const dropout_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const uniform_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const normal_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const sgd_step_args&) { return notSupported("not implemented yet"); }

}  // namespace mlu
