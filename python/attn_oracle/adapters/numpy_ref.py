#!/usr/bin/env python3
"""A backend in numpy (float64): the DSA indexer (its forward top-k and, under pass=bwd, its KL loss and
gradients) and padded-THD SDPA (forward, and under pass=bwd dQ/dK/dV), written from the semantics in docs/case.md, docs/ops.md and meta.json, independently of the C++
reference. CI uses it to test the exec: protocol, and --fault re-creates every way an external backend can fail:

  usage: numpy_ref.py [--fault F] [--bug topleft-cp|loss-mean-buffer-rows] CASE_DIR
  faults: exit3 sleep sleep-child signal skip missing nowrite shape dtype truncated garbage nan

In process (attn_oracle, python/): `kernel(case, inputs)` is the same computation, and `planted_bug`
the same with --bug topleft-cp (rows placed at position i instead of pos0 + i: a CP defect).
"""
import argparse
import os
import signal
import subprocess
import sys
import time

import numpy as np

import functools  # noqa: E402

from .protocol import CaseDir, CaseMeta, skip
from .registry import Adapter

ADAPTER = Adapter(
    name='numpy_ref', what='the exact semantics in numpy (fp64), a peer of the built-in reference; planted faults and defects for tests',
    ops=("sdpa", "indexer"), passes=("fwd", "bwd"), requires=("numpy",),
    kernel="kernel")


def indexer(case, inputs, topleft_bug):
    q, w, k = inputs["q"], inputs["w"], inputs["k"]
    K = int(case.dims["topk"])
    topk = case.output("topk")
    scores = case.output("scores")
    for seg in case.segments:
        d = case.docs[seg["doc"]]
        keys = k[d["kv_off"]:d["kv_off"] + d["kv_len"]].astype(np.float64)
        for i0 in range(0, seg["rows"], 64):
            rows = range(i0, min(i0 + 64, seg["rows"]))
            for i in rows:
                r = seg["row0"] + i
                if i >= seg["valid"]:
                    topk[r, :] = -1
                    scores[r, :] = -np.inf
                    continue
                p = i if topleft_bug else seg["pos0"] + i
                lo, hi = case.allowed_hi_lo(seg["doc"], p)
                n = hi - lo
                if n > 0:
                    dots = np.einsum("hd,sd->hs", q[r].astype(np.float64), keys[lo:hi])
                    s = case.scale * (w[r].astype(np.float64) @ np.maximum(dots, 0.0))
                    order = np.argsort(-s, kind="stable")[:K]
                else:
                    s = np.zeros(0)
                    order = np.zeros(0, dtype=np.int64)
                m = len(order)
                topk[r, :m] = d["kv_off"] + lo + order
                topk[r, m:] = -1
                scores[r, :m] = s[order]
                scores[r, m:] = -np.inf
    return {"topk": topk, "scores": scores}


LOSS_MEANS = ("rows", "valid", "keyed", "sum")


