#!/usr/bin/env python3
"""What a user would otherwise write: the DSA indexer of one zigzag CP rank as a plain fp32 reference,
the natural way (row blocks, one GEMM per block, ReLU, head-weighted sum, mask, top-k).

  indexer_baseline.py --impl numpy|torch [--doc 131072 --cp 32 --rank 31 --heads 32 --dim 128 --topk 2048]

Inputs are random bf16-representable fp32 values of the case's shapes (timing only: the oracle's
counter-based generator is not re-implemented here). Prints one JSON line: impl, seconds, rows, keys,
GFLOP (useful multiply-adds x 2 over allowed keys), threads, BLAS info.
"""
import argparse
import json
import time

import numpy as np


def bf16(x):
    """Round fp32 to the nearest bf16 (ties to even), kept as fp32."""
    u = x.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def zigzag_positions(doc, cp, rank):
    c = doc // (2 * cp)
    return np.concatenate([np.arange(rank * c, (rank + 1) * c), np.arange((2 * cp - 1 - rank) * c, (2 * cp - rank) * c)])


def run_numpy(q, w, k, pos, topk, block):
    rows, H, D = q.shape
    out = np.empty((rows, topk), np.int64)
    for r0 in range(0, rows, block):
        qb, wb, pb = q[r0:r0 + block], w[r0:r0 + block], pos[r0:r0 + block]
        b, n = len(pb), int(pb.max()) + 1
        logits = qb.reshape(b * H, D) @ k[:n].T                      # (b*H, n)
        scores = np.einsum("bh,bhn->bn", wb, np.maximum(logits, 0).reshape(b, H, n))
        scores[np.arange(n)[None, :] > pb[:, None]] = -np.inf       # causal: keys s <= p
        kk = min(topk, n)
        part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1, kind="stable")
        out[r0:r0 + b, :kk] = np.take_along_axis(part, order, 1)
        out[r0:r0 + b, kk:] = -1
    return out


def run_torch(q, w, k, pos, topk, block):
    import torch
    q, w, k, pos = (torch.from_numpy(a) for a in (q, w, k, pos))
    rows, H, D = q.shape
    out = torch.empty((rows, topk), dtype=torch.int64)
    with torch.inference_mode():
        for r0 in range(0, rows, block):
            qb, wb, pb = q[r0:r0 + block], w[r0:r0 + block], pos[r0:r0 + block]
            b, n = len(pb), int(pb.max()) + 1
            logits = torch.relu(qb.reshape(b * H, D) @ k[:n].T).reshape(b, H, n)
            scores = torch.einsum("bh,bhn->bn", wb, logits)
            scores.masked_fill_(torch.arange(n)[None, :] > pb[:, None], float("-inf"))
            kk = min(topk, n)
            out[r0:r0 + b, :kk] = torch.topk(scores, kk, dim=1).indices
            out[r0:r0 + b, kk:] = -1
    return out.numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=["numpy", "torch"], required=True)
    ap.add_argument("--doc", type=int, default=131072)
    ap.add_argument("--cp", type=int, default=32)
    ap.add_argument("--rank", type=int, default=31)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--block", type=int, default=16, help="query rows per block")
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    pos = zigzag_positions(a.doc, a.cp, a.rank)
    rows, keys = len(pos), int(pos.max()) + 1
    q = bf16(rng.standard_normal((rows, a.heads, a.dim), dtype=np.float32))
    w = bf16(rng.standard_normal((rows, a.heads), dtype=np.float32) * 0.1)
    k = bf16(rng.standard_normal((keys, a.dim), dtype=np.float32))
    info, threads = "", 0
    if a.impl == "torch":
        import torch
        threads = torch.get_num_threads()
        info = "torch " + torch.__version__
    else:
        try:
            from threadpoolctl import threadpool_info
            tp = [p for p in threadpool_info() if p.get("user_api") == "blas"]
            info = "; ".join(f"{p['internal_api']} {p.get('version')} {p.get('architecture')}" for p in tp)
            threads = tp[0]["num_threads"] if tp else 0
        except ImportError:
            with open("/proc/self/maps") as f:  # which BLAS numpy actually loaded
                libs = sorted({l.split("/")[-1].strip() for l in f if "blas" in l.lower()})
            info = "numpy " + np.__version__ + " (" + ", ".join(libs) + ")"
    fn = run_numpy if a.impl == "numpy" else run_torch
    t0 = time.perf_counter()
    c0 = time.process_time()
    fn(q, w, k, pos, a.topk, a.block)
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    gflop = 2.0 * float((pos + 1).sum()) * a.heads * a.dim / 1e9
    print(json.dumps({"impl": a.impl, "seconds": sec, "cpu_seconds": cpu, "rows": rows, "keys": keys,
                      "gflop": gflop, "threads": threads, "info": info}))


if __name__ == "__main__":
    main()
