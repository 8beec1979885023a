#!/usr/bin/env python3
"""Counts the cache lines written during check_paths' check loop.

Reads lackey's memory trace on stdin; argv: the checks per thread and the
file of check_paths' stderr, which names the marker's address (`mark`,
written just before and just after the checks) and each thread's stack
(`stack`). Prints, per kind of memory, the lines written, the stores per
check and the stores per check of the lines written most.
"""
import collections
import re
import sys

checks = int(sys.argv[1])
marks = open(sys.argv[2]).read()
mark = int(re.search(r"mark 0x([0-9a-f]+)", marks).group(1), 16)
stacks = [int(x, 16) for x in re.findall(r"stack 0x([0-9a-f]+)", marks)]

stores = collections.Counter()  # line -> stores to it during the checks
inside = False
for line in sys.stdin:
    # Stores are " S addr,size" and modifies " M addr,size".
    if len(line) < 4 or line[1] not in "SM":
        continue
    addr = int(line[3:].split(",")[0], 16)
    if addr == mark:
        if inside:
            break
        inside = True
    elif inside:
        stores[addr >> 6] += 1


def kind(line):
    at = line << 6
    for stack in stacks:
        if stack - (1 << 20) <= at <= stack + 512:
            return "stack"
        if stack - (1 << 16) <= at <= stack + (1 << 16):
            return "thread's own (thread-locals)"
    return "shared (the store)"


total = checks * len(stacks)
by_kind = collections.defaultdict(list)
for line, n in stores.items():
    by_kind[kind(line)].append(n)
for name, counts in sorted(by_kind.items()):
    counts.sort(reverse=True)
    top = ", ".join(f"{n / total:.3f}" for n in counts[:4])
    print(f"  {name}: {len(counts)} lines, {sum(counts) / total:.2f} stores per check"
          f" (most written: {top} per check)")
