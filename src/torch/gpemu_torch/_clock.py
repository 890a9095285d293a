"""The script's own clocks, and its steps.

Under `gpemu torch --clock virtual` the script's clocks read emulated time, so
that what it times and prints (step time, throughput, MFU) is what it would
print on the GPU: time.time, time.perf_counter, time.monotonic and their _ns
forms, datetime.datetime.now / utcnow / today and datetime.date.today read the
host's emulated time (offset to start at the real reading when the run
began); time.sleep in the script's main thread returns at once and moves the
emulated time on. That holds for the script's own code only: the standard
library and installed packages (torch.distributed's store barrier,
multiprocessing's waits) poll for real events with sleeps and deadlines of
their own, and keep the real clocks. Other threads sleep in real time (a
watchdog's loop would otherwise push the emulated time on), and the
DataLoader's worker processes get the real clocks back: their work is real. The script's own
compiled code (its C extensions and ctypes libraries) reads emulated time through the preloaded
_clock_shim.so; time.clock_gettime, time.process_time and every other library's C code read the
real clocks (docs/decisions.md).
Under the real clock nothing is replaced.

Steps (both clocks): the summary's per-step figures come from optimizer.step()
calls (the backend sees them), else from backward calls (torch.autograd.backward,
which Tensor.backward calls), or from `--step-marker NAME`: the calls of a
Python function of that name (or a record_function label, which the backend
sees).
"""
import datetime
import functools
import sys
import threading
import time

_real = {}


def _library_folders():
    """Where the Python installation's code lives: the standard library,
    site-packages / dist-packages (torch, torchvision, ...) and this package."""
    import os
    import site
    import sysconfig

    folders = {os.path.dirname(os.path.abspath(__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if sysconfig.get_paths().get(key):
            folders.add(sysconfig.get_paths()[key])
    for get in (site.getsitepackages, lambda: [site.getusersitepackages()]):
        try:
            folders.update(get())
        except Exception:  # noqa: BLE001 - a venv without them
            pass
    folders.update(p for p in sys.path if "-packages" in p)
    return tuple(os.path.join(os.path.abspath(f), "") for f in folders if f)


def _attach_c_clocks(base_time_ns, base_monotonic_ns):
    """The script's compiled code (its C extensions, its ctypes libraries) reads the same emulated
    clocks: `gpemu torch` preloads _clock_shim.so, which serves that code's clock_gettime,
    gettimeofday, time and sleeps from the backend's clock once attached here; everything else
    keeps the real clocks. Without the shim (another launcher) nothing changes."""
    import ctypes
    import os

    try:
        attach = ctypes.CDLL(None).gpemu_clock_shim_attach
    except (OSError, AttributeError):
        return
    attach.argtypes = (ctypes.c_char_p, ctypes.c_longlong, ctypes.c_longlong)
    backend = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_backend.so")
    attach(backend.encode(), base_time_ns, base_monotonic_ns)


def _install_virtual_clocks(ops):
    names = ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "sleep")
    for n in names:
        _real[n] = getattr(time, n)
    bases = {n: _real[n + "_ns"]() for n in ("time", "perf_counter", "monotonic")}
    main = threading.main_thread().ident
    libraries = _library_folders()
    script_files = {}  # code file name -> whether it is the script's own code

    def from_script(depth):
        """Whether the caller `depth` frames up is the script's own code (not
        the standard library's, an installed package's or gpemu's): library
        code waits for real events (a rank's store, a worker's queue) with
        sleeps and deadlines of its own, which must stay real."""
        name = sys._getframe(depth + 1).f_code.co_filename
        mine = script_files.get(name)
        if mine is None:
            mine = script_files[name] = not (name.startswith(libraries) or name.startswith("<frozen"))
        return mine

    def clock(name, base):
        real = _real[name + "_ns"]

        def read():
            return (base + ops.now_ns() if from_script(1) else real()) / 1e9

        def read_ns():
            return base + ops.now_ns() if from_script(1) else real()

        return functools.update_wrapper(read, _real[name]), functools.update_wrapper(read_ns, real)

    real_sleep = _real["sleep"]

    def sleep(seconds):
        if threading.get_ident() != main or not from_script(1):
            return real_sleep(seconds)
        seconds = float(seconds)  # TypeError as time.sleep's for what is no number
        if not seconds >= 0:
            raise ValueError("sleep length must be non-negative")
        ops.advance(seconds)

    _attach_c_clocks(bases["time"], bases["monotonic"])
    for n, base in bases.items():
        read, read_ns = clock(n, base)
        setattr(time, n, read)
        setattr(time, n + "_ns", read_ns)
    time.sleep = functools.update_wrapper(sleep, real_sleep)

    real_datetime, real_date = datetime.datetime, datetime.date
    _real["datetime"], _real["date"] = real_datetime, real_date
    time_base = bases["time"]

    def timestamp():
        """time.time() as the caller of the datetime method (2 frames up) reads it."""
        return (time_base + ops.now_ns() if from_script(2) else _real["time_ns"]()) / 1e9

    class _DatetimeMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real_datetime)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real_datetime)

    class _DateMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real_date)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real_date)

    class EmulatedDatetime(real_datetime, metaclass=_DatetimeMeta):
        """datetime.datetime whose now(), utcnow() and today() read emulated time."""

        @classmethod
        def now(cls, tz=None):
            return real_datetime.fromtimestamp(timestamp(), tz)

        @classmethod
        def utcnow(cls):
            return real_datetime.utcfromtimestamp(timestamp())

        @classmethod
        def today(cls):
            return real_datetime.fromtimestamp(timestamp())

    class EmulatedDate(real_date, metaclass=_DateMeta):
        """datetime.date whose today() reads emulated time."""

        @classmethod
        def today(cls):
            return real_date.fromtimestamp(timestamp())

    for cls, real in ((EmulatedDatetime, real_datetime), (EmulatedDate, real_date)):
        cls.__name__, cls.__qualname__, cls.__module__ = real.__name__, real.__qualname__, real.__module__
    datetime.datetime, datetime.date = EmulatedDatetime, EmulatedDate


