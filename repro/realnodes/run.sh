#!/usr/bin/env bash
# One reproduction item: repro/<item>/run.sh [--quick|--full] [--clock virtual|real] [--out DIR]
# (run.py's docstring says what it reproduces and against what; docs/reproductions.md).
exec "${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/run.py" "$@"
