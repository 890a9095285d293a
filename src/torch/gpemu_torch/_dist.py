"""DDP's NCCL process group on emulated GPUs (docs/torch.md, "Distributed").

A CPU-only torch has no ProcessGroupNCCL, so `init_process_group("nccl")`
would fail. patch() supplies one: a process group (a Python subclass of
c10d's ProcessGroup, which DDP's C++ reducer calls like any other) whose
collectives

  - are charged on the emulated timeline: each runs on the rank's
    communication stream (a pool stream, as NCCL's), after the work issued
    on the calling stream, starting when the last rank is ready (the ranks
    exchange their ready times), for the ring's time over the node's
    topology (interconnect.h); the calling stream waits for it only when the
    work is waited on, as with NCCL, so DDP's bucket all-reduces overlap
    backward;
  - never block the issuing thread under the real clock: the exchange runs
    on a gloo process group of the same ranks (real sockets, real processes)
    and the collective is put on the timeline when the exchange completes, on
    gloo's thread. Under the virtual clock the issuing thread waits for the
    exchange (real time that costs no emulated time), so the collective is
    on the communication stream before the script's next op, as NCCL puts it
    at issue: what the host then sees of that stream (a block's reuse after
    record_stream, an event's query) does not depend on when another
    process's ready time arrived, and a run's figures repeat exactly;
  - move the values of small tensors (at most 64 KiB) the host filled, so
    that DDP's parameter-shape check, `all_reduce` of a loss or a counter
    and `broadcast` of a flag give what they give on GPUs. Larger tensors
    hold no values on an emulated GPU, and nothing is moved for them.
"""
import collections
import datetime
import os
import sys
import threading
import time

import torch

# Under the virtual clock a collective is on its stream before _run returns (see above).
_VIRTUAL = os.environ.get("GPEMU_TORCH_CLOCK") == "virtual"

_ops = None
_VALUE_BYTES = 64 << 10


def _nbytes(t):
    return t.numel() * t.element_size()


def _cuda_device(tensors, what):
    """The one CUDA device the tensors are on (NCCL's rule)."""
    devices = set()
    for t in tensors:
        if not t.is_cuda:
            raise RuntimeError(f"{what}: tensors must be CUDA and dense (gpemu's emulated NCCL process group); "
                               f"got one on {t.device}")
        devices.add(t.device.index)
    if len(devices) != 1:
        raise RuntimeError(f"{what}: expected tensors on one GPU per process, got cuda:{sorted(devices)}")
    return devices.pop()


