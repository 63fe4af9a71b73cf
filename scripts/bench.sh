#!/usr/bin/env bash
# bench.sh - benchmarks over generated sharded-MLP modules of 1e3..1e6 instructions (make bench).
#
# Usage: scripts/bench.sh BUILD [BENCH...]
#   BENCH_SIZES="1000 10000 100000 1000000"   module sizes (instructions)
#   BENCH_RUNS=3                              runs per measurement at 1e6 (more at small sizes)
#   BENCH_WHOLE_RUNS=5                        rounds of the whole-process bench
# Benches: whole (the hlokit process as the user runs it, beside cat of the
# same file, alternating; medians), instructions (the same process's
# instruction count under callgrind: repeatable on a loaded machine;
# BENCH_IR_SIZE instructions, 100000 by default), parse (parse and print, in process: the
# diagnostic), pipeline (pass dispatch), propagation
# (sharding-propagation over parameter-annotated modules), partition (read,
# parse, spmd-partitioning and print end to end, and a device-count sweep),
# eval (1024^3 dot, 100-layer MLP checked on 8 devices), mpi (the MLP on
# 8 devices under the thread back end and on 2, 4, 8 Open MPI ranks: wall
# time and peak RSS per rank; skipped without Open MPI).  To add one, write bench_NAME (it gets
# the size list; gen_module SIZE ANNOTATE gives a module path) and list it
# in BENCHES below.  Modules are kept in build/bench/.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD [BENCH...]" >&2
  exit 2
fi
build=$1
shift
BENCHES=(whole instructions parse pipeline propagation partition eval mpi)
[ $# -gt 0 ] && BENCHES=("$@")
sizes=(${BENCH_SIZES:-1000 10000 100000 1000000})
runs_1m=${BENCH_RUNS:-3}
benchdir=build/bench
mkdir -p "$benchdir"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"

# gen_module SIZE ANNOTATE [EXTRA ARGS] -> prints the path of a generated module.
gen_module() {
  local size=$1 annotate=$2
  shift 2
  local path="$benchdir/mlp-$size-$annotate.hlo"
  if [ ! -s "$path" ] || [ "$build/hk-gen-mlp" -nt "$path" ]; then
    "$build/hk-gen-mlp" --instructions="$size" --annotate="$annotate" "$@" >"$path.tmp"
    mv "$path.tmp" "$path"
  fi
  echo "$path"
}

# runs_for SIZE -> more runs for small modules so timings are not noise.
runs_for() {
  local r=$((runs_1m * 1000000 / $1))
  [ $r -gt 50 ] && r=50
  [ $r -lt "$runs_1m" ] && r=$runs_1m
  echo $r
}

# gen_many_params SIZE -> a module of about SIZE instructions whose every
# layer has its own weights (3 parameters a layer).
gen_many_params() {
  local path="$benchdir/mlp-$1-all-per-layer.hlo"
  if [ ! -s "$path" ] || [ "$build/hk-gen-mlp" -nt "$path" ]; then
    "$build/hk-gen-mlp" --instructions="$1" --annotate=all --weights=per-layer >"$path.tmp"
    mv "$path.tmp" "$path"
  fi
  echo "$path"
}

# timed CMD... -> "wall_seconds max_rss_kb cpu_seconds" of one run (output
# discarded).  Wall seconds from the clock (ns; /usr/bin/time's %e has 10 ms
# steps, all of a small module's run), peak RSS in KiB and CPU (user +
# system, every thread: steadier than wall on a shared machine); a command
# that fails stops the bench rather than being timed as fast.
timed() {
  local t0 t1
  t0=$(date +%s%N)
  if ! /usr/bin/time -f '%M %U %S' -o "$benchdir/time.txt" "$@" >/dev/null 2>"$benchdir/err.txt"; then
    echo "bench: failed: $*" >&2
    cat "$benchdir/err.txt" >&2
    exit 2
  fi
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000 ))e-6 $(tail -n 1 "$benchdir/time.txt" | awk '{ print $1, $2 + $3 }')"
}

