#!/usr/bin/env bash
# Runs every reproduction item and checks them together.
#   repro/run_all.sh [--quick|--full] [--clock virtual|real] [--out DIR]
# --quick (the default) is what CI runs: fewer points per figure, virtual
# clock, a few seconds. Each item writes result.csv, inputs.json and plot.png
# under DIR/<item> (default repro/<item>/out). The checker prints one line per
# compared point and "N passed, N failed"; with --quick it also holds the
# verdicts against repro/expected-quick.csv, and the exit status is 1 when a
# point that passed there fails now, or a point is missing (docs/reproductions.md).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mode=--quick
clock=virtual
out=
while (($#)); do
  case "$1" in
    --quick | --full) mode=$1 ;;
    --clock) clock=${2:?--clock needs virtual or real}; shift ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    *) echo "run_all.sh: unknown argument '$1'; accepted: --quick, --full, --clock virtual|real, --out DIR" >&2; exit 2 ;;
  esac
  shift
done
python=${PYTHON:-/usr/bin/python3}
items=(datastall_fetch datastall_cache datastall_cpu sff grouping superbatch salus muri synergy allox ffcv coordl ladcache tfds fastflow realnodes)
results=()
status=0
for item in "${items[@]}"; do
  dir=${out:+$out/$item}
  echo "== $item"
  if ! PYTHON=$python bash "$here/$item/run.sh" "$mode" --clock "$clock" ${dir:+--out "$dir"} >"${TMPDIR:-/tmp}/repro-$item.log" 2>&1; then
    # A run that missed a target still wrote its result; any other failure did not.
    [[ -f "${dir:-$here/$item/out}/result.csv" ]] || { cat "${TMPDIR:-/tmp}/repro-$item.log"; status=2; continue; }
  fi
  grep -v '^\(PASS\|FAIL\|INFO\|ANCHOR\|[0-9]* passed\)' "${TMPDIR:-/tmp}/repro-$item.log"
  if grep -q "skipped:" "${TMPDIR:-/tmp}/repro-$item.log"; then continue; fi
  results+=("${dir:-$here/$item/out}/result.csv")
done
((${#results[@]})) || { echo "no item produced a result"; exit "$status"; }
echo "== all items"
expect=()
[[ $mode == --quick && $clock == virtual ]] && expect=(--expect "$here/expected-quick.csv")
"$python" "$here/check.py" "${expect[@]}" "${results[@]}"
check=$?
if ((status)); then exit "$status"; fi
if ((${#expect[@]})); then exit "$check"; fi
exit 0
