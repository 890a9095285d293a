"""GPEmu's file grouping (VLDB 2025): one cold epoch of AlexNet on "2 P100s" (GPEmu's mode: one process, 1/2 of a
P100's batch time, no all-reduce), batch 256, 8 loader workers, Imagenette-10G on an HDD packed 1 to 64 images per
file, files shuffled as units and each read with one request. Compared: the epoch's speed-up over one image per
file at each group size, against GPEmu's artifact (the primary reference; the figure exists only there). No anchor:
the inputs are the setup, the HDD preset, gpemu's cost model and its loader defaults."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import repro  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = ("mengwanguc/gpufs@Haoran_inter_gpu_study:emulator/datastall/optimizations/exp/use-file-group.sh "
         "(experiments.csv, item 12 File grouping)")


def main():
    item = repro.start("grouping", "File grouping: AlexNet, 2 P100s (GPEmu mode), HDD, cold epoch", __doc__, HERE,
                       "it needs an HDD and grouped files on it")
    ref = {}
    for r in repro.read_reference("grouping.csv"):
        if "group_size" in r["at"]:
            ref[(r["series"], int(r["at"]["group_size"]))] = r["value"]
    sizes = [1, 2, 4, 8, 16, 32, 64] if item.full else [1, 2, 8, 64]
    for name, value in [("model", "alexnet"), ("gpu", "2 emulated P100 in GPEmu's mode (--gpemu-gpus 2)"),
                        ("batch_size", 256), ("workers", "8 (the script; the plot's title says 2)"),
                        ("storage", "HDD (the plot's title)"), ("epochs", "1, page cache cleared before"),
                        ("grouping", "N images per file in dataset order, files shuffled as units")]:
        item.input(name, value, SETUP)
    item.input("hdd", "hdd preset: 4.47 ms + size / 109.4 MB/s, one request at a time",
               "GPEmu's testbed HDD throughput (hdd_random_read_throughput.csv), fitted; docs/pipeline.md")
    item.input("cores", "8 (one per worker; the testbed's count is not recorded)", "assumption stated here")
    item.input("loader CPU costs", "gpemu's defaults (800 us + 15 ns/B per image)", "docs/train.md, loader model")

    base = ["--clock", "virtual", "--virtual-dataset", "imagenette10g", "--model", "alexnet", "--gpu", "p100",
            "-b", "256", "--gpemu-gpus", "2", "--workers", "8", "--cores", "8", "--storage", "hdd", "--epochs", "1",
            "--cold", "--seed", "0"]
    ours = {}
    for k in sizes:
        out = item.train(base + ["--group-size", str(k)], f"group size {k}")
        total = out["epoch_times_s"][0]
        compute = (out["forward_ms_mean"] + out["backward_ms_mean"]) * out["iterations"] / 1000.0
        ours[("total", k)] = total
        ours[("compute", k)] = compute
        ours[("stall", k)] = out["data_stall_pct"] / 100.0 * total
        ours[("transfer", k)] = out["h2d_pct"] / 100.0 * total
        print(f"grouping: {k:2d} per file: epoch {total:6.1f} s (compute {compute:5.1f} s, stall "
              f"{ours[('stall', k)]:6.1f} s), {out['reads']['storage_requests']} disk requests")
    for k in sizes:
        if k == 1:
            continue
        item.compare(f"speedup@group_size={k}", "epoch speed-up over 1 image per file (x)",
                     ours[("total", 1)] / ours[("total", k)], ref[("total", 1)] / ref[("total", k)],
                     "gpemu_artifact")
    item.compare("compute@group_size=1", "GPU compute per epoch (s)", ours[("compute", 1)], ref[("compute", 1)],
                 "gpemu_artifact", primary=False, note="gpemu's P100 cost model, not judged")

    def plot(ax):
        ref_sizes = [1, 2, 4, 8, 16, 32, 64]
        ax.plot(sizes, [ours[("total", k)] for k in sizes], marker="o", color="tab:red", label="epoch (gpemu)")
        ax.plot(sizes, [ours[("stall", k)] for k in sizes], marker="s", color="tab:orange", label="stall (gpemu)")
        ax.plot(ref_sizes, [ref[("total", k)] for k in ref_sizes], marker="o", linestyle="--", alpha=0.5,
                color="tab:red", label="epoch (GPEmu artifact)")
        ax.plot(ref_sizes, [ref[("stall", k)] for k in ref_sizes], marker="s", linestyle="--", alpha=0.5,
                color="tab:orange", label="stall (GPEmu artifact)")
        ax.set_xscale("log", base=2)

    return item.finish(plot, xlabel="images per file", ylabel="seconds per epoch")


if __name__ == "__main__":
    sys.exit(main())
