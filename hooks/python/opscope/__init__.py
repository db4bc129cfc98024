"""opscope from a Python program: mark its steps and spans, and switch a tool on for a region of it.

    import opscope

    for step, batch in enumerate(loader):
        with opscope.compare():            # auto-compare this step's calls only
            train_step(batch)
        opscope.step()                     # a training step ended (OP_TIME_MEASURE_SCHEDULE counts these)

    with opscope.range("data loading"):    # a span of the program's naming: trace, module tracks, summary
        ...

    p = opscope.profile(modules=[r"layer1\\..*"])
    p.start(); ...; p.stop()               # the same as `with p:`

Run the program under opscope (`opscope run -- python3 train.py`): each region then switches its tool on
for the calls made inside it, and the results go to the run's result directory, each region's calls
labelled with its name. A tool the environment turned on (`opscope run --compare`) stays on for the whole
run. Without opscope every function here does nothing and says once, on stderr, how to run under it.

The regions: capture, compare, fallback, profile, dump_args, overflow_check. Each takes the calls to cover
as the OP_*_LIST variables do: positional items in their syntax ("conv2d_forward", "aten::addmm",
"module:layer1\\..*"), or ops= (kernel-library op names or regular expressions), aten= (PyTorch op names,
"aten::" added when missing) and modules= (nn.Module path patterns). Options: name= (the region's label;
default "compare#1", counted per tool), threads="all" (default: the calls of every thread, the autograd
engine's too) or "current", env= a dict of `opscope env` variables for the tool ({"OP_CAPTURE_MODE":
"stats"}), and the tool's own keywords (capture's mode=, compare's tolerance=(atol, rtol), dump_args'
level). A tool is made by its first region, with that region's options.
"""
import contextlib as _contextlib
import ctypes as _ctypes
import functools as _functools
import sys as _sys

__all__ = ["loaded", "step", "range", "capture", "compare", "fallback", "profile", "dump_args",
           "overflow_check", "OpscopeError"]


class OpscopeError(RuntimeError):
    """A region the hook refused: an unknown option, a bad list pattern, a tool that could not start."""


def _hook():
    """The hook's entry points when libopscope.so is loaded in this process (opscope run), else None."""
    process = _ctypes.CDLL(None)
    try:
        step_fn = process.opscope_hook_step
    except AttributeError:
        return None
    api = {"step": step_fn}
    for name in ("framework_region_push", "framework_module_pop", "region_begin", "region_end"):
        api[name] = getattr(process, "opscope_hook_" + name, None)
    step_fn.argtypes, step_fn.restype = [], None
    if api["framework_region_push"] is not None:
        api["framework_region_push"].argtypes, api["framework_region_push"].restype = [_ctypes.c_char_p], None
        api["framework_module_pop"].argtypes, api["framework_module_pop"].restype = [], None
    if api["region_begin"] is not None:
        api["region_begin"].argtypes = [_ctypes.c_char_p, _ctypes.c_char_p, _ctypes.c_char_p, _ctypes.c_char_p,
                                        _ctypes.c_int, _ctypes.c_char_p, _ctypes.c_size_t]
        api["region_begin"].restype = _ctypes.c_int
        api["region_end"].argtypes, api["region_end"].restype = [_ctypes.c_int], _ctypes.c_int
    return api


_HOOK = _hook()
_said = False


def _not_loaded():
    global _said
    if not _said:
        _said = True
        print("opscope: the opscope hook is not loaded, so opscope's calls do nothing; run the program under it: "
              "opscope run -- python3 " + (_sys.argv[0] if _sys.argv and _sys.argv[0] else "PROGRAM.py"),
              file=_sys.stderr)


def loaded():
    """Whether the program runs under opscope (libopscope.so is loaded)."""
    return _HOOK is not None


def step():
    """A training step of the program ended: OP_TIME_MEASURE_SCHEDULE counts these steps, and memcheck's
    growth leaks are memory a step allocated and later steps still hold. Once a program calls it, the
    framework's own steps (torch_mlu: each optimizer step) are no longer counted."""
    if _HOOK is None:
        return _not_loaded()
    _HOOK["step"]()


class _Scope:
    """A context manager that is also an object with start()/stop() and a decorator."""

    def __init__(self):
        self._active = False

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __call__(self, function):
        @_functools.wraps(function)
        def scoped(*args, **kwargs):
            with self._copy():
                return function(*args, **kwargs)
        return scoped

    def _copy(self):
        return self


