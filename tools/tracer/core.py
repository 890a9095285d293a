"""The recording dispatch mode.

`Recorder` is a TorchDispatchMode that sees every aten operator below autograd
(forward ops, the backward ops autograd runs, optimizer ops) on meta tensors.
For each op it records name, class, phase, FLOPs, bytes read/written and
parameter bytes, and it keeps a table of tensor *storages* (so views are never
counted twice) with their size and the op interval in which they are alive.

Lifetimes: each storage gets a C++ weak reference (StorageImpl weak pointer).
Before every op the recorder checks which tracked storages have expired: a
storage whose last reference (Python tensor, autograd saved variable, grad
buffer, optimizer state, ...) has died since the previous op is released
"after" the previous op. Holding a weak reference keeps the StorageImpl's
memory (not its data: meta tensors have none) from being reused, so two
storages are never confused by address.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import opclass
from .metakernels import run_missing

_expired = torch.UntypedStorage._expired
_free_weak = torch.UntypedStorage._free_weak_ref

DTYPE_CODES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.float64: "f64", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
    torch.int8: "i8", torch.uint8: "u8", torch.bool: "b8", torch.complex64: "c64",
}

# tensor roles
PARAM, BUFFER, INPUT, STATE, GRAD, ACT, EXTERNAL = (
    "param", "buffer", "input", "state", "grad", "act", "external")


def unique_bytes(t):
    """Bytes a kernel touches for view `t`: element size times the number of
    distinct elements (broadcast dims with stride 0 count once)."""
    n = 1
    for s, st in zip(t.shape, t.stride()):
        if st != 0:
            n *= s
    return n * t.element_size()


class TensorRec:
    __slots__ = ("nbytes", "alloc", "free", "role", "dtype", "wref", "key", "device")

    def __init__(self, nbytes, alloc, role, dtype, wref, key):
        self.nbytes = nbytes
        self.alloc = alloc
        self.free = None  # None: still alive
        self.role = role
        self.dtype = dtype
        self.wref = wref
        self.key = key


class OpRec:
    __slots__ = ("name", "cls", "phase", "dtype", "flops", "rd", "wr", "par", "ins", "outs")


class Recorder(TorchDispatchMode):
    """Records ops and storages. Op indices are global across sections:
    section k's ops continue the numbering after the ops recorded before it."""

    def __init__(self):
        super().__init__()
        self.tensors = []        # TensorRec, index = tensor id
        self.key2id = {}         # StorageImpl address -> tensor id (while tracked)
        self.watch = []          # ids whose death we poll for
        self.ops = []            # OpRec
        self.phase = "forward"
        self.recording = True
        self.errors = []

    # ----- storage bookkeeping -------------------------------------------------
    @staticmethod
    def _key(t):
        return t.storage()._cdata

    def register(self, t, role, alloc=-1):
        """Register an existing meta tensor's storage (weights, inputs, state)."""
        key = self._key(t)
        tid = self.key2id.get(key)
        if tid is not None:
            return tid
        st = t.storage()
        rec = TensorRec(st.nbytes(), alloc, role, DTYPE_CODES.get(t.dtype, str(t.dtype)),
                        st._weak_ref(), key)
        tid = len(self.tensors)
        self.tensors.append(rec)
        self.key2id[key] = tid
        if alloc >= 0:
            self.watch.append(tid)
        return tid

    def tid_of(self, t):
        return self.key2id.get(self._key(t))

    def poll(self, when=None):
        """Mark watched storages that died as released after op `when`
        (default: the last recorded op)."""
        if when is None:
            when = len(self.ops) - 1
        still = []
        tensors = self.tensors
        for tid in self.watch:
            rec = tensors[tid]
            if _expired(rec.wref):
                rec.free = max(when, rec.alloc)
                _free_weak(rec.wref)
                rec.wref = None
                del self.key2id[rec.key]
            else:
                still.append(tid)
        self.watch = still

    def close(self):
        """Forget all weak references (end of a trace)."""
        for rec in self.tensors:
            if rec.wref is not None:
                _free_weak(rec.wref)
                rec.wref = None
        self.key2id.clear()
        self.watch = []

    # ----- dispatch ------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunction():
            return self._dispatch(func, args, kwargs or {})

    def _dispatch(self, func, args, kwargs):
        if not self.recording:
            try:
                return func(*args, **kwargs)
            except NotImplementedError:
                return run_missing(func, args, kwargs)
        self.poll()
        try:
            out = func(*args, **kwargs)
        except NotImplementedError:
            out = run_missing(func, args, kwargs)
        self._record(func, args, kwargs, out)
        return out

    def _record(self, func, args, kwargs, out):
        T = torch.Tensor
        flat_in = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, T)]
        flat_out = [x for x in tree_flatten(out)[0] if isinstance(x, T)]
        if not any(x.is_meta for x in flat_in) and not any(x.is_meta for x in flat_out):
            return  # host-side op (e.g. Adam's CPU step counter): not a GPU kernel
        name = func.overloadpacket.__name__
        idx = len(self.ops)
        # mutated arguments (in-place / out= / foreach lists), from the schema
        mutated = []
        schema = func._schema
        for i, arg in enumerate(schema.arguments):
            ai = arg.alias_info
            if ai is None or not ai.is_write:
                continue
            if i < len(args):
                v = args[i]
            else:
                v = kwargs.get(arg.name)
            if isinstance(v, T):
                mutated.append(v)
            elif isinstance(v, (list, tuple)):
                mutated.extend(x for x in v if isinstance(x, T))
        ins, seen_in = [], set()
        rd = 0
        par = 0
        par_seen = set()
        write_only_self = name in opclass.WRITE_ONLY_SELF
        for j, x in enumerate(flat_in):
            if not x.is_meta:
                continue
            tid = self.tid_of(x)
            if tid is None:  # created outside the recorder: lives throughout
                tid = self.register(x, EXTERNAL)
            vkey = (tid, x.storage_offset(), tuple(x.shape), tuple(x.stride()), x.dtype)
            if tid not in seen_in:
                seen_in.add(tid)
                ins.append(tid)
            if vkey in par_seen:
                continue
            par_seen.add(vkey)
            ub = unique_bytes(x)
            if not (write_only_self and j == 0):
                rd += ub
            if self.tensors[tid].role == PARAM:
                par += ub
        outs = []
        wr = 0
        out_views = []
        seen_out = set()
        for x in flat_out + mutated:
            if not x.is_meta:
                continue
            key = self._key(x)
            tid = self.key2id.get(key)
            if tid is None:
                st = x.storage()
                rec = TensorRec(st.nbytes(), idx, ACT,
                                DTYPE_CODES.get(x.dtype, str(x.dtype)), st._weak_ref(), key)
                tid = len(self.tensors)
                self.tensors.append(rec)
                self.key2id[key] = tid
                self.watch.append(tid)
            vkey = (tid, x.storage_offset(), tuple(x.shape), tuple(x.stride()), x.dtype)
            if vkey in seen_out:
                continue
            seen_out.add(vkey)
            if tid not in outs:
                outs.append(tid)
            out_views.append(x)
            ub = unique_bytes(x)
            wr += ub
            if self.tensors[tid].role == PARAM and vkey not in par_seen:
                par_seen.add(vkey)
                par += ub
        base = opclass.classify(name, None)
        cls = opclass.spatial_class(opclass.classify(name, self.phase), flat_in)
        op = OpRec()
        op.name = name
        op.cls = cls
        op.phase = self.phase
        if cls == "view":
            op.flops = op.rd = op.wr = op.par = 0
        else:
            op.flops = int(opclass.flops(name, base, args, kwargs, out_views, torch))
            op.rd, op.wr, op.par = rd, wr, par
        dt = None
        for x in out_views + flat_in:
            if x.is_floating_point():
                dt = x.dtype
                break
        if dt is None:
            dt = (out_views + flat_in)[0].dtype
        op.dtype = DTYPE_CODES.get(dt, str(dt))
        op.ins = ins
        op.outs = outs
        self.ops.append(op)
