"""gpemu profile's measurement: training steps of torchvision models on a real
GPU (or, to test this code path, the CPU), timed as GPEmu's profiles split
them and as a PyTorch 2 loop runs them, with the caching allocator's peaks.

Prints JSON lines: first {"environment": {...}}, then one object per
(model, batch size). `gpemu profile` turns them into gpemu's profile layout
and a step-times CSV (docs/profiles.md, docs/host.md).

After the timed steps, --op-steps more steps run under torch.profiler (CUDA
kernels on a GPU, CPU time on the CPU) and the row gets "ops": per aten op
(the outermost one: what Python or autograd called), input shapes and phase,
its calls per step, device time per call and kernel names (docs/profiles.md,
"Per-op GPU times").

usage: gpemu_profile.py --models resnet18,resnet50 --batch-sizes 1,8,32
       [--precision fp32|tf32|amp|bf16] [--device auto|cuda|cpu] [--warmup N] [--steps N]
       [--channels-last] [--factory module:function] [--op-steps N]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


def environment(torch, device):
    env = {"device": device, "torch": torch.__version__, "python": platform.python_version(),
           "host_cpu": platform.processor() or platform.machine(), "host_cores": os.cpu_count()}
    if device == "cuda":
        env.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version(),
                   gpu_memory_mib=torch.cuda.get_device_properties(0).total_memory / 2**20)
        try:
            import subprocess
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:  # noqa: BLE001 - the driver version is for people only
            pass
    return env


# The phases of one step, as record_function ranges: GPEmu's backward is
# loss + zero_grad + backward + optimizer step. zero_grad counts with the
# optimizer, as in the zoo's programs (OpProgram::Section::ZeroGrad).
PHASES = ("forward", "loss", "backward", "optimizer")
# The class an outermost op gets: the first of these that an aten op inside it
# has (the tracer's tables, tools/tracer/opclass.py); else elementwise, or view
# when it ran views only.
CLASS_ORDER = ("conv", "matmul", "norm", "pooling", "softmax", "embedding", "reduction", "copy", "optimizer")
# The class of PyTorch's functional wrappers, which the tracer's tables leave
# out because the aten ops they call carry it. Used only when the profiler's
# tree shows none of those calls under the wrapper (seen once, on a loaded
# 2-core machine: an aten::conv2d with no convolution below it; cause not found).
WRAPPER_CLASS = {"conv1d": "conv", "conv2d": "conv", "conv3d": "conv", "conv_transpose1d": "conv",
                 "conv_transpose2d": "conv", "conv_transpose3d": "conv", "linear": "matmul", "matmul": "matmul",
                 "batch_norm": "norm", "layer_norm": "norm", "group_norm": "norm", "instance_norm": "norm",
                 "max_pool1d": "pooling", "max_pool3d": "pooling", "adaptive_avg_pool1d": "pooling",
                 "adaptive_avg_pool2d": "pooling", "adaptive_avg_pool3d": "pooling", "adaptive_max_pool1d": "pooling",
                 "softmax": "softmax", "log_softmax": "softmax", "embedding_bag": "embedding"}
MAX_KERNEL_NAMES = 8


def opclass_module():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tracer"))
    import opclass  # noqa: E402 - tools/tracer/opclass.py, installed beside this script
    return opclass


def subtree(e):
    yield e
    for c in e.cpu_children:
        yield from subtree(c)


def op_class(opclass, names, phase, shapes):
    """The class of an outermost op from the aten ops it ran (`names`, its own
    first). A name in none of the tracer's tables (a wrapper such as conv2d)
    says nothing; in the optimizer every kernel is the optimizer's."""
    known = [opclass.classify(n, phase) for n in names
             if phase == "optimizer" or opclass.classify(n, None) != "elementwise"]
    if not known and phase != "optimizer" and names and names[0] in WRAPPER_CLASS:
        known = [WRAPPER_CLASS[names[0]]]
    for c in CLASS_ORDER:
        if c in known:
            if c == "conv" and any(isinstance(x, list) and len(x) == 5 for x in shapes):
                return "conv3d"
            return c
    if len(known) == len(names) and all(k == "view" for k in known):
        return "view"
    return "elementwise"


