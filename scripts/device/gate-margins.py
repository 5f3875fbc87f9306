#!/usr/bin/env python3
"""Margins the derived gates leave: for each report.json given, per (backend, dtype, metric) the
distribution of gate_ratio (worst row's error / its gate; > 1 fails) over the cases that ran, and the
verdict counts. Usage: gate-margins.py report-*.json > margins.tsv"""
import json
import re
import statistics
import sys
from collections import defaultdict


def dtype_of(line):
    m = re.search(r"\bdtype=(\w+)", line)
    d = m.group(1) if m else "bf16"  # the SDPA default
    return d + "+probe" if re.search(r"\bprobe=edges\b", line) else d


def main(paths):
    ratios = defaultdict(list)
    verdicts = defaultdict(lambda: defaultdict(int))
    for p in paths:
        try:
            with open(p) as f:
                rep = json.load(f)
        except (OSError, ValueError) as e:
            print(f"# {p}: unreadable ({e})")
            continue
        for c in rep.get("cases", []):
            key = (c["backend"], dtype_of(c["case"]))
            verdicts[key][c["verdict"]] += 1
            if c["verdict"] not in ("pass", "fail"):
                continue
            for name, m in c.get("metrics", {}).items():
                r = m.get("gate_ratio")
                if isinstance(r, (int, float)) and r >= 0:
                    ratios[key + (name,)].append(float(r))
    print("backend\tdtype\tmetric\tcases\tmin\tmedian\tp90\tmax\tover_1")
    for (be, dt, name), v in sorted(ratios.items()):
        v.sort()
        p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
        print(f"{be}\t{dt}\t{name}\t{len(v)}\t{v[0]:.3g}\t{statistics.median(v):.3g}\t{p90:.3g}\t{v[-1]:.3g}\t"
              f"{sum(x > 1 for x in v)}")
    print("\nbackend\tdtype\tverdicts")
    for (be, dt), d in sorted(verdicts.items()):
        print(f"{be}\t{dt}\t" + " ".join(f"{k}={n}" for k, n in sorted(d.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
