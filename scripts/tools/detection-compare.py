#!/usr/bin/env python3
"""Before/after table of two scripts/tools/fuzz-detection.sh tables (the same models and seeds, two
builds): per model, the median and worst-seed cases and seconds to the first failure of each, and
whether the after build meets the target (found on every seed, median <= 20 cases, worst <= 100).
Usage: scripts/tools/detection-compare.py BEFORE_TABLE AFTER_TABLE"""
import sys


def rows(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        lines = [l for l in f if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    for l in lines[2:]:
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        out[cells[0]] = dict(zip(head, cells))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = rows(sys.argv[1]), rows(sys.argv[2])
    cols = ("median cases", "worst cases", "median seconds", "worst seconds")
    print("| model | detected before / after | median cases before / after | worst cases before / after "
          "| median seconds before / after | worst seconds before / after | meets the target after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for m, a in after.items():
        b = before.get(m, {})
        cells = [f"{b.get(c, '-')} / {a.get(c, '-')}" for c in cols]
        ok = "yes" if a.get("detected", "").split("/")[0] == a.get("detected", "").split("/")[-1] and \
            a.get("worst cases") not in (None, "miss") and float(a["median cases"]) <= 20 and \
            float(a["worst cases"]) <= 100 else "no"
        print(f"| {m} | {b.get('detected', '-')} / {a.get('detected', '-')} | " + " | ".join(cells) + f" | {ok} |")


if __name__ == "__main__":
    main()