# median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# whole_row FILE ROUNDS [ENV=VALUE...]: cat, the partitioning process and
# parse+print, alternating, ROUNDS times (the hlokit processes run under
# env ENV=VALUE... when given); prints the medians and the ratios to cat.
whole_row() {
  local f=$1 rounds=$2 out="$benchdir/out.hlo" i t r u
  shift 2
  local envs=(env "$@")
  local tc="" tw="" tp="" rw="" rp="" uw="" up=""
  for ((i = 0; i < rounds; i++)); do
    tc+="$(timed sh -c "cat '$f' | cat >/dev/null" | cut -d' ' -f1)"$'\n'
    read -r t r u < <(timed "${envs[@]}" "$build/hlokit" opt "$f" --passes="$PARTITION_PASSES" \
                        --no-verify -o "$out")
    tw+="$t"$'\n'; rw+="$r"$'\n'; uw+="$u"$'\n'
    read -r t r u < <(timed "${envs[@]}" "$build/hlokit" opt "$f" --no-verify -o "$out")
    tp+="$t"$'\n'; rp+="$r"$'\n'; up+="$u"$'\n'
  done
  rm -f "$out"
  local n bytes
  n=$(grep -c ' = ' "$f")
  bytes=$(stat -c %s "$f")
  awk -v n="$n" -v b="$bytes" -v c="$(median <<<"$tc")" -v w="$(median <<<"$tw")" \
      -v p="$(median <<<"$tp")" -v rw="$(median <<<"$rw")" -v rp="$(median <<<"$rp")" \
      -v uw="$(median <<<"$uw")" -v up="$(median <<<"$up")" -v tag="$*" \
    'BEGIN { printf "%9d %7.1f | %7.4f | %8.4f %6.1fx %6.2f %7.0f | %8.4f %6.1fx %6.2f %7.0f %s\n",
             n, b / 1e6, c, w, w / c, uw, rw * 1024 / n, p, p / c, up, rp * 1024 / n, tag }'
}

bench_whole() {
  local rounds=${BENCH_WHOLE_RUNS:-5}
  echo
  echo "== the whole hlokit process, as the user waits for it (wall seconds, medians of $rounds"
  echo "   alternating rounds; cpu: user + system seconds, every thread; RSS: peak bytes per"
  echo "   instruction):"
  echo "   cat:       cat M | cat >/dev/null"
  echo "   partition: hlokit opt M --passes='$PARTITION_PASSES' --no-verify -o out.hlo"
  echo "   parse+print: hlokit opt M --no-verify -o out.hlo"
  printf '%9s %7s | %7s | %8s %7s %6s %7s | %8s %7s %6s %7s\n' instrs MB "cat s" "part s" "x cat" \
    "cpu s" "RSS B/i" "p+p s" "x cat" "cpu s" "RSS B/i"
  for n in "${sizes[@]}"; do
    whole_row "$(gen_module "$n" all)" "$rounds"
  done
  echo "many parameters (every layer its own weights):"
  whole_row "$(gen_many_params "${sizes[-1]}")" "$rounds"
  # The tricks that use a second thread (the prefault helper, the
  # partitioner's early order) go with HLOKIT_THREADS=1: this row is the
  # largest module without them, for their gain.
  echo "the largest module on one thread (HLOKIT_THREADS=1: no prefault helper, no early order):"
  whole_row "$(gen_module "${sizes[-1]}" all)" "$rounds" HLOKIT_THREADS=1
}

# ir_of FILE FN -> the inclusive instruction count of function FN in the
# callgrind output FILE (0 when FN never ran).
ir_of() {
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
    awk -v fn="$2" '{ c = $1; gsub(",", "", c); for (k = 2; k <= NF; k++) if ($k ~ ":" fn " " || $k ~ ":" fn "$") { print c; exit } }' |
    head -n 1 | grep . || echo 0
}

