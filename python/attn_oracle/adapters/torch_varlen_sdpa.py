#!/usr/bin/env python3
"""`exec:` adapter: PyTorch attention over the padded-THD case, read through the bound ragged offsets.

  usage: torch_varlen_sdpa.py [--impl varlen|sdpa] [--sdpa-backend auto|math|efficient|cudnn|flash] CASE_DIR
  --impl varlen: torch.nn.attention.varlen.varlen_attn (Flash Attention, fp16/bf16) on the packed valid
                 rows of every query segment; causal = bottom-right alignment over keys cropped to
                 pos0+valid (window_size=(-1,0), or (window-1,0) with a sliding window); LSE from the
                 kernel (return_aux). GQA by repeating K/V heads (2.11's varlen_attn has no enable_gqa).
  --impl sdpa:   torch.nn.functional.scaled_dot_product_attention per segment with the exact boolean
                 mask (any dtype; PyTorch picks the kernel); it returns no LSE, so the LSE is computed by
                 the adapter in fp32 from the same inputs (that check then tests the adapter, not SDPA).
                 --sdpa-backend pins the kernel PyTorch may pick (torch.nn.attention.sdpa_kernel; the
                 backward follows the forward's choice); one that cannot serve the case is a skip.
Outputs are written only at valid rows (through o/stats offsets); pad slots keep the sentinel.
pass=bwd: the same forward calls under autograd, then backward with the case's dO (the adapter's own
forward, not the case's O/LSE: PyTorch's kernels take no external O); dQ at valid rows, dK/dV summed over
the segments in fp32 at every document's K/V rows. PyTorch's backward forms D = rowsum(dO o O) from that
recomputed O, which the oracle's dQ gate (derived for the case's O) does not cover: dK/dV are a baseline,
dQ beyond its gate is the adapter's protocol gap (results/gpu/backward-kernels-2026-12-04/).
Exits 125 (skip) for op=indexer, for cases an implementation cannot express, or without CUDA.
In process (attn_oracle, python/): `kernel(case, inputs, impl=..., device=...)` is the same call; a
decline is a SKIPPED verdict with the same reason.
"""
import argparse
import sys
import time

import numpy as np

from .protocol import CaseMeta, import_torch, log_timing, main, skip, unmapped_window_reason
from .registry import Adapter

ADAPTER = Adapter(
    name='torch_varlen_sdpa', what="PyTorch's varlen attention or scaled_dot_product_attention per segment, forward and autograd backward",
    ops=("sdpa",), passes=("fwd", "bwd"), requires=("torch", "cuda"),
    kernel="kernel")


SDPA_BACKENDS = ("auto", "math", "efficient", "cudnn", "flash")


