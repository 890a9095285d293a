"""Muri (Zhao et al., SIGCOMM 2022) as GPEmu reproduced it: ten training jobs (five CPU-bound AlexNets with 23 loader
workers, five GPU-bound ResNet-18s with 3) on one emulated V100 shared one batch at a time (GPEmu's FIFO manager,
`gpemu share --policy fifo`), their loaders sharing the machine's CPU. SRTF runs the jobs one after another, shortest
first; Muri-S runs a queue of the CPU-bound jobs beside a queue of the GPU-bound ones, so a CPU-heavy job is paired
with a GPU-heavy one. Compared: the makespan ratio SRTF / Muri-S, against GPEmu's artifact (the primary reference:
1.349, the makespans of its queue traces; the paper's 1.56 comes from another trace and cluster and is printed
beside it), and the average-JCT ratio beside it (1.393). No anchor of this figure: the CPU cost per image is the
testbed's, from DataStall Fig. 5's declared anchor on the same testbed (datastall_cpu), the rest is the stated
setup and gpemu's cost model."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import repro  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = "mengwanguc/gpemu:rep/share/sched.py, muri-srfs-profile.csv (experiments.csv item 7, muri_jobs.csv)"
CORES = 24


def main():
    item = repro.start("muri", "Muri: makespan, SRTF vs Muri-S, 10 jobs on 1 emulated V100", __doc__, HERE,
                       "the schedules take 400-600 s of wall time")
    jobs = repro.read_csv("muri_jobs.csv")
    ref = {r["point"]: r["value"] for r in repro.read_reference("muri_jct.csv")}
    for name, value in [("jobs", "; ".join(f"{j['model']} x{j['epochs']} epochs, {j['workers']} workers"
                                           for j in jobs)),
                        ("batch_size", 256), ("gpu", "1 emulated V100, policy fifo (one batch at a time)"),
                        ("srtf", "one queue, by the profile's solo length, shortest first"),
                        ("muri_s", "a queue of the CPU-bound jobs and one of the GPU-bound jobs, each by solo length, "
                                   "run at once")]:
        item.input(name, value, SETUP)
    item.input("dataset", "imagenette: 9,469 JPEG files (Imagenette's training split), ImageNet's size distribution",
               "experiments.csv item 7 (Imagenette, inferred there); docs/pipeline.md")
    item.input("cores", f"{CORES} (the machine's count is not recorded)",
               "the largest core count of GPEmu's DataStall CPU sweep on its testbed (Fig. 5, datastall_cpu.csv)")
    item.input("start-up", "none: a job starts when the one before it in its queue ends",
               "gpemu models no process start-up; GPEmu's SRTF makespan exceeds its solo lengths' sum by 138 s")
    decode_us = repro.testbed_decode_us(item)

    def job(j, after):
        spec = {"name": f"job{j['job_index']}-{j['model']}", "model": j["model"], "batch_size": int(j["batch_size"]),
                "dataset": "imagenette", "epochs": int(j["epochs"]), "workers": int(j["workers"]),
                "decode_us": round(decode_us, 3)}
        if after:
            spec["after"] = after
        return spec

    def queues(qs, cores=CORES):
        specs = []
        for q in qs:
            after = None
            for j in sorted(q, key=lambda j: float(j["solo_length_s"])):
                specs.append(job(j, after))
                after = specs[-1]["name"]
        return {"gpu": "V100-PCIE-16GB", "cores": cores, "jobs": specs}

    def run(cores=CORES):
        srtf = item.share(queues([jobs], cores), ["--policy", "fifo", "--clock", "virtual"], f"SRTF, {cores} cores")
        muri = item.share(queues([[j for j in jobs if j["bound_type"] == "cpu"],
                                  [j for j in jobs if j["bound_type"] == "gpu"]], cores),
                          ["--policy", "fifo", "--clock", "virtual"], f"Muri-S, {cores} cores")
        # Every job is submitted at 0: its JCT is its end.
        avg = {k: sum(j["end_s"] for j in o["jobs"]) / len(o["jobs"]) for k, o in (("srtf", srtf), ("muri", muri))}
        return srtf["makespan_s"], muri["makespan_s"], avg["srtf"], avg["muri"]

    srtf, muri, avg_srtf, avg_muri = run()
    print(f"muri: makespan SRTF {srtf:.1f} s, Muri-S {muri:.1f} s; average JCT {avg_srtf:.1f} s, {avg_muri:.1f} s "
          f"(GPEmu: {ref['makespan@scheduler=SRTF']:.1f} s, {ref['makespan@scheduler=Muri-S']:.1f} s; "
          f"{ref['avg_jct@scheduler=SRTF']:.1f} s, {ref['avg_jct@scheduler=Muri-S']:.1f} s)")
    if item.full:
        for c in (12, 16, 32, 48):
            s, m, _, _ = run(c)
            print(f"muri: sensitivity: {c} cores: makespan ratio {s / m:.3f}")
    item.compare("makespan_ratio@schedulers=SRTF/Muri-S", "makespan, SRTF over Muri-S (x)", srtf / muri,
                 ref["makespan_ratio@schedulers=SRTF/Muri-S"], "gpemu_artifact")
    paper = next(r["value"] for r in repro.read_reference("muri_jct.csv")
                 if r["point"] == "normalized@scheduler=SRTF" and r["reference_kind"] == "paper")
    item.compare("normalized@scheduler=SRTF", "SRTF over Muri-S as the paper plots it (x)", srtf / muri, paper,
                 "paper", primary=False, note="another trace and cluster; makespan or average JCT not recorded")
    item.compare("avg_jct_ratio@schedulers=SRTF/Muri-S", "average JCT, SRTF over Muri-S (x)", avg_srtf / avg_muri,
                 ref["avg_jct_ratio@schedulers=SRTF/Muri-S"], "gpemu_artifact", primary=False)

    def plot(ax):
        labels = ["SRTF", "Muri-S"]
        series = [("gpemu", [srtf / muri, 1.0], "tab:red"),
                  ("GPEmu artifact", [ref["makespan_ratio@schedulers=SRTF/Muri-S"], 1.0], "tab:blue"),
                  ("paper", [paper, 1.0], "tab:gray")]
        for k, (name, ys, color) in enumerate(series):
            ax.bar([x + (k - 1) * 0.27 for x in range(2)], ys, 0.27, label=name, color=color, alpha=0.8)
        ax.set_xticks(range(2))
        ax.set_xticklabels(labels)

    return item.finish(plot, xlabel="scheduler", ylabel="makespan (normalized to Muri-S)")


if __name__ == "__main__":
    sys.exit(main())
