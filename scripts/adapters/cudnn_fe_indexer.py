#!/usr/bin/env python3
"""`exec:` adapter: cuDNN frontend's DeepSeek sparse-attention indexer (nvidia-cudnn-frontend 1.32.0,
`cudnn.deepseek_sparse_attention`), called on the case's layout the way a training framework's packed
context-parallel path calls it: `indexer_forward_wrapper` on one THD batch, then `indexer_top_k_wrapper`.

  usage: cudnn_fe_indexer.py [--bug none|topleft-cp] [--seq-lens row|chunk] [--deterministic 0|1]
                             [--tie-break 0|1|2] [--w-dtype fp32|bf16] CASE_DIR

The call (per query segment of the case, i.e. one CP chunk of one document, one THD sequence):
  * Q rows: the segment's valid rows (row0 .. row0+valid); K rows: the segment's document in the K
    buffer cropped at the segment's key extent (kv_off .. kv_off+key_len); cu_seqlens_q/k over these.
  * q_causal_offsets = the segment's pos0 (the seed PR's fix). `--bug topleft-cp` (old: `--offsets 0`) leaves it
    out: the kernel then masks each sequence top-left from its own q[0] (the seed's bug).
  * indexer_top_k_wrapper(scores, seq_lens, top_k=min(topk, max_seqlen_k), next_n=1): seq_lens per THD
    row is `row`: the row's causal key count clamp(floor((pos0+i+1)/ratio), 0, key_len) at its true
    position (independent of --offsets, as a framework computes it from the layout), or `chunk`: the
    segment's key_len (known trap: rows with fewer than k allowed keys get the indices of -inf keys).
  * The kernel's local columns c are mapped back to K/V buffer rows kv_off + c. Nothing is cleaned:
    a -inf pick keeps the index the kernel gave, -1 stays -1, and the values go to scores.npy as
    returned. Columns past top_k (topk > max_seqlen_k) are the framework's -1 / -inf padding.

Env: AO_SITE_DIR=folder is added with site.addsitedir before the frontend is imported (the device
campaign's unpacked wheels; their .pth puts the CuTe DSL on the path).
Exit 125 (skip) with the kernel's own reason for what it does not serve (checked before any import,
limits read from the frontend's source; see decline_reason), for op=sdpa, mask=none, and without CUDA.
Only numpy is imported at module level: the layout mapping is tested on CPU
(scripts/adapters/test_cudnn_fe_indexer.py).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ao_exec import CaseDir, add_site_dir, cuda_torch, log_timing, skip  # noqa: E402

NAME = "cudnn_fe_indexer"
FRONTEND_VERSION = "1.32.0"
# Limits of nvidia-cudnn-frontend 1.32.0 (cudnn/deepseek_sparse_attention/):
#   indexer_forward/_interface_sm90.py  (Hopper): head_dim == 128, one K head, qhead_per_kv_head in
#       (16, 32, 64) for bf16, Q/K bfloat16, W bfloat16 or float32;
#   indexer_forward/_support.py (SM100+): SUPPORTED_QHEAD_PER_KV_HEAD_BF16 = (4, 8, 16, 32, 64), and
#       api.py IndexerForward: head_dim == 128;
#   indexer_top_k/api.py IndexerTopK.check_support: 0 < top_k <= 2048, num_cols > 0, SM90+.
HEADS_BY_ARCH = {9: (16, 32, 64), 10: (4, 8, 16, 32, 64)}
MAX_TOPK = 2048


def parse_args(argv):
    ap = argparse.ArgumentParser(prog=NAME)
    ap.add_argument("--bug", default=None, choices=["none", "topleft-cp"],
                    help="topleft-cp: q_causal_offsets omitted (the seed's bug, cpu-bug:topleft-cp); none: each "
                         "segment's pos0 (the fix; default)")
    ap.add_argument("--offsets", default=None, choices=["1", "0"],
                    help="the kernel's own name for the same switch (old spelling): 0 = --bug topleft-cp")
    ap.add_argument("--seq-lens", default="row", choices=["row", "chunk"],
                    help="top-k lengths: per-row causal key count, or the segment's key extent")
    ap.add_argument("--deterministic", default="0", choices=["0", "1"])
    ap.add_argument("--tie-break", default="0", choices=["0", "1", "2"],
                    help="indexer_top_k_wrapper tie_break: 0 arbitrary, 1 smaller index, 2 larger index")
    ap.add_argument("--w-dtype", default="fp32", choices=["fp32", "bf16"],
                    help="dtype W is handed to the kernel in (the case's bf16 values, exact either way)")
    ap.add_argument("case_dir")
    a = ap.parse_args(argv)
    if a.bug is not None and a.offsets is not None and (a.bug == "topleft-cp") != (a.offsets == "0"):
        ap.error(f"--bug {a.bug} contradicts --offsets {a.offsets}")
    a.offsets = a.bug != "topleft-cp" if a.bug is not None else a.offsets != "0"
    a.deterministic = a.deterministic == "1"
    a.tie_break = int(a.tie_break)
    return a


def decline_reason(meta, arch_major=9):
    """Why the kernel does not serve this case (its own words), or None. arch_major: 9 Hopper, 10 Blackwell."""
    if meta["op"] != "indexer":
        return f"{NAME}: serves op=indexer only"
    if meta["mask"] == "none":
        return f"{NAME}: the kernel always applies its ratio-causal mask; mask=none is not served"
    if arch_major < 9:
        return f"IndexerTopK requires SM90+ compute capability, found SM{arch_major}"
    dims = meta["dims"]
    if meta["dtype"] != "bf16":
        torch_name = {"fp16": "torch.float16", "fp32": "torch.float32"}.get(meta["dtype"], meta["dtype"])
        return f"q must be bfloat16, got {torch_name}"
    if int(dims["dim"]) != 128:
        return f"head_dim must be 128, got {dims['dim']}"
    heads = HEADS_BY_ARCH[9 if arch_major == 9 else 10]
    if int(dims["heads"]) not in heads:
        return f"qhead_per_kv_head must be one of {heads}, got {dims['heads']}"
    if not 0 < int(dims["topk"]) <= MAX_TOPK:
        return f"top_k must be in (0, {MAX_TOPK}], got {dims['topk']}"
    if int(dims["ratio"]) < 1:
        return f"ratio must be >= 1, got {dims['ratio']}"
    return None


class ThdPlan:
    """The THD call for a case: which Q/K buffer rows go in, in which order, with which lengths.

    seqs: the case's segments that have valid rows, in segment order (one THD sequence each).
    Pad rows (i >= valid) are not sent: the oracle's contract for them is all -1, which the adapter
    writes itself (a pad-only segment sends nothing at all).
    """

    def __init__(self, meta, offsets=True, seq_lens="row"):
        ratio = int(meta["dims"]["ratio"])
        docs = meta["docs"]
        self.segments = meta["segments"]
        self.seqs = [s for s in self.segments if int(s["valid"]) > 0]
        q_lens = [int(s["valid"]) for s in self.seqs]
        k_lens = [int(s["key_len"]) for s in self.seqs]
        self.cu_seqlens_q = np.concatenate([[0], np.cumsum(q_lens, dtype=np.int64)]).astype(np.int32)
        self.cu_seqlens_k = np.concatenate([[0], np.cumsum(k_lens, dtype=np.int64)]).astype(np.int32)
        self.max_seqlen_q = max(q_lens, default=0)
        self.max_seqlen_k = max(k_lens, default=0)
        self.q_causal_offsets = (np.array([int(s["pos0"]) for s in self.seqs], dtype=np.int32)
                                 if offsets else None)
        rows, krows, lens, base = [], [], [], []
        for s in self.seqs:
            valid, key_len, pos0 = int(s["valid"]), int(s["key_len"]), int(s["pos0"])
            kv_off = int(docs[int(s["doc"])]["kv_off"])
            rows.append(np.arange(int(s["row0"]), int(s["row0"]) + valid, dtype=np.int64))
            krows.append(np.arange(kv_off, kv_off + key_len, dtype=np.int64))
            if seq_lens == "row":
                pos = pos0 + np.arange(valid, dtype=np.int64)
                lens.append(np.clip(np.floor_divide(pos + 1, ratio), 0, key_len))
            else:
                lens.append(np.full(valid, key_len, dtype=np.int64))
            base.append(np.full(valid, kv_off, dtype=np.int64))
        empty = np.zeros(0, dtype=np.int64)
        self.q_rows = np.concatenate(rows) if rows else empty      # Q buffer row of each THD row
        self.k_rows = np.concatenate(krows) if krows else empty    # K buffer row of each THD key
        self.seq_lens = (np.concatenate(lens) if lens else empty).astype(np.int32)
        self.col_base = np.concatenate(base) if base else empty    # kv_off of each THD row's document

    def pad_rows(self):
        """Q buffer rows of the segments' pad rows (i >= valid): the oracle wants all -1 there."""
        out = [np.arange(int(s["row0"]) + int(s["valid"]), int(s["row0"]) + int(s["rows"]), dtype=np.int64)
               for s in self.segments if int(s["valid"]) < int(s["rows"])]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def top_k(self, topk):
        """The k the kernel is asked for: frameworks ask min(topk, S_k) and pad the rest with -1."""
        return min(int(topk), int(self.max_seqlen_k))


