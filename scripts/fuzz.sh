#!/usr/bin/env bash
# Builds the libFuzzer harnesses in fuzz/ (clang, ASan + UBSan, in build-fuzz/)
# and runs each for SECONDS (default 20) from its seed corpus in
# fuzz/corpus/<target>/. Fails when any harness finds a crash, a sanitizer
# report, a non-InputError exception, a leak, a slow input (> 10 s) or one
# that needs more than 2 GB; the input is kept in build-fuzz/findings/<target>/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 600 dlio_yaml
#
# GPEMU_FUZZ_SEED (default 0: libFuzzer picks one) fixes the search: the test
# command passes 1, so CI walks the same inputs on every run and a finding is a
# defect in the change, not chance; a search by hand leaves it random.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true

# -O1 and line tables only: libFuzzer's usual trade of speed for build time.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
  -DCMAKE_CXX_COMPILER=clang++ -DGPEMU_FUZZ=ON -DGPEMU_BUILD_TESTS=OFF >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
rm -f build-fuzz.configure.log
cmake --build build-fuzz --target gpemu_fuzzers -j"$(nproc)"

targets=("$@")
if ((${#targets[@]} == 0)); then
  for h in fuzz/*_fuzz.cpp; do
    n=$(basename "$h" .cpp)
    targets+=("${n%_fuzz}")
  done
fi

status=0
for t in "${targets[@]}"; do
  bin=build-fuzz/fuzz/${t}_fuzz
  [[ -x $bin ]] || { echo "fuzz: no harness '$t' (fuzz/${t}_fuzz.cpp)" >&2; exit 2; }
  # New inputs go to the working corpus in build-fuzz; the seeds in the tree stay as they are.
  work=build-fuzz/corpus/$t findings=build-fuzz/findings/$t log=build-fuzz/$t.log
  mkdir -p "$work" "$findings"
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -seed="${GPEMU_FUZZ_SEED:-0}" -artifact_prefix="$findings/" -print_final_stats=1 "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz: $t: $result, ${runs:-?} executions in ${seconds} s, corpus $(ls "$work" | wc -l) inputs"
  if [[ $result == FAILED ]]; then
    grep -E "ERROR|runtime error|not an InputError|multi-line|Test unit written" "$log" | head -20 >&2 || true
    echo "fuzz: full log: $log" >&2
  fi
done
exit $status
