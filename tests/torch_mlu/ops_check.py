"""Checks torch_mlu's native ops against PyTorch's own CPU kernels in float64 (an independent reference):
each case runs on the MLU in float32 and on the CPU in float64 from the same inputs, forward and, where it
has one, backward. Prints one line per failing case and 'ops_check: N cases, F failed'; exits 1 on a
failure. Also checks the errors a user must get (mixed devices, a device index past the last)."""
import sys

import torch
import torch.nn.functional as F

import torch_mlu  # noqa: F401

dev = torch.mlu.device
torch.manual_seed(0)
failures = []
cases = 0


def close(name, got, want, atol=1e-5, rtol=1e-4):
    global cases
    cases += 1
    got = got.detach().cpu().double() if isinstance(got, torch.Tensor) else torch.tensor(got, dtype=torch.double)
    want = want.detach().double() if isinstance(want, torch.Tensor) else torch.tensor(want, dtype=torch.double)
    if got.shape != want.shape:
        failures.append(f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}")
    elif not torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
        failures.append(f"{name}: max abs diff {(got - want).abs().max().item():.3g}")


def check(name, fn, *inputs, grad=True, atol=1e-5, rtol=1e-4):
    """fn(*inputs) on the MLU (float32) against the CPU (float64); gradients too when grad."""
    ref_in = [x.double().requires_grad_(grad and x.is_floating_point()) if isinstance(x, torch.Tensor) else x
              for x in inputs]
    dev_in = [x.float().to(dev).requires_grad_(grad and x.is_floating_point()) if isinstance(x, torch.Tensor)
              and x.is_floating_point() else (x.to(dev) if isinstance(x, torch.Tensor) else x) for x in inputs]
    want, got = fn(*ref_in), fn(*dev_in)
    close(name, got, want, atol, rtol)
    if grad:
        seed = torch.randn(want.shape, dtype=torch.double)
        want.backward(seed)
        got.backward(seed.float().to(dev))
        for i, (r, d) in enumerate(zip(ref_in, dev_in)):
            if isinstance(r, torch.Tensor) and r.grad is not None:
                close(f"{name} grad {i}", d.grad, r.grad, atol * 10, rtol * 10)


x = torch.randn(4, 5)
y = torch.randn(4, 5)
row = torch.randn(5)
check("add", lambda a, b: a + b, x, y)
check("add broadcast alpha", lambda a, b: torch.add(a, b, alpha=-2.5), x, row)
check("sub", lambda a, b: a - b, x, row)
check("mul", lambda a, b: a * b, x, y)
check("div", lambda a, b: a / b, x, y.abs() + 0.5)
check("scalar ops", lambda a: (a * 3 + 1.5) / 0.7 - 2, x)
check("transposed input", lambda a, b: a.t() * b, x, torch.randn(5, 4))
check("relu", F.relu, x)
check("sqrt rsqrt", lambda a: a.sqrt() + a.rsqrt(), x.abs() + 0.1)
check("exp log", lambda a: a.exp() + (a.abs() + 0.1).log(), x)
check("silu sigmoid tanh", lambda a: F.silu(a) + torch.sigmoid(a) * torch.tanh(a), x)
check("sin cos neg", lambda a: -(a.sin() * a.cos()), x)
check("abs sign", lambda a: a.abs() * a.sign(), x)
check("pow", lambda a: a.pow(2) + a.abs().pow(1.5), x)
check("sum mean", lambda a: a.sum(1) + a.mean(1) + a.sum(), x)
check("mean keepdim negative dim", lambda a: a.mean(-1, keepdim=True) * a, x)
check("mm", lambda a, b: a @ b, x, torch.randn(5, 3))
check("bmm", torch.bmm, torch.randn(2, 3, 4), torch.randn(2, 4, 5))
check("linear", F.linear, torch.randn(6, 5), torch.randn(3, 5), torch.randn(3))
check("linear no bias", lambda a, w: F.linear(a, w), torch.randn(6, 5), torch.randn(3, 5))
check("addmm scaled", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), torch.randn(4, 3),
      torch.randn(4, 5), torch.randn(5, 3))
