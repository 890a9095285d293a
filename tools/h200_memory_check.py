"""Peak allocated memory and step time of gpemu predict --torch 2 at every row
of a measure.py CSV (shared/tools/real-gpu/measure.py), beside the measured ones.

usage (from the repository root, after the build):
    /usr/bin/python3 tools/h200_memory_check.py [STEPS.csv]
"""
import csv, json, statistics, subprocess, sys


def predict_args(r):
    """gpemu predict's arguments for the program of measure.py row `r`."""
    p = r['precision']
    prec = {'amp': 'amp', 'bf16': 'bf16'}.get(p, 'fp32')
    args = ['./build/gpemu', 'predict', '--gpu', 'h200', '--model', r['model'], '-b', r['batch_size'], '--precision', prec,
            '--optimizer', 'adam' if r['optimizer'] == 'adamw' else 'sgd', '--torch', '2', '--json',
            # measure.py keeps only the loss: F.cross_entropy(m(x), y), m(input_ids=ids, labels=ids).loss
            '--keep-output', 'off']
    if r['seq_len']: args += ['--seq-len', r['seq_len']]
    if p == 'tf32': args += ['--matmul-precision', 'high']
    if p == 'fp32': args += ['--cudnn-tf32', 'off']
    if r['memory_format'] == 'channels_last': args += ['--memory-format', 'channels_last']
    return args


def predict(r):
    return json.loads(subprocess.run(predict_args(r), capture_output=True, text=True).stdout)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/measured/h200-2026-12-04/steps.csv"
    out = []
    for r in csv.DictReader(open(path)):
        j = predict(r)
        m = float(r['peak_allocated_mib']); pr = j['peak_allocated_mib']
        t = float(r['iteration_ms'])
        j['iteration_ms'] -= j['transfer_ms']  # measure.py's data is on the GPU already: no H2D copy
        out.append((r['model'], r['precision'], r['batch_size'], m, pr, (pr/m-1)*100, t, j['iteration_ms'],
                    (j['iteration_ms']/t-1)*100))
    for o in out: print("%-16s %-5s %4s mem %8.1f -> %8.1f (%+5.1f%%)  time %6.1f -> %6.1f (%+4.0f%%)" % o)
    print("median |mem err| %.2f%%, max %.1f%%" % (statistics.median(abs(o[5]) for o in out), max(abs(o[5]) for o in out)))
    print("median |time err| %.1f%%" % statistics.median(abs(o[8]) for o in out))


if __name__ == "__main__":
    main()
