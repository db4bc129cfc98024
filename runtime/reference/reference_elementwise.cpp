// CPU reference of the fill, copy/cast, permute, broadcasting binary, unary and their backward, random
// (Philox) ops, sgd ops.
#include <mlu/reference.h>

#include "../ops/validate.h"

namespace mlu::reference {

Status run(const fill_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const copy_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const permute_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const add_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const sub_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const mul_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const div_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const maximum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const minimum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const add_scalar_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const mul_scalar_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const neg_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const abs_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const exp_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const log_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const sqrt_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const rsqrt_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const tanh_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const sigmoid_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const relu_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const relu_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const sigmoid_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const tanh_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const dropout_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const dropout_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const uniform_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const normal_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const sgd_step_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

}  // namespace mlu::reference