check("conv2d", lambda a, w, b: F.conv2d(a, w, b, stride=2, padding=1), torch.randn(2, 3, 9, 9),
      torch.randn(4, 3, 3, 3), torch.randn(4), atol=1e-4)
check("conv2d groups dilation", lambda a, w: F.conv2d(a, w, None, padding=2, dilation=2, groups=2),
      torch.randn(2, 4, 8, 8), torch.randn(6, 2, 3, 3), atol=1e-4)
check("max_pool2d", lambda a: F.max_pool2d(a, 2), torch.randn(2, 3, 8, 8))
check("max_pool2d ceil stride padding", lambda a: F.max_pool2d(a, 3, 2, 1, ceil_mode=True), torch.randn(1, 2, 9, 9))
check("log_softmax", lambda a: F.log_softmax(a, dim=1), x)
check("softmax", lambda a: F.softmax(a, dim=0), x)
target = torch.tensor([1, 0, 4, 2])
check("nll_loss", lambda a: F.nll_loss(F.log_softmax(a, 1), target.to(a.device)), x)
check("nll_loss sum ignore", lambda a: F.nll_loss(F.log_softmax(a, 1), torch.tensor([1, -100, 4, 2]).to(a.device),
                                                   reduction="sum"), x)
check("mse_loss", lambda a, b: F.mse_loss(a, b), x, y)
check("mse_loss sum none", lambda a, b: F.mse_loss(a, b, reduction="sum") + F.mse_loss(a, b, reduction="none")[1, 2],
      x, y)
w = torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0])
check("cross_entropy weighted", lambda a: F.cross_entropy(a, target.to(a.device), weight=w.to(a.device, a.dtype)), x)
emb = torch.randn(7, 3)
idx = torch.tensor([[1, 3, 3], [6, 0, 1]])
check("embedding", lambda e: F.embedding(idx.to(e.device), e), emb)
check("argmax eq", lambda a: a.argmax(1).eq(torch.tensor([0, 1, 2, 3]).to(a.device)).sum(), x, grad=False)
check("cat", lambda a, b: torch.cat([a, b], 0), x, y, grad=False)
check("cat three", lambda a, b: torch.cat([a, b.t(), a], 1), x, torch.randn(3, 4), grad=False)

# The layers of torchvision's models and of GPT-style decoders (kernels_nn.cpp, kernels_select.cpp).
img = torch.randn(4, 3, 5, 5)
ch, ch2 = torch.randn(3), torch.randn(3)
stats = torch.randn(3) * 0.1, torch.rand(3) + 0.5


def bn_train(a, w, b):
    rm, rv = stats[0].to(a.device, a.dtype), stats[1].to(a.device, a.dtype)
    out = F.batch_norm(a, rm, rv, w, b, training=True, momentum=0.2, eps=1e-5)
    return torch.cat([out.flatten(), rm, rv])  # the running statistics are updated too (unbiased var)


check("batch_norm training, running stats", bn_train, img, ch, ch2)
check("batch_norm training, no affine, no stats", lambda a: F.batch_norm(a, None, None, training=True), img)
check("batch_norm eval", lambda a, w, b: F.batch_norm(a, stats[0].to(a.device, a.dtype), stats[1].to(a.device, a.dtype),
                                                       w, b, training=False), img, ch, ch2, grad=False)
check("batch_norm channels_last", lambda a: F.batch_norm(a.contiguous(memory_format=torch.channels_last), None, None,
                                                         training=True), img)
check("conv2d channels_last", lambda a, w: F.conv2d(a.contiguous(memory_format=torch.channels_last),
                                                   w.contiguous(memory_format=torch.channels_last), padding=1),
      img, torch.randn(4, 3, 3, 3), atol=1e-4)
check("max_pool2d avg_pool2d channels_last", lambda a: F.max_pool2d(a.contiguous(memory_format=torch.channels_last), 2)
      + F.avg_pool2d(a.contiguous(memory_format=torch.channels_last), 2), img)
