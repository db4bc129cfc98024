#!/usr/bin/env bash
# All-reduce of 1 MiB and 64 MiB of float32 over 2 and 4 ranks: libmlucl (device buffers, enqueued on a
# queue) against MPI_Allreduce of host buffers in the same MPI job (bench/bench_collectives.cpp). Goal:
# within 1.3x of MPI. Then the same for PyTorch DDP on torch_mlu's backend "mlucl" (bench/ddp_backend.py,
# when torch_mlu is built): each gradient bucket of the MNIST example's DDP all-reduced through the backend
# against Open MPI's MPI_Allreduce of the same size, and the share of the DDP step the all-reduces take.
#   bench/collectives.sh [build-dir] [rounds]
set -euo pipefail
build=${1:-build}
rounds=${2:-7}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI and this machine run as root
for np in 2 4; do
  mpirun -np "$np" --oversubscribe "$build/bin/bench_collectives" --rounds "$rounds" --sizes-mib 1,64
  echo
done
if [[ -f "$build/python/torch_mlu/_mlucl.so" ]]; then
  for np in 2 4; do
    PYTHONPATH="$build/python" mpirun -np "$np" --oversubscribe /usr/bin/python3 "$(dirname "$0")/ddp_backend.py" \
      "$rounds" 2>&1 | grep -v -e 'registered at' -e 'fallthrough' -e 'logger.cpp' -e 'InitGoogleLogging' \
      -e 'fell back to the CPU'
    echo
  done
fi
