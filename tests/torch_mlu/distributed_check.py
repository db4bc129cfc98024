"""torch.distributed's backend "mlucl" checked in one job of N ranks (mpirun -np N): every collective on MLU
tensors against the values worked out by hand from each rank's input, the ordering of Work.wait() with
another stream, DDP of a small model against the same model trained on the CPU with the global batch, and
the errors a user meets. Prints "distributed_check: N ranks, K checks passed" from rank 0; any failure
raises (and mpirun ends the job with an exit status).

    mpirun -np 2 /usr/bin/python3 tests/torch_mlu/distributed_check.py
"""
import datetime

import torch
import torch.distributed as dist
import torch_mlu  # noqa: F401  (the device, and the backend "mlucl")

checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise AssertionError(f"rank {dist.get_rank()}: {what}")
    checks += 1


def expect_error(fn, needle, what):
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        check(needle in str(e), f"{what}: the error says {str(e)!r}, not {needle!r}")
        return
    check(False, f"{what}: no error")


def main():
    # Under mpirun torch_mlu gives the env:// rendezvous Open MPI's rank and size.
    dist.init_process_group("mlucl", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "mlucl", f"backend {dist.get_backend()}")
    # Each rank on an MLU of its own where there are enough (as torch.cuda.set_device(local_rank)).
    torch.mlu.set_device(rank % torch.mlu.device_count())
    dev = torch.device("privateuseone")  # the current MLU
    check(torch.ones(1, device=dev).device.index == rank % torch.mlu.device_count(), "set_device")
    check(torch.ones(1).mlu().device.index == torch.mlu.current_device(), ".mlu() goes to the current MLU")

    def full(shape, value, dtype=torch.float32):
        return torch.full(shape, value, dtype=dtype, device=dev)

    # all_reduce: each reduction, float32, float16, int64; in place on the tensor given.
    for op, expected in ((dist.ReduceOp.SUM, n * (n + 1) / 2), (dist.ReduceOp.AVG, (n + 1) / 2),
                         (dist.ReduceOp.MAX, n), (dist.ReduceOp.MIN, 1), (dist.ReduceOp.PRODUCT, float(
                             torch.arange(1, n + 1).prod()))):
        t = full((1000,), rank + 1.0)
        dist.all_reduce(t, op=op)
        check(torch.equal(t.cpu(), torch.full((1000,), expected)), f"all_reduce {op}: {t[:3].cpu().tolist()}")
    t = full((7,), rank + 0.5, torch.float16)
    dist.all_reduce(t)
    check(torch.equal(t.cpu(), torch.full((7,), n * n / 2, dtype=torch.float16)),
          f"float16 {t.cpu().tolist()}")
    t = torch.arange(5, device=dev) * (rank + 1)
    dist.all_reduce(t)
    check(t.dtype == torch.int64 and t.cpu().tolist() == [i * n * (n + 1) // 2 for i in range(5)],
          f"int64 {t.cpu().tolist()}")
    # async_op: wait() orders the current stream; the value read after it is the reduced one.
    t = full((100,), 1.0)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    check(t.sum().item() == 100 * n, "all_reduce async_op")
    # wait() from another stream: that stream's work runs after the collective.
    t = full((1 << 16,), 1.0)
    work = dist.all_reduce(t, async_op=True)
    side = torch.mlu.Stream()
    with torch.mlu.stream(side):
        work.wait()
        doubled = t * 2
    side.synchronize()
    check(doubled[0].item() == 2 * n, f"wait() on another stream: {doubled[0].item()}")
    # The future DDP rides on: its value is the reduced tensor.
    t = full((3,), 2.0)
    fut = dist.all_reduce(t, async_op=True).get_future()
    check(fut.wait()[0].cpu().tolist() == [2.0 * n] * 3, "get_future()")

    # Several tensors in one call.
    a, b = full((3,), 1.0), full((2,), 2.0)
    dist.all_reduce_coalesced([a, b])
    check(a.cpu().tolist() == [float(n)] * 3 and b.cpu().tolist() == [2.0 * n] * 2, "all_reduce_coalesced")

    # broadcast from the last rank.
    t = full((4, 3), float(rank))
    dist.broadcast(t, src=n - 1)
    check(torch.equal(t.cpu(), torch.full((4, 3), float(n - 1))), f"broadcast {t.cpu().tolist()}")
    # all_gather into a list (of 2-d tensors) and into one tensor (_allgather_base).
    outs = [torch.empty(2, 3, device=dev) for _ in range(n)]
    dist.all_gather(outs, full((2, 3), rank * 10.0))
    check([o[0, 0].item() for o in outs] == [r * 10.0 for r in range(n)], "all_gather")
    out = torch.empty(n * 4, device=dev)
    dist.all_gather_into_tensor(out, torch.arange(4.0, device=dev) + 100 * rank)
    check(out.cpu().tolist() == [100.0 * r + i for r in range(n) for i in range(4)],
          f"all_gather_into_tensor {out.cpu().tolist()}")
    # reduce_scatter: rank r receives the sum over ranks of their r-th input (q + r).
    out = torch.empty(5, device=dev)
    dist.reduce_scatter(out, [full((5,), float(rank + i)) for i in range(n)])
    check(out.cpu().tolist() == [float(sum(q + rank for q in range(n)))] * 5,
          f"reduce_scatter {out.cpu().tolist()}")
    out = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(out, torch.arange(2.0 * n, device=dev))
    check(out.cpu().tolist() == [n * (2.0 * rank), n * (2.0 * rank + 1)],
          f"reduce_scatter_tensor {out.cpu().tolist()}")
    # The rooted ones: reduce to the last rank (the others' tensors left as they were), gather to rank 0,
    # scatter from the last rank; and reduce of a host value.
    t = full((4,), rank + 1.0)
    dist.reduce(t, dst=n - 1)
    check(t.cpu().tolist() == [n * (n + 1) / 2 if rank == n - 1 else rank + 1.0] * 4, f"reduce {t.cpu().tolist()}")
    gathered = [torch.empty(2, device=dev) for _ in range(n)] if rank == 0 else None
    dist.gather(full((2,), rank * 3.0), gathered, dst=0)
    check(rank != 0 or [g.cpu().tolist() for g in gathered] == [[r * 3.0] * 2 for r in range(n)], "gather")
    out = torch.empty(3, device=dev)
    dist.scatter(out, [full((3,), 10.0 + r) for r in range(n)] if rank == n - 1 else None, src=n - 1)
    check(out.cpu().tolist() == [10.0 + rank] * 3, f"scatter {out.cpu().tolist()}")
    t = torch.full((2,), float(rank))
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    check(t.tolist() == [float(n - 1) if rank == 0 else float(rank)] * 2, f"host reduce {t.tolist()}")

    # send / recv around a ring.
    if n > 1:
        received = torch.empty(6, device=dev)
        if rank % 2 == 0:
            dist.send(torch.arange(6.0, device=dev) + rank, (rank + 1) % n)
            dist.recv(received, (rank - 1) % n)
        else:
            dist.recv(received, (rank - 1) % n)
            dist.send(torch.arange(6.0, device=dev) + rank, (rank + 1) % n)
        check(received.cpu().tolist() == [i + (rank - 1) % n for i in range(6)],
              f"recv {received.cpu().tolist()}")
    dist.barrier()
    checks_before_ddp = checks

    # DDP of a small model, 3 steps of SGD on this rank's share of a global batch of 8 per rank, against
    # the same model trained on the CPU with the whole global batch: the gradients are averaged.
    def mlp():
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))

    torch.manual_seed(rank + 7)  # the ranks' models start apart: DDP broadcasts rank 0's
    model = mlp().to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)  # several buckets
    states = [torch.empty(sum(p.numel() for p in model.parameters()), device=dev) for _ in range(n)]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    dist.all_gather(states, flat)
    check(all(torch.equal(s.cpu(), states[0].cpu()) for s in states), "DDP broadcast rank 0's parameters")
    cpu_model = mlp()
    with torch.no_grad():
        for p, q in zip(cpu_model.parameters(), model.parameters()):
            p.copy_(q.cpu())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(123)
    for step in range(3):
        x = torch.randn(8 * n, 6, generator=generator)
        y = torch.randn(8 * n, 3, generator=generator)
        share = slice(8 * rank, 8 * (rank + 1))
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[share].to(dev)), y[share].to(dev)).backward()
        opt.step()
        cpu_opt.zero_grad()
        torch.nn.functional.mse_loss(cpu_model(x), y).backward()
        cpu_opt.step()
        for p, q in zip(model.parameters(), cpu_model.parameters()):
            check(torch.allclose(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6),
                  f"DDP step {step}: {(p.detach().cpu() - q.detach()).abs().max().item()} from the CPU's")
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        dist.all_gather(states, flat)
        check(all(torch.equal(s.cpu(), states[0].cpu()) for s in states), f"DDP step {step}: ranks differ")
    # no_sync(): the gradients of a step inside it stay local, the next step averages both.
    with ddp.no_sync():
        out = ddp(torch.ones(2, 6, device=dev) * rank)
        torch.nn.functional.mse_loss(out, torch.zeros(2, 3, device=dev)).backward()
    local = model[0].bias.grad.clone()
    gathered = [torch.empty_like(local) for _ in range(n)]
    dist.all_gather(gathered, local)
    check(n == 1 or not torch.equal(gathered[0].cpu(), gathered[-1].cpu()),
          "no_sync(): the gradients stayed local")
    checks_ddp = checks - checks_before_ddp

    # Host tensors go through the current MLU: an all_reduce of a host value, and torch.distributed's object
    # collectives (they send pickled bytes in CPU tensors to every backend but NCCL).
    t = torch.full((3,), rank + 1.0)
    dist.all_reduce(t)
    check(t.tolist() == [n * (n + 1) / 2] * 3, f"host all_reduce {t.tolist()}")
    objects = [None] * n
    dist.all_gather_object(objects, {"rank": rank, "name": "r" * (rank + 1)})
    check(objects == [{"rank": r, "name": "r" * (r + 1)} for r in range(n)], f"all_gather_object {objects}")
    listed = [f"from {rank}", rank]
    dist.broadcast_object_list(listed, src=n - 1)
    check(listed == [f"from {n - 1}", n - 1], f"broadcast_object_list {listed}")

    # Errors a user meets, each clear.
    expect_error(lambda: dist.reduce_scatter(torch.empty(2), [torch.ones(2)] * n), "transfers MLU tensors",
                 "a CPU tensor in reduce_scatter")
    expect_error(lambda: dist.all_reduce(full((4, 4), 1.0).t()), "contiguous", "a transposed tensor")
    expect_error(lambda: dist.all_reduce(full((4,), 1.0, torch.int32), op=dist.ReduceOp.BAND), "SUM, AVG",
                 "a bitwise reduction")
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"distributed_check: {n} ranks, {checks} checks passed ({checks_ddp} of DDP)", flush=True)


if __name__ == "__main__":
    main()
