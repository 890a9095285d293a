"""torch.cuda on emulated GPUs.

A CPU-only torch has torch.cuda's Python code but nothing under it: the
torch._C._cuda_* functions it calls are missing and it answers "Torch not
compiled with CUDA enabled". patch() supplies those functions from the C++
backend (torch.ops.gpemu.*) so that torch.cuda's own code runs (device count,
current device, memory statistics, empty_cache, ...), and replaces what rests
on CUDA-only C++ types (streams, events, device properties, the CUDA RNG).
"""
import os
import types

_ops = None


def _dev(torch, device):
    """Device index of a device argument (None: the current device)."""
    if device is None:
        return _ops.current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "cuda":
            raise ValueError(f"expected a cuda device, got {device}")
        return _ops.current_device() if device.index is None else device.index
    return int(device)


# Compute capability by architecture (NVIDIA's CUDA GPUs table).
_CAPABILITY = {"Kepler": (3, 7), "Maxwell": (5, 2), "Pascal": (6, 0), "Volta": (7, 0), "Turing": (7, 5),
               "Ampere": (8, 0), "Ada": (8, 9), "Hopper": (9, 0), "Blackwell": (10, 0)}


class _DeviceProperties:
    def __init__(self, name, gpu_id, architecture, total_memory, sm_count):
        self.name = name
        self.gpemu_id = gpu_id
        self.major, self.minor = _CAPABILITY.get(architecture, (8, 0))
        self.total_memory = total_memory
        self.multi_processor_count = sm_count
        self.is_integrated = 0
        self.is_multi_gpu_board = 0

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def _properties():
    name, gpu_id, arch, memory, sms = _ops.gpu_info().split("|")
    return _DeviceProperties(name, gpu_id, arch, int(memory), int(sms))


def _memory_stats(device):
    (allocated, peak_allocated, reserved, peak_reserved, requested, peak_requested, active, segments, retries,
     ooms, device_alloc, device_free) = _ops.memory_stats(device)

    def stat(current, peak):
        return {"all": {"current": current, "peak": peak, "allocated": peak, "freed": peak - current}}

    return {
        "allocated_bytes": stat(allocated, peak_allocated),
        "reserved_bytes": stat(reserved, peak_reserved),
        "requested_bytes": stat(requested, peak_requested),
        "active_bytes": stat(allocated, peak_allocated),
        "active": stat(active, active),
        "allocation": stat(active, active),
        "segment": stat(segments, segments),
        "num_alloc_retries": retries,
        "num_ooms": ooms,
        "num_device_alloc": device_alloc,
        "num_device_free": device_free,
    }


def cpp_loop(fn):
    """fn issues many ops from one call, as a C++ function of torch's does:
    they pay the C++ launch cost, not the forward's per-op cost, which folds
    in a module's Python (Runtime::issue, cpp_loop)."""
    from ._host import scoped

    return scoped(lambda enter: _ops.cpp_loop(enter), fn)