def _alive(pid):
    """Whether process `pid` still runs (an exited one its parent has not
    reaped yet is a zombie: not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _end_rank(rank, what, pids, error):
    """A collective whose exchange failed: a peer died (gloo saw its
    connection close) or the exchange broke. NCCL would wait for the peer
    until the group's timeout, then its watchdog ends the process; the
    collective never completes. A future's error is not raised by
    Work.wait() (c10d's future-wrapping work only waits), so a script would
    go on as if it had: this rank stops here, naming the rank that is gone."""
    dead = []
    for _ in range(50):  # the peer's exit may be a moment behind its closed connection
        dead = [r for r, pid in enumerate(pids) if r != rank and not _alive(pid)]
        if dead:
            break
        time.sleep(0.02)
    who = (", ".join(f"rank {r} (pid {pids[r]})" for r in dead) + (" has" if len(dead) == 1 else " have") + " exited"
           if dead else f"it failed ({(str(error).splitlines() or [type(error).__name__])[0]})")
    sys.stderr.write(f"gpemu torch: rank {rank}: {what} cannot complete: {who}; NCCL would wait for it until the "
                     f"process group's timeout and then end this process: rank {rank} stops here (exit 1)\n")
    sys.stderr.flush()
    os._exit(1)


def _host_values(t):
    """The tensor's values as a host tensor: those the host gave it, else zeros."""
    v = _ops.values_get(t)
    return v if v is not None else torch.zeros(t.shape, dtype=t.dtype)


class _InOrder:
    """Puts a group's collectives on the timeline in the order they were
    issued (NCCL runs them in order on its stream), though their exchanges
    complete in any order on gloo's threads. One thread at a time drains the
    queue's head; finish() callables run outside the lock (completing a
    future runs its callbacks, which may issue more collectives)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queue = collections.deque()  # entries: [finish callable, or None until ready]
        self._draining = False

    def add(self):
        entry = [None]
        with self._lock:
            self._queue.append(entry)
        return entry

    def ready(self, entry, finish):
        with self._lock:
            entry[0] = finish
            if self._draining:
                return
            self._draining = True
        while True:
            with self._lock:
                if not self._queue or self._queue[0][0] is None:
                    self._draining = False
                    return
                finish = self._queue.popleft()[0]
            finish()


class NcclOptions:
    """ProcessGroupNCCL.Options: the fields scripts set are kept."""

    def __init__(self, is_high_priority_stream=False):
        self.is_high_priority_stream = is_high_priority_stream
        self._timeout = datetime.timedelta(minutes=30)
        self.backend = "nccl"


def patch(torch):
    global _ops
    _ops = torch.ops.gpemu
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch.distributed.distributed_c10d as c10d
    from torch._C._distributed_c10d import (AllreduceOptions, BroadcastOptions, ProcessGroup, ReduceOp,
                                            _create_work_from_future)

    class ProcessGroupNCCL(ProcessGroup):
        """The emulated NCCL process group (see the module's docstring)."""

        Options = NcclOptions

        def __init__(self, store, rank, size, options=None):
            super().__init__(rank, size)
            self.options = options if options is not None else NcclOptions()
            timeout = getattr(self.options, "_timeout", datetime.timedelta(minutes=30))
            prefixed = dist.PrefixStore("gpemu-nccl/", store)
            self._gloo = dist.ProcessGroupGloo(prefixed, rank, size, timeout)
            # Every rank's process id, to name the one that died (_end_rank).
            prefixed.set(f"pid/{rank}", str(os.getpid()))
            self._pids = [int(prefixed.get(f"pid/{r}")) for r in range(size)]
            self._comm_streams = {}
            self._in_order = _InOrder()

        # -- identity ---------------------------------------------------------------
        def getBackendName(self):
            return "nccl"

        def _get_backend_name(self):
            return "nccl"

        def _set_sequence_number_for_group(self):
            self._gloo._set_sequence_number_for_group()

        def _get_sequence_number_for_group(self):
            return self._gloo._get_sequence_number_for_group()

        # -- the common path ------------------------------------------------------------
        def _comm_stream(self, device):
            if device not in self._comm_streams:
                self._comm_streams[device] = _ops.create_stream(device)
            return self._comm_streams[device]

        def _run(self, kind, what, tensors, nbytes, exchange=None):
            """Issues one collective on the tensors' device. `exchange`, when
            given, starts the gloo exchange of values and returns (futures,
            apply): apply() writes the exchanged values once they are in."""
            device = _cuda_device(tensors, what)
            stream = _ops.current_stream(device)
            comm = self._comm_stream(device)
            ready = torch.tensor([_ops.stream_ready_ns(device, stream)], dtype=torch.int64)
            issued = torch.cuda.Event()
            issued.record(torch.cuda.current_stream(device))
            opts = AllreduceOptions()
            opts.reduceOp = ReduceOp.MAX
            futures = [self._gloo.allreduce([ready], opts).get_future()]
            apply = None
            if exchange is not None:
                more, apply = exchange()
                futures += more
            result = torch.futures.Future(devices=[torch.device("cuda", device)])
            # finish() runs on a gloo thread and must not hold the group: were
            # its closure the group's last reference, the gloo group would be
            # destroyed on its own thread, which joins itself.
            world, rank, pids = self.size(), self.rank(), self._pids

            finished = threading.Event()
            # What holds GPU memory (the tensors, apply's closure, the result
            # future), let go on gloo's thread before the waiter goes on: were
            # the callbacks' closures the last to hold a tensor, its block
            # would go back to the allocator whenever gloo dropped them, and
            # a run's peak memory would depend on the threads' timing.
            held = [tensors, apply, result]

            def finish():
                try:
                    for f in futures:
                        f.wait()  # raises what the exchange raised (a dead rank)
                    saved = _ops.current_stream(device)
                    _ops.set_stream(device, comm)
                    try:
                        _ops.event_wait(issued._id, device, comm)
                        _ops.collective(device, comm, kind, int(nbytes), world, int(ready[0]))
                        if held[1] is not None:
                            held[1]()
                        # Completing records an event on this thread's current
                        # stream, the communication stream: waiters wait for it.
                        held[2].set_result(held[0])
                    finally:
                        _ops.set_stream(device, saved)
                except Exception as e:  # noqa: BLE001 - the collective cannot complete
                    # Before the waiter could see the future done (and go on).
                    _end_rank(rank, what, pids, e)
                finally:
                    held.clear()
                    finished.set()

            in_order = self._in_order
            entry = in_order.add()
            torch.futures.collect_all(futures).add_done_callback(lambda _: in_order.ready(entry, finish))
            if _VIRTUAL:
                finished.wait()
            # A C++ work (DDP's reducer holds works past the Python objects'
            # life): waiting makes the waiter's current stream wait for the
            # communication stream, as NCCL's does.
            return _create_work_from_future(result)

        def _small(self, tensors):
            return all(_nbytes(t) <= _VALUE_BYTES for t in tensors)

        def _each(self, tensors, start, finish):
            """The value exchange of a collective that moves each tensor on
            its own (all_reduce, reduce, broadcast), when all are small:
            start(values) launches the gloo op on a tensor's host values,
            finish(tensor, values) writes the result. (None: nothing moves.)
            finish must not hold the group (see _run)."""
            if not self._small(tensors):
                return None

            def exchange():
                values = [_host_values(t) for t in tensors]
                futs = [start(v).get_future() for v in values]

                def apply():
                    for t, v in zip(tensors, values):
                        finish(t, v)
                return futs, apply
            return exchange

        # -- collectives ------------------------------------------------------------------
        def allreduce(self, tensors, opts=None):
            op = (opts if opts is not None else AllreduceOptions()).reduceOp
            avg, world = op == ReduceOp.AVG, self.size()
            gopts = AllreduceOptions()
            gopts.reduceOp = ReduceOp.SUM if avg else op  # gloo has no AVG
            exchange = self._each(tensors, lambda v: self._gloo.allreduce([v], gopts),
                                  lambda t, v: _ops.values_set(t, v / world if avg else v))
            return self._run("all_reduce", "all_reduce", tensors, sum(_nbytes(t) for t in tensors), exchange)

        def allreduce_coalesced(self, tensors, opts=None):
            return self.allreduce(tensors, opts)

        def reduce(self, tensors, opts=None):
            # A ring reduce moves what a broadcast moves, the other way.
            root = opts.rootRank if opts is not None else 0
            gopts = AllreduceOptions()
            gopts.reduceOp = opts.reduceOp if opts is not None else ReduceOp.SUM
            is_root = self.rank() == root
            exchange = self._each(tensors, lambda v: self._gloo.allreduce([v], gopts),
                                  lambda t, v: _ops.values_set(t, v) if is_root else None)
            return self._run("broadcast", "reduce", tensors, sum(_nbytes(t) for t in tensors), exchange)

        def broadcast(self, tensors, opts=None):
            gopts = BroadcastOptions()
            gopts.rootRank = (opts if opts is not None else BroadcastOptions()).rootRank
            exchange = self._each(tensors, lambda v: self._gloo.broadcast([v], gopts), _ops.values_set)
            return self._run("broadcast", "broadcast", tensors, sum(_nbytes(t) for t in tensors), exchange)

        def allgather(self, output_tensors, input_tensors, opts=None):
            outputs = [t for ts in output_tensors for t in ts]
            exchange = None
            rank, world = self.rank(), self.size()  # the callbacks must not hold the group (see _run)
            if self._small(input_tensors):
                def exchange():
                    ins = [_host_values(t) for t in input_tensors]
                    outs = [[torch.empty_like(v) for _ in range(world)] for v in ins]
                    futs = [self._gloo.allgather(outs, ins).get_future()]

                    def apply():
                        for ts, vs in zip(output_tensors, outs):
                            for t, v in zip(ts, vs):
                                _ops.values_set(t, v)
                    return futs, apply
            return self._run("all_gather", "all_gather", input_tensors + outputs,
                             sum(_nbytes(t) for t in outputs), exchange)

        def _allgather_base(self, output, input, opts=None):
            exchange = None
            rank, world = self.rank(), self.size()  # the callbacks must not hold the group (see _run)
            if _nbytes(input) <= _VALUE_BYTES:
                def exchange():
                    v = _host_values(input)
                    outs = [[torch.empty_like(v) for _ in range(world)]]
                    futs = [self._gloo.allgather(outs, [v]).get_future()]

                    def apply():
                        _ops.values_set(output, torch.cat([o.reshape(-1) for o in outs[0]]).view(output.shape))
                    return futs, apply
            return self._run("all_gather", "_allgather_base", [input, output], _nbytes(output), exchange)

        def reduce_scatter(self, output_tensors, input_tensors, opts=None):
            op = opts.reduceOp if opts is not None else ReduceOp.SUM
            inputs = [t for ts in input_tensors for t in ts]
            exchange = None
            rank, world = self.rank(), self.size()  # the callbacks must not hold the group (see _run)
            if self._small(inputs):
                def exchange():
                    values = [torch.stack([_host_values(t) for t in ts]) for ts in input_tensors]
                    gopts = AllreduceOptions()
                    gopts.reduceOp = op
                    futs = [self._gloo.allreduce([v], gopts).get_future() for v in values]

                    def apply():
                        for t, v in zip(output_tensors, values):
                            _ops.values_set(t, v[rank])
                    return futs, apply
            return self._run("reduce_scatter", "reduce_scatter", output_tensors + inputs,
                             sum(_nbytes(t) for t in inputs), exchange)

        def _reduce_scatter_base(self, output, input, opts=None):
            op = opts.reduceOp if opts is not None else ReduceOp.SUM
            exchange = None
            rank, world = self.rank(), self.size()  # the callbacks must not hold the group (see _run)
            if _nbytes(input) <= _VALUE_BYTES:
                def exchange():
                    v = _host_values(input)
                    gopts = AllreduceOptions()
                    gopts.reduceOp = op
                    futs = [self._gloo.allreduce([v], gopts).get_future()]

                    def apply():
                        _ops.values_set(output, v.reshape(world, -1)[rank].view(output.shape))
                    return futs, apply
            return self._run("reduce_scatter", "_reduce_scatter_base", [output, input], _nbytes(input), exchange)

        def barrier(self, opts=None):
            # NCCL's barrier: an all-reduce of one byte on the current GPU,
            # whose wait blocks the host until it is done; here the host
            # waits at once (dist.barrier waits anyway).
            device_ids = getattr(opts, "device_ids", None) or [torch.cuda.current_device()]
            device = device_ids[0]
            t = torch.empty(1, dtype=torch.uint8, device=torch.device("cuda", device))
            work = self._run("all_reduce", "barrier", [t], 1)
            work.get_future().wait()
            _ops.stream_synchronize(device, self._comm_stream(device))
            return work

    # DDP's C++ loops over parameters and buffers (the model broadcast at
    # construction, the buffer broadcast before each forward, the shape
    # check): their copies pay the C++ launch cost.
    from ._cuda import cpp_loop

    dist._broadcast_coalesced = cpp_loop(dist._broadcast_coalesced)
    dist._verify_params_across_processes = cpp_loop(dist._verify_params_across_processes)

    def unsupported(name):
        def method(self, *args, **kwargs):
            raise RuntimeError(f"{name}: not emulated by gpemu's NCCL process group yet (docs/torch.md lists "
                               "all_reduce, broadcast, reduce, all_gather, reduce_scatter and barrier)")
        return method

    for method, name in (("alltoall", "all_to_all"), ("alltoall_base", "all_to_all_single"), ("send", "send"),
                         ("recv", "recv"), ("recv_anysource", "recv"), ("gather", "gather"),
                         ("scatter", "scatter")):
        setattr(ProcessGroupNCCL, method, unsupported(name))
    ProcessGroupNCCL.__module__ = "torch.distributed.distributed_c10d"
    c10d.ProcessGroupNCCL = ProcessGroupNCCL
    c10d._NCCL_AVAILABLE = True
    dist.ProcessGroupNCCL = ProcessGroupNCCL
