#!/usr/bin/env python3
"""The discrimination check's share of each case's check: `repro` of every case line of the given corpus
folders under cpu-ref, one OpenMP thread; sums the stage times its `time:` line prints.
  usage: gate-check-cost.py CLI CORPUS_DIR..."""
import os, re, subprocess, sys, time
cli = sys.argv[1]
lines = []
for d in sys.argv[2:]:
    for root, _, fs in os.walk(d):
        for f in sorted(fs):
            if f.endswith(".case"):
                for ln in open(os.path.join(root, f)):
                    ln = ln.strip()
                    if ln.startswith("op="): lines.append(ln)
tot = {"all": 0.0, "check": 0.0, "judge": 0.0}
worst = (0, "")
rows = []
T = re.compile(r"time: backend ([\d.]+) s, reference ([\d.]+) s; inputs ([\d.]+) s, outputs \+ input checks ([\d.]+) s, judge ([\d.]+) s \(gate check ([\d.]+) s\)")
for ln in lines:
    out = subprocess.run([cli, "repro", ln], capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    m = T.search(out)
    if not m: continue
    b, r, i, o, j, g = map(float, m.groups())
    allt = b + r + i + o + j
    tot["all"] += allt; tot["check"] += g; tot["judge"] += j
    rows.append((allt, g, ln))
print(f"cases {len(rows)}: whole check {tot['all']:.1f} s, of it judge {tot['judge']:.1f} s, the discrimination check {tot['check']:.2f} s ({100*tot['check']/tot['all']:.1f}%)")
rows.sort(reverse=True)
print("the 8 slowest cases: whole s, discrimination s, share")
for a, g, ln in rows[:8]:
    print(f"  {a:8.2f} {g:8.3f} {100*g/a:5.1f}%  {ln[:110]}")
big = [r for r in rows if r[0] >= 0.5]
if big:
    print(f"cases over 0.5 s: {len(big)}, the check's largest share among them {max(100*g/a for a,g,_ in big):.1f}%")