# Instruction counts of the whole hlokit process under callgrind: the same
# on every run, however loaded the machine, so a trick's gain shows even
# where the wall times above move by half (they leave out the kernel's
# work and cache misses: the wall table is still the judge).
bench_instructions() {
  local n=${BENCH_IR_SIZE:-100000}
  echo
  echo "== instructions executed by the whole hlokit process (callgrind, one thread), $n instructions:"
  if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
    echo "skipped: needs valgrind"
    return
  fi
  local f out="$benchdir/out.hlo" cg="$benchdir/callgrind.out"
  f=$(gen_module "$n" all)
  printf '%-12s | %9s %8s | %8s %8s %8s\n' process "M instr" "per i" "read" "passes" "print"
  local what
  for what in partition parse+print; do
    local args=(opt "$f" --no-verify -o "$out")
    [ "$what" = partition ] && args+=(--passes="$PARTITION_PASSES")
    HLOKIT_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$cg" "$build/hlokit" "${args[@]}" \
      >/dev/null 2>"$benchdir/err.txt" || { cat "$benchdir/err.txt" >&2; exit 2; }
    local tot rd ps pr
    tot=$(sed -n 's/^summary: *//p' "$cg" | head -n 1)
    rd=$(ir_of "$cg" hk_cli_read_module)
    ps=$(ir_of "$cg" hk_cli_run_pipeline)
    pr=$(ir_of "$cg" hk_cli_write_module)
    awk -v w="$what" -v n="$n" -v t="$tot" -v rd="$rd" -v ps="$ps" -v pr="$pr" \
      'BEGIN { printf "%-12s | %9.1f %8.0f | %8.0f %8.0f %8.0f\n", w, t / 1e6, t / n, rd / n, ps / n, pr / n }'
  done
  rm -f "$out" "$cg"
  echo "(per i: per input instruction; read = read + parse, passes, print = print + write)"
}

bench_parse() {
  echo
  echo "== parse and print (HLO text, long form; every instruction sharded)"
  echo "   wall: best of the runs; cpu: best CPU time (user + system), steadier on a shared machine"
  printf '%9s %8s | %9s %9s %8s | %9s %9s | %9s | %8s %8s | %8s %8s %9s\n' \
    instrs MB "parse s" "Minstr/s" "MB/s" "print s" "Minstr/s" "floor MB/s" "RSS B/i" "mod B/i" \
    "cpu p s" "cpu q s" "cpu Mi/s"
  local first_parse="" first_print="" last_parse="" last_print="" first_n="" last_n=""
  local first_pc="" first_qc="" last_pc="" last_qc=""
  for n in "${sizes[@]}"; do
    local f row
    f=$(gen_module "$n" all)
    row=$("$build/hk-bench-parse" "$f" --runs="$(runs_for "$n")" --row)
    read -r instrs bytes pbest pmed qbest qmed fbest rss modb outb pcpu qcpu <<<"$row"
    awk -v n="$instrs" -v b="$bytes" -v p="$pbest" -v q="$qbest" -v f="$fbest" -v r="$rss" -v m="$modb" \
        -v pc="$pcpu" -v qc="$qcpu" \
      'BEGIN { printf "%9d %8.1f | %9.4f %9.2f %8.1f | %9.4f %9.2f | %10.1f | %8.0f %8.0f | %8.4f %8.4f %9.2f\n",
               n, b/1e6, p, n/p/1e6, b/1e6/p, q, n/q/1e6, b/1e6/f, r, m, pc, qc, n/(pc+qc)/1e6 }'
    if [ -z "$first_n" ]; then
      first_n=$instrs; first_parse=$pbest; first_print=$qbest; first_pc=$pcpu; first_qc=$qcpu
    fi
    last_n=$instrs; last_parse=$pbest; last_print=$qbest; last_pc=$pcpu; last_qc=$qcpu
  done
  awk -v a="$first_n" -v b="$last_n" -v p0="$first_parse" -v p1="$last_parse" \
      -v q0="$first_print" -v q1="$last_print" \
    'BEGIN { printf "growth (time per instruction at %d vs %d): parse %.2fx, print %.2fx, parse+print %.2f M instr/s at %d\n",
             b, a, (p1/b)/(p0/a), (q1/b)/(q0/a), b/(p1+q1)/1e6, b }'
  awk -v a="$first_n" -v b="$last_n" -v p0="$first_pc" -v p1="$last_pc" \
      -v q0="$first_qc" -v q1="$last_qc" \
    'BEGIN { if (p0 > 0 && q0 > 0)
               printf "growth in cpu time: parse %.2fx, print %.2fx, parse+print %.2f M instr/s at %d\n",
                      (p1/b)/(p0/a), (q1/b)/(q0/a), b/(p1+q1)/1e6, b }'
}

