#!/usr/bin/env bash
# Formats gpemu's C++ sources with .clang-format (clang-format 14, Debian 12's
# clang-format package). With --check it changes nothing and exits 1 when a
# file would change, listing those files.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp')
if [[ "${1:-}" == "--check" ]]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s "$f" -; then
      echo "$f"
      bad=1
    fi
  done
  exit $bad
elif [[ $# -gt 0 ]]; then
  echo "format.sh: unknown argument '$1' (accepted: --check, or nothing to format in place)" >&2
  exit 2
fi
printf '%s\0' "${files[@]}" | xargs -0 -n 32 clang-format --style=file -i
