"""torch_mlu: the simulated MLU as a PyTorch device.

    import torch
    import torch_mlu               # registers the device; adds torch.mlu
    device = torch.mlu.device      # torch.device("privateuseone:0"): PyTorch 1.13 cannot name it "mlu"
    x = torch.ones(3).mlu()        # or .to(device); model.mlu() moves a module
    x.is_mlu                       # True

Ops run through the simulated kernel library (libmluops), so every opscope tool sees them when the
program runs under `opscope run -- /usr/bin/python3 prog.py`. Ops the backend does not implement run on
the CPU (PyTorch's boxed CPU fallback); torch.mlu.fallback_ops() counts them, and the list is printed at
exit.
"""
import atexit
import os
import types

import torch

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libtorch_mlu.so")
torch.ops.load_library(_LIBRARY)
# Under opscope: the results are written when the program's own work ends, before the interpreter's
# teardown frees what it still held (so memcheck reports a tensor the program kept to the end as a leak).
# Registered first, so it runs after every handler the program registers.
atexit.register(torch.ops.torch_mlu.program_end)

_TYPE = "privateuseone"


def device_count():
    """Number of simulated MLUs (MLU_SIM_DEVICE_COUNT, default 2)."""
    return torch.ops.torch_mlu.device_count()


def is_available():
    return device_count() > 0


def synchronize():
    """Waits for the work queued on the current MLU."""
    torch.ops.torch_mlu.synchronize()


def fallback_ops():
    """{'aten::op.overload': calls} for every op that ran on the CPU instead of the MLU."""
    text = torch.ops.torch_mlu.fallback_ops()
    return {name: int(count) for name, count in (line.rsplit(" ", 1) for line in text.splitlines())}


def _index(device):
    if device is None:
        return 0
    if isinstance(device, torch.device):
        return 0 if device.index is None else device.index
    return int(device)


def memory_allocated(device=None):
    """Bytes of device memory held by tensors (the caching allocator's pieces, rounded to 512 bytes)."""
    return torch.ops.torch_mlu.memory_stats(_index(device))[0]


def memory_reserved(device=None):
    """Bytes of device memory the caching allocator holds (its segments, in use or cached)."""
    return torch.ops.torch_mlu.memory_stats(_index(device))[1]


def max_memory_allocated(device=None):
    """The peak of memory_allocated() since the program started."""
    return torch.ops.torch_mlu.memory_stats(_index(device))[2]


def empty_cache():
    """Gives the cached segments no tensor uses back to the device (PYTORCH_NO_MLU_MEMORY_CACHING=1 turns
    the cache off altogether)."""
    torch.ops.torch_mlu.empty_cache()


def _device(index=None):
    if index is None:
        return torch.device(_TYPE, 0)
    if isinstance(index, torch.device):
        if index.type != _TYPE:
            raise ValueError(f"torch_mlu: {index} is not an MLU")
        return index
    return torch.device(_TYPE, int(index))


def _tensor_mlu(self, device=None, non_blocking=False):
    return self.to(_device(device), non_blocking=non_blocking)


def _module_mlu(self, device=None):
    return self.to(_device(device))


mlu = types.ModuleType("torch.mlu", "The simulated MLU (torch_mlu).")
mlu.device = _device()
mlu.device_count = device_count
mlu.is_available = is_available
mlu.synchronize = synchronize
mlu.fallback_ops = fallback_ops
mlu.memory_allocated = memory_allocated
mlu.memory_reserved = memory_reserved
mlu.max_memory_allocated = max_memory_allocated
mlu.empty_cache = empty_cache
torch.mlu = mlu
torch.Tensor.mlu = _tensor_mlu
torch.Tensor.is_mlu = property(lambda self: self.device.type == _TYPE)
torch.nn.Module.mlu = _module_mlu

device = mlu.device
