"""torchvision's ResNet-18 (or another classification model of torchvision's zoo, --arch) trained with SGD
(momentum, weight decay, a cosine learning-rate schedule) on generated 64x64 images, then evaluated, on
the simulated MLU. No download: the weights start random and the images are generated (ten classes of
oriented gratings under noise, see gratings()).

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_resnet/main.py --steps 50
    opscope run --profile -- /usr/bin/python3 examples/torch_resnet/main.py --steps 5
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F
import torchvision

try:
    import torch_mlu  # noqa: F401  (registers the device: torch.mlu)
except ImportError as e:
    torch_mlu = None
    _mlu_error = e

ARCHS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "vgg11_bn")


def gratings(n, size, generator, classes=10):
    """n RGB images [n, 3, size, size] and labels [n]: class c is a sine grating at angle c * 18 degrees
    with a random phase, frequency and colour, under Gaussian noise; normalized per channel as ImageNet's
    transforms would."""
    labels = torch.randint(classes, (n,), generator=generator)
    angle = labels.double() * math.pi / classes
    freq = 0.15 + 0.1 * torch.rand(n, generator=generator, dtype=torch.float64)
    phase = 2 * math.pi * torch.rand(n, generator=generator, dtype=torch.float64)
    coords = torch.arange(size, dtype=torch.float64) - size / 2
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    proj = xx[None] * angle.cos()[:, None, None] + yy[None] * angle.sin()[:, None, None]
    wave = torch.sin(freq[:, None, None] * proj + phase[:, None, None])  # [n, size, size]
    colour = 0.5 + 0.5 * torch.rand(n, 3, generator=generator, dtype=torch.float64)
    images = colour[:, :, None, None] * wave[:, None] + 0.3 * torch.randn(n, 3, size, size, generator=generator,
                                                                          dtype=torch.float64)
    return images.float(), labels


def build(arch, num_classes=10):
    if arch not in ARCHS:
        raise SystemExit(f"main.py: unknown --arch {arch!r}; one of {', '.join(ARCHS)}")
    return getattr(torchvision.models, arch)(num_classes=num_classes)


def parser():
    p = argparse.ArgumentParser(description="torchvision classification models on the simulated MLU")
    p.add_argument("--arch", default="resnet18", help="one of " + ", ".join(ARCHS))
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--eval-batches", type=int, default=4, help="batches of the evaluation")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    p.add_argument("--channels-last", action="store_true", help="the model and its inputs in channels_last")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-mlu", action="store_true", help="run on the CPU")
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--print-losses", action="store_true", help="print every step's loss exactly")
    return p


def to_device(x, device, channels_last):
    x = x.to(device, non_blocking=True)  # queued behind the step before, as training scripts copy batches
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


@torch.no_grad()
def evaluate(model, args, device, generator):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for _ in range(args.eval_batches):
        x, y = gratings(args.batch_size, args.image_size, generator)
        out = model(to_device(x, device, args.channels_last))
        y = y.to(device, non_blocking=True)
        loss_sum += F.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(dim=1) == y).sum().item()
        total += y.numel()
    model.train()
    return loss_sum / total, correct, total


def main():
    args = parser().parse_args()
    if args.no_mlu:
        device = torch.device("cpu")
    elif torch_mlu is None:
        raise SystemExit(f"main.py: cannot import torch_mlu ({_mlu_error}); set PYTHONPATH=<build>/python "
                         "or run with --no-mlu")
    else:
        device = torch.mlu.device

    torch.manual_seed(args.seed)
    model = build(args.arch).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, args.steps))
    generator = torch.Generator().manual_seed(args.seed)
    print(f"{args.arch}: {sum(p.numel() for p in model.parameters())} parameters on {device}", flush=True)
    model.train()
    start = time.perf_counter()
    for step in range(args.steps):
        x, y = gratings(args.batch_size, args.image_size, generator)
        out = model(to_device(x, device, args.channels_last))
        loss = F.cross_entropy(out, y.to(device, non_blocking=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if args.print_losses:
            print(f"step {step + 1} loss {loss.item():.9g}", flush=True)
        elif (step + 1) % args.log_interval == 0 or step == 0:
            print(f"step {step + 1:5d}  loss {loss.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps on {device} in {elapsed:.2f} s ({1000 * elapsed / max(1, args.steps):.1f} ms "
          f"per step)", flush=True)
    if not args.no_eval:
        loss, correct, total = evaluate(model, args, device, generator)
        print(f"eval: loss {loss:.4f}, accuracy {correct}/{total} ({100.0 * correct / total:.0f}%)", flush=True)


if __name__ == "__main__":
    main()
