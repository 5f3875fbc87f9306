"""The table of before-after.sh's `checks` step: per case and thread count, the full check's time (repro wall
minus the backend run) of both builds against the reference alone (the backend run: cpu-ref is the backend),
the judgement, peak RSS, and whether the verdict lines (metrics and gates, the time line left out) are identical.
Usage: checks-table.py DIR   (DIR: <side>.t<threads>.c<case>.r<rep>.{case,txt,time} files)"""
import glob
import os
import re
import statistics
import sys


def seconds(clock):
    return sum(float(x) * 60 ** i for i, x in enumerate(reversed(clock.split(":"))))


def main(d):
    runs = {}
    for f in sorted(glob.glob(os.path.join(d, "*.txt"))):
        side, t, c, _ = os.path.basename(f)[:-4].split(".")
        txt, tv = open(f).read(), open(f[:-4] + ".time").read()
        t_line = re.search(r"time: backend ([\d.]+) s, reference ([\d.]+) s(?:; inputs ([\d.]+) s, outputs \+ input checks "
                           r"([\d.]+) s, judge ([\d.]+) s)?", txt)
        wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", tv)
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", tv)
        if not (t_line and wall and rss):
            print(f"{f}: no time line or no /usr/bin/time figures", file=sys.stderr)
            continue
        backend, ref = float(t_line.group(1)), float(t_line.group(2))
        runs.setdefault((int(t[1:]), c), {}).setdefault(side, []).append(dict(
            check=seconds(wall.group(1)) - backend, ref=backend, ref_run=ref,
            judge=float(t_line.group(5)) if t_line.group(5) else float("nan"), rss=int(rss.group(1)) / 1024,
            verdict="\n".join(x for x in txt.splitlines() if not x.strip().startswith("time:")),
            case=open(f[:-4] + ".case").read().strip()))
    med = statistics.median
    print("| case | threads | check before (s) | check after (s) | after / before | reference alone before / after (s) "
          "| check / reference, before -> after | reference's run in the check, before / after (s) | judge after (s) "
          "| peak RSS before -> after (MiB) | verdict lines |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (t, _), s in sorted(runs.items()):
        if "before" not in s or "after" not in s:
            continue
        b, a = s["before"], s["after"]
        cb, ca = med(x["check"] for x in b), med(x["check"] for x in a)
        rb, ra = med(x["ref"] for x in b), med(x["ref"] for x in a)
        same = "identical" if len({x["verdict"] for x in b + a}) == 1 else "DIFFER"
        print(f"| `{a[0]['case']}` | {t} | {cb:.1f} | {ca:.1f} | {ca / cb:.2f} | {rb:.1f} / {ra:.1f} | "
              f"{cb / rb:.1f}x -> {ca / ra:.1f}x | {med(x['ref_run'] for x in b):.1f} / {med(x['ref_run'] for x in a):.1f} | "
              f"{med(x['judge'] for x in a):.1f} | "
              f"{med(x['rss'] for x in b):.0f} -> {med(x['rss'] for x in a):.0f} | {same} |")
    print("\ncheck = repro wall - the backend run (inputs, sentinel outputs and input checks, the reference's run where one "
          "ran, the judgement); medians over the repetitions, the two builds alternating per case.")


if __name__ == "__main__":
    main(sys.argv[1])
