#!/usr/bin/env python3
"""xla-spmd-cases.py - XLA's own partitioner tests that the visible corpus does not hold, as corpus lines.

Usage: scripts/xla-spmd-cases.py XLA_TEST_CC VISIBLE_SPMD_JSONL OUT_JSONL

XLA_TEST_CC is xla/service/spmd/spmd_partitioner_test.cc from an openxla/xla
checkout; every TEST_P with one module string and one PartitionComputation
call whose name the visible corpus lacks becomes a line in the corpus format
(README of ../shared/conformance): the module, num_devices, the positional
options named as upstream, and xla_collectives, the collective kinds the
test body names (null when it names no op).  Score it with
  build/hk-conformance --dir=DIR_OF_OUT --suite=spmd_quality
to see how the partitioner does on cases it was not tuned on.  A dev tool:
nothing in the build or make test runs it.
"""
import re, json, sys
src = open(sys.argv[1]).read()
visible = set(json.loads(l)['name'] for l in open(sys.argv[2]))
out = open(sys.argv[3], 'w')
POS = ['conv_halo_exchange_always_on_lhs', 'choose_faster_windowed_einsum', 'unroll_windowed_einsum',
       'bidirectional_windowed_einsum', 'threshold_for_windowed_einsum_mib', 'gather_method', 'scatter_method',
       'total_bytes_windowed_einsum_threshold']
starts = [m for m in re.finditer(r'^TEST_P\(SpmdPartitioningTest,\s*(\w+)\)\s*\{', src, re.M)]
kinds = {'AllReduce': 'all-reduce', 'AllGather': 'all-gather', 'AllToAll': 'all-to-all',
         'CollectivePermute': 'collective-permute', 'ReduceScatter': 'reduce-scatter'}
stats = {'multi': 0, 'nocall': 0, 'visible': 0, 'ok': 0}
def split_args(s):
    args, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([{': depth += 1
        if ch in ')]}': depth -= 1
        if ch == ',' and depth == 0: args.append(cur.strip()); cur = ''
        else: cur += ch
    if cur.strip(): args.append(cur.strip())
    return args
for i, m in enumerate(starts):
    name = m.group(1)
    end = starts[i + 1].start() if i + 1 < len(starts) else len(src)
    body = src[m.end():end]
    if name in visible: stats['visible'] += 1; continue
    raws = re.findall(r'R"\((.*?)\)"', body, re.S)
    calls = [c for c in re.finditer(r'PartitionComputation\(', body)]
    if len(raws) != 1 or len(calls) != 1: stats['multi'] += 1; continue
    # argument text up to the matching paren
    j = calls[0].end(); depth = 1; k = j
    while depth:
        if body[k] == '(': depth += 1
        elif body[k] == ')': depth -= 1
        k += 1
    argtext = re.sub(r'/\*.*?\*/', '', body[j:k - 1])
    args = split_args(argtext)
    if len(args) < 2 or not re.fullmatch(r'\d+', args[1]): stats['nocall'] += 1; continue
    opts = {}
    for pos, a in enumerate(args[2:]):
        key = POS[pos]
        if a in ('true', 'false'): opts[key] = a == 'true'
        elif re.fullmatch(r'-?\d+', a): opts[key] = int(a)
        elif a.startswith('PartitioningMethod::'): opts[key] = a
        elif a == 'std::nullopt': continue
        elif '<<' in a: opts[key] = eval(a)
        else: opts[key] = a
    after = body[k:]
    expect_error = bool(re.search(r'EXPECT_FALSE\([^;]*ok\(\)|StatusIs\(|IsOk\(\)\)\)|status\(\)\.ok\(\)', body)) and 'TF_ASSERT_OK_AND_ASSIGN' not in body[:calls[0].start()][-200:]
    named = set()
    for w in re.findall(r'op::(\w+)|HloOpcode::k(\w+)', body):
        n = w[0] or w[1]
        if n in kinds: named.add(kinds[n])
    names_any = bool(re.search(r'op::\w+|HloOpcode::k\w+', body))
    rec = {'name': name, 'hlo': raws[0], 'num_devices': int(args[1]), 'options': opts,
           'allow_module_signature_change': True, 'root_shape': None, 'expect_error': expect_error,
           'xla_expected_ops': [], 'xla_collectives': sorted(named) if names_any else None, 'partitioner': 'spmd'}
    out.write(json.dumps(rec) + '\n'); stats['ok'] += 1
print(stats, file=sys.stderr)
