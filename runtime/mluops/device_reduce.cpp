// Device kernels of the reduction, softmax, loss and pooling ops.
#include "device.h"

namespace mlu {

Status device(const Launch&, const sum_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const mean_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const max_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const min_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const argmax_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const softmax_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const softmax_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const log_softmax_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const log_softmax_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const nll_loss_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const nll_loss_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const cross_entropy_forward_args&) {
  return notSupported("not implemented yet");
}

Status device(const Launch&, const cross_entropy_backward_args&) {
  return notSupported("not implemented yet");
}

Status device(const Launch&, const max_pool2d_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const max_pool2d_backward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const avg_pool2d_forward_args&) { return notSupported("not implemented yet"); }

Status device(const Launch&, const avg_pool2d_backward_args&) { return notSupported("not implemented yet"); }

}  // namespace mlu