seq = torch.randn(2, 3, 8)
check("layer_norm weight bias", lambda a, w, b: F.layer_norm(a, (8,), w, b), seq, torch.randn(8), torch.randn(8))
check("layer_norm no bias", lambda a, w: F.layer_norm(a, (8,), w, None), seq, torch.randn(8))
check("layer_norm 2-d shape, no affine", lambda a: F.layer_norm(a, (3, 8)), seq)
check("gelu", F.gelu, x * 3)
check("gelu tanh", lambda a: F.gelu(a, approximate="tanh"), x * 3)
check("relu6 hardtanh", lambda a: F.relu6(a * 4) + F.hardtanh(a, -0.5, 0.7), x)
check("avg_pool2d", lambda a: F.avg_pool2d(a, 2), img)
check("avg_pool2d stride padding", lambda a: F.avg_pool2d(a, 3, 2, 1, count_include_pad=False), img)
check("adaptive_avg_pool2d up and down", lambda a: torch.cat([F.adaptive_avg_pool2d(a, (7, 7)).flatten(),
                                                           F.adaptive_avg_pool2d(a, (2, 3)).flatten()]), img)
check("where comparisons", lambda a, b: torch.where(a > 0.2, a, b) + torch.where(b <= a, 1.5, b), x, y)
check("comparisons", lambda a, b: torch.stack([a == b, a != 0.5, a < b, a <= 0, a > -0.1, a >= b]).float(), x,
      x.clone().masked_fill_(torch.rand(4, 5) > 0.5, 0.0), grad=False)
check("masked_fill broadcast mask", lambda a: a.masked_fill(torch.tril(torch.ones(4, 5)).to(a.device) == 0, -2.5), x)
check("clamp", lambda a: a.clamp(-0.5, 0.5) + a.clamp(min=0.1) * a.clamp(max=-0.2), x)
check("maximum minimum", lambda a, b: torch.maximum(a, b) - torch.minimum(a, b), x, y)
check("reciprocal", lambda a: a.reciprocal(), x.abs() + 0.5)
check("norm", lambda a: torch.stack([torch.norm(a), torch.norm(a, 1.0), torch.linalg.vector_norm(a, 3)]), x)
check("norm dims", lambda a: torch.norm(a, 2.0, dim=1) + torch.linalg.vector_norm(a, float("inf"), dim=1), x)
check("index with a list", lambda a: a[:, [-1, 0, 2]] * 2 + a[[3, -4, 0]].sum(), x)
check("index with a tensor of indices", lambda a: a[torch.tensor([[0, 1], [-1, 2]]).to(a.device)], x)
check("index_put_ with a mask", lambda a: a.clone().index_put_((a < 0,), torch.tensor(0.25).to(a.device)), x)
check("hardsigmoid hardswish", lambda a: F.hardsigmoid(a * 3) + F.hardswish(a * 3), x)
check("hardswish in place", lambda a: F.hardswish(a * 3, inplace=True), x)

# Sequences, sorting and sampling (kernels_sort.cpp).
close("arange", torch.arange(0, 7, device=dev), torch.arange(0, 7))
close("arange float step", torch.arange(-1.0, 2.0, 0.25, device=dev), torch.arange(-1.0, 2.0, 0.25))
close("arange into out", torch.arange(10, -1, -3, out=torch.empty(0, dtype=torch.long, device=dev)),
      torch.arange(10, -1, -3))
check("cumsum", lambda a: torch.cumsum(a, 1) + torch.cumsum(a, 0), x)
check("flip", lambda a: a.flip(0) * 2 + a.flip([0, 1]), x)
close("cumsum of ints is int64", torch.cumsum(torch.tensor([[1, 2], [3, 4]], dtype=torch.int32).to(dev), 0),
      torch.tensor([[1, 2], [4, 6]]))
cases += 1
if torch.cumsum(torch.ones(3, dtype=torch.int32, device=dev), 0).dtype != torch.int64:
    failures.append("cumsum of int32 is not int64")