class range(_Scope):  # noqa: A001 (named as NVTX's and the issue's ranges are)
    """A span of the program's own naming ("data loading"): in the trace (its own span, on the thread that
    opened it), the module tracks and the summary; the calls inside it that no nn.Module encloses are
    attributed to it. Use with `with`, as a decorator, or start()/stop()."""

    def __init__(self, name):
        super().__init__()
        self.name = str(name)

    def _copy(self):
        return range(self.name)

    def start(self):
        if _HOOK is None or _HOOK["framework_region_push"] is None:
            return _not_loaded()
        if self._active:
            raise OpscopeError(f"opscope.range({self.name!r}) is already started")
        _HOOK["framework_region_push"](self.name.encode())
        self._active = True

    def stop(self):
        if self._active:
            self._active = False
            _HOOK["framework_module_pop"]()


def _items(values, prefix=""):
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [v if not prefix or v.startswith(prefix) else prefix + v for v in map(str, values)]


class _Region(_Scope):
    _tool = None  # opscope.h's tool name
    _keywords = {}  # the tool's own keyword -> its variable

    def __init__(self, *items, ops=None, aten=None, modules=None, name=None, threads="all", env=None, **options):
        super().__init__()
        if threads not in ("all", "current"):
            raise ValueError(f"threads={threads!r}: use 'all' or 'current'")
        self._args = (items, dict(ops=ops, aten=aten, modules=modules, name=name, threads=threads, env=env,
                                  **options))
        selection = _items(list(items)) + _items(ops) + _items(aten, "aten::") + _items(modules, "module:")
        if any("," in item for item in selection):
            raise ValueError("a list item holds a comma: give each item on its own")
        self.list = ",".join(selection)
        self.name = name
        self.threads = threads
        variables = dict(env or {})
        for keyword, value in options.items():
            if keyword not in self._keywords:
                raise TypeError(f"opscope.{self._tool}() got an unexpected keyword argument {keyword!r}")
            variable, convert = self._keywords[keyword]
            variables[variable] = convert(value)
        self.options = "".join(f"{k}={v}\n" for k, v in variables.items())
        self._id = 0

    def _copy(self):
        items, kwargs = self._args
        return type(self)(*items, **kwargs)

    def start(self):
        """Switches the tool on for the calls from now to stop()."""
        if _HOOK is None or _HOOK["region_begin"] is None:
            return _not_loaded()
        if self._id:
            raise OpscopeError(f"opscope.{self._tool} region {self.name or ''} is already started")
        error = _ctypes.create_string_buffer(1024)
        self._id = _HOOK["region_begin"](self._tool.encode(), self.name.encode() if self.name else None,
                                         self.list.encode(), self.options.encode(),
                                         1 if self.threads == "current" else 0, error, len(error))
        if not self._id:
            raise OpscopeError(f"opscope.{self._tool}: " + error.value.decode(errors="replace"))

    def stop(self):
        """Ends the region: calls made afterwards are not its."""
        if self._id:
            _HOOK["region_end"](self._id)
            self._id = 0


def _tolerance(value):
    atol, rtol = value
    return f"{float(atol)!r},{float(rtol)!r}"


class capture(_Region):
    """Captures the covered calls' inputs and outputs to capture.db (mode="stats": statistics of every
    tensor, whole tensors around a NaN/Inf or a failed compare)."""
    _tool = "capture"
    _keywords = {"mode": ("OP_CAPTURE_MODE", str), "max_mb": ("OP_CAPTURE_MAX_MB", int)}


class compare(_Region):
    """Compares each covered call with the CPU reference (tolerance=(atol, rtol) for every dtype)."""
    _tool = "compare"
    _keywords = {"tolerance": ("AUTOCOMPARE_ERROR_TOLERANCE", _tolerance)}


class fallback(_Region):
    """Runs the covered calls on the CPU reference instead of the device (with no selection: every call)."""
    _tool = "fallback"


class profile(_Region):
    """Times the covered calls into the trace (trace.json: the region only, when the environment profiles
    nothing)."""
    _tool = "profile"


class dump_args(_Region):
    """Prints the covered calls' arguments (level 1 names, 2 describes every argument, 3 prints values)."""
    _tool = "dump_args"

    def __init__(self, level=1, *items, **kwargs):
        if isinstance(level, bool) or not isinstance(level, int) or level not in (1, 2, 3):
            raise ValueError(f"dump_args level {level!r}: the first argument is the level, 1, 2 or 3 "
                             "(then the calls to cover: opscope.dump_args(2, \"aten::addmm\"))")
        env = dict(kwargs.pop("env", None) or {})
        env["OP_DUMP_ARGS"] = str(level)
        super().__init__(*items, env=env, **kwargs)
        self._args = ((level,) + items, dict(kwargs, env=env))


class overflow_check(_Region):
    """Finds the first covered call whose outputs hold a NaN or an infinity its inputs did not."""
    _tool = "overflow_check"