def kernel(buffers, inputs, impl="varlen", device="cuda", sdpa_backend="auto"):
    """The adapter's kernel call on `buffers` (an exec: CaseDir or an attn_oracle.Case) and `inputs`
    (float32 arrays by name): {"o", "lse"} as float32 host arrays."""
    if impl not in ("varlen", "sdpa"):
        raise ValueError(f"torch_varlen_sdpa: unknown impl {impl!r} (varlen | sdpa)")
    if sdpa_backend not in SDPA_BACKENDS:
        raise ValueError(f"torch_varlen_sdpa: unknown sdpa_backend {sdpa_backend!r} ({' | '.join(SDPA_BACKENDS)})")
    if sdpa_backend != "auto" and impl != "sdpa":
        raise ValueError(f"torch_varlen_sdpa: sdpa_backend={sdpa_backend} needs impl=sdpa")
    case = CaseMeta.of(buffers)
    if case.op != "sdpa":
        skip("torch_varlen_sdpa: serves op=sdpa only")
    if unmapped_window_reason(case.meta, "torch_varlen_sdpa"):
        skip(unmapped_window_reason(case.meta, "torch_varlen_sdpa"))
    torch = import_torch("torch_varlen_sdpa", device)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(device)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[case.meta["dtype"]]
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    bwd = case.meta.get("pass", "fwd") == "bwd"
    if bwd:  # fp32 leaves cast to the dtype: autograd sums the segments' dK/dV in fp32, as a CP framework does
        leaves = {n: torch.from_numpy(inputs[n]).to(dev).requires_grad_() for n in ("q", "k", "v")}
        q, k, v = (leaves[n].to(dt) for n in ("q", "k", "v"))
        o = torch.full((int(case.meta["rows"]["q"]), hq, int(case.dims["dim_v"])), float("nan"), device=dev)
        lse = torch.full((int(case.meta["rows"]["q"]), hq), float("nan"), device=dev)
        outs, grads = [], []  # each segment's output (in the graph) and its dO
        dout = torch.from_numpy(inputs["dout"]).to(dev).to(dt)
    else:
        q = torch.from_numpy(inputs["q"]).to(dev).to(dt)
        k = torch.from_numpy(inputs["k"]).to(dev).to(dt)
        v = torch.from_numpy(inputs["v"]).to(dev).to(dt)
        o = torch.from_numpy(buffers.output("o")).to(dev)
        lse = torch.from_numpy(buffers.output("lse")).to(dev)
    segs = [s for s in case.segments if s["valid"] > 0]
    # Keys of each segment: a row at position p sees document keys [lo(p), hi(p)); the segment's key
    # extent is [0, key_hi) with key_hi = max hi over its rows.
    spans = []
    for s in segs:
        d = case.docs[s["doc"]]
        if case.mask == "none":
            key_hi = d["kv_len"]
        else:
            key_hi = min(max(s["pos0"] + s["valid"], 0), d["kv_len"])
        spans.append(key_hi)

    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if impl == "varlen":
        try:
            from torch.nn.attention.varlen import AuxRequest, varlen_attn
        except ImportError as e:
            skip(f"torch_varlen_sdpa: torch {torch.__version__} has no torch.nn.attention.varlen ({e})")
        if int(case.dims["dim_v"]) != int(case.dims["dim"]):
            skip("torch_varlen_sdpa: varlen_attn needs dim_v == dim")
        if dt == torch.float32:
            skip("torch_varlen_sdpa: varlen_attn (Flash Attention) takes fp16/bf16 only")
        for s, key_hi in zip(segs, spans):
            # Bottom-right causal over keys [0, key_hi) puts row i at key_hi - valid + i; that is the row's
            # position only when key_hi == pos0 + valid (rows past the document's keys are not expressible).
            if case.mask != "none" and key_hi != s["pos0"] + s["valid"]:
                skip(f"torch_varlen_sdpa: segment at pos0={s['pos0']} with {s['valid']} rows needs keys past "
                     f"the document's {case.docs[s['doc']]['kv_len']} (not expressible as bottom-right causal)")
        qs, ks, vs, cq, ck = [], [], [], [0], [0]
        for s, key_hi in zip(segs, spans):
            d = case.docs[s["doc"]]
            qs.append(q[s["row0"]:s["row0"] + s["valid"]])
            ks.append(k[d["kv_off"]:d["kv_off"] + key_hi])
            vs.append(v[d["kv_off"]:d["kv_off"] + key_hi])
            cq.append(cq[-1] + s["valid"])
            ck.append(ck[-1] + key_hi)
        Q = torch.cat(qs)
        Kp = torch.cat(ks).repeat_interleave(g, dim=1)
        Vp = torch.cat(vs).repeat_interleave(g, dim=1)
        cu_q = torch.tensor(cq, dtype=torch.int32, device=dev)
        cu_k = torch.tensor(ck, dtype=torch.int32, device=dev)
        if case.mask == "none":
            win = (-1, -1)
        elif case.window > 0:
            win = (case.window - 1, 0)
        else:
            win = (-1, 0)
        try:  # a shape the kernel refuses (head dim, dtype, ...) is a decline: skipped, with its message
            out, l = varlen_attn(Q, Kp, Vp, cu_q, cu_k, max(s["valid"] for s in segs), max(spans),
                                 return_aux=AuxRequest(lse=True), scale=case.scale, window_size=win)
        except (RuntimeError, ValueError, NotImplementedError) as e:
            skip(f"torch_varlen_sdpa: varlen_attn declined the case: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        if bwd:
            outs.append(out)
            grads.append(torch.cat([dout[s["row0"]:s["row0"] + s["valid"]] for s in segs]))
        if l.shape == (hq, Q.shape[0]):
            l = l.transpose(0, 1)
        for j, s in enumerate(segs):
            o[s["o_row0"]:s["o_row0"] + s["valid"]] = out[cq[j]:cq[j + 1]].float()
            lse[s["stats_row0"]:s["stats_row0"] + s["valid"]] = l[cq[j]:cq[j + 1]].float()
    else:
        import contextlib

        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        def pinned():  # a fresh context per call (sdpa_kernel's cannot be entered twice)
            return contextlib.nullcontext() if sdpa_backend == "auto" else sdpa_kernel(
                {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                 "cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[sdpa_backend])
        for s, key_hi in zip(segs, spans):
            d = case.docs[s["doc"]]
            n = s["valid"]
            kh = max(key_hi, 1)
            pos = torch.arange(n, device=dev) + s["pos0"]
            j = torch.arange(kh, device=dev)
            if case.mask == "none":
                allowed = torch.ones(n, kh, dtype=torch.bool, device=dev)
            else:
                allowed = j[None, :] <= pos[:, None]
                if case.window > 0:
                    allowed &= j[None, :] > pos[:, None] - case.window
            allowed &= j[None, :] < key_hi
            qb = q[s["row0"]:s["row0"] + n].transpose(0, 1)[None]            # [1, hq, n, D]
            kb = k[d["kv_off"]:d["kv_off"] + kh].transpose(0, 1)[None]      # [1, hkv, S, D]
            vb = v[d["kv_off"]:d["kv_off"] + kh].transpose(0, 1)[None]
            try:
                with pinned():
                    ob = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=allowed[None, None],
                                                        scale=case.scale, enable_gqa=(g > 1))
            except RuntimeError as e:
                if sdpa_backend == "auto":
                    raise
                skip(f"torch_varlen_sdpa: the {sdpa_backend} kernel declined the case: "
                     f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
            if bwd:
                outs.append(ob)
                grads.append(dout[s["row0"]:s["row0"] + n].transpose(0, 1)[None])
                continue
            o[s["o_row0"]:s["o_row0"] + n] = ob[0].transpose(0, 1).float()
            # LSE by the adapter (fp32, same inputs): SDPA's public API does not return it.
            kr = kb.float().repeat_interleave(g, dim=1)
            sc = (qb.float() @ kr.transpose(-1, -2)) * case.scale
            sc = sc.masked_fill(~allowed[None, None], float("-inf"))
            lse[s["stats_row0"]:s["stats_row0"] + n] = torch.logsumexp(sc, dim=-1)[0].transpose(0, 1)
    if bwd and outs:
        try:
            torch.autograd.backward(outs, grads)
        except (RuntimeError, NotImplementedError) as e:  # e.g. a kernel with no backward for this shape
            skip(f"torch_varlen_sdpa: autograd declined the backward: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    log_timing("torch_varlen_sdpa", secs, case=case.meta["case"], impl=impl, sdpa_backend=sdpa_backend,
               torch=torch.__version__)
    if bwd:
        return gradients(case, buffers, segs, {n: t.grad for n, t in leaves.items()})
    return {"o": o.cpu().numpy().astype(np.float32), "lse": lse.cpu().numpy().astype(np.float32)}


def gradients(case, buffers, segs, grad):
    """dQ at every segment's valid rows, dK/dV (summed over the segments, fp32) at every document's K/V rows
    (0 where no query reached them, as in a framework's zeroed buffer); pad slots keep the sentinel."""
    out = {n: buffers.output(n) for n in ("dq", "dk", "dv")}
    g = {n: (t.float().cpu().numpy() if t is not None else np.zeros(out["d" + n].shape, np.float32))
         for n, t in grad.items()}
    for s in segs:
        out["dq"][s["row0"]:s["row0"] + s["valid"]] = g["q"][s["row0"]:s["row0"] + s["valid"]]
    for d in case.docs:
        rows = slice(d["kv_off"], d["kv_off"] + d["kv_len"])
        out["dk"][rows], out["dv"][rows] = g["k"][rows], g["v"][rows]
    return out


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default="varlen", choices=["varlen", "sdpa"])
    ap.add_argument("--sdpa-backend", default="auto", choices=SDPA_BACKENDS)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("case_dir")
    return ap


def run(argv):
    a = arguments().parse_args(argv)
    return main(kernel, [a.case_dir], impl=a.impl, device=a.device, sdpa_backend=a.sdpa_backend)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
