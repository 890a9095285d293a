#!/usr/bin/env bash
# Configures and builds gpemu into build/ (-O2 with line tables and function
# names, -g1: enough for perf and backtraces, and about a fifth less compile
# time than -g, which keeps the test command within CI's 30 minutes; a
# Debug build has the variables).
# Arguments name the targets to build (scripts/run.sh: `gpemu` alone, the
# program and the torch backend it loads; its data is read from the source
# tree); none: every target, the tests included (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
