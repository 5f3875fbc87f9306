#!/usr/bin/env python3
"""What an exec: adapter wrote, element by element, against a float64 reference of the case's own inputs
(scripts/device/real-kernels-campaign.sh step fes-fp32): for each case directory kept by
`AO_EXEC_KEEP=1 AO_EXEC_DIR=... attn-oracle repro ...` (meta.json, the inputs, and the o / lse the adapter
saved), per valid query row: how many O elements still hold the output sentinel and in which head-dim
columns, the max |error| of the written elements, and the LSE error. A wrong O is also compared against
references computed from part of the head dim (the first half / quarter of Q.K or of V), so that a kernel
that reads or writes only part of a wide head names itself.

  fes-out-pattern.py CASE_DIR...
"""
import os
import sys

import numpy as np

from attn_oracle.adapters.protocol import CaseDir  # PYTHONPATH=python from the checkout

SENTINEL_BITS = 0x7FE5A5A5


def ranges(idx):
    """[3, 4, 5, 9] -> '3-5,9'."""
    out, start, prev = [], None, None
    for i in idx:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
    return ",".join(out) or "-"


def reference(q, k, v, scale, lo, hi, dq=None, dv=None):
    """One row's O and natural LSE (float64); dq / dv: use only the first dq columns of Q.K, dv of V."""
    qq = q[:dq] if dq else q
    kk = k[lo:hi, :dq] if dq else k[lo:hi]
    if hi <= lo:
        return np.zeros(v.shape[1]), -np.inf
    s = kk @ qq * scale
    m = s.max()
    p = np.exp(s - m)
    o = (p / p.sum()) @ v[lo:hi]
    if dv:
        o = np.concatenate([o[:dv], np.zeros(v.shape[1] - dv)])
    return o, m + np.log(p.sum())


def main(dirs):
    for d in dirs:
        c = CaseDir(d)
        m = c.meta
        hq, hkv = int(m["dims"]["hq"]), int(m["dims"]["hkv"])
        dd, dvv = int(m["dims"]["dim"]), int(m["dims"]["dim_v"])
        q, k, v = (c.input(n).astype(np.float64) for n in ("q", "k", "v"))
        o = np.load(os.path.join(d, m["outputs"]["o"]["file"]))
        lse = np.load(os.path.join(d, m["outputs"]["lse"]["file"]))
        sent = o.view(np.uint32) == SENTINEL_BITS
        print(f"== {m.get('case', d)}")
        print(f"   O {o.shape} {o.dtype}, LSE {lse.shape}; sentinel elements anywhere: {int(sent.sum())}")
        worst = []
        for s in m["segments"]:
            doc = m["docs"][s["doc"]]
            kv0 = int(doc["kv_off"])
            for i in range(int(s["valid"])):
                p = int(s["pos0"]) + i
                lo, hi = c.allowed_hi_lo(s["doc"], p)
                for h in range(hq):
                    kh = h // (hq // hkv)
                    qi = q[int(s["row0"]) + i, h]
                    kk, vv = k[kv0:kv0 + int(doc["kv_len"]), kh], v[kv0:kv0 + int(doc["kv_len"]), kh]
                    ro, rl = reference(qi, kk, vv, c.scale, lo, hi)
                    got = o[int(s["o_row0"]) + i, h].astype(np.float64)
                    un = sent[int(s["o_row0"]) + i, h]
                    w = ~un & np.isfinite(got)
                    err = float(np.abs(got[w] - ro[w]).max()) if w.any() else 0.0
                    gl = float(lse[int(s["stats_row0"]) + i, h])
                    alt = {}
                    if err > 1e-3 * max(1.0, float(np.abs(ro).max())):
                        for name, kw in (("qk/2", {"dq": dd // 2}), ("qk/4", {"dq": dd // 4}), ("v/2", {"dv": dvv // 2})):
                            ao, al = reference(qi, kk, vv, c.scale, lo, hi, **kw)
                            alt[name] = (float(np.abs(got[w] - ao[w]).max()) if w.any() else 0.0, abs(gl - al))
                    worst.append((err, s["doc"], i, h, int(un.sum()), ranges(np.nonzero(un)[0]), int((~np.isfinite(got) & ~un).sum()),
                                  abs(gl - rl) if np.isfinite(rl) else gl, hi - lo, alt))
        bad = [w for w in worst if w[0] > 1e-3 or w[4] > 0 or w[6] > 0]
        print(f"   rows x heads: {len(worst)}, with an unwritten element / a wrong written element / non-finite: "
              f"{sum(w[4] > 0 for w in worst)} / {sum(w[0] > 1e-3 for w in worst)} / {sum(w[6] > 0 for w in worst)}")
        for w in sorted(bad, key=lambda x: -x[0])[:12]:
            alt = " ".join(f"{n}: o {e:.3g} lse {le:.3g}" for n, (e, le) in w[9].items())
            print(f"   doc {w[1]} row {w[2]} head {w[3]} keys {w[8]}: written max|err| {w[0]:.3g}, unwritten cols "
                  f"{w[4]} [{w[5]}], non-finite {w[6]}, lse |err| {w[7]:.3g}{'; vs ' + alt if alt else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