ties = torch.tensor([[3.0, 1.0, 2.0, 1.0, float("nan")], [0.5, -1.0, 0.5, 2.0, 0.0]])
for descending in (False, True):
    got = torch.sort(ties.to(dev), dim=1, descending=descending, stable=True)
    want = torch.sort(ties, dim=1, descending=descending, stable=True)
    close(f"sort values descending={descending}", got.values, want.values)
    close(f"sort indices descending={descending}", got.indices, want.indices)
# (their backward scatters into zeros: scatter_ has no kernel yet, so forward only)
check("sort dim 0", lambda a: torch.sort(a, dim=0, descending=True).values * torch.arange(5.0).to(a.device), x,
      grad=False)
check("topk", lambda a: torch.topk(a, 2, dim=1).values.sum(1) + torch.topk(a, 3, largest=False).values[:, 0], x,
      grad=False)
distinct = torch.tensor([[3.0, 1.0, 2.0, -1.0, float("nan")], [0.5, -1.0, 0.25, 2.0, 0.0]])
close("topk indices", torch.topk(distinct.to(dev), 3).indices, torch.topk(distinct, 3).indices)  # (ties: any order)
probs = torch.softmax(torch.randn(4, 65), dim=-1)
for n, replace in ((1, False), (3, False)):
    torch.manual_seed(11)
    want = torch.multinomial(probs, n, replacement=replace)
    torch.manual_seed(11)
    close(f"multinomial {n} replacement={replace} (the CPU's samples)",
          torch.multinomial(probs.to(dev), n, replacement=replace), want)
cases += 1
try:
    torch.multinomial(torch.tensor([0.5, -0.1]).to(dev), 1)
    failures.append("multinomial of a negative probability: no error")
except RuntimeError as e:
    if "element < 0" not in str(e):
        failures.append(f"multinomial of a negative probability: {e}")

# clip_grad_norm_: the total norm, and the gradients scaled by it.
params = [torch.randn(4, 5, requires_grad=True), torch.randn(7, requires_grad=True)]
mlu_params = [q.detach().to(dev).requires_grad_() for q in params]
for ps in (params, mlu_params):
    sum((q * q).sum() * 3 for q in ps).backward()
close("clip_grad_norm_ total", torch.nn.utils.clip_grad_norm_(mlu_params, 1.0),
      torch.nn.utils.clip_grad_norm_(params, 1.0))
for i, (q, m) in enumerate(zip(params, mlu_params)):
    close(f"clip_grad_norm_ grad {i}", m.grad, q.grad)

# In-place ops (the optimizers' arithmetic) and views.
p = torch.randn(4, 5)
for name, fn in [("addcmul_", lambda t, a, b: t.addcmul_(a, b, value=0.3)),
                 ("addcdiv_", lambda t, a, b: t.addcdiv_(a, b.abs() + 1, value=-0.2)),
                 ("mul_ add_", lambda t, a, b: t.mul_(0.9).add_(a, alpha=0.1)),
                 ("div_ sqrt_", lambda t, a, b: t.abs().sqrt_().div_(b.abs() + 1))]:
    got = fn(p.clone().to(dev), x.to(dev), y.to(dev))
    close(name, got, fn(p.double().clone(), x.double(), y.double()))
v = torch.arange(24.0).reshape(2, 3, 4)
close("views", v.to(dev).permute(2, 0, 1)[1:3].reshape(2, 6).t().contiguous(),
      v.permute(2, 0, 1)[1:3].reshape(2, 6).t().contiguous())
close("item", torch.tensor(3.25).to(dev).item(), 3.25)
close("int64 copy", torch.tensor([2**40, -3]).to(dev).cpu(), torch.tensor([2**40, -3]))
close("copy_ broadcast to host", torch.empty(3, 4).copy_(torch.arange(4.0).to(dev)), torch.arange(4.0).expand(3, 4))
close("copy_ broadcast to device, cast", torch.empty(3, 4, device=dev).copy_(torch.arange(4)),
      torch.arange(4.0).expand(3, 4))
close("copy_ into a strided device view", torch.zeros(4, 4, device=dev).t().copy_(torch.arange(16.0).view(4, 4)).t(),
      torch.arange(16.0).view(4, 4).t())
