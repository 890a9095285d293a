"""What every reproduction item shares: finding gpemu and the reference data,
running gpemu, recording inputs with their sources, comparing relative effects
with the references, and writing the item's CSV, JSON and PNG.

An item's run.py builds an Item, runs gpemu, calls compare() per point and
finish(). The CSV has one row per compared point; check.py reads it.
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CSV_COLUMNS = ["item", "point", "metric", "ours", "reference", "reference_kind", "primary", "difference",
               "tolerance", "verdict", "note"]


def gpemu_binary():
    path = os.environ.get("GPEMU") or os.path.join(REPO, "build", "gpemu")
    if not os.access(path, os.X_OK):
        sys.exit(f"repro: no gpemu program at {path}: build it (README) or set GPEMU to its path")
    return path


def reference_dir():
    """The shared folder of published figures, or None when it is not there."""
    path = os.environ.get("GPEMU_REPRO_REFERENCE") or os.path.join(REPO, "..", "shared", "reference", "published",
                                                                     "repro")
    return path if os.path.isdir(path) else None


def parse_point(point):
    """'epoch_time@cached_pct=20;cache=minio' -> ('epoch_time', {'cached_pct': '20', 'cache': 'minio'})."""
    series, _, where = point.partition("@")
    keys = {}
    for part in where.split(";") if where else []:
        k, _, v = part.partition("=")
        keys[k] = v
    return series, keys


def read_reference(name):
    """Rows of one reference figure file as dicts, each with 'series' and 'at' (the point's keys)."""
    folder = reference_dir()
    path = os.path.join(folder, name)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["series"], r["at"] = parse_point(r["point"])
        r["value"] = float(r["value"])
    return rows


def read_csv(name):
    """Rows of a reference file that is a table of its own (muri_jobs.csv, salus_jobs.csv) as dicts."""
    with open(os.path.join(reference_dir(), name), newline="") as f:
        return list(csv.DictReader(f))


def arguments(description):
    p = argparse.ArgumentParser(description=description)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="fewer points, for CI (the default)")
    mode.add_argument("--full", action="store_true", help="every point of the figure")
    p.add_argument("--clock", choices=["virtual", "real"], default="virtual",
                   help="virtual: the modelled loader at the original scale; real: a small smoke run on real files")
    p.add_argument("--out", help="folder for the CSV, JSON and PNG (default: out/ beside run.sh)")
    return p


def solve_linear(run, target, x0=0.0, x1=8000.0):
    """The x at which run(x) == target, for a run linear in x (an epoch that is CPU-bound, as a function of the
    loader's fixed CPU time per image): two probes give the line."""
    y0, y1 = run(x0), run(x1)
    return x0 + (x1 - x0) * (target - y0) / (y1 - y0)


def decode_us_for_one_core(item, gpu, images_per_s):
    """The modelled loader's fixed CPU time per image (us) at which AlexNet with one worker on one core delivers
    `images_per_s` (DataStall Fig. 5's 1-core point on GPEmu's testbed). AlexNet there is CPU-bound."""
    def seconds_per_image(decode_us):
        out = item.train(["--clock", "virtual", "--virtual-dataset", "imagenette10g", "--model", "alexnet", "--gpu",
                          gpu, "-b", "256", "--workers", "1", "--cores", "1", "--epochs", "1",
                          "--decode-us", f"{decode_us:.3f}"], f"anchor probe, decode {decode_us:.0f} us")
        return out["elapsed_s"] / out["samples"]
    return solve_linear(seconds_per_image, 1.0 / images_per_s)


def testbed_decode_us(item):
    """GPEmu's testbed's loader CPU time per image (us), recorded as the item's input `decode_us`: DataStall
    Fig. 5's declared anchor (AlexNet, 1 core) solved as datastall_cpu solves it. For items whose jobs GPEmu ran
    on that testbed (muri, synergy)."""
    fig5 = next(r["value"] for r in read_reference("datastall_cpu.csv")
                if r["series"] == "alexnet" and r["at"]["cores"] == "1")
    decode_us = decode_us_for_one_core(item, "v100", fig5)
    item.input("decode_us", round(decode_us, 1),
               f"the testbed's CPU time per image: DataStall Fig. 5's declared anchor (alexnet, 1 core, {fig5} "
               "images/s, datastall_cpu.csv) solved as datastall_cpu solves it")
    return decode_us


def constant_sizes(item, name, size, count, comment):
    """A `--virtual-dataset sizes=FILE` of `count` samples of `size` bytes, written to the item's output folder
    (a dataset whose file sizes the experiment does not record, only its sample count); returns the spec."""
    path = os.path.join(item.out, f"{name}-sizes.txt")
    with open(path, "w") as f:
        f.write(f"# {comment}\n")
        f.write(f"{size}\n" * count)
    return f"sizes={path}"


# Why the distributed-cache items (CoorDL, LADCache) have no --clock real form yet.
DISTRIBUTED_CACHE_NOT_REAL = ("it needs the distributed cache across real nodes (the real mode of issue 32 exchanges "
                              "only the gradients, not the cache's lookups and samples)")


