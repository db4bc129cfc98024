"""torch_mlu: the simulated MLU as a PyTorch device.

    import torch
    import torch_mlu               # registers the device; adds torch.mlu
    device = torch.mlu.device      # torch.device("privateuseone:0"): PyTorch 1.13 cannot name it "mlu"
    x = torch.ones(3).mlu()        # or .to(device); model.mlu() moves a module
    torch.mlu.set_device(1)        # .mlu() now goes to MLU 1 (torch.mlu.current_device())
    x.is_mlu                       # True

Ops run through the simulated kernel library (libmluops), so every opscope tool sees them when the
program runs under `opscope run -- /usr/bin/python3 prog.py`. Ops the backend does not implement run on
the CPU (PyTorch's boxed CPU fallback); torch.mlu.fallback_ops() counts them, and the list is printed at
exit. Device memory comes from a caching allocator (torch.mlu.memory_allocated(), memory_reserved(),
empty_cache(); PYTORCH_NO_MLU_MEMORY_CACHING=1 turns it off); streams are MLU queues (torch.mlu.Stream,
torch.mlu.stream(s), torch.mlu.Event, Tensor.record_stream). torch.distributed gets the backend "mlucl"
(collectives of MLU tensors over libmlucl): init_process_group("mlucl") under mpirun, then
DistributedDataParallel.
"""
import atexit
import ctypes
import os
import site
import sys
import sysconfig
import types
import weakref

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


def set_device(device):
    """Makes an MLU the calling thread's current one (where .mlu() and torch.device("privateuseone") put
    tensors), as torch.cuda.set_device: a data-parallel rank takes its own (LOCAL_RANK % device_count())."""
    torch.ops.torch_mlu.set_device(_index(device))


def current_device():
    """The index of the calling thread's current MLU."""
    return torch.ops.torch_mlu.current_device()


def fallback_ops():
    """{'aten::op.overload': calls} for every op that ran on the CPU instead of the MLU."""
    text = torch.ops.torch_mlu.fallback_ops()
    return {name: int(count) for name, count in (line.rsplit(" ", 1) for line in text.splitlines())}


def _index(device):
    if device is None:
        return current_device()
    if isinstance(device, torch.device):
        return current_device() if device.index is None else device.index
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