def shape_of(x):
    """One input's recorded shape in the file's form: whole numbers, or for a
    tensor list a list of such shapes; [] for anything else (a scalar)."""
    def dims(v):
        return isinstance(v, (list, tuple)) and all(isinstance(d, int) and d >= 0 for d in v)
    if dims(x):
        return list(x)
    if isinstance(x, (list, tuple)) and all(dims(v) for v in x):
        return [list(v) for v in x]
    return []


def dtype_of(dtypes):
    for d in dtypes or []:
        if d and d != "Scalar":
            return d.replace("c10::", "").lower()
    return None


def op_rows(prof, cuda, steps, opclass):
    """Per (phase, op, shapes, dtype): calls per step, device seconds per call
    (the kernels of the op and the aten ops inside it on a GPU; its CPU time,
    nested ops included, on the CPU), the class and the kernels' names."""
    from torch.autograd import DeviceType
    events = [e for e in prof.events() if getattr(e, "device_type", DeviceType.CPU) == DeviceType.CPU]
    # Time windows, not thread stacks: on CUDA autograd runs backward on its own thread.
    windows = sorted((e.time_range.start, e.time_range.end, e.name[len("gpemu::"):])
                     for e in events if e.name.startswith("gpemu::"))
    dtypes = {}
    try:  # the input dtypes are on the raw kineto events only
        for k in prof.profiler.kineto_results.events():
            dtypes[k.correlation_id()] = k.dtypes()
    except Exception:  # noqa: BLE001 - the dtype is optional
        pass
    rows = {}
    for e in events:
        if not e.name.startswith("aten::"):
            continue
        parent, outer = e.cpu_parent, True
        while parent is not None:
            if parent.name.startswith("aten::"):
                outer = False
                break
            parent = parent.cpu_parent
        if not outer:
            continue
        phase = next((p for s, t, p in windows if s <= e.time_range.start <= t), None)
        if phase is None:
            continue
        nodes = [n for n in subtree(e) if n.name.startswith("aten::")]
        if cuda:
            kernels = [k for n in subtree(e) for k in getattr(n, "kernels", [])]
            us = sum(k.duration for k in kernels)
        else:
            kernels, us = [], e.cpu_time_total
        shapes = [shape_of(x) for x in (e.input_shapes or [])]
        key = (phase, e.name, json.dumps(shapes), dtype_of(dtypes.get(e.id)))
        r = rows.setdefault(key, {"calls": 0, "us": 0.0, "kernels": set(),
                                  "class": op_class(opclass, [n.name[len("aten::"):] for n in nodes],
                                                    phase, shapes)})
        r["calls"] += 1
        r["us"] += us
        r["kernels"].update(k.name for k in kernels)
    out = []
    for (phase, name, shapes, dtype), r in sorted(rows.items(), key=lambda kv: (PHASES.index(kv[0][0]), -kv[1]["us"])):
        row = {"phase": phase, "op": name, "class": r["class"], "shapes": json.loads(shapes),
               "calls_per_step": r["calls"] / steps, "seconds_per_call": r["us"] * 1e-6 / r["calls"]}
        if dtype:
            row["dtype"] = dtype
        if cuda:
            row["kernels"] = sorted(r["kernels"])[:MAX_KERNEL_NAMES]
        out.append(row)
    return out


