"""The script `gpemu bench torch` runs under `gpemu torch` (bench/torch_bench.h).

Trains a torchvision model for --warmup + --iters iterations (SGD with
momentum, pinned batches copied non_blocking, loss.item() every iteration)
and prints one JSON line: the mean over measured iterations of the emulated
forward, backward + step and iteration (copies included) times (CUDA
events), the wall time and the ops issued; then the emulator's own cost per op on a loop of small in-place adds
on the emulated GPU beside the same loop on CPU tensors.
"""
import argparse
import json
import time


def wall_clock():
    """Wall time: under gpemu torch --clock virtual, time.perf_counter reads
    emulated time (docs/torch.md, "The script's own clocks")."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--micro-ops", type=int, default=20000)
    a = p.parse_args()

    model = getattr(torchvision.models, a.model)().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss().cuda()
    x = torch.randn(a.batch, 3, 224, 224).pin_memory()
    y = torch.randint(0, 1000, (a.batch,)).pin_memory()

    def counted():
        s = json.loads(torch.ops.gpemu.summary())
        return s["kernels"] + s["view_ops"]

    fwd, bwd, it, wall, ops = [], [], [], [], []
    for i in range(a.warmup + a.iters):
        start, e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        n0, w0 = counted(), wall_clock()
        start.record()
        xb, yb = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        e0.record()  # completes when the copies have: forward is e0 -> e1
        loss = crit(model(xb), yb)
        e1.record()
        opt.zero_grad()
        loss.backward()
        opt.step()
        e2.record()
        loss.item()
        w1, n1 = wall_clock(), counted()
        if i >= a.warmup:
            fwd.append(e0.elapsed_time(e1))
            bwd.append(e1.elapsed_time(e2))
            it.append(start.elapsed_time(e2))  # the copies, forward, backward + step
            wall.append((w1 - w0) * 1e3)
            ops.append(n1 - n0)

    def mean(v):
        return sum(v) / len(v)

    # The emulator's own cost per op: small in-place adds (no GPU work to
    # speak of), timed on the wall clock, beside torch's own CPU dispatch.
    def per_op_us(device):
        t = torch.zeros(16, device=device)
        torch.cuda.synchronize()
        w0 = wall_clock()
        for _ in range(a.micro_ops):
            t.add_(1)
        return (wall_clock() - w0) / a.micro_ops * 1e6

    out = dict(model=a.model, batch=a.batch, iters=a.iters, forward_ms=mean(fwd), backward_ms=mean(bwd),
               iteration_ms=mean(it), wall_ms=mean(wall), ops_per_iteration=mean(ops),
               peak_allocated_bytes=torch.cuda.max_memory_allocated(),
               peak_reserved_bytes=torch.cuda.max_memory_reserved(),
               emulated_op_us=per_op_us("cuda"), cpu_op_us=per_op_us("cpu"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
