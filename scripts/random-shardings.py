#!/usr/bin/env python3
"""random-shardings.py - random valid shardings on corpus modules, checked.

Usage: scripts/random-shardings.py HLOKIT CORPUS.jsonl OUTDIR [VARIANTS] [SEED]

For each module of a conformance corpus (spmd.jsonl, propagation.jsonl) and
each of VARIANTS (default 3) seeds, one to three instructions of the entry
(written on one line, outside manual regions) get a random tiled or
partially replicated sharding over the module's devices; the module is then
propagated, partitioned and compared with `hlokit check`.  A run that
differs (exit 1), crashes or hangs is a finding: its module is written to
OUTDIR/fail-NAME-V.hlo and listed in OUTDIR/results.txt with the first line
of hlokit's output.  Exit 2 (a clear error for a sharding the partitioner
refuses) is listed but is not a finding.  Modules whose reduces start from
a parameter are skipped: XLA asks the init value to be the reducer's
identity, so their partitioned result is not defined to match.
"""
import json
import os
import random
import re
import subprocess
import sys

LINE = re.compile(r'^(\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*)([a-z0-9]+)\[([0-9,]*)\](\{[^}]*\})?\s+([a-z\-]+)\(')
SKIP_OPS = {'parameter', 'tuple', 'get-tuple-element', 'custom-call', 'while', 'conditional', 'call',
            'after-all', 'partition-id', 'replica-id', 'rng', 'send', 'recv', 'send-done',
            'recv-done', 'outfeed', 'infeed'}
PARAM_INIT = re.compile(r'%?init[\w.]* = \w+\[\]\S* parameter\(')


def device_count(case, text):
    """The case's device count, else the largest tile assignment written."""
    if case.get('num_devices'):
        return case['num_devices']
    n = 1
    for m in re.finditer(r'devices=\[([0-9,]+)\]', text):
        p = 1
        for x in m.group(1).split(','):
            p *= int(x)
        n = max(n, p)
    return n


def strip_sharding(line):
    i = line.find('sharding={')
    if i < 0:
        return line
    j, depth = i + len('sharding='), 0
    while j < len(line):
        depth += {'{': 1, '}': -1}.get(line[j], 0)
        if depth == 0:
            break
        j += 1
    k = i
    while k > 0 and line[k - 1] in ' ,':
        k -= 1
    return line[:k] + line[j + 1:]


def random_sharding(rng, rank, n):
    """Tiles over n devices: n's prime factors spread over the dims, some
    (with partial replication) left to a replicated last tile dim."""
    if rank == 0 or n == 1:
        return '{replicated}'
    tiles, left, partial = [1] * rank, n, rng.random() < 0.3
    factors, x, f = [], n, 2
    while x > 1:
        while x % f == 0:
            factors.append(f)
            x //= f
        f += 1
    rng.shuffle(factors)
    for f in factors:
        if partial and rng.random() < 0.4:
            continue
        tiles[rng.randrange(rank)] *= f
        left //= f
    dims = ','.join(map(str, tiles))
    if left == n:
        return '{replicated}'
    if left > 1:
        return '{devices=[%s,%d]<=[%d] last_tile_dim_replicate}' % (dims, left, n)
    return '{devices=[%s]<=[%d]}' % (dims, n)


def candidates(lines):
    """Entry instructions written on one line, outside manual regions."""
    start = next((i for i, l in enumerate(lines) if l.lstrip().startswith('ENTRY')), None)
    if start is None:
        return []
    out = []
    for i in range(start + 1, len(lines)):
        if lines[i].startswith('}'):
            break
        m = LINE.match(lines[i])
        nxt = lines[i + 1] if i + 1 < len(lines) else '}'
        one_line = LINE.match(nxt) or nxt.strip() == '' or nxt.strip().startswith('}')
        if m and one_line and m.group(5) not in SKIP_OPS and m.group(3) and 'manual' not in lines[i]:
            out.append(i)
    return out


def check(hlokit, path, n):
    passes = 'sharding-propagation,spmd-partitioning{allow_module_signature_change=true}'
    try:
        p = subprocess.run([hlokit, 'check', path, '--num-partitions=%d' % n, '--timeout=60',
                            '--passes=' + passes], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return 'hang', ''
    return p.returncode, (p.stdout + p.stderr).strip().split('\n')[0][:200]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    hlokit, corpus, outdir = sys.argv[1:4]
    variants = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    os.makedirs(outdir, exist_ok=True)
    results = open(os.path.join(outdir, 'results.txt'), 'w')
    runs = findings = refused = 0
    for ci, case in enumerate(json.loads(l) for l in open(corpus)):
        text = case.get('hlo') or ''
        n = device_count(case, text)
        if n < 2 or case.get('expect_error') or PARAM_INIT.search(text):
            continue
        lines = text.split('\n')
        cand = candidates(lines)
        for v in range(variants if cand else 0):
            rng = random.Random(seed * 1000003 + ci * 7 + v)
            mutated = list(lines)
            for i in rng.sample(cand, min(len(cand), rng.randint(1, 3))):
                rank = len(LINE.match(mutated[i]).group(3).split(','))
                mutated[i] = strip_sharding(mutated[i]).rstrip() + ', sharding=' + random_sharding(rng, rank, n)
            path = os.path.join(outdir, 'case.hlo')
            open(path, 'w').write('\n'.join(mutated))
            rc, msg = check(hlokit, path, n)
            runs += 1
            if rc == 0:
                continue
            name = '%s-%d' % (case['name'], v)
            if rc == 2:
                refused += 1
            else:
                findings += 1
                open(os.path.join(outdir, 'fail-%s.hlo' % name), 'w').write('\n'.join(mutated))
            results.write('%s %s rc=%s %s\n' % ('REFUSED' if rc == 2 else 'FINDING', name, rc, msg))
            results.flush()
    summary = 'runs %d, findings %d, refused with exit 2: %d' % (runs, findings, refused)
    results.write(summary + '\n')
    print(summary)
    return 1 if findings else 0


if __name__ == '__main__':
    sys.exit(main())
