"""The cost of torch_mlu's torch.distributed backend "mlucl" in a PyTorch DDP job, side by side with Open
MPI's raw MPI_Allreduce in the same job (run under mpirun; bench/collectives.sh runs it):

  - per gradient bucket of the MNIST example's DDP (its sizes read from DDP itself): dist.all_reduce of
    the MLU bucket through the backend, waited for (torch.mlu.synchronize), against MPI_Allreduce of a
    host buffer of the same size (Open MPI's own library, called through ctypes in this process, which
    libmlucl has already initialized);
  - the whole DDP training step, and the time of the step's bucket all-reduces through the backend.

Rounds alternate the two (every rank in step) and rank 0 prints medians and ratios.

    mpirun -np 2 /usr/bin/python3 bench/ddp_backend.py [ROUNDS]
"""
import ctypes
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch_mlu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "torch_mnist"))
from main import Net  # noqa: E402  (the example's model)


def open_mpi():
    """MPI_Allreduce(sum, float32, MPI_COMM_WORLD) of host tensors through Open MPI's libmpi."""
    lib = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)

    def handle(name):
        return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, name)))

    comm, dtype, op = handle("ompi_mpi_comm_world"), handle("ompi_mpi_float"), handle("ompi_mpi_op_sum")
    lib.MPI_Allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_void_p, ctypes.c_void_p]

    def allreduce(send, recv):
        code = lib.MPI_Allreduce(send.data_ptr(), recv.data_ptr(), send.numel(), dtype, op, comm)
        if code != 0:
            raise RuntimeError(f"MPI_Allreduce returned {code}")
    return allreduce


def timed(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    dist.init_process_group("mlucl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.mlu.device
    model = torch.nn.parallel.DistributedDataParallel(Net().to(dev))
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    data = torch.randn(64 // world, 1, 28, 28, device=dev)
    target = torch.randint(0, 10, (64 // world,)).to(dev)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.nll_loss(model(data), target).backward()
        optimizer.step()
        torch.mlu.synchronize()

    step(), step()  # DDP rebuilds its buckets in the order of the first backward, for the second
    # Its buckets as rebuilt (float32 elements).
    sizes = [b.buffer().numel() for b in model.reducer._get_zeros_like_grad_buckets()]
    mpi_allreduce = open_mpi()
    rows = []
    for count in sizes:
        mlu = torch.ones(count, device=dev)
        host, host_out = torch.ones(count), torch.empty(count)

        def backend():
            dist.all_reduce(mlu)
            torch.mlu.synchronize()

        def raw():
            mpi_allreduce(host, host_out)

        backend(), raw()  # warm
        a, b = [], []
        for _ in range(rounds):
            dist.barrier()
            a.append(timed(backend, 5))
            dist.barrier()
            b.append(timed(raw, 5))
        rows.append((count, statistics.median(a), statistics.median(b)))
    steps = []
    for _ in range(rounds):
        dist.barrier()
        steps.append(timed(step, 3))
    if rank == 0:
        print(f"ddp_backend: {world} ranks, MNIST example's DDP (Adadelta, global batch 64), {rounds} rounds")
        print(f"{'bucket':>20} {'mlucl backend ms':>17} {'MPI_Allreduce ms':>17} {'ratio':>7}")
        for count, a, b in rows:
            print(f"{count:>10} x float32 {a * 1e3:>17.3f} {b * 1e3:>17.3f} {a / b:>6.2f}x")
        total_a = sum(a for _, a, _ in rows)
        total_b = sum(b for _, _, b in rows)
        step_ms = statistics.median(steps) * 1e3
        print(f"{'all buckets':>20} {total_a * 1e3:>17.3f} {total_b * 1e3:>17.3f} {total_a / total_b:>6.2f}x")
        share_a, share_b = 100 * total_a * 1e3 / step_ms, 100 * total_b * 1e3 / step_ms
        print(f"DDP step: {step_ms:.2f} ms (median); its buckets' all-reduces through the backend "
              f"{share_a:.0f}% of it, raw MPI would take {share_b:.0f}%", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
