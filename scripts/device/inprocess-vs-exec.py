#!/usr/bin/env python3
"""One adapter, two paths: the corpus through the Python package in process (`attn_oracle.gate` on the
adapter's kernel function) and the same corpus's exec: report (`attn-oracle gate --backend exec:...`), case
by case: the verdicts must agree, and so must the failing metrics.

  inprocess-vs-exec.py run ADAPTER[:impl=X] CORPUS REPORT_DIR     in-process gate; report.json in REPORT_DIR
  inprocess-vs-exec.py compare OUT.tsv NAME=INPROC_DIR,EXEC_DIR...  one row per case and path pair

`run` imports attn_oracle (and its adapter module, attn_oracle.adapters.<name>) from PYTHONPATH (the campaign puts AO_PY_DIR first).
`compare` exits 1 when a case's verdicts differ, or a case is in one report only; its last line says so.
"""
import functools
import importlib
import json
import os
import sys
import time



def run(spec, corpus, report_dir):
    import attn_oracle  # the installed package (AO_PY_DIR's, through PYTHONPATH, on the device)
    name, _, knobs = spec.partition(":")
    kernel = importlib.import_module(f"attn_oracle.adapters.{name}").kernel
    kw = dict(k.split("=", 1) for k in knobs.split(",") if k)
    if kw:
        kernel = functools.partial(kernel, **kw)
    t0 = time.perf_counter()
    res = attn_oracle.gate(kernel, corpus, explain=False, report_dir=report_dir)
    secs = time.perf_counter() - t0
    print(res.summary())
    print(f"inprocess-gate: adapter={spec} cases={len(res.results)} seconds={secs:.1f} "
          f"attn_oracle={os.path.dirname(attn_oracle.__file__)}")
    return 0


def cases(report_dir):
    with open(os.path.join(report_dir, "report.json")) as f:
        rep = json.load(f)
    out = {}
    for c in rep["cases"]:
        failing = sorted(n for n, m in c.get("metrics", {}).items() if m.get("failed"))
        out.setdefault(c["case"], []).append((c["verdict"], ",".join(failing), c.get("reason", ""),
                                              sum(c.get("seconds", {}).values())))
    return out


def compare(out_tsv, pairs):
    bad, rows, totals = 0, [], []
    for pair in pairs:
        name, _, dirs = pair.partition("=")
        inproc_dir, exec_dir = dirs.split(",")
        a, b = cases(inproc_dir), cases(exec_dir)
        same = kinds = 0
        t_in = t_ex = 0.0
        for line in sorted(set(a) | set(b)):
            for i in range(max(len(a.get(line, [])), len(b.get(line, [])))):
                va = a.get(line, [])[i] if i < len(a.get(line, [])) else ("missing", "", "", 0.0)
                vb = b.get(line, [])[i] if i < len(b.get(line, [])) else ("missing", "", "", 0.0)
                agree = va[0] == vb[0] and va[1] == vb[1]
                same += agree
                kinds += va[0] == vb[0]
                bad += not agree
                t_in += va[3]
                t_ex += vb[3]
                rows.append([name, line, vb[0], va[0], "yes" if agree else "NO", vb[1], va[1], (vb[2] or va[2])[:160]])
        n = sum(1 for r in rows if r[0] == name)
        totals.append(f"{name}: {n} cases, {same} agree (verdict and failing metrics), {kinds} same verdict; "
                      f"backend+reference seconds exec {t_ex:.1f}, in process {t_in:.1f}")
    with open(out_tsv, "w") as f:
        f.write("adapter\tcase\texec\tin_process\tagree\texec_failing\tin_process_failing\treason\n")
        for r in rows:
            f.write("\t".join(str(x).replace("\t", " ").replace("\n", " ") for x in r) + "\n")
    for t in totals:
        print(t)
    print(f"inprocess-vs-exec: {'AGREE' if bad == 0 else f'{bad} DIFFER'}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "run":
        sys.exit(run(*sys.argv[2:]))
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