bench_pipeline() {
  echo
  echo "== pass dispatch: 1000 no-op passes (each walks every instruction), pipeline vs direct calls"
  printf '%9s %7s | %10s %10s %8s | %12s %12s\n' instrs passes "direct s" "pipeline s" "A/B %" \
    "dispatch ns" "overhead %"
  for n in 1000 100000; do
    "$build/hk-bench-pipeline" --instructions="$n" --passes=1000 --runs=5 --row |
      awk '{ printf "%9d %7d | %10.4f %10.4f %+8.2f | %12.1f %12.5f\n", $1, $2, $3, $4, $5, $6, $7 }'
  done
}

bench_propagation() {
  echo
  echo "== sharding-propagation{is_spmd=true} over modules annotated only at their parameters"
  printf '%9s | %9s %9s | %10s\n' instrs "best s" "Minstr/s" "us/instr"
  local first_n="" first_t="" last_n="" last_t=""
  for n in "${sizes[@]}"; do
    local f best="" t
    f=$(gen_module "$n" params)
    for _ in $(seq "$(runs_for "$n")"); do
      t=$("$build/hlokit" opt "$f" --no-verify --passes='sharding-propagation{is_spmd=true}' \
            --time-passes -o /dev/null 2>&1 | awk '$2 == "sharding-propagation" { print $3 / 1000 }')
      if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
    done
    awk -v n="$n" -v t="$best" 'BEGIN { printf "%9d | %9.4f %9.3f | %10.3f\n", n, t, n/t/1e6, t/n*1e6 }'
    if [ -z "$first_n" ]; then first_n=$n; first_t=$best; fi
    last_n=$n; last_t=$best
  done
  awk -v a="$first_n" -v b="$last_n" -v t0="$first_t" -v t1="$last_t" \
    'BEGIN { printf "growth (time per instruction at %d vs %d): %.2fx\n", b, a, (t1/b)/(t0/a) }'
}

# The pass as `hlokit opt IN --passes=... -o OUT` runs it.  The generated
# stack has sharded entry parameters (the weights), so the signature may
# change (XLA's allow_module_signature_change).
PARTITION_PASSES='spmd-partitioning{allow_module_signature_change=true}'

# partition_row FILE RUNS -> hk-bench-partition's row for FILE.
partition_row() {
  "$build/hk-bench-partition" "$1" --passes="$PARTITION_PASSES" --runs="$2" --row
}

bench_partition() {
  echo
  echo "== read + parse + $PARTITION_PASSES + print (long form), in process;"
  echo "   every instruction sharded (Megatron MLP: column-, then row-sharded weights), 8 devices;"
  echo "   wall seconds, best run (the prefault helper works on the second core); CPU: this thread, all threads"
  printf '%9s | %7s %7s %8s %7s | %8s %9s | %8s %8s | %9s %6s %6s | %7s\n' instrs "read s" "parse s" \
    "part s" "print s" "total s" "Minstr/s" "cpu thr" "cpu all" "out instrs" "AR/lyr" "other" "RSS B/i"
  local first_n="" first_t="" first_p="" last_n="" last_t="" last_p="" last_n_size=""
  for n in "${sizes[@]}"; do
    local f row
    f=$(gen_module "$n" all)
    row=$(partition_row "$f" "$(runs_for "$n")")
    read -r instrs outi rd ps pp pr tot ar other rss outb tcpu pcpu <<<"$row"
    last_n_size=$n
    awk -v n="$instrs" -v o="$outi" -v rd="$rd" -v ps="$ps" -v pp="$pp" -v pr="$pr" -v t="$tot" \
        -v ar="$ar" -v ot="$other" -v r="$rss" -v L="$(( (instrs - 10) / 20 ))" -v tc="$tcpu" -v pc="$pcpu" \
      'BEGIN { printf "%9d | %7.4f %7.4f %8.4f %7.4f | %8.4f %9.3f | %8.4f %8.4f | %10d %6.2f %6d | %7.0f\n",
               n, rd, ps, pp, pr, t, n/t/1e6, tc, pc, o, ar/L, ot, r }'
    if [ -z "$first_n" ]; then first_n=$instrs; first_t=$tot; first_p=$pp; fi
    last_n=$instrs; last_t=$tot; last_p=$pp
  done
  awk -v a="$first_n" -v b="$last_n" -v t0="$first_t" -v t1="$last_t" -v p0="$first_p" -v p1="$last_p" \
    'BEGIN { printf "growth (time per instruction at %d vs %d): end to end %.2fx, partition %.2fx; %.3f M instr/s end to end at %d\n",
             b, a, (t1/b)/(t0/a), (p1/b)/(p0/a), b/t1/1e6, b }'
  bench_partition_phases "$(gen_module "$last_n_size" all)"
  bench_partition_devices
}

