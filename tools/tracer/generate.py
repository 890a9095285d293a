"""Generate zoo graphs.

    /usr/bin/python3 -m tools.tracer.generate --model resnet50 --out zoo/resnet50.json
    /usr/bin/python3 -m tools.tracer.generate --all --out-dir zoo
    /usr/bin/python3 -m tools.tracer.generate --list
"""
import argparse
import gc
import os
import sys
import time

from . import models
from .zoofile import build_doc, dumps, phase_flops, live_peak


def _write(spec, path, precisions, optimizers):
    t0 = time.time()
    doc = build_doc(spec, precisions=precisions, optimizers=optimizers,
                    log=lambda m: print(m, file=sys.stderr, flush=True))
    text = dumps(doc)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    m = doc["model"]
    B, S = m["ref"]["B"], m["ref"].get("S")
    opt = "adam" if "adam" in optimizers else optimizers[0]
    pk = live_peak(doc, "fp32", opt, B, S) if "fp32" in doc["variants"] else 0
    print(f"{spec.name:22s} params {m['params']:>14,d}  fwd {m['fwd_flops_per_sample'] / 1e9:10.3f}"
          f" GFLOP/sample  live-peak(fp32,{opt},B={B}) {pk / 2**30:8.2f} GiB  "
          f"{len(text) / 1024:8.1f} KiB  {time.time() - t0:6.1f}s", flush=True)
    return doc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="model name (repeatable)")
    ap.add_argument("--all", action="store_true", help="every registered model")
    ap.add_argument("--out", help="output file (with a single --model)")
    ap.add_argument("--out-dir", default="zoo", help="output folder (default: zoo)")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    ap.add_argument("--precision", action="append", choices=["fp32", "amp", "half"],
                    help="variants to trace (default: the model's own list: fp32 and amp, "
                         "plus half (pure FP16, apex O2-like) for transformers)")
    ap.add_argument("--optimizer", action="append", choices=["sgd", "adam"],
                    help="optimizer sections (default: the model's own list, ModelSpec.optimizers: "
                         "sgd and adam; sgd alone for dlrm_dle)")
    args = ap.parse_args(argv)
    if args.list:
        for name, s in models.REGISTRY.items():
            print(f"{name:22s} {s.family:12s} {s.input_desc}")
        return 0
    names = list(models.REGISTRY) if args.all else (args.model or [])
    if not names:
        ap.error("give --model NAME or --all")
    if args.out and len(names) != 1:
        ap.error("--out needs exactly one --model")
    precisions = tuple(args.precision) if args.precision else None
    optimizers = tuple(args.optimizer) if args.optimizer else None
    failed = []
    for name in names:
        spec = models.get(name)
        path = args.out or os.path.join(args.out_dir, name + ".json")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        try:
            _write(spec, path, precisions or spec.precisions, optimizers or spec.optimizers)
        except Exception as e:  # keep going with --all, report at the end
            if len(names) == 1:
                raise
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            failed.append(name)
        spec.release()
        gc.collect()
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
