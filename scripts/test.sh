#!/usr/bin/env bash
# test.sh - the README's test command: install missing Debian packages (make included), then make test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
exec make test "$@"
