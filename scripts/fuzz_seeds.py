#!/usr/bin/env python3
"""fuzz_seeds.py - seeds for fuzz_pipeline: every module of the given
conformance .jsonl files (their "hlo" fields) and .hlo files, written to
OUT/ with a control byte in front (2 or 4 partitions; no or one sharding
mutation).  Usage: fuzz_seeds.py OUT FILE..."""
import hashlib
import json
import os
import sys


def modules(path):
    if path.endswith(".jsonl"):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    hlo = json.loads(line).get("hlo")
                    if isinstance(hlo, str):
                        yield hlo
    else:
        with open(path) as f:
            yield f.read()


def main():
    out = sys.argv[1]
    n = 0
    for path in sys.argv[2:]:
        for k, hlo in enumerate(modules(path)):
            ctl = (1 + k % 2) | ((k // 2) % 2) << 2
            data = bytes([ctl]) + hlo.encode()
            name = hashlib.sha1(data).hexdigest()
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
            n += 1
    print(f"fuzz_seeds: {n} seeds in {out}")


if __name__ == "__main__":
    main()
