#!/bin/sh
# Regenerate every model-zoo graph (zoo/*.json) and run the tracer tests.
# Usage (from anywhere): tools/tracer/regenerate.sh [extra generate args]
# Needs Debian's Python with torch 1.13 / torchvision 0.14 (CPU only, no GPU,
# no network). Takes about half an hour on one core; runs sequentially.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
"$PY" -m unittest discover -s tools/tracer/tests -t .
"$PY" -m tools.tracer.generate --all --out-dir zoo "$@"
du -ch zoo/*.json | tail -1
