#!/usr/bin/env bash
# Configures and builds gpemu into build/ (-O2 with line tables and function
# names, -g1: enough for perf and backtraces, and about a fifth less compile
# time than -g, which keeps the test command within CI's 30 minutes; a
# Debug build has the variables).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build -j"$(nproc)"
