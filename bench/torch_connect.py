"""Scripts attached to `gpemu serve` (`gpemu torch --connect`) against a script on GPUs of its own.

Run as `/usr/bin/python3 bench/torch_connect.py [gpemu] [model] [batch] [iterations]` (ctest does not
run it: it measures wall time). Starts a server (V100, the given policy) and runs one training script
(torchvision model, SGD, in-memory batch) under the real clock four ways: on its own emulated GPU;
attached to a fifo server, alone; two copies attached to one fifo server; two copies attached to one
mps server. Prints, per way, each copy's iteration time (CUDA events: emulated GPU time between the
iteration's first and last op) and wall time per iteration, then the ratios side by side."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import json, sys, time, torch, torchvision
model = getattr(torchvision.models, sys.argv[1])().cuda()
batch, iterations = int(sys.argv[2]), int(sys.argv[3])
x, y = torch.randn(batch, 3, 224, 224).cuda(), torch.randint(0, 1000, (batch,)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
events, walls = [], []
for i in range(iterations):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    w = time.monotonic()
    s.record()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
    e.record()
    e.synchronize()
    walls.append(time.monotonic() - w)
    events.append(s.elapsed_time(e))
print(json.dumps(dict(event_ms=events, wall_ms=[w * 1e3 for w in walls])), flush=True)
"""


def median_after_warmup(xs):
    return statistics.median(xs[2:] if len(xs) > 3 else xs)


def main():
    gpemu = sys.argv[1] if len(sys.argv) > 1 else "build/gpemu"
    model = sys.argv[2] if len(sys.argv) > 2 else "resnet18"
    batch = sys.argv[3] if len(sys.argv) > 3 else "32"
    iterations = sys.argv[4] if len(sys.argv) > 4 else "8"
    with tempfile.TemporaryDirectory() as tmp:
        child = os.path.join(tmp, "child.py")
        with open(child, "w") as f:
            f.write(CHILD)

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
            procs = [subprocess.Popen(args + ["--", child, model, batch, iterations], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(copies)]
            results = []
            for p in procs:
                out, err = p.communicate(timeout=900)
                if p.returncode != 0:
                    raise SystemExit(f"a copy failed:\n{err}")
                results.append(json.loads(out.strip().splitlines()[-1]))
            if server:
                server.terminate()
                server.wait(timeout=60)
            return [(median_after_warmup(r["event_ms"]), median_after_warmup(r["wall_ms"])) for r in results]

        ways = [("own emulated GPU", run(1, False)), ("attached, fifo, alone", run(1, True, "fifo")),
                ("attached, fifo, 2 copies", run(2, True, "fifo")), ("attached, mps, 2 copies", run(2, True, "mps"))]
        print(f"gpemu torch --connect: torchvision {model}, batch {batch}, {iterations} iterations, V100, real clock, "
              f"{os.cpu_count()} cores; medians after 2 warm-up iterations")
        print(f"{'way':28} {'copy':>4} {'event ms':>9} {'wall ms':>9} {'event / own':>12}")
        own = ways[0][1][0][0]
        for name, rows in ways:
            for i, (ev, wall) in enumerate(rows):
                print(f"{name:28} {i:>4} {ev:9.1f} {wall:9.1f} {ev / own:12.2f}")


if __name__ == "__main__":
    main()
