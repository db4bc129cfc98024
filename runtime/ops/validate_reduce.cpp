// Argument checks of the reduction, softmax, loss and pooling ops.
#include "validate.h"

namespace mlu {

Status validate(const sum_args&) { return notSupported("not implemented yet"); }

Status validate(const mean_args&) { return notSupported("not implemented yet"); }

Status validate(const max_args&) { return notSupported("not implemented yet"); }

Status validate(const min_args&) { return notSupported("not implemented yet"); }

Status validate(const argmax_args&) { return notSupported("not implemented yet"); }

Status validate(const softmax_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const softmax_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const log_softmax_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const log_softmax_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const nll_loss_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const nll_loss_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const cross_entropy_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const cross_entropy_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const max_pool2d_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const max_pool2d_backward_args&) { return notSupported("not implemented yet"); }

Status validate(const avg_pool2d_forward_args&) { return notSupported("not implemented yet"); }

Status validate(const avg_pool2d_backward_args&) { return notSupported("not implemented yet"); }

}  // namespace mlu