def start(name, title, doc, script_dir, real_clock_needs=None, needs_reference=True):
    """Parses an item's arguments (its docstring's first line describes it) and makes its Item.
    real_clock_needs: why the item has no --clock real form (it then says so and exits 0); None when it has one.
    needs_reference: False for an item whose reference is a run of its own (realnodes), not ../shared's figures."""
    args = arguments(doc.splitlines()[0]).parse_args()
    if args.clock == "real" and real_clock_needs:
        print(f"{name}: skipped: --clock real is not built: {real_clock_needs}")
        sys.exit(0)
    return Item(name, title, args, script_dir, needs_reference)


class Item:
    def __init__(self, name, title, args, script_dir, needs_reference=True):
        self.name = name
        self.title = title
        self.args = args
        self.full = bool(args.full)
        self.out = args.out or os.path.join(script_dir, "out")
        os.makedirs(self.out, exist_ok=True)
        self.inputs = []
        self.rows = []
        self.runs = []
        self.emulated_s = 0.0
        self.wall_s = 0.0
        if needs_reference and reference_dir() is None:
            print(f"{name}: skipped: the reference data (../shared/reference/published/repro) is not here")
            sys.exit(0)

    def input(self, name, value, source):
        """An input of the experiment and where it comes from (setup, a gpemu benchmark, or the anchor)."""
        self.inputs.append({"name": name, "value": value, "source": source})

    def run(self, cmd, label, emulated_key):
        """Runs a gpemu command that prints JSON, records it (wall time, emulated time: the JSON's
        `emulated_key`) and returns the JSON; a failure ends the item with gpemu's message."""
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(f"{self.name}: gpemu failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
        out = json.loads(proc.stdout)
        self.emulated_s += out.get(emulated_key, 0.0)
        self.wall_s += wall
        self.runs.append({"label": label, "command": " ".join(cmd[1:]), "wall_s": wall,
                          "elapsed_s": out.get(emulated_key)})
        return out

    def train(self, args, label=""):
        """Runs `gpemu train ... --json` and returns its JSON. GPEmu's experiments ran PyTorch 1.x
        programs on its own hosts: `--torch 1` unless the item names another."""
        args = [str(a) for a in args]
        if "--torch" not in args:
            args = ["--torch", "1"] + args
        return self.run([gpemu_binary(), "train", "--json"] + args, label, "elapsed_s")

    def share(self, jobs_file, args, label=""):
        """Runs `gpemu share --jobs FILE ... --json` on a jobs file (a dict, written to the output folder) and
        returns its JSON."""
        # Model jobs run GPEmu's PyTorch 1.x programs unless a job names another.
        jobs_file = {**jobs_file, "jobs": [{"torch": "1", **j} if "model" in j else j for j in jobs_file["jobs"]]}
        path = os.path.join(self.out, f"jobs-{len(self.runs)}.json")
        with open(path, "w") as f:
            json.dump(jobs_file, f, indent=1)
        return self.run([gpemu_binary(), "share", "--json", "--jobs", path] + [str(a) for a in args], label,
                        "makespan_s")

    def compare(self, point, metric, ours, reference, reference_kind, primary=True, tolerance=10.0,
                mode="relative", note=""):
        """One compared point. mode 'relative': difference = (ours - ref) / ref in %; 'points': ours - ref in
        percentage points. A primary point passes when |difference| <= tolerance; other references are printed
        beside it (verdict 'info'); 'anchor' marks the declared anchor, not counted."""
        if mode == "relative":
            diff = (ours - reference) / reference * 100.0 if reference else math.inf
        else:
            diff = ours - reference
        if primary == "anchor":
            verdict = "anchor"
        elif primary:
            verdict = "pass" if abs(diff) <= tolerance else "fail"
        else:
            verdict = "info"
        unit = "%" if mode == "relative" else " points"
        self.rows.append({"item": self.name, "point": point, "metric": metric, "ours": f"{ours:.6g}",
                          "reference": f"{reference:.6g}", "reference_kind": reference_kind,
                          "primary": "anchor" if primary == "anchor" else ("yes" if primary else "no"),
                          "difference": f"{diff:+.2f}{unit}", "tolerance": f"{tolerance:g}{unit}",
                          "verdict": verdict, "note": note})

    def finish(self, plot, xlabel, ylabel):
        """Writes result.csv, inputs.json and the PNG (plot(axes) draws the series; the axes' labels, legend and
        title are set here), then runs the checker."""
        csv_path = os.path.join(self.out, "result.csv")
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            w.writeheader()
            w.writerows(self.rows)
        with open(os.path.join(self.out, "inputs.json"), "w") as f:
            json.dump({"item": self.name, "title": self.title, "mode": "full" if self.full else "quick",
                       "clock": self.args.clock, "inputs": self.inputs, "runs": self.runs}, f, indent=2)
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        plot(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.set_title(self.title, fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(self.out, "plot.png"), dpi=110)
        plt.close(fig)
        if self.wall_s > 0 and self.args.clock == "virtual":
            print(f"{self.name}: {self.emulated_s:.1f} emulated s in {self.wall_s:.2f} wall s "
                  f"({self.emulated_s / self.wall_s:.0f} emulated s per wall s)")
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import check
        return check.report([csv_path])
