#!/usr/bin/env bash
# conformance.sh - runs the conformance runner and fails when a pass rate is under its floor.
#
# Usage: scripts/conformance.sh BUILD [hk-conformance args...]
#   JOBS=N                          cases at once (default: the core count)
#   HLOKIT_CONFORMANCE_TIMEOUT=S    seconds per case (default 30)
#   HLOKIT_CONFORMANCE_DIR=DIR      the corpus (default ../shared/conformance)
# Floors: scripts/conformance-floors.txt, lines "NAME RATE" where NAME is a
# suite (parser) or suite/kind (parser/roundtrip); '#' starts a comment.
# The full output is kept in BUILD/conformance.txt, failing cases listed in it.
set -uo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD [hk-conformance args...]" >&2
  exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
floors="${HLOKIT_CONFORMANCE_FLOORS:-$here/conformance-floors.txt}"
runner="$build/hk-conformance"
out="$build/conformance.txt"

if [ ! -x "$runner" ]; then
  echo "conformance: $runner is not built (make BUILD=$build tools)" >&2
  exit 2
fi
dir="${HLOKIT_CONFORMANCE_DIR:-../shared/conformance}"
if [ ! -d "$dir" ]; then
  echo "conformance: corpus folder $dir not found (set HLOKIT_CONFORMANCE_DIR)" >&2
  exit 2
fi

# Cases run JOBS at a time (default: the core count), each given
# HLOKIT_CONFORMANCE_TIMEOUT seconds before it counts as failed (timed out).
"$runner" --dir="$dir" --hlokit="$build/hlokit" --timeout="${HLOKIT_CONFORMANCE_TIMEOUT:-30}" \
  "$@" >"$out"
rc=$?
# Failing cases first (they can be many), then the table.
grep -E '^FAIL ' "$out" | sort || true
grep -v -E '^(FAIL|pass|rate) ' "$out"
if [ $rc -gt 1 ]; then
  echo "conformance: the runner failed (exit $rc)" >&2
  exit 2
fi

status=0
n_ok=0
n_bad=0
while read -r name floor _; do
  case "$name" in '' | '#'*) continue ;; esac
  rate=$(awk -v n="$name" '$1 == "rate" && $2 == n { print $3 }' "$out")
  if [ -z "$rate" ]; then
    # A suite not selected by --suite is not judged.
    if [ $# -gt 0 ] && printf '%s\n' "$@" | grep -q -- '--suite\|--filter'; then continue; fi
    echo "conformance: BELOW FLOOR $name: no result (floor $floor)"
    status=1
    n_bad=$((n_bad + 1))
    continue
  fi
  if awk -v r="$rate" -v f="$floor" 'BEGIN { exit !(r + 1e-9 < f) }'; then
    echo "conformance: BELOW FLOOR $name: $rate < $floor"
    status=1
    n_bad=$((n_bad + 1))
  else
    echo "conformance: ok $name $rate >= $floor"
    n_ok=$((n_ok + 1))
  fi
done <"$floors"
# The verdict: each floor is one test.
echo "conformance floors: $n_ok passed, $n_bad failed"
exit $status
