#!/usr/bin/env python3
"""The distribution of (error / gate) of honest SDPA backward implementations: every op=sdpa line of the
given corpus files turned into its backward (`pass=bwd`; forward-only keys dropped), judged through
`attn-oracle gate` against each backend, and per gradient the worst err/gate of every case (from
report.json's `*_violations` metrics) summarised as quantiles. A ratio > 1 is a false failure.

  usage: scripts/tools/bwd-error-over-gate.py [--cli build/attn-oracle] [--backend SPEC]... CORPUS...
  default backends: numpy fp32 dense, numpy fp32 key tiles of 32 with P and dS rounded to the dtype.
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
FORWARD_ONLY = ("num_splits", "atol", "rtol", "lse_tol", "pass", "rows")


def backward_lines(paths):
    for p in paths:
        files = [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs if f.endswith(".case")] \
            if os.path.isdir(p) else [p]
        for f in sorted(files):
            for line in open(f):
                line = line.strip()
                if not line.startswith("op=sdpa"):
                    continue
                keys = [k for k in line.split() if k.split("=")[0] not in FORWARD_ONLY]
                yield " ".join(keys + ["pass=bwd"])


def quantiles(xs):
    xs = sorted(xs)
    at = lambda q: xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]  # noqa: E731
    return f"n={len(xs)} median={at(0.5):.3g} p90={at(0.9):.3g} max={xs[-1]:.3g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default="build/attn-oracle")
    ap.add_argument("--backend", action="append")
    ap.add_argument("corpus", nargs="+")
    a = ap.parse_args()
    py = sys.executable
    backends = a.backend or [f"exec:{py} {ADAPTERS}/numpy_sdpa_fp32.py --impl dense",
                             f"exec:{py} {ADAPTERS}/numpy_sdpa_fp32.py --impl online --tile 32 --round"]
    lines = sorted(set(backward_lines(a.corpus)))
    with tempfile.TemporaryDirectory(prefix="ao-bwd-gates-") as tmp:
        corpus = os.path.join(tmp, "bwd.case")
        with open(corpus, "w") as f:
            f.write("\n".join(lines) + "\n")
        for b in backends:
            rd = os.path.join(tmp, "report")
            r = subprocess.run([a.cli, "gate", corpus, "--backend", b, "--report-dir", rd, "--no-explain", "-q"],
                               capture_output=True, text=True)
            rep = json.load(open(os.path.join(rd, "report.json")))
            ratios = {"dq": [], "dk": [], "dv": []}
            failed = []
            for case in rep["cases"]:
                for name, m in case["metrics"].items():
                    g = re.match(r"(d[qkv])_violations$", name)
                    if g and "gate_ratio" in m:
                        ratios[g.group(1)].append(float(m["gate_ratio"]))
                if case["verdict"] != "pass":
                    failed.append(f'{case["verdict"]}: {case["case"]}')
            print(f"{b}\n  gate exit {r.returncode}; {len(lines)} cases; not passed: {len(failed)}")
            for name in failed[:10]:
                print(f"    {name}")
            for g, xs in ratios.items():
                if xs:
                    print(f"  {g} worst err/gate per case: {quantiles(xs)}")


if __name__ == "__main__":
    main()
