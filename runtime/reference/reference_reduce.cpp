// CPU reference of the reduction, softmax, loss and pooling ops.
#include <mlu/reference.h>

#include "../ops/validate.h"

namespace mlu::reference {

Status run(const sum_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const mean_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const max_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const min_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const argmax_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const softmax_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const softmax_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const log_softmax_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const log_softmax_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const nll_loss_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const nll_loss_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const cross_entropy_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const cross_entropy_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const max_pool2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const max_pool2d_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const avg_pool2d_forward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

Status run(const avg_pool2d_backward_args& args) {
  MLU_RETURN_IF_ERROR(validate(args));
  return notSupported("not implemented yet");
}

}  // namespace mlu::reference
