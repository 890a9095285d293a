#!/usr/bin/env bash
# Configures and builds gpemu into build/ (Release with debug info).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build -j"$(nproc)"
