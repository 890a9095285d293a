"""Scripts attached to `gpemu serve` (`gpemu torch --connect`) against a script on GPUs of its own.

Run as `/usr/bin/python3 bench/torch_connect.py [gpemu] [model] [batch] [iterations]` (ctest does not
run it: it measures wall time). Starts a server (V100, the given policy) and runs one training script
(torchvision model, SGD, in-memory batch) under the real clock four ways: on its own emulated GPU;
attached to a fifo server, alone; two copies attached to one fifo server; two copies attached to one
mps server. Prints, per way, each copy's iteration time (CUDA events: emulated GPU time between the
iteration's first and last op) and wall time per iteration, and its event time over the script's on its own GPU.
The copies start their measured iterations together (a barrier after a warm-up iteration)."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(model_name, batch, iterations, barrier):
    """The measured script (run under gpemu torch): event and wall time of each iteration, after every copy
    has warmed up (the copies wait at `barrier`, a folder, so that their measured iterations overlap)."""
    import torch
    import torchvision
    from torch_ddp import iteration  # this folder's: the same timed iteration as the DDP benchmark
    model = getattr(torchvision.models, model_name)().cuda()
    x, y = torch.randn(batch, 3, 224, 224).cuda(), torch.randint(0, 1000, (batch,)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    iteration(model, opt, x, y)  # warm-up: the allocator's segments, the first launches
    open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.01)
    events, walls = [], []
    for _ in range(iterations):
        w = time.monotonic()
        events.append(iteration(model, opt, x, y))
        walls.append((time.monotonic() - w) * 1e3)
    print(json.dumps(dict(event_ms=events, wall_ms=walls)), flush=True)


def main():
    gpemu = sys.argv[1] if len(sys.argv) > 1 else "build/gpemu"
    model = sys.argv[2] if len(sys.argv) > 2 else "resnet18"
    batch = sys.argv[3] if len(sys.argv) > 3 else "32"
    iterations = sys.argv[4] if len(sys.argv) > 4 else "10"
    me = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as tmp:
        def run(copies, connect, policy=None):
            server, sock = None, os.path.join(tmp, f"{policy}.sock")
            if connect:
                server = subprocess.Popen([gpemu, "serve", "--gpu", "v100", "--policy", policy, "--socket", sock],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(600):
                    if os.path.exists(sock):
                        break
                    time.sleep(0.05)
            args = [gpemu, "torch", "--gpu", "v100"] if not connect else [gpemu, "torch", "--connect", "--socket",
                                                                           sock]
            barrier = tempfile.mkdtemp(dir=tmp)
            procs = [subprocess.Popen(args + ["--", me, "child", model, batch, iterations, barrier],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(copies)]
            while len([f for f in os.listdir(barrier) if f.startswith("ready-")]) < copies:
                if any(p.poll() is not None for p in procs):
                    break
                time.sleep(0.05)
            open(os.path.join(barrier, "go"), "w").close()
            results = []
            for p in procs:
                out, err = p.communicate(timeout=900)
                if p.returncode != 0:
                    raise SystemExit(f"a copy failed:\n{err}")
                results.append(json.loads(out.strip().splitlines()[-1]))
            if server:
                server.terminate()
                server.wait(timeout=60)
            return [(statistics.median(r["event_ms"]), statistics.median(r["wall_ms"])) for r in results]

        ways = [("own emulated GPU", run(1, False)), ("attached, fifo, alone", run(1, True, "fifo")),
                ("attached, fifo, 2 copies", run(2, True, "fifo")), ("attached, mps, 2 copies", run(2, True, "mps"))]
        print(f"gpemu torch --connect: torchvision {model}, batch {batch}, {iterations} iterations, V100, real clock, "
              f"{os.cpu_count()} cores; medians, after a warm-up iteration, of iterations the copies ran together")
        print(f"{'way':28} {'copy':>4} {'event ms':>9} {'wall ms':>9} {'event / own':>12}")
        own = ways[0][1][0][0]
        for name, rows in ways:
            for i, (ev, wall) in enumerate(rows):
                print(f"{name:28} {i:>4} {ev:9.1f} {wall:9.1f} {ev / own:12.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        main()
