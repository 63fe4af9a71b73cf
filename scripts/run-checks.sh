#!/usr/bin/env bash
# run-checks.sh - runs Check test binaries, one line per suite, and a closing "N passed, N failed".
#
# Usage: scripts/run-checks.sh BUILD TEST...
#   VALGRIND=1  run each binary under valgrind (CK_FORK=no, definite leaks fail);
#               HLOKIT_VALGRIND=1 is exported so suites can shorten fuzz loops
#   JOBS=N      suites run N at a time (default: the number of cores)
# A suite's full output is kept in BUILD/test-logs[-valgrind]/NAME.log and
# shown when it fails.
set -uo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD TEST..." >&2
  exit 2
fi
build=$1
shift
logdir="$build/test-logs${VALGRIND:+-valgrind}"
mkdir -p "$logdir"
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
[ -n "${VALGRIND:-}" ] && export HLOKIT_VALGRIND=1

# Runs one suite, leaving NAME.log, NAME.rc and NAME.time in the log folder.
run_one() {
  local t=$1 name start end
  name=$(basename "$t")
  start=$(date +%s.%N)
  if [ -n "${VALGRIND:-}" ]; then
    CK_FORK=no valgrind -q --leak-check=full --error-exitcode=1 \
      --errors-for-leak-kinds=definite --show-leak-kinds=definite \
      "$t" >"$logdir/$name.log" 2>&1
  else
    "$t" >"$logdir/$name.log" 2>&1
  fi
  echo $? >"$logdir/$name.rc"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f\n", b - a }' >"$logdir/$name.time"
}

# Prints "passed failed" from Check's summary "NN%: Checks: C, Failures: F, Errors: E".
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

# Start the suites, at most $jobs at a time.
running=0
for t in "$@"; do
  [ -x "$t" ] || continue
  rm -f "$logdir/$(basename "$t").rc"
  run_one "$t" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

suites_passed=0
suites_failed=0
checks_passed=0
checks_failed=0
failed_names=()
tag=${VALGRIND:+  (valgrind)}
for t in "$@"; do
  name=$(basename "$t")
  if [ ! -x "$t" ] || [ ! -f "$logdir/$name.rc" ]; then
    echo "FAIL $name: not built ($t)"
    suites_failed=$((suites_failed + 1))
    checks_failed=$((checks_failed + 1))
    failed_names+=("$name")
    continue
  fi
  log="$logdir/$name.log"
  rc=$(cat "$logdir/$name.rc")
  secs=$(cat "$logdir/$name.time")
  read -r p f < <(check_counts "$log")
  checks_passed=$((checks_passed + p))
  checks_failed=$((checks_failed + f))
  if [ "$rc" -eq 0 ]; then
    suites_passed=$((suites_passed + 1))
    printf 'PASS %-28s %4d checks  %6ss%s\n' "$name" "$p" "$secs" "$tag"
  else
    suites_failed=$((suites_failed + 1))
    failed_names+=("$name")
    # A crash before Check's summary still counts as one failure.
    [ "$f" -eq 0 ] && checks_failed=$((checks_failed + 1))
    printf 'FAIL %-28s %4d passed, %d failed, exit %d  %6ss%s\n' "$name" "$p" "$f" "$rc" "$secs" "$tag"
    grep -v -E '^[^:]*:[0-9]+:P:' "$log" | tail -n 60 | sed -e 's/^/    /'
  fi
done

echo "suites: $suites_passed passed, $suites_failed failed${failed_names[*]:+ (${failed_names[*]})}"
echo "$checks_passed passed, $checks_failed failed"
[ $suites_failed -eq 0 ]
