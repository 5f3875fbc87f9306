#!/usr/bin/env python3
"""An `exec:` SDPA backend in numpy doing its arithmetic in float32 on purpose: two honest fp32
kernels whose rounding differs from the oracle's own fp32 emulation, to show that the derived gates
(docs/tolerances.md, "How the tolerances are derived") pass correct fp32 arithmetic without a false failure.

  usage: numpy_sdpa_fp32.py [--impl dense|online] [--tile N] [--round | --cudnn-rounding] [--exp2] CASE_DIR
    dense:  S = scale * Q K^T over the row's allowed keys, one max, exp, sum, P V / sum
    online: FlashAttention's online softmax over key tiles of N (default 64): running max, rescaled
            running sum and accumulator, one division at the end
    --round: behave like a flash kernel in the case dtype: P rounded to the dtype before P V (against
            the running max, for online), O rounded to the dtype (a no-op for fp32)
Under pass=bwd: dQ/dK/dV in float32 from the given O and LSE (numpy_ref.sdpa_backward's formulas), dense
(one product per segment and head) or online (key tiles of N, the accumulation order of a flash
backward); --round rounds P and dS to the dtype before their products, like such kernels;
--cudnn-rounding rounds as cuDNN's SDPA backward does (its GPU output matched to three digits): scale * dS
rounded (fp16 subnormals for small scaled dS), each query head's dK/dV rounded before the GQA sum, and
dQ/dK/dV written in the dtype; --exp2 computes P as FlashAttention's backward does, exp2 of a fused
q k^T * (scale log2 e) - lse log2 e with both constants rounded to fp32 (at logits ~5e5, values=extreme, a
relative error of P of a few percent, the same for every key of a row whose scores are equal).
Indexer cases are declined (skipped). In process (attn_oracle, python/): `kernel(case, inputs, impl=...,
tile=..., round_=...)` is the same call.
"""
import argparse
import sys

import numpy as np

from .protocol import CaseMeta, main, skip
from .numpy_ref import CaseBuffers, sdpa_backward
from .registry import Adapter

ADAPTER = Adapter(
    name='numpy_sdpa_fp32', what='SDPA in float32 numpy the way a kernel computes it (dense or online softmax, tiles, rounding)',
    ops=("sdpa",), passes=("fwd", "bwd"), requires=("numpy",),
    kernel="kernel")

F = np.float32


def rounder(dtype):
    """Round-to-nearest-even of float32 values to the case dtype, kept as float32."""
    if dtype == "fp16":
        return lambda a: np.asarray(a, dtype=F).astype(np.float16).astype(F)
    if dtype == "bf16":
        def bf16(a):
            u = np.atleast_1d(np.asarray(a, dtype=F)).view(np.uint32)
            r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(F)
            return r.reshape(np.shape(a))
        return bf16
    return lambda a: np.asarray(a, dtype=F)


def row_dense(s, v, rnd):
    """s: allowed scores [n] (fp32), v: [n, dv] (fp32) -> (o, lse)."""
    m = s.max()
    p = np.exp(s - m)
    tot = p.sum(dtype=F)
    return rnd((rnd(p) @ v) / tot), m + np.log(tot)


def row_online(s, v, tile, rnd):
    m, tot = F(-np.inf), F(0)
    acc = np.zeros(v.shape[1], dtype=F)
    for a in range(0, len(s), tile):
        st, vt = s[a:a + tile], v[a:a + tile]
        m_new = max(m, st.max())
        alpha = np.exp(F(m - m_new)) if np.isfinite(m) else F(0)
        p = np.exp(st - m_new)
        tot = F(tot * alpha + p.sum(dtype=F))
        acc = acc * alpha + rnd(p) @ vt
        m = m_new
    return rnd(acc / tot), F(m + np.log(tot))


def sdpa(case, buffers, inputs, impl, tile, rnd):
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    scale = F(case.scale)
    o, lse = buffers.output("o"), buffers.output("lse")
    for seg in case.segments:
        d = case.docs[seg["doc"]]
        kd = k[d["kv_off"]:d["kv_off"] + d["kv_len"]]
        vd = v[d["kv_off"]:d["kv_off"] + d["kv_len"]]
        for i in range(seg["valid"]):
            lo, hi = case.allowed_hi_lo(seg["doc"], seg["pos0"] + i)
            qr = q[seg["row0"] + i]
            for h in range(hq):
                orow, srow = seg["o_row0"] + i, seg["stats_row0"] + i
                if hi <= lo:
                    o[orow, h, :] = 0
                    lse[srow, h] = -np.inf
                    continue
                s = (kd[lo:hi, h // g, :] @ qr[h]) * scale
                vv = vd[lo:hi, h // g, :]
                out, l_ = row_dense(s, vv, rnd) if impl == "dense" else row_online(s, vv, tile, rnd)
                o[orow, h, :] = out
                lse[srow, h] = l_
    return {"o": o, "lse": lse}


def kernel(buffers, inputs, impl="dense", tile=64, round_=False, cudnn_rounding=False, exp2=False):
    """The adapter's kernel call on `buffers` (an exec: CaseDir or an attn_oracle.Case) and `inputs`."""
    if impl not in ("dense", "online") or tile < 1:
        raise ValueError(f"numpy_sdpa_fp32: impl must be dense|online and tile >= 1, got {impl!r}, {tile}")
    case = CaseMeta.of(buffers)
    if case.op != "sdpa":
        skip("numpy_sdpa_fp32: SDPA only")
    rnd = rounder(case.meta["dtype"] if round_ or cudnn_rounding else "fp32")
    if case.meta.get("pass", "fwd") == "bwd":
        out = sdpa_backward(CaseBuffers(case, buffers), inputs, F, tile if impl == "online" else None, rnd,
                            fold_scale=cudnn_rounding, round_heads=cudnn_rounding, exp2=exp2)
        if not cudnn_rounding:
            return out
        # Written in the dtype; pad slots keep the sentinel bit for bit.
        return {n: np.where(a.view(np.uint32) != np.asarray(buffers.output(n), dtype=F).view(np.uint32), rnd(a), a)
                for n, a in out.items()}
    with np.errstate(over="raise", invalid="raise"):
        return sdpa(case, buffers, inputs, impl, tile, rnd)



def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default="dense", choices=["dense", "online"])
    ap.add_argument("--tile", type=int, default=64)
    ap.add_argument("--round", action="store_true")
    ap.add_argument("--cudnn-rounding", action="store_true")
    ap.add_argument("--exp2", action="store_true")
    ap.add_argument("case_dir")
    return ap


def run(argv):
    ap = arguments()
    a = ap.parse_args(argv)
    if a.tile < 1:
        ap.error(f"--tile must be >= 1, got {a.tile}")
    return main(kernel, [a.case_dir], impl=a.impl, tile=a.tile, round_=a.round, cudnn_rounding=a.cudnn_rounding,
                exp2=a.exp2)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