def indexer_backward(case, inputs, mean_bug, ft=np.float64):
    """The indexer's KL loss and its gradients over the given top-k slots (docs/ops.md, "The indexer's
    training path"), straight from the definition: per row, its valid slots; d_index_k accumulated over every row
    that selected a key. ft = np.float32 computes like an honest fp32 kernel (fp32 logs, exps and sums)."""
    loss_mean = case.meta.get("loss_mean", "rows")
    if loss_mean not in LOSS_MEANS:  # a convention this adapter does not know: never a silent wrong answer
        skip(f"numpy_ref: loss_mean={loss_mean} is not implemented (known: {', '.join(LOSS_MEANS)})")
    q, w, k = (inputs[n].astype(ft) for n in ("q", "w", "k"))
    topk = inputs["topk"].astype(np.int64)
    target, predict = inputs["target"].astype(ft), inputs["predict"].astype(ft)
    grad_loss = ft(inputs["grad_loss"][0])
    dq, dw, dk, loss = case.output("dq"), case.output("dw"), case.output("dk"), case.output("loss")
    rows = case.valid_q_rows()
    keyed = sum(1 for r in rows if (topk[r] >= 0).any())
    denom = {"rows": topk.shape[0], "valid": len(rows), "keyed": keyed, "sum": 1}[loss_mean]
    if mean_bug:  # loss-mean-buffer-rows: every buffer row counted, whatever the convention
        denom = topk.shape[0]
    denom = max(denom, 1)
    grad_k = np.zeros((k.shape[0], k.shape[1]), dtype=ft)
    total = ft(0.0)
    lo, hi = ft(-100.0), ft(0.0)
    with np.errstate(divide="ignore"):
        for r in rows:
            sel = np.nonzero(topk[r] >= 0)[0]
            keys = topk[r, sel]
            log_t, log_p = np.log(target[r, sel]), np.log(predict[r, sel])
            lt, lp = np.clip(log_t, lo, hi), np.clip(log_p, lo, hi)
            total += np.sum(np.exp(lt) * (lt - lp))
            g = np.where(log_p >= lo, -np.exp(lt), ft(0.0))
            dz = (g - predict[r, sel] * g.sum()) * grad_loss / ft(denom) * ft(case.scale)
            dots = q[r] @ k[keys].T                       # [heads, slots]
            dw[r] = (np.maximum(dots, ft(0.0)) * dz[None, :]).sum(axis=1)
            coef = (dots > 0).astype(ft) * w[r][:, None] * dz[None, :]  # [heads, slots]
            dq[r] = coef @ k[keys]
            np.add.at(grad_k, keys, coef.T @ q[r])
    valid_k = np.zeros(k.shape[0], dtype=bool)
    valid_k[case.valid_kv_rows()] = True
    dk[valid_k] = grad_k[valid_k]
    loss[0] = total / ft(denom)
    return {"dq": dq, "dw": dw, "dk": dk, "loss": loss}


# LSE of a row with no allowed key, by meta.json's empty_rows (docs/case.md: conventions).
EMPTY_LSE = {"neginf": -np.inf, "posinf": np.inf}


def allowed_mask(case, doc, positions):
    """[rows, kv_len] bool: the keys each row at these document positions may attend."""
    allowed = np.zeros((len(positions), case.docs[doc]["kv_len"]), dtype=bool)
    for i, p in enumerate(positions):
        lo, hi = case.allowed_hi_lo(doc, int(p))
        allowed[i, lo:hi] = True
    return allowed


