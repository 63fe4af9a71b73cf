#!/usr/bin/env bash
# run-checks.sh - runs Check test binaries, one line per suite, and a closing "N passed, N failed".
#
# Usage: scripts/run-checks.sh BUILD TEST...
#   VALGRIND=1  run each binary under valgrind (CK_FORK=no, definite leaks fail)
# A suite's full output is kept in BUILD/test-logs/NAME.log and shown when it fails.
set -uo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD TEST..." >&2
  exit 2
fi
build=$1
shift
logdir="$build/test-logs${VALGRIND:+-valgrind}"
mkdir -p "$logdir"

suites_passed=0
suites_failed=0
checks_passed=0
checks_failed=0
failed_names=()

# Prints "passed failed" from a Check summary line "NN%: Checks: C, Failures: F, Errors: E".
check_counts() {
  local line
  line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$1" | tail -n 1)
  if [ -z "$line" ]; then
    echo "0 0"
    return
  fi
  local c f e
  c=$(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")
  e=$(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")
  echo "$((c - f - e)) $((f + e))"
}

run_one() {
  local t=$1 name log start end rc
  name=$(basename "$t")
  log="$logdir/$name.log"
  start=$(date +%s.%N)
  if [ -n "${VALGRIND:-}" ]; then
    CK_FORK=no valgrind -q --leak-check=full --error-exitcode=1 \
      --errors-for-leak-kinds=definite --show-leak-kinds=definite \
      "$t" >"$log" 2>&1
  else
    "$t" >"$log" 2>&1
  fi
  rc=$?
  end=$(date +%s.%N)
  read -r p f < <(check_counts "$log")
  checks_passed=$((checks_passed + p))
  checks_failed=$((checks_failed + f))
  local secs
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 0 ]; then
    suites_passed=$((suites_passed + 1))
    printf 'PASS %-28s %4d checks  %6ss%s\n' "$name" "$p" "$secs" "${VALGRIND:+  (valgrind)}"
  else
    suites_failed=$((suites_failed + 1))
    failed_names+=("$name")
    # A crash before Check's summary still counts as one failure.
    [ "$f" -eq 0 ] && checks_failed=$((checks_failed + 1))
    printf 'FAIL %-28s %4d passed, %d failed, exit %d  %6ss%s\n' "$name" "$p" "$f" "$rc" "$secs" \
      "${VALGRIND:+  (valgrind)}"
    sed -e 's/^/    /' "$log" | grep -v -E '^    [^:]*:[0-9]+:P:' | tail -n 60
  fi
}

for t in "$@"; do
  if [ ! -x "$t" ]; then
    echo "FAIL $(basename "$t"): not built ($t)"
    suites_failed=$((suites_failed + 1))
    failed_names+=("$(basename "$t")")
    continue
  fi
  run_one "$t"
done

echo "suites: $suites_passed passed, $suites_failed failed${failed_names[*]:+ (${failed_names[*]})}"
echo "$checks_passed passed, $checks_failed failed"
[ $suites_failed -eq 0 ]
