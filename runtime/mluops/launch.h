// launch.h — what a device kernel needs: the handle's device and cores, work splitting across the
// simulated cores, and the enqueueing of its body on the handle's queue (with the op's planted faults).
#pragma once

#include "fault.h"

#include <mlu/op_args.h>
#include <mlu/status.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

struct mluopContext;

namespace mlu {

class Launch {
 public:
  Launch(const mluopContext& ctx, std::string_view op, const std::vector<Fault>* faults,
         TensorView first_output);

  // Whether a fault of that kind is planted in this call (MLU_SIM_FAULT): the kernels that change how they
  // compute for one (unstable) ask.
  bool hasFault(FaultKind kind) const {
    if (faults_ == nullptr) return false;
    for (const Fault& f : *faults_)
      if (f.kind == kind) return true;
    return false;
  }

  // Simulated cores of the device: how many ways a kernel may split its work.
  int cores() const { return cores_; }

  // Enqueues body as the op's kernel on the handle's queue; returns at once. body runs on the queue's
  // worker and must own (capture by value) everything it reads.
  Status enqueue(std::function<void()> body) const;

 private:
  const mluopContext& ctx_;
  std::string_view op_;
  const std::vector<Fault>* faults_;
  TensorView first_output_;
  int cores_;
};

// Runs fn(begin, end) over [0, n) split into up to `ways` chunks of at least `grain` items, on the
// library's worker pool and the calling thread; returns when every chunk is done.
void parallelFor(std::int64_t n, std::int64_t grain, int ways,
                 const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace mlu
