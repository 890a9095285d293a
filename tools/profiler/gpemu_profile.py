"""gpemu profile's measurement: training steps of torchvision models on a real
GPU (or, to test this code path, the CPU), timed as GPEmu's profiles split
them and as a PyTorch 2 loop runs them, with the caching allocator's peaks.

Prints JSON lines: first {"environment": {...}}, then one object per
(model, batch size). `gpemu profile` turns them into gpemu's profile layout
and a step-times CSV (docs/profiles.md, docs/host.md).

usage: gpemu_profile.py --models resnet18,resnet50 --batch-sizes 1,8,32
       [--precision fp32|tf32|amp|bf16] [--device auto|cuda|cpu] [--warmup N] [--steps N]
       [--channels-last] [--factory module:function]
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

                def rest(out):  # GPEmu's backward: loss + zero_grad + backward + step
                    with autocast():
                        loss = F.cross_entropy(out, y)
                    opt.zero_grad(set_to_none=True)
                    if scaler:
                        scaler.scale(loss).backward()
                        scaler.step(opt)
                        scaler.update()
                    else:
                        loss.backward()
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
