"""FastFlow (Um et al., VLDB 2023) as GPEmu reproduced it: GAN-ADA and Transformer-ASR with local:remote CPUs of 3:3,
3:6 and 6:3, each trained with its input pipeline on the client (TF-NO), all offloaded to the remote CPUs (TF-DS), or
as FastFlow's policy chooses (FastFlow); the epoch time of each against GPEmu's (the only reference), FastFlow's
choice printed per point.

The jobs are GPEmu's: GAN-ADA as in repro/tfds (468 steps of batch 128, 64 x 64 outputs, the patched Keras loop's
0.064102564 / 4 s a step), Transformer-ASR on LJSpeech (99 % of its 13,100 clips, 203 steps of batch 64, each
sample's spectrogram 2,754 x 129 floats, 0.1657731909 / 4 s a step). The remote side is one tf.data service worker
pinned to the remote CPUs (ff.sh: taskset -c 1-N worker.py). The declared anchor, one per app, is TF-NO at 3:3: it
sets the CPU time per sample of that app's pipeline on the testbed's cores. Everything else is gpemu's defaults
(docs/pipeline.md, "Preprocessing service") and FastFlow's own policy (fastflow.h) with GPEmu's profiling settings
(100 steps, 10 initial)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import repro  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = "mengwanguc/gpufs:Fastfloww/examples (experiments.csv, item 3 FastFlow)"
RATIOS = [(3, 3), (3, 6), (6, 3)]
SYSTEMS = ["TF-NO", "TF-DS", "FastFlow"]
# name: (reference app key, batch, steps, bytes a sample, output side (its bytes as 3 x N x N floats), profile)
APPS = {
    "gan_ada": (128, 468, 100_200, 64, os.path.join(HERE, "..", "tfds", "gan-ada-profile")),
    "transformer_asr": (64, 203, 291_000, 344, os.path.join(HERE, "transformer-asr-profile")),
}


def main():
    item = repro.start("fastflow", "FastFlow: epoch time by system and local:remote CPUs", __doc__, HERE,
                       "the figure's remote CPUs are another machine's; this machine has 2 cores")
    ref = {}
    for r in repro.read_reference("fastflow.csv"):
        at = r["at"]
        ref[(at["app"], at["system"], at["local_remote_cpus"])] = r["value"]
    item.input("apps", "GAN-ADA (caltech_birds2011, 64 x 64, batch 128); Transformer-ASR (LJSpeech, batch 64)",
               SETUP)
    item.input("steps", "GAN-ADA 468 (5,994 x 10 // 128); Transformer-ASR 203 (the app's steps_per_epoch)", SETUP)
    item.input("gpu step", "GAN-ADA 0.064102564 / 4 s, Transformer-ASR 0.1657731909 / 4 s, no transfer",
               "experiments.csv gpu_step_gan_s, gpu_step_asr_s; repro/tfds/gan-ada-profile, "
               "repro/fastflow/transformer-asr-profile")
    item.input("sample bytes", "GAN-ADA 100,200 (tfds's 1.10 GiB / 11,788 images); Transformer-ASR 291,000 (LJSpeech's "
               "24 h of 22,050 Hz 16-bit audio / 13,100 clips); outputs: 64 x 64 x 3 floats, and the spectrogram's "
               "1.42 MB carried as 344 x 344 x 3 floats", "assumption stated here")
    item.input("remote", "one worker with the remote CPUs (ff.sh); network 10gbe (not recorded)",
               "mengwanguc/gpufs:Fastfloww/examples/dispatcher-and-workers/ff.sh; assumption stated here")
    item.input("fastflow profiling", "num_profile_steps 100, num_initial_steps 10, cpu_bottleneck_threshold 1.3",
               "experiments.csv fastflow_profiling; SamsungLabs/FastFlow fastflow/model.py")
    ours = {}
    choices = {}
    for app, (batch, steps, sample_bytes, side, profile) in APPS.items():
        sizes = repro.constant_sizes(item, app, sample_bytes, steps * batch, f"{app}: {steps} batches of {batch}")

        def run(local, remote, system, decode_us, label):
            args = ["--clock", "virtual", "--model", "resnet18", "--gpu", "p100", "-b", str(batch), "--profiles",
                    profile, "--virtual-dataset", sizes, "--image-size", str(side),
                    "--decode-ns-per-byte", "0", "--decode-us", f"{decode_us:.3f}", "--workers", str(local),
                    "--cores", str(local), "--epochs", "1", "--seed", "0"]
            if system != "TF-NO":
                args += ["--prep-workers", "1", "--prep-worker-cpus", str(remote), "--prep-network", "10gbe",
                         "--prep-offload", "all" if system == "TF-DS" else "fastflow"]
            return item.train(args, label)

        anchor = ref[(app, "TF-NO", "3:3")]
        # Probes where the 3 local CPUs are the bottleneck (the epoch is linear in the CPU time per sample there).
        cpu_bound_us = anchor * 3 / (steps * batch) * 1e6
        decode_us = repro.solve_linear(lambda us: run(3, 3, "TF-NO", us, f"{app} anchor probe")["epoch_s"], anchor,
                                       0.8 * cpu_bound_us, cpu_bound_us)
        item.input(f"decode_us ({app})", round(decode_us, 1),
                   f"anchor: {app}'s TF-NO epoch at 3:3, {anchor:g} s (fastflow.csv), solved for the CPU time per "
                   "sample")
        for local, remote in RATIOS:
            ratio = f"{local}:{remote}"
            for system in SYSTEMS:
                out = run(local, remote, system, decode_us, f"{app} {system} {ratio}")
                ours[(app, system, ratio)] = out["epoch_s"]
                ff = (out.get("prep_service") or {}).get("fastflow")
                if ff:
                    choices[(app, ratio)] = ff
                point = f"epoch_time@app={app};system={system};local_remote_cpus={ratio}"
                if system == "TF-NO" and ratio == "3:3":
                    item.compare(point, "epoch time (s)", out["epoch_s"], anchor, "gpemu_artifact", primary="anchor",
                                 note="the declared anchor")
                else:
                    note = ""
                    if ff:
                        note = (f"FastFlow chose offload {ff['offload']}, local share {ff['local_share']:.3f}" if
                                ff["bottleneck"] else "FastFlow chose no offloading")
                    item.compare(point, "epoch time (s)", out["epoch_s"], ref[(app, system, ratio)], "gpemu_artifact",
                                 note=note)
    for (app, ratio), ff in choices.items():
        what = (f"offload {ff['offload']}, {ff['local_share']:.3f} of the batches local" if ff["bottleneck"]
                else "no offloading")
        print(f"fastflow: {app} {ratio}: FastFlow's choice: {what} (steps/s: local {ff['lthp']:.2f}, GPU "
              f"{ff['gthp']:.2f}, remote " + ", ".join(f"{k['offload']} {k['rthp']:.2f}" for k in ff["candidates"])
              + ")")

    def plot(ax):
        labels = [f"{app[:3]} {r[0]}:{r[1]}" for app in APPS for r in RATIOS]
        width = 0.13
        for n, system in enumerate(SYSTEMS):
            xs = [i + (n - 1) * 2 * width for i in range(len(labels))]
            keys = [(app, system, f"{r[0]}:{r[1]}") for app in APPS for r in RATIOS]
            ax.bar([x - width / 2 for x in xs], [ours[k] for k in keys], width, label=f"gpemu {system}")
            ax.bar([x + width / 2 for x in xs], [ref[k] for k in keys], width, label=f"GPEmu {system}", alpha=0.5)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)

    return item.finish(plot, xlabel="app, local:remote CPUs", ylabel="epoch time (s)")


if __name__ == "__main__":
    sys.exit(main())