class Stream:
    """A stream of an MLU: a queue of its own (stream 0 is the device's default queue). Stream() takes the
    next of the device's pool of 8, as torch.cuda.Stream() takes the next of CUDA's pool."""

    def __init__(self, device=None, stream_id=None):
        self.device_index = _index(device)
        self.stream_id = (torch.ops.torch_mlu.pool_stream(self.device_index)
                          if stream_id is None else int(stream_id))

    @property
    def device(self):
        return torch.device(_TYPE, self.device_index)

    def query(self):
        """Whether everything queued on the stream has run."""
        return torch.ops.torch_mlu.stream_query(self.device_index, self.stream_id)

    def synchronize(self):
        torch.ops.torch_mlu.stream_synchronize(self.device_index, self.stream_id)

    def wait_event(self, event):
        """Work queued on this stream after this call waits for the event's last record."""
        torch.ops.torch_mlu.event_wait(event._id, self.device_index, self.stream_id)

    def wait_stream(self, stream):
        """Work queued on this stream after this call waits for what `stream` was given so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return (isinstance(other, Stream) and other.device_index == self.device_index
                and other.stream_id == self.stream_id)

    def __hash__(self):
        return hash((self.device_index, self.stream_id))

    def __repr__(self):
        return f"<torch_mlu.Stream device={self.device} stream_id={self.stream_id}>"


class Event:
    """An MLU notifier: record() it on a stream, wait() for it on another, synchronize() or query() from
    the host; with enable_timing, elapsed_time() between two recorded events in milliseconds."""

    def __init__(self, enable_timing=False):
        self._id = torch.ops.torch_mlu.event_create(bool(enable_timing))

    def record(self, stream=None):
        stream = current_stream() if stream is None else stream
        torch.ops.torch_mlu.event_record(self._id, stream.device_index, stream.stream_id)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return torch.ops.torch_mlu.event_query(self._id)

    def synchronize(self):
        torch.ops.torch_mlu.event_synchronize(self._id)

    def elapsed_time(self, end_event):
        return torch.ops.torch_mlu.event_elapsed_time(self._id, end_event._id)

    def __del__(self):
        try:
            torch.ops.torch_mlu.event_destroy(self._id)
        except Exception:  # the interpreter's teardown may have taken torch.ops already
            pass


def current_stream(device=None):
    index = _index(device)
    return Stream(index, torch.ops.torch_mlu.current_stream(index))


def default_stream(device=None):
    return Stream(_index(device), 0)


class stream:
    """with torch.mlu.stream(s): the ops inside are queued on s (its device's current stream)."""

    def __init__(self, s):
        self.stream = s

    def __enter__(self):
        if self.stream is not None:
            self.previous = torch.ops.torch_mlu.set_stream(self.stream.device_index, self.stream.stream_id)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            torch.ops.torch_mlu.set_stream(self.stream.device_index, self.previous)
        return False


_tensor_record_stream = torch.Tensor.record_stream


def _record_stream(self, s):
    """Tensor.record_stream: also takes a torch.mlu.Stream for an MLU tensor."""
    if isinstance(s, Stream):
        torch.ops.torch_mlu.record_stream(self, s.stream_id)
    else:
        _tensor_record_stream(self, s)


def _device(index=None):
    if index is None:
        return torch.device(_TYPE, current_device())
    if isinstance(index, torch.device):
        if index.type != _TYPE:
            raise ValueError(f"torch_mlu: {index} is not an MLU")
        return index
    return torch.device(_TYPE, int(index))


def _tensor_mlu(self, device=None, non_blocking=False):
    return self.to(_device(device), non_blocking=non_blocking)


def _module_mlu(self, device=None):
    return self.to(_device(device))


_module_apply = torch.nn.Module._apply


def _apply_keeping_shared_parameters(self, fn, *args, **kwargs):
    """Module._apply (behind .to(), .mlu(), .half()...) that keeps parameters shared as they were.

    PyTorch 1.13 moves a parameter to a PrivateUse1 device by making a new Parameter per module that holds
    it (its shallow-copy check knows only CPU, CUDA, MPS, HIP and XPU as dense), which would silently untie
    tied weights (a language model's embedding and output layer): every slot that held one Parameter
    before holds one Parameter after.
    """
    slots = {}
    for module in self.modules():
        for name, p in module._parameters.items():
            if p is not None:
                slots.setdefault(id(p), []).append((module, name))
    result = _module_apply(self, fn, *args, **kwargs)
    for shared in slots.values():
        first_module, first_name = shared[0]
        for module, name in shared[1:]:
            module._parameters[name] = first_module._parameters[first_name]
    return result


torch.nn.Module._apply = _apply_keeping_shared_parameters


def _library_folders():
    """The folders whose files are not the program's: the standard library, site- and dist-packages (torch,
    torchvision and every installed package) and this package; the program's line of an op is its innermost
    frame outside them."""
    folders = {os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(torch.__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if sysconfig.get_path(key):
            folders.add(sysconfig.get_path(key))
    for folder in list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]:
        folders.add(folder)
    folders.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return sorted(os.path.join(os.path.abspath(f), "") for f in folders if f)


def _attribute_modules():
    """Under opscope: every nn.Module's forward is declared to the hook (opscope.h's
    opscope_framework_module_push/pop) with its path in its model ("layer1.0.conv1"; a model's own ops are
    its class name's), so that each finding names the module it ran in; and the ops get the program's
    source line. Costs nothing without opscope: no hook is registered. TORCH_MLU_ATTRIBUTION=0 turns it off
    (findings then name the PyTorch ops only)."""
    if os.environ.get("TORCH_MLU_ATTRIBUTION", "1") == "0":
        return
    process = ctypes.CDLL(None)
    try:
        push, pop = process.opscope_hook_framework_module_push, process.opscope_hook_framework_module_pop
    except AttributeError:  # libopscope.so is not preloaded
        return
    push.argtypes, push.restype, pop.argtypes, pop.restype = [ctypes.c_char_p], None, [], None
    torch.ops.load_library(os.path.join(os.path.dirname(_LIBRARY), "libtorch_mlu_python.so"))
    torch.ops.torch_mlu.attribute_sources("\n".join(_library_folders()), os.path.join(os.getcwd(), ""))
    names = weakref.WeakKeyDictionary()  # module -> its path, encoded
    running = []  # the modules whose forward is running, outermost first

    def name_tree(root):
        for path, module in root.named_modules(remove_duplicate=False):
            if path and module not in names:
                names[module] = path.encode()

    def name_of(module):
        name = names.get(module)
        if name is None:
            if running:  # a module added to a running model after it was named: name its root's tree again
                name_tree(running[0])
                name = names.get(module)
            if name is None:  # a model of its own
                names[module] = name = type(module).__name__.encode()
                name_tree(module)
        return name

    call = torch.nn.Module.__call__

    def attributed_call(self, *args, **kwargs):
        # Around Module.__call__ (not forward hooks): a forward that raises still ends its frame.
        push(name_of(self))
        running.append(self)
        try:
            return call(self, *args, **kwargs)
        finally:
            running.pop()
            pop()

    torch.nn.Module.__call__ = attributed_call


_attribute_modules()


def _open_mpi_rendezvous():
    """Under Open MPI's mpirun: the variables of torch.distributed's env:// rendezvous (RANK, WORLD_SIZE,
    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) from Open MPI's, where the program or the
    command line has not set them, so that init_process_group() needs no more under mpirun. The store is
    rank 0's on this host when every rank runs here (else set MASTER_ADDR to rank 0's host), at a port of
    the job's own (its Open MPI job id's) unless MASTER_PORT says."""
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" not in env or "OMPI_COMM_WORLD_SIZE" not in env:
        return
    env.setdefault("RANK", env["OMPI_COMM_WORLD_RANK"])
    env.setdefault("WORLD_SIZE", env["OMPI_COMM_WORLD_SIZE"])
    env.setdefault("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK", env["OMPI_COMM_WORLD_RANK"]))
    env.setdefault("LOCAL_WORLD_SIZE", env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env["OMPI_COMM_WORLD_SIZE"]))
    if env.get("OMPI_COMM_WORLD_LOCAL_SIZE") == env["OMPI_COMM_WORLD_SIZE"]:
        env.setdefault("MASTER_ADDR", "127.0.0.1")
    job = env.get("OMPI_MCA_ess_base_jobid") or env.get("PMIX_NAMESPACE") or "0"
    digits = "".join(ch for ch in job if ch.isdigit()) or "0"
    # Below Linux's ephemeral ports (32768-60999), so that no outgoing connection holds it.
    env.setdefault("MASTER_PORT", str(20000 + int(digits) % 12000))


