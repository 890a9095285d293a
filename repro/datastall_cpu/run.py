"""DataStall Fig. 5 (Mohan et al., VLDB 2021), as GPEmu reproduced it: images/s of four models on one emulated
V100 (batch 256, Imagenette-10G fully in the page cache) as the loader gets 1 to 24 CPU cores (one worker per
core). Compared: each model's throughput relative to its 1-core figure (the linear rise and where it plateaus),
against GPEmu's artifact (the primary reference: the paper's figure is for its own testbed and not in the
artifact). Anchor: alexnet's 1-core throughput (174.3 images/s) sets the modelled loader's CPU cost per image, which
the testbed's CPU decided and the artifact does not record. The GPU side is gpemu's own cost model."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import repro  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = "mengwanguc/gpemu:rep/datastall/datastall/figure5.sh (experiments.csv, item 1a, datastall_cpu)"
MODELS = ["alexnet", "resnet18", "mobilenet_v2", "resnet50"]


def main():
    item = repro.start("datastall_cpu", "DataStall Fig. 5: images/s vs CPU cores, 1 emulated V100", __doc__, HERE,
                       "the sweep is of CPU cores this machine does not have")
    ref = {}
    for r in repro.read_reference("datastall_cpu.csv"):
        ref[(r["series"], int(r["at"]["cores"]))] = r["value"]
    cores = [1, 2, 3, 6, 12, 24] if item.full else [1, 3, 12, 24]
    models = MODELS if item.full else ["alexnet", "resnet50"]
    for name, value in [("gpu", "1 emulated V100"), ("batch_size", 256), ("workers", "one per core"),
                        ("epochs", 1), ("cache_state", "dataset fully in the page cache")]:
        item.input(name, value, SETUP)
    item.input("dataset", "imagenette10g: 87,473 JPEG files, ImageNet's size distribution",
               "imagenette10g.csv and imagenet_file_size_cdf.csv (GPEmu's artifact); docs/pipeline.md")

    def images_per_s(model, c, decode_us, scaling=None):
        extra = ["--loader-scaling", scaling] if scaling else []
        out = item.train(["--clock", "virtual", "--virtual-dataset", "imagenette10g", "--model", model, "--gpu",
                          "v100", "-b", "256", "--workers", str(c), "--cores", str(c), "--epochs", "1",
                          "--decode-us", f"{decode_us:.3f}"] + extra,
                         f"{model} {c} cores" + (" (measured scaling)" if scaling else ""))
        return out["samples"] / out["elapsed_s"]

    # Anchor: alexnet on one core is CPU-bound; its time per image is linear in
    # the fixed CPU cost, so two probes give the line.
    anchor = ref[("alexnet", 1)]
    decode_us = repro.decode_us_for_one_core(item, "v100", anchor)
    item.input("decode_us", round(decode_us, 1),
               f"anchor: alexnet's 1-core throughput, {anchor} images/s (datastall_cpu.csv), solved for the modelled "
               "loader's fixed CPU time per image (the per-byte part kept at 15 ns/B)")

    ours = {}
    for model in models:
        for c in cores:
            ours[(model, c)] = images_per_s(model, c, decode_us)
        print(f"datastall_cpu: {model:13} " + "  ".join(f"{c} cores {ours[(model, c)]:7.1f}" for c in cores))
    item.compare("alexnet@cores=1", "images/s", ours[("alexnet", 1)], anchor, "gpemu_artifact", primary="anchor",
                 note="the declared anchor")
    for model in models:
        for c in cores:
            if c == 1:
                continue
            item.compare(f"{model}@cores={c}", "images/s relative to 1 core (x)",
                         ours[(model, c)] / ours[(model, 1)], ref[(model, c)] / ref[(model, 1)], "gpemu_artifact")

    # Printed beside, not judged: the same runs with the only many-core loader scaling measured for this project
    # (torchvision's DataLoader on the H200's 16-core host), by worker count. Applying one machine's curve to
    # another (GPEmu's testbed) is an assumption, so these rows are information, not the item's result.
    scaling = os.path.join(os.path.dirname(os.path.dirname(repro.reference_dir() or "")), "measured",
                           "h200-2026-12-04", "torch_loader_scaling.csv")
    if os.path.isfile(scaling):
        item.input("measured scaling (info rows)", "torch_loader_scaling.csv of the H200's 16-core host "
                   "(--loader-scaling), by worker count", "../shared/reference/measured/h200-2026-12-04/")
        for model in models:
            scaled = {c: images_per_s(model, c, decode_us, scaling) for c in cores}
            print(f"datastall_cpu: {model:13} with the H200 host's measured loader scaling: " +
                  "  ".join(f"{c} cores {scaled[c]:7.1f}" for c in cores))
            for c in cores:
                if c != 1:
                    item.compare(f"{model}@cores={c};measured_scaling", "images/s relative to 1 core (x)",
                                 scaled[c] / scaled[1], ref[(model, c)] / ref[(model, 1)], "gpemu_artifact",
                                 primary=False, note="with the H200 host's measured loader scaling, printed, not judged")

    def plot(ax):
        colors = dict(zip(MODELS, ["tab:blue", "tab:orange", "tab:green", "tab:red"]))
        all_cores = [1, 2, 3, 6, 12, 24]
        for model in models:
            ax.plot(cores, [ours[(model, c)] for c in cores], marker="o", color=colors[model], label=f"{model} (gpemu)")
            ax.plot(all_cores, [ref[(model, c)] for c in all_cores], marker="o", linestyle="--", alpha=0.5,
                    color=colors[model], label=f"{model} (GPEmu artifact)")

    return item.finish(plot, xlabel="CPU cores (one loader worker each)", ylabel="images/s")


if __name__ == "__main__":
    sys.exit(main())
