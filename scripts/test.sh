#!/usr/bin/env bash
# Set-up and test: installs dependencies, builds, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
cd ..
# Each parser's libFuzzer harness for a short while under ASan + UBSan
# (scripts/fuzz.sh; run it with more seconds by hand for a deeper search).
GPEMU_FUZZ_SEED=${GPEMU_FUZZ_SEED:-1} bash scripts/fuzz.sh "${GPEMU_FUZZ_SECONDS:-15}"
