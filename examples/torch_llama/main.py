"""A small Llama-style decoder written the way people write one in plain PyTorch (RMSNorm, rotary position
embedding, causal multi-head attention with grouped-query heads, SwiGLU feed-forward, AdamW), trained as
a character model on the public-domain Shakespeare text in examples/data, on the simulated MLU.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_llama/main.py --steps 100
    opscope run --compare -- /usr/bin/python3 examples/torch_llama/main.py --steps 20
    mpirun -np 2 /usr/bin/python3 examples/torch_llama/main.py --ddp --steps 20

--ddp: data parallelism with DistributedDataParallel on torch_mlu's torch.distributed backend "mlucl", one
process per rank under mpirun. --batch-size is the global batch: every rank draws the same global batch
and trains on its share of the sequences, so 1, 2 or 4 ranks see the same data; the loss printed is the
global batch's (the mean of the ranks').
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

try:
    import torch_mlu  # noqa: F401  (registers the device: torch.mlu)
except ImportError as e:
    torch_mlu = None
    _mlu_error = e

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tinyshakespeare.txt")


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(seq_len, head_dim, theta=10000.0):
    """cos and sin [seq_len, head_dim] for the rotate-half form of RoPE."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def repeat_kv(x, n_rep):
    """[b, kv_heads, t, d] -> [b, kv_heads * n_rep, t, d], each head repeated n_rep times (as Llama's code)."""
    b, kv, t, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n_rep, t, d).reshape(b, kv * n_rep, t, d)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.kv_heads != self.heads:  # grouped-query attention: each k/v head serves several q heads
            k, v = repeat_kv(k, self.heads // self.kv_heads), repeat_kv(v, self.heads // self.kv_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask
        out = F.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = FeedForward(dim, hidden)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, hidden, seq_len):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([Block(dim, heads, kv_heads, hidden) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        cos, sin = rotary_tables(seq_len, dim // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)  # causal: no position sees a later one
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.tok_embeddings(tokens)
        cos, sin, mask = self.cos[:t], self.sin[:t], self.mask[:t, :t]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))


def batches(text, vocab, batch, seq_len, generator):
    ids = torch.tensor([vocab[c] for c in text], dtype=torch.int64)
    while True:
        starts = torch.randint(0, len(ids) - seq_len - 1, (batch,), generator=generator)
        x = torch.stack([ids[s:s + seq_len] for s in starts])
        y = torch.stack([ids[s + 1:s + seq_len + 1] for s in starts])
        yield x, y


def main():
    p = argparse.ArgumentParser(description="A small Llama-style model in plain PyTorch on the simulated MLU")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=4, help="grouped-query attention when below --heads")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-mlu", action="store_true", help="run on the CPU")
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--print-losses", action="store_true", help="print every step's loss exactly")
    p.add_argument("--ddp", action="store_true",
                   help="data parallel, one process per rank under mpirun; --batch-size is the global batch")
    args = p.parse_args()
    if args.heads % args.kv_heads:
        p.error(f"--kv-heads {args.kv_heads} must divide --heads {args.heads}")
    if args.no_mlu:
        device = torch.device("cpu")
    elif torch_mlu is None:
        raise SystemExit(f"main.py: cannot import torch_mlu ({_mlu_error}); set PYTHONPATH=<build>/python "
                         "or run with --no-mlu")
    else:
        device = torch.mlu.device

    rank, world = 0, 1
    if args.ddp:
        # Under mpirun, torch_mlu gives init_process_group its rank, world size and store from Open MPI's.
        dist.init_process_group("gloo" if args.no_mlu else "mlucl")
        rank, world = dist.get_rank(), dist.get_world_size()
        if args.batch_size % world:
            p.error(f"--batch-size {args.batch_size} is not a multiple of the {world} ranks")
        if rank == 0:
            print(f"data parallel: {world} ranks (backend {dist.get_backend()}), {args.batch_size // world} "
                  f"sequences of each global batch of {args.batch_size} per rank", flush=True)
    share = slice(rank * args.batch_size // world, (rank + 1) * args.batch_size // world)

    torch.manual_seed(args.seed)
    with open(DATA, encoding="utf-8") as f:
        text = f.read()
    vocab = {c: i for i, c in enumerate(sorted(set(text)))}
    model = Llama(len(vocab), args.dim, args.layers, args.heads, args.kv_heads, 4 * args.dim,
                  args.seq_len).to(device)
    if args.ddp:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    data = batches(text, vocab, args.batch_size, args.seq_len, torch.Generator().manual_seed(args.seed))
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = next(data)
        x, y = x[share].to(device), y[share].to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.print_losses or step % args.log_interval == 0 or step == 1:
            value = loss.detach().clone()
            if args.ddp:  # the global batch's loss: the mean of the ranks' (their shares are equal)
                dist.all_reduce(value, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step} loss {value.item():.9g}" if args.print_losses
                      else f"step {step:5d}  loss {value.item():.4f}", flush=True)
    elapsed = time.perf_counter() - start
    if args.ddp:
        dist.destroy_process_group()
    if rank:
        return
    print(f"{args.steps} steps on {device} in {elapsed:.2f} s ({1000 * elapsed / args.steps:.1f} ms per step)",
          flush=True)


if __name__ == "__main__":
    main()