def sdpa(case, inputs, topleft_bug):
    empty_rows = case.meta.get("empty_rows", "neginf")
    if empty_rows not in EMPTY_LSE:  # a convention this adapter does not know: never a silent wrong answer
        skip(f"numpy_ref: empty_rows={empty_rows} is not implemented (known: {', '.join(EMPTY_LSE)})")
    empty_lse = EMPTY_LSE[empty_rows]
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    o = case.output("o")
    lse = case.output("lse")
    for seg in case.segments:
        d = case.docs[seg["doc"]]
        kd = k[d["kv_off"]:d["kv_off"] + d["kv_len"]].astype(np.float64)
        vd = v[d["kv_off"]:d["kv_off"] + d["kv_len"]].astype(np.float64)
        n = seg["valid"]
        if n == 0:
            continue
        allowed = allowed_mask(case, seg["doc"], (0 if topleft_bug else seg["pos0"]) + np.arange(n))
        qs = q[seg["row0"]:seg["row0"] + n].astype(np.float64)
        for h in range(hq):
            s = case.scale * (qs[:, h, :] @ kd[:, h // g, :].T)
            s = np.where(allowed, s, -np.inf)
            mx = s.max(axis=1, initial=-np.inf)
            none = ~np.isfinite(mx)
            e = np.exp(s - np.where(none, 0.0, mx)[:, None])
            e[~allowed] = 0.0
            tot = e.sum(axis=1)
            out = (e @ vd[:, h // g, :]) / np.where(none, 1.0, tot)[:, None]
            out[none] = 0.0
            o[seg["o_row0"]:seg["o_row0"] + n, h, :] = out
            lse[seg["stats_row0"]:seg["stats_row0"] + n, h] = np.where(none, empty_lse, mx + np.log(np.where(none, 1.0, tot)))
    return {"o": o, "lse": lse}


def sdpa_backward(case, inputs, ft=np.float64, tile=None, rnd=None, fold_scale=False, round_heads=False, exp2=False):
    """SDPA's backward from its definition (docs/ops.md, "The backward pass"), per segment and query head:
    P = exp(scale QK^T - lse) from the given LSE over the allowed keys, D = rowsum(dO o O) from the given O,
    dV += P^T dO, dS = P o (dO V^T - D), dQ = scale dS K, dK += scale dS^T Q; GQA heads summed into their
    K/V head; rows without a key (infinite LSE) contribute nothing. Only valid rows are written (pad
    slots as given); dK/dV cover every K/V row of a document (under CP: this rank's partial).
    ft = np.float32 computes like an fp32 kernel; tile: keys in tiles of that many (a flash kernel's
    accumulation order), else one dense product; rnd: P and dS rounded (to the dtype) before their products;
    fold_scale: scale * dS is rounded (and the products take 1), round_heads: each query head's dK/dV is
    rounded before its GQA group's sum (the two rounding choices cuDNN's SDPA backward makes); exp2: P as a
    FlashAttention kernel computes it, exp2(fma(q k^T, fl(fl(scale) log2 e), -fl(lse log2 e))) in fp32 (the
    constant and lse log2 e each rounded once, the fused product and difference rounded once)."""
    rnd = rnd or (lambda a: a)
    q, k, v, dout, o_in, lse_in = (inputs[n].astype(ft) for n in ("q", "k", "v", "dout", "o", "lse"))
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    scale = ft(case.scale)
    dq, dk, dv = case.output("dq"), case.output("dk"), case.output("dv")
    gk, gv = np.zeros(k.shape, dtype=ft), np.zeros(v.shape, dtype=ft)
    for seg in case.segments:
        n = seg["valid"]
        if n == 0:
            continue
        d = case.docs[seg["doc"]]
        ko, kl = d["kv_off"], d["kv_len"]
        allowed = allowed_mask(case, seg["doc"], seg["pos0"] + np.arange(n))
        r0, or0, sr0 = seg["row0"], seg["o_row0"], seg["stats_row0"]
        for h in range(hq):
            kh = h // g
            qs, do = q[r0:r0 + n, h, :], dout[r0:r0 + n, h, :]
            lse = lse_in[sr0:sr0 + n, h]
            live = np.isfinite(lse) & allowed.any(axis=1)
            lse = np.where(live, lse, ft(0))
            dsum = (do * o_in[or0:or0 + n, h, :]).sum(axis=1, dtype=ft)
            dqh = np.zeros(qs.shape, dtype=ft)
            hk = np.zeros((kl, k.shape[2]), dtype=ft)  # this head's dK/dV of the document's keys
            hv = np.zeros((kl, v.shape[2]), dtype=ft)
            step = tile or max(kl, 1)
            for a in range(0, kl, step):
                b = min(a + step, kl)
                kt, vt = k[ko + a:ko + b, kh, :], v[ko + a:ko + b, kh, :]
                mask = allowed[:, a:b] & live[:, None]
                if exp2:
                    log2e = np.float64(np.log2(np.e))
                    scale_l2 = np.float64(np.float32(np.float64(np.float32(case.scale)) * log2e))
                    lse_l2 = (lse.astype(np.float64) * log2e).astype(np.float32).astype(np.float64)
                    x = ((qs @ kt.T).astype(np.float64) * scale_l2 - lse_l2[:, None]).astype(ft)
                    p_ = np.where(mask, np.exp2(np.where(mask, x, ft(0))), ft(0)).astype(ft)
                else:
                    s_ = (qs @ kt.T) * scale
                    p_ = np.where(mask, np.exp(np.where(mask, s_ - lse[:, None], ft(0))), ft(0)).astype(ft)
                ds = (p_ * ((do @ vt.T) - dsum[:, None])).astype(ft)
                if fold_scale:
                    dsr = rnd((ds * scale).astype(ft))
                    dqh += dsr @ kt
                    hk[a:b] += dsr.T @ qs
                else:
                    dqh += (rnd(ds) @ kt) * scale
                    hk[a:b] += (rnd(ds).T @ qs) * scale
                hv[a:b] += rnd(p_).T @ do
            dq[r0:r0 + n, h, :] = dqh
            part = rnd if round_heads and g > 1 else (lambda a: a)
            gk[ko:ko + kl, kh, :] += part(hk)
            gv[ko:ko + kl, kh, :] += part(hv)
    for d in case.docs:
        sl = slice(d["kv_off"], d["kv_off"] + d["kv_len"])
        dk[sl], dv[sl] = gk[sl], gv[sl]
    return {"dq": dq, "dk": dk, "dv": dv}


def kernel(case, inputs, bug="none", fp32=False):
    """The adapter's kernel call: outputs {"topk", "scores"} or {"o", "lse"} of `case` (an exec:
    CaseDir or an attn_oracle.Case) on `inputs` (arrays by name), or under pass=bwd the indexer's
    {"dq", "dk", "dw", "loss"} and SDPA's {"dq", "dk", "dv"}. bug: a defect to re-create; fp32: the
    backward in float32 like a kernel."""
    if bug not in ("none", "topleft-cp", "loss-mean-buffer-rows"):
        raise ValueError(f"numpy_ref: unknown bug {bug!r} (known: none, topleft-cp, loss-mean-buffer-rows)")
    m = CaseMeta.of(case)
    view = CaseBuffers(m, case)
    if m.meta.get("pass", "fwd") == "bwd":
        if m.op == "sdpa":
            return sdpa_backward(view, inputs, np.float32 if fp32 else np.float64)
        return indexer_backward(view, inputs, bug == "loss-mean-buffer-rows", np.float32 if fp32 else np.float64)
    return indexer(view, inputs, bug == "topleft-cp") if m.op == "indexer" else sdpa(view, inputs, bug == "topleft-cp")


class CaseBuffers:
    """The layout (CaseMeta) and the case's sentinel output buffers, under one name for the functions above."""

    def __init__(self, meta, case):
        self._meta, self._case = meta, case

    def __getattr__(self, name):
        return getattr(self._meta, name)

    def output(self, name):
        return self._case.output(name)


# The defect of --bug topleft-cp as a kernel of its own (what a test of a planted bug runs).
planted_bug = functools.partial(kernel, bug="topleft-cp")


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault", default="")
    ap.add_argument("--bug", default="none", choices=["none", "topleft-cp", "loss-mean-buffer-rows"],
                    help="defect to re-create (cpu-bug:<id> id)")
    ap.add_argument("--fp32", action="store_true", help="pass=bwd: compute in float32 like a kernel")
    ap.add_argument("case_dir")
    return ap


def run(argv):
    a = arguments().parse_args(argv)
    case = CaseDir(a.case_dir)
    f = a.fault
    if f == "exit3":
        print("numpy_ref: planted failure before any output", file=sys.stderr)
        sys.exit(3)
    if f == "sleep":
        time.sleep(60)
    if f == "sleep-child":  # a grandchild that would outlive a kill of the direct child only
        subprocess.Popen(["sh", "-c", "sleep 60; :", "grandchild", a.case_dir])
        time.sleep(60)
    if f == "signal":
        os.kill(os.getpid(), signal.SIGSEGV)
    if f == "skip":
        skip("numpy_ref: this adapter declines the case (planted skip)")
    backward = case.meta.get("pass", "fwd") == "bwd"
    main_out = "dq" if backward else "topk" if case.op == "indexer" else "o"
    if f == "nowrite":
        return 0
    if f == "missing":
        os.remove(os.path.join(a.case_dir, main_out + ".npy"))
        return 0
    outs = kernel(case, case.inputs(), a.bug, fp32=a.fp32)
    if f == "nan":
        seg = case.segments[0]
        outs[main_out][seg["o_row0"] if main_out == "o" else seg["row0"], 0, 0] = np.nan
    for name, arr in outs.items():
        case.save(name, arr)
    path = os.path.join(a.case_dir, main_out + ".npy")
    if f == "shape":
        np.save(path, outs[main_out].reshape(outs[main_out].shape[0], -1)[:, :-1])
    if f == "dtype":
        np.save(path, outs[main_out].astype(np.float64 if case.op == "sdpa" else np.int64))
    if f == "truncated":
        size = os.path.getsize(path)
        with open(path, "r+b") as fh:
            fh.truncate(size - max(1, (size - 128) // 2))
    if f == "garbage":
        with open(path, "wb") as fh:
            fh.write(b"this is not a numpy file\n")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
