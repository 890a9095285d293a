"""Trace one training iteration of a model at one concrete shape.

The iteration is the steady state of a standard loop:

    optimizer.zero_grad(set_to_none=True)      # grads of the previous step gone
    with autocast():                           # amp only
        out = model(*inputs); loss = loss_fn(out, target)      -> phase "forward"
    scaler.scale(loss).backward()              # amp: loss * scale  -> "backward"
    scaler.unscale_/optimizer.step()/update    # one section per optimizer -> "optimizer"

Precision "half" is pure-half training as apex's O2 level runs it: the model's
parameters and float inputs are FP16 (BatchNorm stays FP32), every op runs in
the dtype of its inputs (no autocast), the loss is scaled, and the optimizer
works on FP32 master copies of the FP16 parameters: each step copies the FP16
gradients into FP32 master gradients, unscales them, updates the masters and
copies them back into the FP16 parameters (FP32 parameters are their own
masters).

A parameter carrying a `_gpemu_sparse` holder (recsys.SparseGrad: an embedding
table trained with sparse gradients) gets no dense gradient: its gradient is
the holder's (rows, values), and each optimizer section updates only those
rows (recsys.sparse_sgd; SGD only, as torch's sparse gradients allow).

Optimizer state (SGD momentum buffers, Adam exp_avg/exp_avg_sq) already exists,
as it does from the second iteration on. Everything runs on meta tensors.
"""
import torch

from .core import Recorder, PARAM, BUFFER, INPUT, STATE, GRAD
from .cudasem import CudaSemantics
from . import recsys

END = -1  # free index: alive until the end of the iteration (or persistent)

OPTIMIZERS = ("sgd", "adam")
PRECISIONS = ("fp32", "amp")
# Traced only where a model's spec asks for it (ModelSpec.half): pure-half
# training is what transformer benchmarks run; see the module docstring.
ALL_PRECISIONS = ("fp32", "amp", "half")


def make_optimizer(kind, params, momentum=0.9):
    if kind == "sgd":
        opt = torch.optim.SGD(params, lr=0.1, momentum=momentum, foreach=False)
        if momentum:
            for p in params:
                opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        return opt
    if kind == "adam":
        opt = torch.optim.Adam(params, lr=1e-3, foreach=False)
        for p in params:
            st = opt.state[p]
            st["step"] = torch.tensor(1.0)
            st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return opt
    raise ValueError(f"unknown optimizer {kind}")


def _state_tensors(opt):
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            for k, v in opt.state[p].items():
                if isinstance(v, torch.Tensor) and v.is_meta:
                    out.append(v)
    return out


def _to_pure_half(model):
    """apex O2's cast: a copy of the model in FP16, BatchNorm kept in FP32."""
    import copy
    m = copy.deepcopy(model)
    m.half()
    for mod in m.modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            mod.float()
    return m


def _half_inputs(x):
    if isinstance(x, torch.Tensor):
        return x.half() if x.dtype == torch.float32 else x
    if isinstance(x, (tuple, list)):
        return type(x)(_half_inputs(y) for y in x)
    return x


