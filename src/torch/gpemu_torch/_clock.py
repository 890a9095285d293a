"""The script's own clocks, and its steps.

Under `gpemu torch --clock virtual` the script's clocks read emulated time, so
that what it times and prints (step time, throughput, MFU) is what it would
print on the GPU: time.time, time.perf_counter, time.monotonic and their _ns
forms, datetime.datetime.now / utcnow / today and datetime.date.today read the
host's emulated time (offset to start at the real reading when the run
began); time.sleep in the script's main thread returns at once and moves the
emulated time on. Other threads sleep in real time (a watchdog's loop would
otherwise push the emulated time on), and the DataLoader's worker processes
get the real clocks back: their work is real. time.clock_gettime,
time.process_time and C code read the real clocks (docs/decisions.md).
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


def _install_virtual_clocks(ops):
    names = ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "sleep")
    for n in names:
        _real[n] = getattr(time, n)
    bases = {n: _real[n + "_ns"]() for n in ("time", "perf_counter", "monotonic")}
    main = threading.main_thread().ident

    def clock(base):
        return lambda: (base + ops.now_ns()) / 1e9

    def clock_ns(base):
        return lambda: base + ops.now_ns()

    real_sleep = _real["sleep"]

    def sleep(seconds):
        if threading.get_ident() != main:
            return real_sleep(seconds)
        seconds = float(seconds)  # TypeError as time.sleep's for what is no number
        if not seconds >= 0:
            raise ValueError("sleep length must be non-negative")
        ops.advance(seconds)

    for n, base in bases.items():
        setattr(time, n, functools.update_wrapper(clock(base), _real[n]))
        setattr(time, n + "_ns", functools.update_wrapper(clock_ns(base), _real[n + "_ns"]))
    time.sleep = functools.update_wrapper(sleep, real_sleep)

    real_datetime, real_date = datetime.datetime, datetime.date
    _real["datetime"], _real["date"] = real_datetime, real_date

    def now_timestamp():
        return time.time()

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
            return real_datetime.fromtimestamp(now_timestamp(), tz)

        @classmethod
        def utcnow(cls):
            return real_datetime.utcfromtimestamp(now_timestamp())

        @classmethod
        def today(cls):
            return real_datetime.fromtimestamp(now_timestamp())

    class EmulatedDate(real_date, metaclass=_DateMeta):
        """datetime.date whose today() reads emulated time."""

        @classmethod
        def today(cls):
            return real_date.fromtimestamp(now_timestamp())

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
