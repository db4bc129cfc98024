"""Small PyTorch programs for the tests of opscope's PyTorch-level lists and of the opscope package, each
run by test_torch_mlu.cpp under the hook: `opscope_check.py MODE`."""
import sys

import torch
import torch_mlu


def tiny_model():
    """Linear, LayerNorm (named norm), ReLU, Linear, on the MLU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.add_module("fc1", torch.nn.Linear(8, 16))
    model.add_module("norm", torch.nn.LayerNorm(16))
    model.add_module("act", torch.nn.ReLU())
    model.add_module("fc2", torch.nn.Linear(16, 4))
    return model.to(torch_mlu.device)


def train_tiny(steps):
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(6, 8).to(torch_mlu.device)
    for step in range(steps):
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "tiny":
        train_tiny(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    else:
        sys.exit(f"opscope_check.py: unknown mode {mode!r}")
