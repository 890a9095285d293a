#!/usr/bin/env bash
# Set-up and main job: installs dependencies, builds, and runs `gpemu train`
# with its built-in defaults. Extra arguments go to `gpemu train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh gpemu  # the program only, not the test targets
exec ./build/gpemu train "$@"