def _register_distributed_backend():
    """torch.distributed's backend "mlucl" (collectives of MLU tensors over libmlucl: a process group as
    NCCL's is for CUDA): init_process_group("mlucl") under mpirun, then DistributedDataParallel of an MLU
    model as of a CUDA one."""
    import torch.distributed as dist
    if not dist.is_available() or hasattr(dist.Backend, "MLUCL"):
        return

    def create(store, rank, size, timeout):
        from torch_mlu._mlucl import ProcessGroupMLU
        return ProcessGroupMLU(store, rank, size, timeout)

    dist.Backend.register_backend("mlucl", create)


_open_mpi_rendezvous()
_register_distributed_backend()

mlu = types.ModuleType("torch.mlu", "The simulated MLU (torch_mlu).")
mlu.device = _device(0)
for _name in ("device_count", "is_available", "synchronize", "set_device", "current_device", "fallback_ops",
              "memory_allocated",
              "memory_reserved", "max_memory_allocated", "empty_cache", "Stream", "Event", "current_stream",
              "default_stream", "stream"):
    setattr(mlu, _name, globals()[_name])
torch.Tensor.record_stream = _record_stream
torch.mlu = mlu
torch.Tensor.mlu = _tensor_mlu
torch.Tensor.is_mlu = property(lambda self: self.device.type == _TYPE)
torch.nn.Module.mlu = _module_mlu

device = mlu.device
