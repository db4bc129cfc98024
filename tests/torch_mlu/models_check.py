"""torchvision's classification models on the MLU, checked against the same model in float64 on PyTorch's
CPU (an independent reference) beside PyTorch's own float32 CPU run, from the same weights and batch
(64x64 images): one training step (SGD with momentum and weight decay: the loss, every gradient, every
updated parameter and running statistic), then evaluation (model.eval(), no_grad).

A randomly initialized deep network with batch norm over a few values per channel (ResNet-50's last stage
sees 2x2 maps) is ill-conditioned in float32: PyTorch's own CPU gradients differ from float64 by a few
percent there. So the device passes where its error against float64 is at most twice the CPU's (msprobe's
benchmark-relative standard) or below a floor, each tensor's error measured as ||x - ref|| / ||ref||, with
||ref|| floored at 1e-4 of the model's largest (a gradient that is zero in exact arithmetic has only
rounding noise to compare). The floor of gradients and parameters is 1e-2: a ReLU input within rounding of
0 that lands on the other side moves one element's gradient entirely (seen once in VGG-11's early layers:
3e-3 there and below). vgg11_bn (133 million parameters, most in its classifier) runs on the device only:
its layers are the other models' and its float32 and float64 copies would cost half a minute of page
faults. Every op must run on the device: the fallback list is printed and must be empty. Prints one line
per model; exits 1 on a failure.
usage: models_check.py [ARCH...]  (default: resnet18 resnet50 mobilenet_v2 mobilenet_v3_small vgg11_bn)"""
import copy
import os
import sys
import time

import torch
import torch.nn.functional as F

import torch_mlu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch_resnet"))
import main as resnet  # noqa: E402

dev = torch.mlu.device


def step_and_eval(model, x, y, collect=True):
    """One SGD step and an evaluation; returns the loss, grads, params, buffers and eval outputs on the CPU
    (only the loss and eval outputs unless collect)."""
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    torch.manual_seed(1)  # the same dropout masks
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        out = model(x)
    if not collect:
        return {"loss": [loss.detach().cpu().double().reshape(1)], "eval": [out.cpu().double()]}
    grads = [p.grad.detach().cpu().double() for p in model.parameters()]
    params = [p.detach().cpu().double() for p in model.parameters()]
    buffers = [b.detach().cpu().double() for b in model.buffers() if b.is_floating_point()]
    return {"loss": [loss.detach().cpu().double().reshape(1)], "grad": grads, "param": params, "buffer": buffers,
            "eval": [out.cpu().double()]}


def error(got, ref):
    """The worst ||got - ref|| / max(||ref||, 1e-4 * the largest ||ref||) over the tensors."""
    floor = 1e-4 * max(r.norm().item() for r in ref)
    return max(((g - r).norm() / max(r.norm().item(), floor, 1e-30)).item() for g, r in zip(got, ref))


FLOOR = {"loss": 1e-6, "grad": 1e-2, "param": 1e-2, "buffer": 1e-5, "eval": 1e-3}
DEVICE_ONLY = ("vgg11_bn",)


def check(arch, batch=4, size=64):
    torch.manual_seed(0)
    model = resnet.build(arch)
    x, y = resnet.gratings(batch, size, torch.Generator().manual_seed(0))
    start = time.perf_counter()
    if arch in DEVICE_ONLY:
        mlu = step_and_eval(model.to(dev), x.to(dev), y.to(dev), collect=False)
        ok = all(torch.isfinite(t).all() for ts in mlu.values() for t in ts)
        print(f"{arch}: {'ok' if ok else 'FAILED'}: a training step and an evaluation on the device, loss "
              f"{mlu['loss'][0].item():.4f} ({time.perf_counter() - start:.1f} s)", flush=True)
        return ok
    ref = step_and_eval(copy.deepcopy(model).double(), x.double(), y)
    cpu = step_and_eval(copy.deepcopy(model), x, y)
    mlu = step_and_eval(model.to(dev), x.to(dev), y.to(dev))
    ok = True
    parts = []
    for key in ref:
        e_mlu, e_cpu = error(mlu[key], ref[key]), error(cpu[key], ref[key])
        ok = ok and e_mlu <= max(2 * e_cpu, FLOOR[key])
        parts.append(f"{key} {e_mlu:.1e} (cpu {e_cpu:.1e})")
    print(f"{arch}: {'ok' if ok else 'FAILED'}: error against float64: " + ", ".join(parts) +
          f" ({time.perf_counter() - start:.1f} s)", flush=True)
    return ok


archs = sys.argv[1:] or list(resnet.ARCHS)
results = [check(a) for a in archs]
fallback = torch.mlu.fallback_ops()
print("fallback:", fallback)
sys.exit(0 if all(results) and not fallback else 1)
