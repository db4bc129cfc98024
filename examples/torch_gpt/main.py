"""A GPT-2-style decoder written the way a popular public training script writes one (learned position
embeddings, LayerNorm with bias, a GELU MLP, causal attention through masked_fill on a tril buffer,
dropout, weight tying, AdamW with weight-decay groups, gradient clipping, top-k sampling), trained as a
character model on the public-domain Shakespeare text in examples/data, evaluated, then sampled, on the
simulated MLU.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_gpt/main.py --steps 200
    opscope run --compare -- /usr/bin/python3 examples/torch_gpt/main.py --steps 10
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import torch_mlu  # noqa: F401  (registers the device: torch.mlu)
except ImportError as e:
    torch_mlu = None
    _mlu_error = e

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tinyshakespeare.txt")


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's has no bias=False in 1.13)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)  # q, k, v for all heads at once
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        # The causal mask: position t sees positions 0..t only.
        self.register_buffer("bias", torch.tril(torch.ones(cfg.block_size, cfg.block_size))
                             .view(1, 1, cfg.block_size, cfg.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPTConfig:
    def __init__(self, **kw):
        self.block_size, self.vocab_size = 64, 65
        self.n_layer, self.n_head, self.n_embd = 4, 4, 128
        self.dropout, self.bias = 0.1, True
        self.__dict__.update(kw)


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=LayerNorm(cfg.n_embd, bias=cfg.bias),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.cfg.block_size, f"sequence of {t} is longer than the block size {self.cfg.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:  # inference: only the last position's logits (a list index keeps the time dimension)
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {n: p for n, p in self.named_parameters() if p.requires_grad}
        decay = [p for p in params.values() if p.dim() >= 2]  # matrices and embeddings decay; biases, norms not
        no_decay = [p for p in params.values() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.cfg.block_size else idx[:, -self.cfg.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


class Chars:
    """The Shakespeare text as character ids, split 90/10 into training and validation."""

    def __init__(self):
        with open(DATA, encoding="utf-8") as f:
            text = f.read()
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        n = int(0.9 * len(data))
        self.train, self.val = data[:n], data[n:]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)

    def batch(self, split, batch_size, block_size, generator):
        data = self.train if split == "train" else self.val
        ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
        x = torch.stack([data[i:i + block_size] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
        return x, y


def lr_at(step, args):
    """Linear warm-up, then cosine decay to a tenth."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    ratio = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (0.1 + 0.45 * (1.0 + math.cos(math.pi * ratio)))


@torch.no_grad()
def estimate_loss(model, chars, args, device, generator):
    model.eval()
    out = {}
    for split in ("train", "val"):
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            x, y = chars.batch(split, args.batch_size, args.block_size, generator)
            _, loss = model(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


def build(args, vocab_size):
    cfg = GPTConfig(block_size=args.block_size, vocab_size=vocab_size, n_layer=args.n_layer,
                    n_head=args.n_head, n_embd=args.n_embd, dropout=args.dropout, bias=not args.no_bias)
    return GPT(cfg)


def parser():
    p = argparse.ArgumentParser(description="A GPT-2-style decoder in plain PyTorch on the simulated MLU")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--no-bias", action="store_true", help="Linear and LayerNorm without bias")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="clip the gradient norm (0: off)")
    p.add_argument("--eval-interval", type=int, default=0, help="evaluate every N steps (0: at the end only)")
    p.add_argument("--eval-iters", type=int, default=4)
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation")
    p.add_argument("--sample-tokens", type=int, default=100, help="characters to generate at the end (0: none)")
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-mlu", action="store_true", help="run on the CPU")
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--print-losses", action="store_true", help="print every step's loss exactly")
    return p


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
    chars = Chars()
    model = build(args, len(chars.chars)).to(device)
    optimizer = model.configure_optimizers(args.weight_decay, args.lr, (0.9, 0.95))
    generator = torch.Generator().manual_seed(args.seed)
    print(f"{sum(p.numel() for p in model.parameters())} parameters on {device}", flush=True)
    start = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args)
        x, y = chars.batch("train", args.batch_size, args.block_size, generator)
        # As training scripts do on an accelerator: the batch's copy is queued behind the step before it,
        # so the host builds this step while the device still runs the last one.
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        if args.print_losses:
            print(f"step {step + 1} loss {loss.item():.9g}", flush=True)
        elif (step + 1) % args.log_interval == 0 or step == 0:
            print(f"step {step + 1:5d}  loss {loss.item():.4f}", flush=True)
        if args.eval_interval and (step + 1) % args.eval_interval == 0 and not args.no_eval:
            losses = estimate_loss(model, chars, args, device, generator)
            print(f"step {step + 1}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
    elapsed = time.perf_counter() - start
    print(f"{args.steps} steps on {device} in {elapsed:.2f} s ({1000 * elapsed / max(1, args.steps):.1f} ms "
          f"per step)", flush=True)
    if not args.no_eval:
        losses = estimate_loss(model, chars, args, device, generator)
        print(f"eval: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
    if args.sample_tokens:
        model.eval()
        start_ids = torch.tensor([[chars.stoi["\n"]]], dtype=torch.long, device=device)
        torch.manual_seed(args.seed)
        out = model.generate(start_ids, args.sample_tokens, temperature=args.temperature, top_k=args.top_k)
        print("sample:", repr(chars.decode(out[0].tolist())), flush=True)


if __name__ == "__main__":
    main()
