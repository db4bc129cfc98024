#!/usr/bin/env bash
# All-reduce of 1 MiB and 64 MiB of float32 over 2 and 4 ranks: libmlucl (device buffers, enqueued on a
# queue) against MPI_Allreduce of host buffers in the same MPI job (bench/bench_collectives.cpp). Goal:
# within 1.3x of MPI.
#   bench/collectives.sh [build-dir] [rounds]
set -euo pipefail
build=${1:-build}
rounds=${2:-7}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI and this machine run as root
for np in 2 4; do
  mpirun -np "$np" --oversubscribe "$build/bin/bench_collectives" --rounds "$rounds" --sizes-mib 1,64
  echo
done
