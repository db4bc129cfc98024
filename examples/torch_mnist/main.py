"""The PyTorch MNIST example (pytorch/examples, mnist/main.py: its network, training loop, Adadelta and
StepLR) on the simulated MLU. Changed from the original only where it must be:
  - the device line: torch.mlu.device instead of CUDA (and --no-mlu instead of --no-cuda);
  - the data: generated digits (digits.py) instead of the MNIST download;
  - for tests and measurements: --train-size/--test-size, --max-steps, --no-eval and --print-losses;
  - opscope.step() after each training step (when the opscope package is there: `opscope run` provides it),
    so that OP_TIME_MEASURE_SCHEDULE counts the training's steps;
  - --ddp: data parallelism as PyTorch's DDP tutorials write it (init_process_group, DistributedSampler,
    DistributedDataParallel), one process per rank under mpirun, on torch_mlu's backend "mlucl";
    --batch-size is then the global batch (each rank takes its share) and the loss printed the global
    batch's (the mean of the ranks'), so that 1, 2 or 4 ranks print the same losses; --no-dropout for
    that comparison (each rank draws its own dropout masks).

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_mnist/main.py --epochs 1
    opscope run --compare -- /usr/bin/python3 examples/torch_mnist/main.py --max-steps 50
    mpirun -np 2 /usr/bin/python3 examples/torch_mnist/main.py --ddp --max-steps 20
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler
from torch.optim.lr_scheduler import StepLR

import digits

try:
    import opscope  # marks the steps under `opscope run`; does nothing without it
except ImportError:
    opscope = None

try:
    import torch_mlu  # noqa: F401  (registers the device: torch.mlu)
except ImportError as e:  # the CPU run needs no MLU
    torch_mlu = None
    _mlu_error = e


class Net(nn.Module):
    def __init__(self, dropout=True):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25 if dropout else 0.0)
        self.dropout2 = nn.Dropout(0.5 if dropout else 0.0)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def global_loss(args, loss):
    """The loss of the global batch: under --ddp the mean of the ranks' (their shares are equal)."""
    if not args.ddp:
        return loss.item()
    total = loss.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.AVG)
    return total.item()


def train(args, model, device, loader, optimizer, epoch, step):
    model.train()
    leader = not args.ddp or dist.get_rank() == 0
    for batch_idx, (data, target) in enumerate(loader):
        if args.max_steps and step >= args.max_steps:
            break
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        step += 1
        if opscope is not None and opscope.loaded():
            opscope.step()
        if args.print_losses:
            value = global_loss(args, loss)
            if leader:
                print(f"step {step} loss {value:.9g}", flush=True)
        elif batch_idx % args.log_interval == 0:
            value = global_loss(args, loss)
            if leader:
                seen = batch_idx * len(data) * (dist.get_world_size() if args.ddp else 1)
                print(f"Train Epoch: {epoch} [{seen}/{len(loader.dataset)} "
                      f"({100. * batch_idx / len(loader):.0f}%)]\tLoss: {value:.6f}", flush=True)
        if args.dry_run:
            break
    return step


def test(model, device, loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(loader.dataset)
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(loader.dataset)} "
          f"({100. * correct / len(loader.dataset):.0f}%)\n", flush=True)
    return test_loss, correct


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example on the simulated MLU")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N")
    parser.add_argument("--epochs", type=int, default=14, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--no-mlu", action="store_true", default=False, help="run on the CPU")
    parser.add_argument("--dry-run", action="store_true", default=False, help="one batch only")
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N")
    parser.add_argument("--save-model", action="store_true", default=False)
    parser.add_argument("--train-size", type=int, default=10000, help="generated training digits")
    parser.add_argument("--test-size", type=int, default=2000, help="generated test digits")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N training steps (0: no limit)")
    parser.add_argument("--no-eval", action="store_true", help="skip the test pass")
    parser.add_argument("--print-losses", action="store_true", help="print every step's loss exactly")
    parser.add_argument("--ddp", action="store_true",
                        help="data parallel, one process per rank under mpirun (backend mlucl); --batch-size "
                             "is the global batch")
    parser.add_argument("--no-dropout", action="store_true",
                        help="no dropout (to compare runs on different numbers of ranks)")
    args = parser.parse_args()

    use_mlu = not args.no_mlu
    if use_mlu and torch_mlu is None:
        raise SystemExit(f"main.py: cannot import torch_mlu ({_mlu_error}); set PYTHONPATH=<build>/python "
                         "or run with --no-mlu")
    torch.manual_seed(args.seed)
    device = torch.mlu.device if use_mlu else torch.device("cpu")

    train_set = digits.Digits(args.train_size, train=True)
    sampler = None
    batch_size = args.batch_size
    if args.ddp:
        # Under mpirun, torch_mlu gives init_process_group its rank, world size and store from Open MPI's.
        dist.init_process_group("mlucl" if use_mlu else "gloo")
        world = dist.get_world_size()
        if args.batch_size % world:
            raise SystemExit(f"main.py: --batch-size {args.batch_size} is not a multiple of the {world} ranks")
        batch_size = args.batch_size // world
        # Rank r takes every world-th sample of the epoch's shuffled order: together the ranks' batches are
        # the global batch one rank would take.
        sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed, drop_last=True)
        if dist.get_rank() == 0:
            print(f"data parallel: {world} ranks (backend {dist.get_backend()}), {batch_size} samples of each "
                  f"global batch of {args.batch_size} per rank", flush=True)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=sampler is None,
                                               sampler=sampler)
    test_loader = torch.utils.data.DataLoader(digits.Digits(args.test_size, train=False),
                                              batch_size=args.test_batch_size)

    model = Net(dropout=not args.no_dropout).to(device)
    if args.ddp:
        model = DistributedDataParallel(model)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    step = 0
    start = time.perf_counter()
    leader = not args.ddp or dist.get_rank() == 0
    for epoch in range(1, args.epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)
        step = train(args, model, device, train_loader, optimizer, epoch, step)
        if not args.no_eval and leader:  # under --ddp rank 0 evaluates the model alone
            test(model.module if args.ddp else model, device, test_loader)
        scheduler.step()
        if args.dry_run or (args.max_steps and step >= args.max_steps):
            break
    elapsed = time.perf_counter() - start
    if args.ddp:
        dist.destroy_process_group()
    if not leader:
        return
    print(f"{step} steps on {device} in {elapsed:.2f} s ({1000 * elapsed / max(step, 1):.1f} ms per step, "
          f"evaluation included)", flush=True)
    if args.save_model:
        state = (model.module if args.ddp else model).state_dict()
        torch.save({k: v.cpu() for k, v in state.items()}, "mnist_cnn.pt")


if __name__ == "__main__":
    main()