# Where the partitioner's time goes at the largest size: the driver's phase
# clock (HLOKIT_SPMD_TIMES) over the second of two runs (the first warms up).
bench_partition_phases() {
  echo
  echo "partitioner phases at ${sizes[-1]} instructions (second of two runs):"
  HLOKIT_SPMD_TIMES=1 "$build/hk-bench-partition" "$1" --passes="$PARTITION_PASSES" --runs=2 \
    2>&1 >/dev/null | sed -n 's/^spmd-partitioning: /  /p' |
    awk '{ line[NR] = $0 } END { for (k = NR / 2 + 1; k <= NR; k++) print line[k] }'
}

# The same 1e5-instruction stack over 2..1024 devices: the cost must not
# depend on the device count.
bench_partition_devices() {
  local n=${BENCH_SWEEP_SIZE:-100000} base=""
  echo
  echo "device-count sweep at $n instructions (best of $(runs_for "$n")):"
  printf '%8s | %8s %8s | %9s %9s | %8s %8s\n' devices "part s" "total s" "Minstr/s" "vs first" \
    "out MB" "RSS B/i"
  for d in 2 8 64 1024; do
    local f="$benchdir/mlp-$n-all-d$d.hlo" row
    if [ ! -s "$f" ] || [ "$build/hk-gen-mlp" -nt "$f" ]; then
      "$build/hk-gen-mlp" --instructions="$n" --annotate=all --devices="$d" >"$f.tmp"
      mv "$f.tmp" "$f"
    fi
    row=$(partition_row "$f" "$(runs_for "$n")")
    read -r instrs outi rd ps pp pr tot ar other rss outb tcpu pcpu <<<"$row"
    [ -z "$base" ] && base=$tot
    awk -v d="$d" -v n="$instrs" -v pp="$pp" -v t="$tot" -v b="$base" -v ob="$outb" -v r="$rss" \
      'BEGIN { printf "%8d | %8.4f %8.4f | %9.3f %8.2fx | %8.1f %8.0f\n", d, pp, t, n/t/1e6, t/b, ob/1e6, r }'
  done
}

# best_seconds N CMD... -> the best wall time of N runs of CMD, in seconds.
best_seconds() {
  local n=$1 best="" t0 t1 t
  shift
  for _ in $(seq "$n"); do
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
  done
  echo "$best"
}

bench_eval() {
  echo
  echo "== evaluator"
  local t
  t=$(best_seconds 3 "$build/hlokit" run fixtures/eval/dot_1024.hlo)
  awk -v t="$t" 'BEGIN { printf "f32 dot 1024x1024x1024: %.3f s (whole run), %.2f GFLOP/s\n", t, 2*1024^3/t/1e9 }'
  local mlp="$benchdir/mlp-100-layers.hlo"
  [ -s "$mlp" ] || "$build/hk-gen-mlp" --layers=100 --annotate=all >"$mlp"
  t=$(best_seconds 3 "$build/hlokit" check "$mlp" --num-partitions=8 \
        --passes='spmd-partitioning{allow_module_signature_change=true}' --atol=1e-3 --rtol=1e-2)
  awk -v t="$t" 'BEGIN { printf "100-layer MLP: partition + global run + 8-device run + compare: %.3f s\n", t }'
}

# peak_rss_run N CMD... -> "WALL MAXRSS_KB": CMD on N MPI ranks (N=0: no
# mpirun), wall seconds and the largest peak RSS of one rank.
peak_rss_run() {
  local n=$1
  shift
  local d
  d=$(mktemp -d)
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$n" = 0 ]; then
    /usr/bin/time -f %M -o "$d/rss.0" "$@" >/dev/null
  else
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -n "$n" \
      sh -c '/usr/bin/time -f %M -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$@"' "$d" "$@" >/dev/null
  fi
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v m="$(cat "$d"/rss.* | sort -n | tail -1)" 'BEGIN { printf "%.3f %d\n", b - a, m }'
  rm -rf "$d"
}

