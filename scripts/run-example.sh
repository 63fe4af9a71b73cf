#!/usr/bin/env bash
# run-example.sh - the README's first command: install deps, build, run hlokit on a bundled fixture.
#
# Usage: scripts/run-example.sh [hlokit arguments...]
# With no arguments it partitions fixtures/mlp_partial.hlo (parameters and
# root annotated) over 8 devices and checks the result against the global
# program, when the propagation and partitioning passes are built; until
# then it parses, verifies and prints fixtures/mlp.hlo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --no-valgrind
make -j"$(nproc)" all >/dev/null
if [ $# -gt 0 ]; then
  exec build/hlokit "$@"
fi
if build/hlokit passes 2>/dev/null | grep -q 'spmd-partitioning' &&
   build/hlokit passes 2>/dev/null | grep -q 'sharding-propagation'; then
  set -x
  exec build/hlokit check fixtures/mlp_partial.hlo --num-partitions=8 \
    --passes='sharding-propagation{is_spmd=true},spmd-partitioning{allow_module_signature_change=true}'
fi
echo "run-example: the partitioning passes are not built yet; parsing, verifying and printing instead" >&2
set -x
exec build/hlokit opt fixtures/mlp.hlo
