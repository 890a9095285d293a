#!/usr/bin/python3
"""The reproductions' checker: one line per compared point of the given result.csv files, then
'N passed, N failed'. Anchors and secondary references are printed and not counted.

With --expect FILE (item,point,verdict rows), the verdicts are also held against recorded ones: a point
recorded as passing that fails now, or a recorded point that is missing, is a regression (exit status 1);
a recorded failure that passes now is reported as an improvement to record. Without --expect the exit
status is 1 when any primary point failed."""

import csv
import sys


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            rows.extend(csv.DictReader(f))
    return rows


def report(paths, expect=None):
    rows = read_rows(paths)
    passed = failed = 0
    for r in rows:
        print(f"{r['verdict'].upper():6} {r['item']}: {r['metric']} {r['point']}: ours {r['ours']}, "
              f"{r['reference_kind']} {r['reference']} ({r['difference']}, tolerance {r['tolerance']})"
              + (f" [{r['note']}]" if r["note"] else ""))
        passed += r["verdict"] == "pass"
        failed += r["verdict"] == "fail"
    print(f"{passed} passed, {failed} failed")
    if expect is None:
        return 1 if failed else 0
    with open(expect, newline="") as f:
        recorded = {(e["item"], e["point"]): e["verdict"] for e in csv.DictReader(f)}
    now = {(r["item"], r["point"]): r["verdict"] for r in rows}
    items = {r["item"] for r in rows}
    regressions = 0
    for key, verdict in sorted(recorded.items()):
        if key[0] not in items:
            continue  # an item that was skipped or not run
        got = now.get(key)
        if got is None:
            print(f"REGRESSION {key[0]}: {key[1]} is recorded in {expect} and was not compared")
            regressions += 1
        elif verdict == "pass" and got == "fail":
            print(f"REGRESSION {key[0]}: {key[1]} passed when recorded and fails now")
            regressions += 1
        elif verdict == "fail" and got == "pass":
            print(f"improved {key[0]}: {key[1]} failed when recorded and passes now: record it in {expect}")
    for key in sorted(set(now) - set(recorded)):
        if now[key] in ("pass", "fail"):
            print(f"new point {key[0]}: {key[1]} ({now[key]}) is not recorded in {expect}")
    print(f"{regressions} regression{'' if regressions == 1 else 's'} against {expect}")
    return 1 if regressions else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    expect = None
    if args[:1] == ["--expect"]:
        if len(args) < 2:
            sys.exit("usage: check.py [--expect EXPECTED.csv] RESULT.csv [...]")
        expect, args = args[1], args[2:]
    if not args:
        sys.exit("usage: check.py [--expect EXPECTED.csv] RESULT.csv [...]")
    sys.exit(report(args, expect))
