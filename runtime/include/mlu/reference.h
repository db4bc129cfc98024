// reference.h — the CPU reference of every op: a separate, plainly written implementation (float64
// accumulation, exact functions) that compare, fallback and op-replay run against the device.
//
// reference::run(args) checks the arguments exactly as the device does, then computes synchronously on
// the calling thread. Tensor data may be host memory or simulated device memory (both are host-addressable).
// Unlike the device, the reference supports float64.
#pragma once

#include <mlu/op_args.h>
#include <mlu/status.h>

namespace mlu::reference {

// Sets how many threads OpenBLAS uses for the reference's matrix products, unless the user chose with
// OPENBLAS_NUM_THREADS or OMP_NUM_THREADS (then nothing changes). Process-wide: OpenBLAS has one setting
// for everybody in the process. Auto-compare and fallback ask for 1 (they run comparisons on threads of
// their own, and an idle OpenBLAS thread spins for its next call, taking a core from the device).
void setBlasThreads(int threads);

#define MLUOP_DECLARE_REFERENCE(op, Symbol, ARGS) Status run(const op##_args& args);
MLUOP_FOR_EACH_OP(MLUOP_DECLARE_REFERENCE)
#undef MLUOP_DECLARE_REFERENCE

}  // namespace mlu::reference
