// context.h — the kernel library's handle and descriptor objects, and its per-thread error message.
#pragma once

#include <mlu/mluops.h>
#include <mlu/op_args.h>
#include <mlu/status.h>

#include <string>

struct mluopContext {
  int device = 0;
  mlurtQueue_t queue = nullptr;  // NULL: the device's default queue
  int cores = 1;                 // the device's simulated cores
};

struct mluopTensorStruct {
  mlu::TensorView view;  // data stays NULL: pointers come with each call
  bool set = false;      // mluopSetTensorDescriptor* was called
};

struct mluopConvolutionStruct {
  mlu::ConvParams params;
};

namespace mlu {

// Records a failure for mluopGetLastErrorMessage and returns its code.
mluopStatus_t recordError(const Status& status);
mluopStatus_t recordError(mluopStatus_t code, std::string message);

}  // namespace mlu