def profile_ops(steps, cuda, forward, rest, sync):
    """`steps` more training steps under torch.profiler, each phase a
    record_function range; their per-op rows (op_rows)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    def phase(name):
        return record_function("gpemu::" + name)

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts, record_shapes=True) as prof:
        for _ in range(steps):
            with phase("forward"):
                out = forward()
            rest(out, phase)
            sync()
    return op_rows(prof, cuda, steps, opclass_module())


def build(torch, name, factory, device, channels_last):
    if factory:
        module, fn = factory.split(":", 1)
        sys.path.insert(0, os.getcwd())
        model = getattr(__import__(module, fromlist=[fn]), fn)(name)
    else:
        import torchvision
        kw = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
        model = getattr(torchvision.models, name)(**kw)
    model = model.to(device).train()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--batch-sizes", required=True)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "amp", "bf16"])
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--factory", default="")
    ap.add_argument("--op-steps", type=int, default=1)
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - reported as the run's error
        emit({"error": f"cannot import torch: {e}"})
        return 0
    device = a.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        emit({"error": "--device cuda: torch sees no CUDA device"})
        return 0
    cuda = device == "cuda"
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32 or a.precision != "fp32"
    torch.backends.cudnn.benchmark = True
    half = {"amp": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    if half is torch.float16 and not cuda:
        half = torch.bfloat16  # CPU autocast runs BF16
    emit({"environment": environment(torch, device)})

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def clock():
        sync()
        return time.perf_counter()

    for name in a.models.split(","):
        for b in [int(x) for x in a.batch_sizes.split(",")]:
            row = {"model": name, "batch_size": b, "precision": a.precision}
            model = opt = None
            try:
                model = build(torch, name, a.factory, device, a.channels_last)
                size = 299 if name == "inception_v3" else 224
                x = torch.randn(b, 3, size, size, device=device)
                if a.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                y = torch.randint(0, 1000, (b,), device=device)
                opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
                scaler = torch.cuda.amp.GradScaler() if (cuda and half is torch.float16) else None

                import contextlib

                def autocast():
                    return torch.autocast(device_type=device, dtype=half) if half else contextlib.nullcontext()

                def forward():
                    with autocast():
                        return model(x)

                def rest(out, phase=contextlib.nullcontext):  # GPEmu's backward: loss + zero_grad + backward + step
                    with phase("loss"), autocast():
                        loss = F.cross_entropy(out, y)
                    with phase("optimizer"):
                        opt.zero_grad(set_to_none=True)
                    with phase("backward"):
                        (scaler.scale(loss) if scaler else loss).backward()
                    with phase("optimizer"):
                        if scaler:
                            scaler.step(opt)
                            scaler.update()
                        else:
                            opt.step()

                for _ in range(a.warmup):
                    rest(forward())
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                    persistent = torch.cuda.memory_allocated() / 2**20
                fwd, bwd = [], []
                for _ in range(a.steps):  # each phase synchronised, as GPEmu timed it
                    t0 = clock()
                    out = forward()
                    t1 = clock()
                    rest(out)
                    t2 = clock()
                    fwd.append(t1 - t0)
                    bwd.append(t2 - t1)
                del out
                t0 = clock()  # steps back to back, as a training loop issues them
                for _ in range(a.steps):
                    rest(forward())
                step = (clock() - t0) / a.steps
                row.update(status="ok", forward_s=statistics.median(fwd), backward_s=statistics.median(bwd),
                           step_s=step, forward_cv=statistics.pstdev(fwd) / statistics.mean(fwd),
                           backward_cv=statistics.pstdev(bwd) / statistics.mean(bwd))
                if cuda:
                    row.update(peak_allocated_mib=torch.cuda.max_memory_allocated() / 2**20,
                               peak_reserved_mib=torch.cuda.max_memory_reserved() / 2**20,
                               persistent_mib=persistent)
                if a.op_steps > 0:  # per-op times, after (never inside) the timed steps and the peaks
                    try:
                        row.update(op_timer="cuda" if cuda else "cpu",
                                   ops=profile_ops(a.op_steps, cuda, forward, rest, sync))
                    except Exception as e:  # noqa: BLE001 - the row's times stand without its ops
                        row.pop("op_timer", None)
                        row["ops_error"] = repr(e)[:300].replace("\n", " ")
            except Exception as e:  # noqa: BLE001 - one failing row must not cost the others
                oom = "out of memory" in str(e).lower()
                row.update(status="oom" if oom else "error", error=repr(e)[:300].replace("\n", " "))
            del model, opt
            if cuda:
                torch.cuda.empty_cache()
            emit(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