def trace_once(spec, B, S=None, precision="fp32", optimizers=OPTIMIZERS):
    """Returns a raw trace: plain Python lists with concrete numbers."""
    if precision not in ALL_PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {ALL_PRECISIONS}")
    half = precision == "half"
    model = spec.build()
    if half:
        model = _to_pure_half(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    rec = Recorder()
    param_ids = [rec.register(p, PARAM) for p in params]
    for b in model.buffers():
        if b.is_meta:
            rec.register(b, BUFFER)
    args, target = spec.inputs(B, S)
    if half:
        args = _half_inputs(args)
    targets = list(target) if isinstance(target, (tuple, list)) else [target]
    for x in list(args) + targets:
        if isinstance(x, torch.Tensor):
            rec.register(x, INPUT)
    for b in getattr(spec, "extra_persistent", lambda m: [])(model):
        rec.register(b, BUFFER)
    # pure half: the optimizer updates FP32 master copies of the FP16
    # parameters; FP32 ones (BatchNorm's) are their own masters, as in apex.
    masters = params
    if half:
        masters = [p.detach().float().requires_grad_() if p.dtype != torch.float32 else p for p in params]
        for p, m in zip(params, masters):
            if m is not p:
                rec.register(m, STATE)
    sparse = [p for p in params if hasattr(p, "_gpemu_sparse")]
    if sparse and (half or any(k != "sgd" for k in optimizers)):
        raise ValueError(f"{spec.name}: tables with sparse gradients are traced with SGD in fp32/amp only")
    dense_masters = [m for p, m in zip(params, masters) if not hasattr(p, "_gpemu_sparse")]
    momentum = getattr(spec, "sgd_momentum", 0.9)
    opts = {k: make_optimizer(k, dense_masters, momentum) for k in optimizers}

    amp = precision in ("amp", "half")
    if amp:
        scale = torch.full((1,), 65536.0, device="meta")
        growth_tracker = torch.zeros((1,), dtype=torch.int32, device="meta")
        rec.register(scale, STATE)
        rec.register(growth_tracker, STATE)
    sem = CudaSemantics(torch.float16 if precision == "amp" else None)

    with sem, rec:
        rec.phase = "forward"
        out = model(*args)
        loss = spec.loss(out, target)
        sem.end_autocast()
        if amp:
            loss = loss.float() * scale
        n_fwd = len(rec.ops)
        rec.phase = "backward"
        loss.backward()
        del out, loss
    rec.poll()
    n_main = len(rec.ops)
    main_tensor_count = len(rec.tensors)
    grad_ids = []
    for p in params:
        g = p._gpemu_sparse.values if hasattr(p, "_gpemu_sparse") else p.grad
        if g is None:
            raise RuntimeError(f"{spec.name}: a parameter got no gradient")
        tid = rec.tid_of(g)
        rec.tensors[tid].role = GRAD
        grad_ids.append(tid)
    # everything still alive survives to the end of the iteration
    for tid in rec.watch:
        rec.tensors[tid].free = END
    rec.watch = []
    for r in rec.tensors:
        if r.free is None:
            r.free = END

    main = {
        "ops": [_op_tuple(o) for o in rec.ops],
        "tensors": [_t_tuple(t) for t in rec.tensors],
        "phases": {"forward": [0, n_fwd], "backward": [n_fwd, n_main]},
        "param_grad": [[p, g] for p, g in zip(param_ids, grad_ids)],
    }
    sections = {}
    for kind, opt in opts.items():
        op0, t0 = len(rec.ops), len(rec.tensors)
        for st in _state_tensors(opt):
            rec.register(st, STATE)
        with rec:
            rec.phase = "optimizer"
            grads = [p.grad for p in params if not hasattr(p, "_gpemu_sparse")]
            grads += [p._gpemu_sparse.values for p in sparse]  # GradScaler unscales their values too
            if half:
                # apex's model_grads_to_master_grads: FP16 grads -> FP32 master grads
                grads = [g.float() for g in grads]
                for m, g in zip(masters, grads):
                    m.grad = g
            if amp:
                inv_scale = scale.double().reciprocal().float()
                found_inf = torch.full((1,), 0.0, device="meta")
                torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
                # (GradScaler reads found_inf back to the host here: a D2H sync)
            opt.step()
            for p in sparse:
                recsys.sparse_sgd(p, p._gpemu_sparse, 0.1)
            if amp:
                torch._amp_update_scale_(scale, growth_tracker, found_inf, 2.0, 0.5, 2000)
                del inv_scale, found_inf
            if half:
                # master_params_to_model_params; the master grads die with the step
                with torch.no_grad():
                    for p, m in zip(params, masters):
                        if m is not p:
                            p.copy_(m)
                for p, m in zip(params, masters):
                    if m is not p:
                        m.grad = None
            del grads
        rec.poll()
        for tid in rec.watch:
            rec.tensors[tid].free = END
        rec.watch = []
        # renumber: section ops follow the main ops; section tensors follow main tensors
        shift_op = op0 - n_main
        shift_t = t0 - main_tensor_count

        def remap(tid):
            if tid >= t0:
                return tid - shift_t
            if tid >= main_tensor_count:
                raise RuntimeError("optimizer section touched another section's tensor")
            return tid
        ops = []
        for o in rec.ops[op0:]:
            name, cls, dt, fl, rd, wr, par, ins, outs = _op_tuple(o)
            ops.append((name, cls, dt, fl, rd, wr, par, tuple(remap(i) for i in ins),
                        tuple(remap(i) for i in outs)))
        tens = []
        for t in rec.tensors[t0:]:
            nbytes, alloc, free, role, dt = _t_tuple(t)
            if alloc >= 0:
                alloc -= shift_op
            if free is not None and free >= 0:
                free -= shift_op
            if free is None:
                free = END
            tens.append((nbytes, alloc, free, role, dt))
        sections[kind] = {"ops": ops, "tensors": tens}
    for p in sparse:
        p._gpemu_sparse.clear()
    rec.close()
    n_params = sum(p.numel() for p in params)
    return {"main": main, "sections": sections, "params": n_params,
            "grad_ids": grad_ids, "B": B, "S": S, "precision": precision}


def _op_tuple(o):
    return (o.name, o.cls, o.dtype, o.flops, o.rd, o.wr, o.par, tuple(o.ins), tuple(o.outs))


def _t_tuple(t):
    return (t.nbytes, t.alloc, t.free, t.role, t.dtype)
