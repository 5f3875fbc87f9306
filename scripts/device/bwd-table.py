#!/usr/bin/env python3
"""Summarises the backward gates of scripts/device/real-kernels-campaign.sh (step bwd-table) into one TSV row
per case: the kernel, the case, the verdict, per gradient (dq, dk, dv) the worst err/gate ratio, the
non-finite valid elements and the clobbered pad slots, then unwritten rows, gradient reaching keys no
query of the case reaches (dkv_unreached_nonzero), the backend's seconds and the reason.
With --indexer (op=indexer pass=bwd): per gradient (dq, dw, dk) its err/gate ratio, then the non-finite
elements, dk_unselected_written, unwritten_rows, clobbered_pad_slots, the backend's seconds and the reason.

  bwd-table.py [--indexer] OUT.tsv NAME=REPORT_DIR [NAME=REPORT_DIR ...]
A missing report.json gives one `no-report` row.
"""
import json
import os
import sys

GRADS = ("dq", "dk", "dv")
HEAD = (["kernel", "case", "verdict"] +
        [f"{g}_{m}" for g in GRADS for m in ("err_over_gate", "nonfinite_valid", "clobbered_pad_slots")] +
        ["unwritten_rows", "dkv_unreached_nonzero", "backend_s", "reason"])
INDEXER = ("dq_err_over_gate", "dw_err_over_gate", "dk_err_over_gate", "nonfinite", "dk_unselected_written",
           "unwritten_rows", "clobbered_pad_slots")
HEAD_INDEXER = ["kernel", "case", "verdict"] + list(INDEXER) + ["backend_s", "reason"]


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, str):  # a non-finite value is written as text ("inf", "nan")
        return v
    return f"{v:.3g}" if isinstance(v, float) and not float(v).is_integer() else f"{v:g}"


def rows_of(name, report_dir, indexer=False):
    path = os.path.join(report_dir, "report.json")
    head = HEAD_INDEXER if indexer else HEAD
    if not os.path.exists(path):
        return [[name, "", "no-report"] + [""] * (len(head) - 4) + [f"no {path}"]]
    with open(path) as f:
        rep = json.load(f)
    out = []
    for c in rep.get("cases", []):
        m = c.get("metrics", {})
        val = lambda k, f="value": fmt(m.get(k, {}).get(f))  # noqa: E731
        row = [name, c["case"], c.get("verdict", "")]
        if indexer:
            row += [val(k) for k in INDEXER]
        else:
            for g in GRADS:
                row += [val(f"{g}_violations", "gate_ratio"), val(f"{g}_nonfinite_valid"), val(f"{g}_clobbered_pad_slots")]
            row += [val("unwritten_rows"), val("dkv_unreached_nonzero")]
        row += [f"{c.get('seconds', {}).get('backend', 0):.2f}", c.get("reason", "").replace("\t", " ").replace("\n", " ")[-300:]]
        out.append(row)
    return out


def main(argv):
    indexer = argv[:1] == ["--indexer"]
    argv = argv[1:] if indexer else argv
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    rows = [HEAD_INDEXER if indexer else HEAD]
    for a in argv[1:]:
        name, d = a.split("=", 1)
        rows += rows_of(name, d, indexer)
    with open(argv[0], "w") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
