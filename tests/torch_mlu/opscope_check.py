"""Small PyTorch programs for the tests of opscope's PyTorch-level lists and of the opscope package, each
run by test_torch_mlu.cpp under the hook: `opscope_check.py MODE`."""
import sys

import torch
import torch_mlu

import opscope


def tiny_model():
    """Linear, LayerNorm (named norm), ReLU, Linear, on the MLU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(8, 16))
    model.add_module("norm", torch.nn.LayerNorm(16))
    model.add_module("act", torch.nn.ReLU())
    model.add_module("fc2", torch.nn.Linear(16, 4))
    return model.to(torch_mlu.device)


def train_tiny(steps, region=None, at=0, count=1):
    """steps training steps, each ended by opscope.step(); region (a factory of an opscope region) open from
    the start of step `at` to the end of step at + count - 1 (after its opscope.step())."""
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(6, 8).to(torch_mlu.device)
    scope = None
    for step in range(steps):
        if region is not None and step == at:
            scope = region()
            scope.start()
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        opscope.step()
        print(f"step {step} loss {loss.item():.6f}", flush=True)
        if scope is not None and step == at + count - 1:
            torch.mlu.synchronize()
            scope.stop()
            scope = None


def refused(make):
    """The message of the OpscopeError (or ValueError, TypeError) a region raises when made and started."""
    try:
        make().start()
    except (opscope.OpscopeError, ValueError, TypeError) as e:
        return str(e)
    return "accepted"


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "tiny":
        train_tiny(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    elif mode == "region":  # region TOOL STEPS AT COUNT [ITEMS...]: opscope.TOOL(*ITEMS) over steps AT...
        tool, steps, at, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        train_tiny(steps, lambda: getattr(opscope, tool)(*sys.argv[6:]), at, count)
    elif mode == "outside":  # every call of the package without the hook: nothing happens, one line says so
        print("loaded", opscope.loaded())
        opscope.step()
        with opscope.range("data"), opscope.compare(modules=["fc1"]):
            train_tiny(1)
        p = opscope.profile()
        p.start()
        p.stop()
        opscope.fallback("aten::addmm")(train_tiny)(1)
    elif mode == "fork":  # os.fork() after device use: the child's ops raise, the parent goes on
        import os
        x = torch.ones(4).to(torch_mlu.device)
        (x * 2).cpu()
        pid = os.fork()
        if pid == 0:
            try:
                (x * 3).cpu()
                print("child computed", flush=True)
            except RuntimeError as e:
                print("child error:", e, flush=True)
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print("parent: child exit status", status, (x * 4).cpu().tolist(), flush=True)
    elif mode == "refused":  # what the hook refuses, under opscope: one line each
        print("list:", refused(lambda: opscope.compare("conv2d(")))
        print("option:", refused(lambda: opscope.capture(env={"OP_CAPTUER_MODE": "stats"})))
        print("value:", refused(lambda: opscope.capture(mode="statistics")))
        print("keyword:", refused(lambda: opscope.compare(mode="stats")))
        print("threads:", refused(lambda: opscope.profile(threads="some")))
        print("level:", refused(lambda: opscope.dump_args("aten::addmm")))
    else:
        sys.exit(f"opscope_check.py: unknown mode {mode!r}")
