"""GPEmu's async loader with superbatches (VLDB 2025): one cold epoch of AlexNet on one emulated P100, batch 256,
4 loader workers (prefetch factor 2) reading Imagenette-10G from an HDD, with the synchronous loader (a read, then
its decode), the async io_uring loader (a batch's reads submitted at once), and superbatches of 2 to 64 batches'
reads at once. Compared: the epoch's speed-up over the synchronous loader, against GPEmu's artifact (the primary
reference; the figure exists only there). No anchor: the inputs are the setup, the HDD preset, gpemu's cost model
and its loader defaults."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import repro  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = "mengwanguc/gpufs@fix-superbatch:emulator/datastall/figures/superbatch/run-async.sh (experiments.csv, item 11)"


def main():
    item = repro.start("superbatch", "Async loader and superbatches: AlexNet, 1 P100, HDD, cold epoch", __doc__, HERE,
                       "it needs an HDD")
    ref = {}
    for r in repro.read_reference("superbatch.csv"):
        ref[r["at"]["config"] + ("" if "superbatch" not in r["at"] else r["at"]["superbatch"])] = r["value"]
    configs = ["sync", "async1", "async2", "async4", "async8", "async16", "async32", "async64"]
    if not item.full:
        configs = ["sync", "async1", "async8", "async64"]
    for name, value in [("model", "alexnet"), ("gpu", "1 emulated P100"), ("batch_size", 256), ("workers", 4),
                        ("prefetch_factor", 2), ("epochs", "1, caches dropped before"),
                        ("loader", "sync: pread; async: io_uring (--read-method io_uring); superbatch k")]:
        item.input(name, value, SETUP)
    item.input("hdd", "hdd preset: 4.47 ms + size / 109.4 MB/s, one request at a time",
               "GPEmu's testbed HDD throughput (hdd_random_read_throughput.csv), fitted; docs/pipeline.md")
    item.input("cores", "4 (one per worker; the testbed's count is not recorded)", "assumption stated here")
    base = ["--clock", "virtual", "--virtual-dataset", "imagenette10g", "--model", "alexnet", "--gpu", "p100", "-b",
            "256", "--workers", "4", "--cores", "4", "--prefetch-factor", "2", "--storage", "hdd", "--epochs", "1",
            "--cold", "--seed", "0"]
    ours = {}
    for c in configs:
        extra = ["--read-method", "pread"] if c == "sync" else ["--read-method", "io_uring", "--superbatch", c[5:]]
        ours[c] = item.train(base + extra, c)["epoch_times_s"][0]
        print(f"superbatch: {c:8} epoch {ours[c]:6.1f} s")
    for c in configs[1:]:
        item.compare(f"speedup@config={c}", "epoch speed-up over the synchronous loader (x)", ours["sync"] / ours[c],
                     ref["sync"] / ref[c], "gpemu_artifact")

    def plot(ax):
        labels = [c.replace("async", "") if c != "async1" else "async" for c in configs]
        xs = range(len(configs))
        ax.bar([x - 0.2 for x in xs], [ours[c] for c in configs], 0.4, label="gpemu", color="tab:red")
        ax.bar([x + 0.2 for x in xs], [ref[c] for c in configs], 0.4, label="GPEmu artifact", color="tab:blue",
               alpha=0.6)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels)

    return item.finish(plot, xlabel="loader (superbatch size)", ylabel="epoch time (s)")


if __name__ == "__main__":
    sys.exit(main())
