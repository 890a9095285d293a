"""measure.py (shared/tools/real-gpu/measure.py) run under `gpemu torch`,
beside the real GPU's rows and `gpemu predict --torch 2` at each row: step time
and peak allocated memory, with the median and largest errors (issue 28's
targets: step time within 10 % median and 25 % each row, peak allocated within
2 %).

usage (from the repository root, after the build):
    ./build/gpemu torch --gpu h200 --clock virtual -- ../shared/tools/real-gpu/measure.py EMULATED.csv
    /usr/bin/python3 tools/torch_measure_check.py EMULATED.csv [REAL_STEPS.csv]
"""
import csv, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h200_memory_check import predict  # noqa: E402


def key(r):
    return (r['model'], r['precision'], r['batch_size'], r['seq_len'], r['memory_format'])


def main():
    emulated = [r for r in csv.DictReader(open(sys.argv[1])) if r['status'] == 'ok']
    real_path = sys.argv[2] if len(sys.argv) > 2 else "../shared/reference/measured/h200-2026-12-04/steps.csv"
    real = {key(r): r for r in csv.DictReader(open(real_path)) if r['status'] == 'ok'}
    rows = []
    for e in emulated:
        r = real.get(key(e))
        if r is None:
            continue
        p = predict(r)
        # measure.py's data is on the GPU already: predict's step without its H2D copy
        t, tr, tp = float(e['iteration_ms']), float(r['iteration_ms']), p['iteration_ms'] - p['transfer_ms']
        m, mr, mp = float(e['peak_allocated_mib']), float(r['peak_allocated_mib']), p['peak_allocated_mib']
        rows.append((e['model'], e['precision'], e['batch_size'], e['memory_format'], t, tr, (t / tr - 1) * 100, tp,
                     (t / tp - 1) * 100, m, mr, (m / mr - 1) * 100, mp, (m / mp - 1) * 100))
    print("%-16s %-5s %4s %-13s | %8s %8s %6s %8s %6s | %8s %8s %6s %8s %6s" %
          ("model", "prec", "b", "format", "torch ms", "real ms", "err", "pred ms", "err", "torch MiB", "real MiB",
           "err", "pred MiB", "err"))
    for o in rows:
        print("%-16s %-5s %4s %-13s | %8.2f %8.2f %+5.1f%% %8.2f %+5.1f%% | %8.1f %8.1f %+5.1f%% %8.1f %+5.1f%%" % o)

    def summary(i, what):
        errs = [abs(o[i]) for o in rows]
        return "%s: median %.1f %%, max %.1f %%, beyond 25 %%: %d" % (what, statistics.median(errs), max(errs),
                                                                      sum(e > 25 for e in errs))
    print("%d rows" % len(rows))
    for i, what in ((6, "time, torch vs real"), (8, "time, torch vs predict"), (11, "peak allocated, torch vs real"),
                    (13, "peak allocated, torch vs predict")):
        print(summary(i, what))


if __name__ == "__main__":
    main()