# The MPI table: the MLP's run and check on 8 devices, one process
# (threads) beside N = 2, 4, 8 ranks: wall time, the largest peak RSS of a
# rank, its ratio to the one process, and the same figures above each
# launcher's fixed cost (its peak RSS running a 16-element module: the
# binary, its libraries and, for MPI, Open MPI's own buffers, which do not
# shrink with N).
bench_mpi() {
  echo
  echo "== MPI back end: MLP (4 layers, width ${MPI_BENCH_WIDTH:-1024}, batch 16) on 8 devices"
  if ! command -v mpirun >/dev/null 2>&1 || [ ! -f "$build/backends/mpi.so" ] || [ ! -x /usr/bin/time ]; then
    echo "skipped: needs Open MPI, $build/backends/mpi.so and /usr/bin/time"
    return
  fi
  local mlp="$benchdir/mlp-mpi.hlo" part="$benchdir/mlp-mpi-part.hlo"
  local tiny="$benchdir/mlp-mpi-tiny.hlo" tiny_part="$benchdir/mlp-mpi-tiny-part.hlo"
  local passes='spmd-partitioning{allow_module_signature_change=true}'
  "$build/hk-gen-mlp" --layers=4 --width="${MPI_BENCH_WIDTH:-1024}" --batch=16 --devices=8 >"$mlp"
  "$build/hlokit" opt "$mlp" --num-partitions=8 --passes="$passes" -o "$part"
  "$build/hk-gen-mlp" --layers=1 --width=8 --batch=8 --devices=8 >"$tiny"
  "$build/hlokit" opt "$tiny" --num-partitions=8 --passes="$passes" -o "$tiny_part"
  printf '%-9s | %7s %9s %6s %9s %6s | %7s %9s %6s %9s %6s | %8s\n' backend "run s" "RSS/rank" "vs 1p" \
    "above fix" "vs 1p" "check s" "RSS/rank" "vs 1p" "above fix" "vs 1p" "fixed"
  local base_run="" base_check="" base_run_d="" base_check_d=""
  for n in 0 2 4 8; do
    local backend=threads r c f
    [ "$n" != 0 ] && backend="mpi -n $n"
    local extra=()
    [ "$n" != 0 ] && extra=(--backend=mpi)
    f=$(peak_rss_run "$n" "$build/hlokit" run "$tiny_part" "${extra[@]}")
    r=$(peak_rss_run "$n" "$build/hlokit" run "$part" "${extra[@]}")
    c=$(peak_rss_run "$n" "$build/hlokit" check "$mlp" --partitioned="$part" --sample-seconds=0 "${extra[@]}")
    read -r _ fm <<<"$f"
    read -r rt rm <<<"$r"
    read -r ct cm <<<"$c"
    local rd=$((rm - fm)) cd=$((cm - fm))
    [ $rd -lt 1 ] && rd=1
    [ $cd -lt 1 ] && cd=1
    [ -z "$base_run" ] && base_run=$rm && base_check=$cm && base_run_d=$rd && base_check_d=$cd
    awk -v b="$backend" -v rt="$rt" -v rm="$rm" -v ct="$ct" -v cm="$cm" -v br="$base_run" -v bc="$base_check" \
        -v rd="$rd" -v cd="$cd" -v brd="$base_run_d" -v bcd="$base_check_d" -v fm="$fm" \
      'BEGIN { printf "%-9s | %7.3f %6.1f MB %5.2fx %6.1f MB %5.2fx | %7.3f %6.1f MB %5.2fx %6.1f MB %5.2fx | %5.1f MB\n",
               b, rt, rm/1024, rm/br, rd/1024, rd/brd, ct, cm/1024, cm/bc, cd/1024, cd/bcd, fm/1024 }'
  done
  echo "(threads: one process runs all 8 devices; mpi -n N: each rank runs 8/N devices as threads."
  echo " RSS/rank: the largest peak RSS of one rank; above fix: minus 'fixed', the same launcher's"
  echo " peak RSS on a 16-element module.  run gives every device the same parameter values, held"
  echo " once per process, so a rank's run holds what the one process holds of them; check's"
  echo " reference holds, per rank, the global operands its pieces read)"
}

for b in "${BENCHES[@]}"; do
  if ! declare -F "bench_$b" >/dev/null; then
    echo "bench.sh: unknown bench '$b' (have: $(declare -F | sed -n 's/^declare -f bench_//p' | tr '\n' ' '))" >&2
    exit 2
  fi
  "bench_$b"
done
