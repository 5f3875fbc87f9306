#!/usr/bin/env python3
"""Summarises the cudnn_fe_sdpa gates of scripts/device/real-kernels-campaign.sh (step fes-table) into one TSV
row per case: the gate, its adapter knobs, the case, the verdict, which engine served it (from the adapter's
$AO_TIMING_LOG record of that case and knob set: FROST engine name, or the backend plan's name and engine id),
the SDPA metrics, the backend's seconds and the reason (a skip's reason is the frontend's own).

  fes-table.py OUT.tsv TIMING.jsonl GATES.tsv
GATES.tsv: one line per gate, `name<TAB>report_dir<TAB>adapter knobs` (written by the step).
"""
import json
import os
import sys

METRICS = ("rel_l2_err", "max_abs_err", "lse_max_err", "tol_violations", "unwritten_rows", "clobbered_pad_slots",
           "nonfinite_valid")


def knob_set(flags):
    f = flags.split()
    get = lambda k, d: f[f.index(k) + 1] if k in f else d  # noqa: E731
    return get("--path", "graph"), get("--engine", "auto"), get("--bug", "none"), get("--offset-units", "elements")


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.3g}"
    return f"{v:g}" if isinstance(v, (int, float)) else str(v)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, timing, gates = argv[1:]
    served = {}
    if os.path.exists(timing):
        with open(timing) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("adapter") != "cudnn_fe_sdpa":
                    continue
                key = (r.get("case"), r.get("path"), r.get("engine_knob"), r.get("planted_defect", r.get("bug")), r.get("offset_units"))
                if r.get("engine_kind") == "backend":
                    served[key] = f"backend: {r.get('plan_name')} (id {r.get('engine_id')})"
                else:
                    served[key] = f"{r.get('engine_kind')}: {r.get('plan_name') or r.get('engine')}"
    head = ["gate", "knobs", "case", "verdict", "served_by", *METRICS, "backend_s", "reason"]
    rows = []
    with open(gates) as f:
        for line in f:
            name, rdir, flags = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            path = os.path.join(rdir, "report.json")
            if not os.path.exists(path):
                rows.append([name, flags, "", "no-report"] + [""] * (len(head) - 4))
                continue
            with open(path) as rf:
                rep = json.load(rf)
            for c in rep.get("cases", []):
                m = c.get("metrics", {})
                p, e, b, u = knob_set(flags)
                rows.append([name, flags or "(defaults)", c["case"], c.get("verdict", ""),
                             served.get((c["case"], p, e, b, u), ""),
                             *[fmt(m.get(k, {}).get("value")) for k in METRICS],
                             f"{c.get('seconds', {}).get('backend', 0):.2f}",
                             c.get("reason", "").replace("\t", " ").replace("\n", " ")[-400:]])
    with open(out, "w") as f:
        f.write("\t".join(head) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
