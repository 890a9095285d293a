"""The host's dispatch cost per op of the installed PyTorch, on the CPU
(gpemu bench host; docs/host.md).

Every op runs on tiny CPU tensors, so its kernel costs almost nothing and the
time is Python, the nn.Module call, the dispatcher and autograd's bookkeeping:
what a GPU host pays too before the CUDA launch itself. Prints one JSON line.

usage: host_bench.py [--quick]
"""
import json
import sys
import time


def per_call(fn, calls, repeats=5):
    """Median over `repeats` of the mean time of `calls` calls (seconds)."""
    for _ in range(max(10, calls // 10)):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    times.sort()
    return times[len(times) // 2]


def main():
    quick = "--quick" in sys.argv[1:]
    n = 300 if quick else 2000
    try:
        import torch
        import torch.nn as nn
    except Exception as e:  # noqa: BLE001 - reported as the bench's error
        print(json.dumps({"error": f"cannot import torch: {e}"}))
        return 0
    torch.set_num_threads(1)
    x = torch.randn(4, 16)
    img = torch.randn(1, 4, 4, 4)

    # A view: the dispatcher only, no kernel.
    view = per_call(lambda: x.view(16, 4), n * 5)

    # Forward: module calls that each issue one kernel (nn.Linear also a
    # transpose view of its weight, which is taken off).
    modules = [(nn.ReLU(), x, 1, 0), (nn.LayerNorm(16), x, 1, 0), (nn.Linear(16, 16), x, 1, 1),
               (nn.BatchNorm2d(4).train(), img, 1, 0), (nn.Conv2d(4, 4, 1), img, 1, 0)]
    # With autograd recording, as in training: the parameters require grads.
    forward = [(per_call(lambda m=m, inp=inp: m(inp), n) - views * view) / kernels for m, inp, kernels, views in modules]
    forward_us = sum(forward) / len(forward) * 1e6

    # Autograd: a chain of 64 elementwise ops, forward + backward, minus the
    # forward alone; one backward node (one kernel) per op.
    depth = 64
    w = torch.randn(4, 16, requires_grad=True)

    def chain():
        y = w
        for _ in range(depth):
            y = y * 1.0001
        return y.sum()

    def chain_and_backward():
        chain().backward()

    fwd = per_call(chain, max(20, n // 20))
    both = per_call(chain_and_backward, max(20, n // 20))
    backward_us = max(0.0, (both - fwd) / (depth + 1)) * 1e6

    # The optimizer: SGD with momentum over 64 small parameters, foreach (one
    # call per step of the update: 3) and the for-loop (3 kernels a parameter).
    params = [nn.Parameter(torch.randn(16)) for _ in range(64)]
    for p in params:
        p.grad = torch.randn(16)
    result = {}
    for foreach in (True, False):
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=foreach)
        opt.step()  # the momentum buffers exist from here on, as in a steady state
        t = per_call(opt.step, max(20, n // 20))
        result["foreach" if foreach else "for_loop"] = t / (3 if foreach else 3 * len(params)) * 1e6

    print(json.dumps({
        "torch": torch.__version__.split("+")[0],
        "threads": torch.get_num_threads(),
        "forward_us": forward_us,
        "forward_us_per_module": {type(m).__name__: v * 1e6 for (m, _, _, _), v in zip(modules, forward)},
        "backward_us": backward_us,
        "optimizer_foreach_call_us": result["foreach"],
        "optimizer_for_loop_kernel_us": result["for_loop"],
        "view_us": view * 1e6,
        "calls": n,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