def patch(torch):
    global _ops
    _ops = torch.ops.gpemu
    cuda = torch.cuda
    C = torch._C

    # The torch._C functions torch.cuda's own code calls.
    C._cuda_getDeviceCount = lambda: _ops.device_count()
    C._cuda_init = lambda: None
    C._cuda_getDevice = lambda: _ops.current_device()
    C._cuda_setDevice = lambda d: _ops.set_device(d) if d >= 0 else None
    C._cuda_synchronize = lambda: _ops.synchronize(_ops.current_device())
    C._cuda_memoryStats = _memory_stats
    C._cuda_emptyCache = lambda: _ops.empty_cache()
    C._cuda_resetPeakMemoryStats = lambda d: _ops.reset_peak_memory_stats(d)
    C._cuda_resetAccumulatedMemoryStats = lambda d: None
    C._cuda_setMemoryFraction = lambda fraction, d: _ops.set_memory_fraction(fraction, d)
    C._cuda_getArchFlags = lambda: None
    C._cuda_getCompiledVersion = lambda: 11070
    C._cuda_canDeviceAccessPeer = lambda a, b: True
    C._cuda_isInBadFork = lambda: False
    cuda._initialized = True

    # What torch does with a CUDA tensor's values on the host (printing it)
    # runs on its host copy: the values the host gave it, else zeros, as
    # .cpu() gives them (N14: print(x) failed in masked_select).
    tensor_str = torch._tensor_str._tensor_str

    def _tensor_str(self, indent):
        return tensor_str(self.cpu() if self.is_cuda else self, indent)

    torch._tensor_str._tensor_str = _tensor_str

    # CUDA IPC: each process emulates its own devices; no handle of one is
    # any use in another.
    def _share_cuda_(self, *args, **kwargs):
        raise RuntimeError("gpemu torch: sharing a CUDA tensor with another process (CUDA IPC) is not emulated: each "
                           "process has its own emulated GPU; send host tensors (.cpu()) instead")

    torch.UntypedStorage._share_cuda_ = _share_cuda_

    def get_device_properties(device=None):
        d = _dev(torch, device)
        if not 0 <= d < _ops.device_count():
            raise AssertionError("Invalid device id")
        return _properties()

    def mem_get_info(device=None):
        d = _dev(torch, device)
        total = _properties().total_memory
        return total - _ops.memory_stats(d)[2], total

    class Event:
        """torch.cuda.Event on an emulated stream: times are the timeline's."""

        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self._id = _ops.event_create()
            self.enable_timing = enable_timing

        def __del__(self):
            if _ops is not None and getattr(self, "_id", None) is not None:
                try:
                    _ops.event_destroy(self._id)
                except Exception:  # interpreter shutdown
                    pass

        def record(self, stream=None):
            stream = stream or current_stream()
            _ops.event_record(self._id, stream.device_index, stream.stream_id)

        def wait(self, stream=None):
            stream = stream or current_stream()
            _ops.event_wait(self._id, stream.device_index, stream.stream_id)

        def query(self):
            return _ops.event_query(self._id)

        def synchronize(self):
            _ops.event_synchronize(self._id)

        def elapsed_time(self, end_event):
            return _ops.event_elapsed_ms(self._id, end_event._id)

        def __repr__(self):
            return f"<torch.cuda.Event (gpemu) {self._id}>"

    class Stream(torch._C.Stream):
        """torch.cuda.Stream on an emulated device (a torch.Stream, so that
        record_stream and the other C++ functions taking a stream accept it)."""

        def __new__(cls, device=None, priority=0, stream_id=None, device_index=None, **kwargs):
            index = _dev(torch, device) if device_index is None else device_index
            sid = _ops.create_stream(index) if stream_id is None else stream_id
            self = torch._C.Stream.__new__(cls, _ops.stream_pack(index, sid))
            self.device_index = index
            self.stream_id = sid
            self.priority = priority
            return self

        def __init__(self, *args, **kwargs):
            pass

        @property
        def device(self):
            return torch.device("cuda", self.device_index)

        @property
        def device_type(self):
            return 1  # DeviceType::CUDA

        def wait_event(self, event):
            event.wait(self)

        def wait_stream(self, stream):
            self.wait_event(stream.record_event())

        def record_event(self, event=None):
            event = event or Event()
            event.record(self)
            return event

        def query(self):
            return _ops.stream_query(self.device_index, self.stream_id)

        def synchronize(self):
            _ops.stream_synchronize(self.device_index, self.stream_id)

        def __eq__(self, other):
            return (isinstance(other, Stream) and self.device_index == other.device_index
                    and self.stream_id == other.stream_id)

        def __hash__(self):
            return hash((self.device_index, self.stream_id))

        def __repr__(self):
            return f"<torch.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.stream_id}>"

    def current_stream(device=None):
        d = _dev(torch, device)
        return Stream(device_index=d, stream_id=_ops.current_stream(d))

    def default_stream(device=None):
        return Stream(device_index=_dev(torch, device), stream_id=0)

    def set_stream(stream):
        if stream is not None:
            _ops.set_stream(stream.device_index, stream.stream_id)

    def synchronize(device=None):
        _ops.synchronize(_dev(torch, device))

    # Device RNG: tensors on an emulated GPU hold no values, so seeds have
    # nothing to act on; they are accepted and ignored.
    def _ignore(*args, **kwargs):
        return None

    def initial_seed():
        return 0

    def is_bf16_supported():
        return get_device_properties().major >= 8

    names = dict(
        get_device_properties=get_device_properties, mem_get_info=mem_get_info, Event=Event, Stream=Stream,
        current_stream=current_stream, default_stream=default_stream, set_stream=set_stream,
        synchronize=synchronize, manual_seed=_ignore, manual_seed_all=_ignore, seed=_ignore, seed_all=_ignore,
        set_rng_state=_ignore, set_rng_state_all=_ignore, initial_seed=initial_seed,
        is_bf16_supported=is_bf16_supported)
    for name, value in names.items():
        setattr(cuda, name, value)
    cuda.get_rng_state = lambda device="cuda": torch.zeros(16, dtype=torch.uint8)
    cuda.get_rng_state_all = lambda: [cuda.get_rng_state() for _ in range(_ops.device_count())]
    cuda.streams.Stream = Stream
    cuda.streams.Event = Event
    cuda.random.manual_seed = cuda.random.manual_seed_all = _ignore
    cuda.memory.mem_get_info = mem_get_info

    # torch.nn.parallel's collectives (DataParallel): device-to-device copies
    # on the emulated devices, each charged as a copy kernel on its stream.
    def cuda_dev(d):
        return torch.device("cuda", d)

    def broadcast(tensor, devices):
        return [tensor if tensor.get_device() == d else tensor.to(cuda_dev(d)) for d in devices]

    def broadcast_out(tensor, out):
        for o in out:
            o.copy_(tensor)
        return out

    def broadcast_coalesced(tensors, devices, buffer_size=0):
        return [[t if t.get_device() == d else t.to(cuda_dev(d)) for t in tensors] for d in devices]

    def scatter(tensor, devices, chunk_sizes=None, dim=0, streams=None):
        chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(len(devices), dim)
        out = []
        for i, (d, chunk) in enumerate(zip(devices, chunks)):
            with torch.cuda.device(d):
                stream = streams[i] if streams else None
                if stream is not None:
                    with torch.cuda.stream(stream):
                        out.append(chunk.to(cuda_dev(d), non_blocking=True).contiguous())
                else:
                    out.append(chunk.to(cuda_dev(d), non_blocking=True).contiguous())
        return out

    def scatter_out(tensor, out, dim=0, streams=None):
        chunks = tensor.split([o.size(dim) for o in out], dim)
        for o, chunk in zip(out, chunks):
            o.copy_(chunk, non_blocking=True)
        return out

    def gather(tensors, dim=0, destination=None):
        if destination is None:
            destination = _ops.current_device()
        target = torch.device("cpu") if destination == -1 else cuda_dev(destination)
        return torch.cat([t.to(target) for t in tensors], dim)

    def gather_out(tensors, out, dim=0):
        torch.cat([t.to(out.device) for t in tensors], dim, out=out)
        return out

    # The trace shows where the script waited for its DataLoader (the
    # workers' own work is in their processes and is not drawn). The wait is
    # real (the loader is): under the virtual clock the host's emulated time
    # moves on by the real time waited.
    from torch.utils.data import dataloader

    from . import _clock

    next_batch = dataloader._BaseDataLoaderIter.__next__
    virtual = os.environ.get("GPEMU_TORCH_CLOCK") == "virtual"

    def traced_next(self):
        start, real_start = _ops.now(), _clock.real_perf_counter()
        try:
            return next_batch(self)
        finally:
            if virtual:
                _ops.advance(max(0.0, _clock.real_perf_counter() - real_start))
            _ops.host_span("DataLoader next batch", start, _ops.now())

    dataloader._BaseDataLoaderIter.__next__ = traced_next

    # torch's are C++ loops: their copies pay the C++ launch cost (cpp_loop).
    C._broadcast = cpp_loop(broadcast)
    C._broadcast_out = cpp_loop(broadcast_out)
    C._broadcast_coalesced = cpp_loop(broadcast_coalesced)
    C._scatter = cpp_loop(scatter)
    C._scatter_out = cpp_loop(scatter_out)
    C._gather = cpp_loop(gather)
    C._gather_out = cpp_loop(gather_out)

    # Storage.cuda() (torch.load(map_location=...) restores storages with it):
    # torch's own makes torch.UntypedStorage(device="cuda"), which a CPU-only
    # build refuses; a byte tensor on the emulated device gives the storage.
    def storage_cuda(self, device=None, non_blocking=False, **kwargs):
        non_blocking = kwargs.pop("async", non_blocking)
        if self.is_cuda:
            if device is None:
                device = _ops.current_device()
            if self.get_device() == device:
                return self
        index = _dev(torch, device)
        with torch.cuda.device(index):
            src = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self)
            dst = torch.empty(self.nbytes(), dtype=torch.uint8, device=cuda_dev(index))
            dst.copy_(src, non_blocking)
            return dst.storage().untyped()

    base_clone = torch.storage._StorageBase.clone

    def storage_clone(self):
        if self.device.type != "cuda":
            return base_clone(self)
        with torch.cuda.device(self.device.index):
            src = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self)
            return src.clone().storage().untyped()

    torch.storage._StorageBase.cuda = storage_cuda
    torch.storage._StorageBase.clone = storage_clone

    # torch.accelerator, for scripts written for newer torch.
    if not hasattr(torch, "accelerator"):
        torch.accelerator = types.SimpleNamespace(
            is_available=lambda: True, device_count=lambda: _ops.device_count(),
            current_accelerator=lambda *a, **k: torch.device("cuda"),
            current_device_index=lambda: _ops.current_device(),
            set_device_index=lambda d: _ops.set_device(_dev(torch, d)), synchronize=synchronize)
