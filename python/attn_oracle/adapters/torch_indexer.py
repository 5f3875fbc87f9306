#!/usr/bin/env python3
"""`exec:` adapter: a plain PyTorch DSA lightning indexer + torch.topk on the GPU (the semantics of docs/ops.md):
score(t,s) = scale * sum_h w[t,h] * relu(q[t,h] . k[s]) over the segment's allowed keys, top-k per row.

  usage: torch_indexer.py [--compute fp32|input] [--bug topleft-cp] CASE_DIR
  --compute fp32 (default): inputs upcast to fp32, TF32 off (an exact-arithmetic peer);
            input: matmuls in the case dtype as a bf16 kernel would (scores rounded to bf16).
Exits 125 (skip) for op=sdpa or when no CUDA device is present (unless --device cpu).
In process (attn_oracle, python/): `kernel(case, inputs, compute=..., bug=..., device=...)` is the same call.
"""
import argparse
import sys
import time

import numpy as np

from .protocol import CaseMeta, import_torch, log_timing, main, skip
from .registry import Adapter

ADAPTER = Adapter(
    name='torch_indexer', what='a plain PyTorch DSA lightning indexer and torch.topk (the semantics a user would write)',
    ops=("indexer",), passes=("fwd",), requires=("torch", "cuda"),
    kernel="kernel")


def kernel(buffers, inputs, compute="fp32", bug="none", device="cuda", rows_per_block=256):
    """The adapter's kernel call on `buffers` (an exec: CaseDir or an attn_oracle.Case) and `inputs`
    (float32 arrays by name): {"topk", "scores"} as host arrays."""
    if compute not in ("fp32", "input") or bug not in ("none", "topleft-cp") or rows_per_block < 1:
        raise ValueError(f"torch_indexer: compute={compute!r} bug={bug!r} rows_per_block={rows_per_block}")
    case = CaseMeta.of(buffers)
    if case.op != "indexer":
        skip("torch_indexer: serves op=indexer only")
    torch = import_torch("torch_indexer", device)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(device)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[case.meta["dtype"]]
    cdt = torch.float32 if compute == "fp32" else dt
    q = torch.from_numpy(inputs["q"]).to(dev)
    w = torch.from_numpy(inputs["w"]).to(dev)
    k = torch.from_numpy(inputs["k"]).to(dev)
    K = int(case.dims["topk"])
    ratio = int(case.dims["ratio"])
    topk = torch.from_numpy(buffers.output("topk")).to(dev)
    scores = torch.from_numpy(buffers.output("scores")).to(dev)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for seg in case.segments:
        d = case.docs[seg["doc"]]
        kd = k[d["kv_off"]:d["kv_off"] + d["kv_len"]].to(cdt)
        if seg["valid"] < seg["rows"]:  # pad rows of the segment: all -1
            topk[seg["row0"] + seg["valid"]:seg["row0"] + seg["rows"]] = -1
            scores[seg["row0"] + seg["valid"]:seg["row0"] + seg["rows"]] = float("-inf")
        for i0 in range(0, seg["valid"], rows_per_block):
            i1 = min(i0 + rows_per_block, seg["valid"])
            r0, r1 = seg["row0"] + i0, seg["row0"] + i1
            pos = torch.arange(i0, i1, device=dev) + (0 if bug == "topleft-cp" else seg["pos0"])
            if case.mask == "none":
                hi = torch.full_like(pos, d["kv_len"])
            else:
                hi = torch.clamp(torch.div(pos + 1, ratio, rounding_mode="floor"), 0, d["kv_len"])
            nkeys = int(hi.max().item()) if len(hi) else 0
            if nkeys == 0:
                topk[r0:r1] = -1
                scores[r0:r1] = float("-inf")
                continue
            qb = q[r0:r1].to(cdt)                      # [R, H, D]
            dots = torch.einsum("rhd,sd->rhs", qb, kd[:nkeys])  # [R, H, S]
            s = (torch.relu(dots).to(torch.float32) * w[r0:r1].to(cdt).to(torch.float32)[:, :, None]).sum(1)
            s = s * case.scale
            allowed = torch.arange(nkeys, device=dev)[None, :] < hi[:, None]
            s = torch.where(allowed, s, torch.full_like(s, float("-inf")))
            kk = min(K, nkeys)
            val, idx = torch.topk(s, kk, dim=1)
            got = torch.where(torch.isfinite(val), idx + d["kv_off"], torch.full_like(idx, -1)).to(torch.int32)
            topk[r0:r1, :kk] = got
            topk[r0:r1, kk:] = -1
            scores[r0:r1, :kk] = val
            scores[r0:r1, kk:] = float("-inf")
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    log_timing("torch_indexer", secs, case=case.meta["case"], compute=compute,
               torch=torch.__version__, device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu")
    return {"topk": topk.cpu().numpy().astype(np.int32), "scores": scores.cpu().numpy().astype(np.float32)}


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--compute", default="fp32", choices=["fp32", "input"])
    ap.add_argument("--bug", default="none", choices=["none", "topleft-cp"], help="defect to re-create (cpu-bug:<id> id)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows-per-block", type=int, default=256)
    ap.add_argument("case_dir")
    return ap


def run(argv):
    a = arguments().parse_args(argv)
    kw = {"compute": a.compute, "bug": a.bug, "device": a.device, "rows_per_block": a.rows_per_block}
    return main(kernel, [a.case_dir], **kw)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
