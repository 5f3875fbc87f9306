#!/usr/bin/env python3
"""The distribution of (error / gate) of honest backward implementations: every line of the given corpus
files turned into its backward (`pass=bwd`; forward-only keys dropped), judged through `attn-oracle gate`
against each backend, and per gradient the worst err/gate of every case (from report.json's
`*_violations` metrics for SDPA, `*_err_over_gate` for the indexer) summarised as quantiles. A ratio > 1
is a false failure; a weak case (no metric failed, a gate that a zero answer passes) is counted apart.

  usage: scripts/tools/bwd-error-over-gate.py [--cli build/attn-oracle] [--op sdpa|indexer|both]
                                              [--backend SPEC]... CORPUS...
  default backends: SDPA: numpy fp32 dense, numpy fp32 key tiles of 32 with P and dS rounded to the
  dtype; the indexer: numpy fp32 (numpy_ref.py --fp32). --backend replaces them for every op.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTERS = os.path.join(HERE, "..", "adapters")
# Keys a backward case refuses (forward tolerances and samples), per op.
FORWARD_ONLY = {"sdpa": ("num_splits", "atol", "rtol", "lse_tol", "pass", "rows"),
                "indexer": ("rows", "min_recall", "score_tol", "pass")}
RATIO = re.compile(r"(d[qkvw]|loss)_(violations|err_over_gate)$")


def backward_lines(paths, op):
    for p in paths:
        files = [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs if f.endswith(".case")] \
            if os.path.isdir(p) else [p]
        for f in sorted(files):
            for line in open(f):
                line = line.strip()
                if not line.startswith(f"op={op}"):
                    continue
                keys = [k for k in line.split() if k.split("=")[0] not in FORWARD_ONLY[op]]
                yield " ".join(keys + ["pass=bwd"])


def quantiles(xs):
    xs = sorted(xs)
    at = lambda q: xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]  # noqa: E731
    return f"n={len(xs)} median={at(0.5):.3g} p90={at(0.9):.3g} max={xs[-1]:.3g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/attn-oracle")
    ap.add_argument("--op", default="both", choices=["sdpa", "indexer", "both"])
    ap.add_argument("--backend", action="append")
    ap.add_argument("corpus", nargs="+")
    a = ap.parse_args()
    py = sys.executable
    defaults = {"sdpa": [f"exec:{py} {ADAPTERS}/numpy_sdpa_fp32.py --impl dense",
                         f"exec:{py} {ADAPTERS}/numpy_sdpa_fp32.py --impl online --tile 32 --round"],
                "indexer": [f"exec:{py} {ADAPTERS}/numpy_ref.py --fp32"]}
    false_failures = 0
    for op in (["sdpa", "indexer"] if a.op == "both" else [a.op]):
        lines = sorted(set(backward_lines(a.corpus, op)))
        if not lines:
            continue
        with tempfile.TemporaryDirectory(prefix="ao-bwd-gates-") as tmp:
            corpus = os.path.join(tmp, "bwd.case")
            with open(corpus, "w") as f:
                f.write("\n".join(lines) + "\n")
            for b in a.backend or defaults[op]:
                rd = os.path.join(tmp, "report")
                r = subprocess.run([a.cli, "gate", corpus, "--backend", b, "--report-dir", rd, "--no-explain", "-q"],
                                   capture_output=True, text=True)
                rep = json.load(open(os.path.join(rd, "report.json")))
                ratios = {}
                failed, weak = [], []
                for case in rep["cases"]:
                    for name, m in case["metrics"].items():
                        g = RATIO.match(name)
                        ratio = m.get("gate_ratio")  # null: no ratio; "inf"/"nan": non-finite, as text
                        if g and ratio is not None:
                            ratios.setdefault(g.group(1), []).append(float(ratio))
                    if case["verdict"] == "weak":  # no metric failed: not a false failure, counted apart
                        weak.append(case["case"])
                    elif case["verdict"] != "pass":
                        failed.append(f'{case["verdict"]}: {case["case"]}')
                false_failures += len(failed)
                print(f"op={op} {b}\n  gate exit {r.returncode}; {len(lines)} cases; not passed: {len(failed)}; "
                      f"weak (a gate a zero answer passes): {len(weak)}")
                for name in failed[:10]:
                    print(f"    {name}")
                for g, xs in ratios.items():
                    print(f"  {g} worst err/gate per case: {quantiles(xs)}")
    sys.exit(1 if false_failures else 0)


if __name__ == "__main__":
    main()