def restore_real_clocks():
    """The real clocks again (a DataLoader worker's process: its work is real)."""
    for n, f in _real.items():
        if n == "datetime":
            datetime.datetime = f
        elif n == "date":
            datetime.date = f
        else:
            setattr(time, n, f)


def real_perf_counter():
    """The real time.perf_counter, whichever clock the run has."""
    return _real.get("perf_counter", time.perf_counter)()


def _mark_backward_steps(torch, ops):
    backward = torch.autograd.backward

    @functools.wraps(backward)
    def marked(tensors, *args, **kwargs):
        first = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
        if isinstance(first, torch.Tensor) and first.is_cuda:
            ops.step("backward")
        return backward(tensors, *args, **kwargs)

    torch.autograd.backward = marked


def _mark_function_steps(ops, name):
    """Each call of a Python function named `name` ("train_step", or a
    qualified "Trainer.step") starts a step."""
    short = name.rsplit(".", 1)[-1]

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == short:
            if short == name or getattr(frame.f_code, "co_qualname", name).endswith(name):
                ops.step("marker")

    sys.setprofile(profile)
    threading.setprofile(profile)


def _wrap_workers(torch):
    """DataLoader workers run with the real clocks."""
    from torch.utils.data._utils import worker

    loop = worker._worker_loop

    @functools.wraps(loop)
    def real_clocked_loop(*args, **kwargs):
        restore_real_clocks()
        return loop(*args, **kwargs)

    worker._worker_loop = real_clocked_loop


def patch(torch):
    ops = torch.ops.gpemu
    import os

    _mark_backward_steps(torch, ops)
    marker = os.environ.get("GPEMU_TORCH_STEP_MARKER")
    if marker:
        _mark_function_steps(ops, marker)
    if os.environ.get("GPEMU_TORCH_CLOCK") == "virtual":
        _install_virtual_clocks(ops)
        _wrap_workers(torch)
