#!/usr/bin/env bash
# deps.sh - checks the Debian packages hlokit needs; installs the missing ones when root.
#
# Usage: scripts/deps.sh [--no-valgrind]
# Quiet when everything is present.  As root, missing packages are installed
# with apt-get; otherwise the missing ones and the apt-get line are printed
# and the script exits 2.
set -euo pipefail

want_valgrind=1
[ "${1:-}" = "--no-valgrind" ] && want_valgrind=0

missing=()

have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }

# A C compiler: gcc, or any cc already on PATH.
if ! have_pkg gcc && ! command -v cc >/dev/null 2>&1; then missing+=(gcc libc6-dev); fi
if ! have_pkg libc6-dev && [ ! -e /usr/include/stdio.h ]; then missing+=(libc6-dev); fi
command -v make >/dev/null 2>&1 || missing+=(make)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ! have_pkg libjson-c-dev && ! pkg-config --exists json-c 2>/dev/null; then missing+=(libjson-c-dev); fi
if ! have_pkg check && ! pkg-config --exists check 2>/dev/null; then missing+=(check); fi
if [ "$want_valgrind" = 1 ] && ! command -v valgrind >/dev/null 2>&1; then missing+=(valgrind); fi
# Open MPI for the MPI collective back end (hlokit builds without it; the
# back end and its tests are then skipped).
if ! have_pkg libopenmpi-dev && ! command -v mpicc >/dev/null 2>&1; then missing+=(libopenmpi-dev); fi
if ! have_pkg openmpi-bin && ! command -v mpirun >/dev/null 2>&1; then missing+=(openmpi-bin); fi

[ ${#missing[@]} -eq 0 ] && exit 0

# De-duplicate, keeping order.
declare -A seen=()
pkgs=()
for p in "${missing[@]}"; do
  [ -n "${seen[$p]:-}" ] && continue
  seen[$p]=1
  pkgs+=("$p")
done

line="apt-get update && apt-get install -y --no-install-recommends ${pkgs[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "hlokit: missing Debian packages: ${pkgs[*]}" >&2
  echo "hlokit: install them as root with:" >&2
  echo "  $line" >&2
  exit 2
fi

echo "hlokit: installing missing Debian packages: ${pkgs[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q </dev/null
apt-get install -y -q --no-install-recommends "${pkgs[@]}" </dev/null
