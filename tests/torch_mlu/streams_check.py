"""Streams and events of torch_mlu, checked against PyTorch's CPU results. Run with MLU_SIM_FAULT=relu:delay=300
(relu's kernel then sleeps 300 ms before it reads its input), so that the race record_stream prevents is
real: a tensor freed on the default stream while a relu on another stream has yet to read it.

usage: streams_check.py all            every check; prints "streams ok"
       streams_check.py race           the same race without record_stream; prints what relu read
       streams_check.py memcheck       every check, but record_stream's only on relu's result: under memcheck
                                       (whose syncs let the device finish s's work before the memory is
                                       asked for again) handing the memory out again is right; for the race
                                       check of streams used right
"""
import sys

import torch
import torch_mlu  # noqa: F401  (registers the device)

m = torch.mlu
torch.manual_seed(0)


def check(cond, what):
    if not cond:
        raise SystemExit(f"streams_check: FAILED: {what}")


def streams_and_events():
    a = torch.randn(64, 64)
    am = a.mlu()
    s = m.Stream()
    check(s.stream_id >= 1 and m.current_stream() == m.default_stream(), "a new stream is not current")
    with m.stream(s):
        check(m.current_stream() == s, "inside torch.mlu.stream(s), s is current")
        y = am @ am + 1  # queued on s
        done = s.record_event()
    check(m.current_stream().stream_id == 0, "the default stream is current again")
    m.current_stream().wait_event(done)
    z = (y * 2).cpu()  # on the default stream, after s's work
    check(torch.allclose(z, (a @ a + 1) * 2, atol=1e-3), "a result computed across two streams")
    # Timing events on the default stream.
    start, end = m.Event(enable_timing=True), m.Event(enable_timing=True)
    start.record()
    w = am @ am
    end.record()
    end.synchronize()
    check(end.query() and start.elapsed_time(end) >= 0, "elapsed_time between two recorded events")
    del w
    # Autograd: the forward on s (relu delayed), the backward on the default stream once it has waited for
    # s (PyTorch 1.13's autograd engine follows the forward's stream only for CUDA), gives PyTorch's CPU
    # gradients.
    x = torch.randn(8, 16, requires_grad=True)
    wt = torch.randn(16, 4, requires_grad=True)
    xm = x.detach().mlu().requires_grad_()
    wm = wt.detach().mlu().requires_grad_()
    with m.stream(s):
        loss = torch.relu(xm @ wm).sum()
    m.current_stream().wait_stream(s)
    loss.backward()
    torch.relu(x @ wt).sum().backward()
    check(torch.allclose(xm.grad.cpu(), x.grad, atol=1e-5), "x.grad through a stream")
    check(torch.allclose(wm.grad.cpu(), wt.grad, atol=1e-5), "w.grad through a stream")


def race(record):
    """relu(big) queued on s (it sleeps 300 ms first); big freed on the default stream and its memory asked
    for again, filled with -1 at once. Returns (relu's result is right, the memory was handed out again)."""
    big_cpu = torch.rand(256, 256) + 1  # every element positive: relu keeps it
    big = big_cpu.mlu()
    s = m.Stream()
    s.wait_stream(m.default_stream())
    with m.stream(s):
        y = torch.relu(big)
    if record:
        big.record_stream(s)
    p = big.data_ptr()
    del big
    q = torch.full((256, 256), -1.0, device=m.device)  # the default stream, at once
    reused = q.data_ptr() == p
    s.synchronize()
    return torch.equal(y.cpu(), big_cpu), reused


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "all"
    if mode == "race":
        right, reused = race(record=False)
        print(f"without record_stream: relu right {right}, memory reused {reused}")
        return
    streams_and_events()
    right, reused = race(record=True)
    check(right and (mode == "memcheck" or not reused), f"record_stream kept the memory until s was done (right {right}, reused {reused})")
    print("streams ok")


main()