grown = torch.ones(2, device=dev)
grown.resize_(3, 5)
close("resize_ keeps the old elements", grown.view(-1)[:2], torch.ones(2))

# Random draws come from PyTorch's CPU generator and are queued to the device like a kernel (not waited
# for): the same seed gives the CPU's numbers, in a dense or a transposed tensor, behind a large product
# still running and before the op that reads them.
for transposed in (False, True):
    torch.manual_seed(5)
    want_b, want_e = torch.empty(6, 7).bernoulli_(0.3), torch.empty(6, 7).exponential_(2.0)
    want_n, want_u = torch.randn(6, 7), torch.empty(6, 7).uniform_(-2, 3)
    big = torch.randn(512, 512).to(dev)
    torch.manual_seed(5)
    got_b = torch.empty(7, 6, device=dev).t() if transposed else torch.empty(6, 7, device=dev)
    got_e, got_u = torch.empty_like(got_b), torch.empty_like(got_b)
    busy = big @ big
    got_b.bernoulli_(0.3)
    got_e.exponential_(2.0)
    got_n = torch.randn(6, 7, device=dev)
    got_u.uniform_(-2, 3)
    layout = "transposed" if transposed else "dense"
    close(f"bernoulli_ {layout} is the CPU's", got_b * 2 + 1, want_b * 2 + 1, atol=0, rtol=0)
    close(f"exponential_ {layout} is the CPU's", got_e + 0, want_e, atol=0, rtol=0)
    close(f"randn {layout} is the CPU's", got_n + 0, want_n, atol=0, rtol=0)
    close(f"uniform_ {layout} is the CPU's", got_u + 0, want_u, atol=0, rtol=0)
    close(f"the product before them {layout}", busy[:2, :3], (big.cpu() @ big.cpu())[:2, :3], atol=1e-3)

# copy_(non_blocking=True) from the host is queued from a snapshot: the source may change at once after
# the call, into a dense or a transposed destination, behind a product still running.
for transposed in (False, True):
    src = torch.randn(6, 7)
    want = src.clone()
    big = torch.randn(512, 512).to(dev)
    busy = big @ big
    dst = torch.empty(7, 6, device=dev).t() if transposed else torch.empty(6, 7, device=dev)
    dst.copy_(src, non_blocking=True)
    src.fill_(7.0)
    layout = "transposed" if transposed else "dense"
    close(f"non_blocking copy {layout} holds the source as it was", dst * 1, want, atol=0, rtol=0)
    close(f"non_blocking batch to(), {layout}", src.to(dev, non_blocking=True).sum(), torch.tensor(7.0 * 42))
    close(f"the product before it {layout}", busy[:1, :2], (big.cpu() @ big.cpu())[:1, :2], atol=1e-3)

# A second device (MLU_SIM_DEVICE_COUNT=2): the index is honoured, kernels run there, copies cross over.
if torch.mlu.device_count() > 1:
    one = torch.device("privateuseone", 1)
    a = torch.arange(6.0).to(one)
    cases += 1
    if (a * 2).device != one or a.mlu(0).device != torch.device("privateuseone", 0):
        failures.append(f"device index: {(a * 2).device}, {a.mlu(0).device}")
    close("on device 1", (a * 2 + a.mlu(1)).cpu(), torch.arange(6.0) * 3)
    close("device 1 to device 0", a.to(dev), torch.arange(6.0))

# Errors a user must see.
for name, fn, expect in [
        ("mixed devices", lambda: torch.ones(3).to(dev) + torch.ones(3), "same device"),
        ("device index", lambda: torch.ones(3).to(torch.device("privateuseone", 99)), "mlurtSetDevice")]:
    cases += 1
    try:
        fn()
        failures.append(f"{name}: no error")
    except RuntimeError as e:
        if expect not in str(e):
            failures.append(f"{name}: the error does not say '{expect}': {e}")

for f in failures:
    print("FAIL", f)
print(f"ops_check: {cases} cases, {len(failures)} failed")
print("fallback:", torch.mlu.fallback_ops())
sys.exit(1 if failures else 0)