def map_columns(local, col_base):
    """Kernel columns -> K/V buffer rows: kv_off + c for c >= 0; negative values (-1) kept as returned."""
    local = np.asarray(local, dtype=np.int64)
    mapped = np.where(local >= 0, local + col_base[:, None], local)
    # A garbage column near 2^31 could overflow int32 after the shift: saturate (still out of range).
    return np.clip(mapped, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(np.int32)


def assemble(topk_buf, scores_buf, plan, idx, vals):
    """Writes the kernel's picks into the case's output buffers (rows outside segments keep the sentinel)."""
    kk = idx.shape[1] if idx is not None else 0
    pad = plan.pad_rows()
    topk_buf[pad] = -1
    scores_buf[pad] = -np.inf
    if len(plan.q_rows):
        topk_buf[plan.q_rows] = -1
        scores_buf[plan.q_rows] = -np.inf
        if kk:
            topk_buf[plan.q_rows, :kk] = map_columns(idx, plan.col_base)
            if vals is not None:
                scores_buf[plan.q_rows, :kk] = vals
    return topk_buf, scores_buf


def _bf16(torch, a_u16):
    """uint16 bf16 bit patterns -> torch.bfloat16 (the case's exact values)."""
    return torch.from_numpy(np.ascontiguousarray(a_u16).view(np.int16)).view(torch.bfloat16)


def run(argv):
    a = parse_args(argv)
    case = CaseDir(a.case_dir)
    reason = decline_reason(case.meta)  # before importing torch: the common declines cost nothing
    if reason:
        skip(reason)
    plan = ThdPlan(case.meta, offsets=a.offsets, seq_lens=a.seq_lens)
    topk_buf, scores_buf = case.output("topk"), case.output("scores")
    K = int(case.dims["topk"])
    if len(plan.q_rows) == 0:  # every segment is padding: a framework sends nothing; all -1
        assemble(topk_buf, scores_buf, plan, None, None)
        case.save("topk", topk_buf)
        case.save("scores", scores_buf)
        return 0
    torch = cuda_torch(NAME, decline_reason, case.meta)
    if plan.max_seqlen_k == 0:
        skip(f"num_cols must be positive, got 0 ({NAME}: no segment has a key)")
    add_site_dir(NAME)
    import cuda.bindings.driver as cuda
    from cudnn import deepseek_sparse_attention as dsa
    got = getattr(sys.modules["cudnn"], "__version__", "?")
    if got != FRONTEND_VERSION:  # the limits in decline_reason were read from FRONTEND_VERSION's source
        print(f"{NAME}: note: cudnn frontend {got} imported, the adapter was written for {FRONTEND_VERSION}", file=sys.stderr)

    dev = torch.device("cuda")
    q = _bf16(torch, case.raw_input("q"))
    k = _bf16(torch, case.raw_input("k"))
    w = _bf16(torch, case.raw_input("w"))
    qi = torch.from_numpy(plan.q_rows)
    q_thd = q[qi].contiguous().to(dev)                                   # (total_q, H, 128) bf16
    k_thd = k[torch.from_numpy(plan.k_rows)][:, None, :].contiguous().to(dev)  # (total_k, 1, 128) bf16
    w_thd = w[qi].to(torch.float32 if a.w_dtype == "fp32" else torch.bfloat16).contiguous().to(dev)
    cu_q = torch.from_numpy(plan.cu_seqlens_q).to(dev)
    cu_k = torch.from_numpy(plan.cu_seqlens_k).to(dev)
    offs = torch.from_numpy(plan.q_causal_offsets).to(dev) if plan.q_causal_offsets is not None else None
    seq_lens = torch.from_numpy(plan.seq_lens).to(dev)
    kk = plan.top_k(K)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    scores = dsa.indexer_forward_wrapper(
        q_thd, k_thd, w_thd, ratio=int(case.dims["ratio"]), sm_scale=case.scale, stream=stream,
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=plan.max_seqlen_q, max_seqlen_k=plan.max_seqlen_k,
        q_causal_offsets=offs)["scores"]                                 # (total_q, max_seqlen_k) fp32
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    res = dsa.indexer_top_k_wrapper(scores, seq_lens, top_k=kk, next_n=1, return_val=True, stream=stream,
                                    tie_break=a.tie_break, deterministic=a.deterministic)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    idx = res["indices"].cpu().numpy()
    vals = res["values"].float().cpu().numpy() if res["values"] is not None else None
    assemble(topk_buf, scores_buf, plan, idx, vals)
    case.save("topk", topk_buf)
    case.save("scores", scores_buf)
    log_timing(NAME, t2 - t0, case=case.meta["case"], forward_s=t1 - t0, offsets=int(a.offsets),
               seq_lens=a.seq_lens, deterministic=int(a.deterministic), tie_break=a.tie_break,
               w_dtype=a.w_dtype, total_q=int(len(plan.q_rows)), total_k=int(len(plan.k_rows)),
               max_seqlen_k=int(plan.max_seqlen_k), frontend=got,
               torch=torch.__version__, device=torch.cuda.get_device_name())
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
