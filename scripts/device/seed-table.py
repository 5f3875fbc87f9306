#!/usr/bin/env python3
"""Summarises the report.json files of scripts/device/real-kernels-campaign.sh's gates into one TSV row per
case: the knob set, the case, the verdict, strict top-k overlap (mean/min), tie-aware recall (min),
out-of-causal / out-of-range picks, the backend's seconds, the reason, and beside it what the seed PR
and the first H200 run of the frontend's indexer published for that case.

  seed-table.py OUT.tsv NAME=REPORT_DIR [NAME=REPORT_DIR ...]
NAME is the gate's knob set (e.g. offsets1-row); a missing report.json gives one `no-report` row.
"""
import json
import os
import sys

# What was published: the seed PR's description (the fix: full overlap, no out-of-causal pick; the bug:
# 2-25 % overlap at cp=32, an illegal memory access at 131k) and the first H200 run of the frontend's indexer
# of 2026-12-02 (fresh process per case, overlap vs an fp32 reference, without q_causal_offsets).
SEED_FIX = "PR fix: overlap 1.0000, 0 out-of-causal"
SEED_BUG = "PR bug: overlap 2-25% (cp=32); 131k IMA at [65536,65536] rank 31"
FIRST_RUN = {("8192", 31): "first run: 6%", ("32768", 31): "first run: 12%", ("8192", 0): "first run: 3% (back chunk)",
             ("8192,4096", 15): "first run: 33%/65% (two docs)"}


def case_key(line):
    kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
    return kv.get("docs", ""), int(kv.get("rank", 0))


def metric(m, name):
    v = m.get(name, {}).get("value")
    return "" if v is None else (f"{v:.4f}" if isinstance(v, float) and not v.is_integer() else f"{v:g}")


def rows_of(name, report_dir):
    path = os.path.join(report_dir, "report.json")
    if not os.path.exists(path):
        return [[name, "", "no-report", "", "", "", "", "", "", "", f"no {path}", ""]]
    with open(path) as f:
        rep = json.load(f)
    out = []
    for c in rep.get("cases", []):
        m = c.get("metrics", {})
        published = SEED_BUG if "offsets0" in name else SEED_FIX
        if "offsets0" in name and case_key(c["case"]) in FIRST_RUN:
            published += "; " + FIRST_RUN[case_key(c["case"])]
        out.append([name, c["case"], c.get("verdict", ""), metric(m, "overlap_mean"), metric(m, "overlap_min"),
                    metric(m, "tie_aware_recall_min"), metric(m, "out_of_causal"), metric(m, "out_of_range"),
                    metric(m, "wrong_fill_rows"), f"{c.get('seconds', {}).get('backend', 0):.2f}",
                    c.get("reason", "").replace("\t", " ").replace("\n", " ")[-300:], published])
    return out


def main(argv):
    if len(argv) < 1 or any("=" not in a for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    head = ["knobs", "case", "verdict", "overlap_mean", "overlap_min", "tie_recall_min", "out_of_causal",
            "out_of_range", "wrong_fill_rows", "backend_s", "reason", "published"]
    rows = []
    for a in argv[1:]:
        name, d = a.split("=", 1)
        rows += rows_of(name, d)
    with open(argv[0], "w") as f:
        f.write("\t".join(head) + "\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
