#!/usr/bin/env python3
"""`exec:` adapter: cuDNN frontend's DeepSeek sparse-attention indexer (nvidia-cudnn-frontend 1.32.0,
`cudnn.deepseek_sparse_attention`), called on the case's layout the way a training framework's packed
context-parallel path calls it: `indexer_forward_wrapper` on one THD batch, then `indexer_top_k_wrapper`.

  usage: cudnn_fe_indexer.py [--bug none|topleft-cp] [--seq-lens row|chunk] [--deterministic 0|1]
                             [--tie-break 0|1|2] [--w-dtype fp32|bf16]
                             [--slot-fill case|zero] [--dk-dtype bf16|fp32] CASE_DIR

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

Backward (op=indexer pass=bwd): `indexer_backward_wrapper` (indexer_backward/api.py; SM90: the score-grad
kernel, then IndexerBackwardSm90) on the case's buffers as one batch of the dense (B, S, ...) layout it takes,
B = 1: index_q/weights = the whole Q buffer (S_q = its rows, pad rows included), index_k = the whole K buffer
(the all-gathered one under CP), topk_indices = the case's slots (K buffer rows: with B = 1 local ids are the
global ones; -1 stays -1), attn_score = the target and index_score = the prediction (fp32), grad_loss, and
sm_scale = the case's scale. The kernel's mean is grad_scale = loss_coeff / (B*S_q): the Q buffer's rows
(loss_mean=rows, loss_coeff 1); another loss_mean is passed as loss_coeff = S_q / its count, as a caller
with that mean would. Outputs: d_index_q and d_weights in bf16 (the only dtype the default backend
writes), d_index_k in --dk-dtype (bf16: the wrapper's default, the fp32 accumulator cast; fp32: the
accumulator itself), handed over pre-filled with a NaN marker so an element the kernel leaves keeps the
case's sentinel. Only the rows a framework takes back are copied: the segments' valid Q rows (dq, dw) and
the documents' K rows (dk); the dense layout has no pad rows, so the kernel computes every row and a
framework discards the pad rows' gradients. The kernel returns no loss: loss.npy keeps the sentinel.
  --slot-fill case (default): -1 slots' target and prediction as the case holds them (its poison);
  zero: 0 there, what a framework's masked softmax leaves. The score-grad kernel sums every slot of a row,
  the -1 slots included (target floored at e^-100, a slot counted where prediction >= e^-100).

Env: AO_SITE_DIR=folder is added with site.addsitedir before the frontend is imported (the device
campaign's unpacked wheels; their .pth puts the CuTe DSL on the path).
Exit 125 (skip) with the kernel's own reason for what it does not serve (checked before any import,
limits read from the frontend's source; see decline_reason), for op=sdpa, mask=none, and without CUDA.
Only numpy is imported at module level: the layout mapping is tested on CPU
(python/tests/adapters/test_cudnn_fe_indexer.py).
"""
import argparse
import sys
import time

import numpy as np

from .protocol import CaseMeta, add_site_dir, cuda_torch, log_timing, main, skip, stored_input
from .registry import Adapter

ADAPTER = Adapter(
    name='cudnn_fe_indexer', what="the cuDNN frontend's DSA indexer forward, top-k and indexer backward wrappers on padded THD",
    ops=("indexer",), passes=("fwd", "bwd"), requires=("torch", "cuda", "cudnn", "cuda.bindings"),
    wheels=("nvidia-cudnn-frontend==1.32.0", "nvidia-cutlass-dsl==4.8.1", "nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-core==4.8.1", "nvidia-cutlass-dsl-libs-cu13==4.8.1", "apache-tvm-ffi==0.1.15.post2"),
    kernel="kernel")

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
# indexer_backward (1.32.0): api.py IndexerBackward.check_support: index_q/weights/index_k bfloat16,
# attn_score/index_score float32, topk int32, SM90 or SM100+ (default SM100 backend: H = 32 or H >= 64);
# indexer_backward_sm90.py IndexerBackwardSm90: assert heads >= 64, assert topk % block_I == 0.
BWD_BLOCK_I = 128


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
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
    ap.add_argument("--slot-fill", default="case", choices=["case", "zero"],
                    help="pass=bwd: -1 slots' target/prediction as the case holds them, or 0")
    ap.add_argument("--dk-dtype", default="bf16", choices=["bf16", "fp32"],
                    help="pass=bwd: the d_index_k buffer's dtype")
    ap.add_argument("case_dir")
    return ap


def parse_args(argv):
    ap = arguments()
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
    if meta.get("pass", "fwd") == "bwd":
        return backward_decline_reason(meta, arch_major)
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


def backward_decline_reason(meta, arch_major=9):
    """Why indexer_backward_wrapper does not serve this case (its own words), or None."""
    if arch_major != 9 and arch_major < 10:
        return f"IndexerBackward requires SM90 or SM100+, found SM{arch_major}"
    if meta["dtype"] != "bf16":
        return f"index_q must be torch.bfloat16, got {meta['dtype']}"
    heads, topk = int(meta["dims"]["heads"]), int(meta["dims"]["topk"])
    if arch_major == 9 and heads < 64:
        return f"IndexerBackwardSm90: heads >= 64 (assert heads >= 64), got heads={heads}"
    if arch_major >= 10 and heads != 32 and heads < 64:
        return f"the default SM100 IndexerBackward requires H=32 or H>=64, got H={heads}"
    if arch_major == 9 and topk % BWD_BLOCK_I != 0:
        return f"IndexerBackwardSm90: topk % block_I == 0 (assert), got topk={topk}, block_I={BWD_BLOCK_I}"
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


# --- the backward (pass=bwd) ---------------------------------------------------------------------------
# A NaN payload no arithmetic produces (quiet NaNs come out as 0x7FC0): the bf16 gradient buffers handed to
# the kernel hold it, and an element that still holds it was not written. fp32 d_index_k: 0x7FA5A5A5.
MARKER_BF16 = 0x7FA5
MARKER_F32 = 0x7FA5A5A5
LOSS_MEANS = ("rows", "valid", "keyed", "sum")


class BackwardCall:
    """What indexer_backward_wrapper is handed for a case (numpy; B = 1, the whole buffers, see the top of
    the file), and which rows come back."""

    def __init__(self, case, inputs, slot_fill="case"):
        meta = case.meta
        loss_mean = meta.get("loss_mean", "rows")
        if loss_mean not in LOSS_MEANS:
            skip(f"{NAME}: loss_mean={loss_mean} is not mapped (known: {', '.join(LOSS_MEANS)})")
        self.q_bits = stored_input(case, inputs, "q")[None]      # (1, S_q, H, D) bf16 bits
        self.w_bits = stored_input(case, inputs, "w")[None]      # (1, S_q, H)
        self.k_bits = stored_input(case, inputs, "k")[None]      # (1, S_k, D)
        topk = np.array(inputs["topk"], dtype=np.int32)  # a copy: in process the inputs are the harness's memory
        self.topk = topk[None]
        target = np.array(inputs["target"], dtype=np.float32)
        predict = np.array(inputs["predict"], dtype=np.float32)
        if slot_fill == "zero":  # a framework's masked softmax: 0 in the -1 slots
            target[topk < 0] = 0.0
            predict[topk < 0] = 0.0
        self.target, self.predict = target[None], predict[None]
        self.grad_loss = np.asarray(inputs["grad_loss"], dtype=np.float32).reshape(1)
        self.sm_scale = float(meta["scale"])
        s_q = topk.shape[0]
        layout = CaseMeta.of(case)
        self.q_rows = np.array(layout.valid_q_rows(), dtype=np.int64)
        self.k_rows = np.array(layout.valid_kv_rows(), dtype=np.int64)
        keyed = int(sum(1 for r in self.q_rows if (topk[r] >= 0).any()))
        denom = {"rows": s_q, "valid": len(self.q_rows), "keyed": keyed, "sum": 1}[loss_mean]
        self.loss_coeff = float(s_q) / float(max(denom, 1))  # grad_scale = loss_coeff / S_q = 1 / denom

    def outputs(self, case, dq, dw, dk, written):
        """The kernel's gradients (float32 arrays of the dense shapes; written[name]: bool, False where the
        marker survived) on the case's rows: valid Q rows and the documents' K rows; the rest keeps the
        sentinel."""
        out = {n: case.output(n) for n in ("dq", "dw", "dk")}
        for name, val, rows in (("dq", dq[0], self.q_rows), ("dw", dw[0], self.q_rows), ("dk", dk[0], self.k_rows)):
            buf, wr = out[name], written[name][0]
            sel = buf[rows]
            sel[wr[rows]] = val[rows][wr[rows]]
            buf[rows] = sel
        return out


def backward(case, inputs, slot_fill="case", dk_dtype="bf16", launch=None):
    """pass=bwd: indexer_backward_wrapper on the case (see the top of the file). launch: the kernel call
    (None: cuDNN's on the GPU), call(BackwardCall, dk_dtype) -> (dq, dw, dk, written) as numpy."""
    call = BackwardCall(case, inputs, slot_fill)
    if len(call.q_rows) == 0 and len(call.k_rows) == 0:  # nothing of this rank is a token: nothing to send
        return {n: case.output(n) for n in ("dq", "dw", "dk")}
    if launch is None:
        torch = cuda_torch(NAME, decline_reason, case.meta)
        launch = lambda c, dt: launch_cudnn(torch, case, c, dt)  # noqa: E731
    dq, dw, dk, written = launch(call, dk_dtype)
    return call.outputs(case, dq, dw, dk, written)


def launch_cudnn(torch, case, call, dk_dtype):
    add_site_dir(NAME)
    import cuda.bindings.driver as cuda
    from cudnn import deepseek_sparse_attention as dsa
    got = getattr(sys.modules["cudnn"], "__version__", "?")
    dev = torch.device("cuda")
    bf = lambda a: _bf16(torch, a).to(dev)  # noqa: E731
    to_dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731 - keeps the dtype
    q, w, k = bf(call.q_bits), bf(call.w_bits), bf(call.k_bits)
    marked = lambda t, bits, dt: torch.full(t.shape, bits, dtype=dt, device=dev)  # noqa: E731
    dq = marked(q, MARKER_BF16, torch.int16).view(torch.bfloat16)
    dw = marked(w, MARKER_BF16, torch.int16).view(torch.bfloat16)
    if dk_dtype == "fp32":
        dk = marked(k, MARKER_F32, torch.int32).view(torch.float32)
    else:
        dk = marked(k, MARKER_BF16, torch.int16).view(torch.bfloat16)
    attn_score = to_dev(call.target)  # the kernel overwrites it with its grad_signal
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    try:
        dsa.indexer_backward_wrapper(q, w, k, attn_score, to_dev(call.predict), to_dev(call.topk), to_dev(call.grad_loss),
                                     sm_scale=call.sm_scale, loss_coeff=call.loss_coeff, d_index_q=dq, d_weights=dw,
                                     d_index_k=dk, stream=stream)
    except (AssertionError, NotImplementedError, ValueError) as e:  # the frontend's own refusals
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        skip(f"{NAME}: indexer_backward_wrapper declined the case: {msg}")
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    def host(t, bits, int_dt):
        return t.float().cpu().numpy(), (t.view(int_dt) != bits).cpu().numpy()
    (dq_v, dq_w), (dw_v, dw_w) = host(dq, MARKER_BF16, torch.int16), host(dw, MARKER_BF16, torch.int16)
    dk_v, dk_w = host(dk, MARKER_F32 if dk_dtype == "fp32" else MARKER_BF16,
                      torch.int32 if dk_dtype == "fp32" else torch.int16)
    log_timing(NAME, secs, case=case.meta["case"], pass_="bwd", frontend=got, dk_dtype=dk_dtype,
               loss_coeff=call.loss_coeff, s_q=int(call.topk.shape[1]), s_k=int(call.k_bits.shape[1]),
               torch=torch.__version__, device=torch.cuda.get_device_name())
    return dq_v, dw_v, dk_v, {"dq": dq_w, "dw": dw_w, "dk": dk_w}


def forward(case, inputs, offsets=True, seq_lens="row", deterministic=False, tie_break=0, w_dtype="fp32"):
    plan = ThdPlan(case.meta, offsets=offsets, seq_lens=seq_lens)
    topk_buf, scores_buf = case.output("topk"), case.output("scores")
    K = int(case.meta["dims"]["topk"])
    if len(plan.q_rows) == 0:  # every segment is padding: a framework sends nothing; all -1
        assemble(topk_buf, scores_buf, plan, None, None)
        return {"topk": topk_buf, "scores": scores_buf}
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
    q = _bf16(torch, stored_input(case, inputs, "q"))
    k = _bf16(torch, stored_input(case, inputs, "k"))
    w = _bf16(torch, stored_input(case, inputs, "w"))
    qi = torch.from_numpy(plan.q_rows)
    q_thd = q[qi].contiguous().to(dev)                                   # (total_q, H, 128) bf16
    k_thd = k[torch.from_numpy(plan.k_rows)][:, None, :].contiguous().to(dev)  # (total_k, 1, 128) bf16
    w_thd = w[qi].to(torch.float32 if w_dtype == "fp32" else torch.bfloat16).contiguous().to(dev)
    cu_q = torch.from_numpy(plan.cu_seqlens_q).to(dev)
    cu_k = torch.from_numpy(plan.cu_seqlens_k).to(dev)
    offs = torch.from_numpy(plan.q_causal_offsets).to(dev) if plan.q_causal_offsets is not None else None
    seq_lens_t = torch.from_numpy(plan.seq_lens).to(dev)
    kk = plan.top_k(K)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    scores = dsa.indexer_forward_wrapper(
        q_thd, k_thd, w_thd, ratio=int(case.meta["dims"]["ratio"]), sm_scale=case.scale, stream=stream,
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=plan.max_seqlen_q, max_seqlen_k=plan.max_seqlen_k,
        q_causal_offsets=offs)["scores"]                                 # (total_q, max_seqlen_k) fp32
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    res = dsa.indexer_top_k_wrapper(scores, seq_lens_t, top_k=kk, next_n=1, return_val=True, stream=stream,
                                    tie_break=tie_break, deterministic=deterministic)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    idx = res["indices"].cpu().numpy()
    vals = res["values"].float().cpu().numpy() if res["values"] is not None else None
    assemble(topk_buf, scores_buf, plan, idx, vals)
    log_timing(NAME, t2 - t0, case=case.meta["case"], forward_s=t1 - t0, offsets=int(offsets),
               seq_lens=seq_lens, deterministic=int(deterministic), tie_break=tie_break,
               w_dtype=w_dtype, total_q=int(len(plan.q_rows)), total_k=int(len(plan.k_rows)),
               max_seqlen_k=int(plan.max_seqlen_k), frontend=got,
               torch=torch.__version__, device=torch.cuda.get_device_name())
    return {"topk": topk_buf, "scores": scores_buf}


def kernel(case, inputs, bug="none", seq_lens="row", deterministic=False, tie_break=0, w_dtype="fp32",
           slot_fill="case", dk_dtype="bf16"):
    """cuDNN frontend's indexer on one case (an exec: CaseDir or an attn_oracle.Case): the outputs by name.
    The knobs are the command line's (see parse_args)."""
    reason = decline_reason(case.meta)  # before importing torch: the common declines cost nothing
    if reason:
        skip(reason)
    if case.meta.get("pass", "fwd") == "bwd":
        return backward(case, inputs, slot_fill=slot_fill, dk_dtype=dk_dtype)
    return forward(case, inputs, offsets=bug != "topleft-cp", seq_lens=seq_lens, deterministic=bool(deterministic),
                   tie_break=int(tie_break), w_dtype=w_dtype)


def run(argv):
    a = parse_args(argv)
    return main(kernel, [a.case_dir], bug="none" if a.offsets else "topleft-cp", seq_lens=a.seq_lens,
                deterministic=a.deterministic, tie_break=a.tie_break, w_dtype=a.w_dtype, slot_fill=a.slot_fill,
                dk_dtype=a.dk_dtype)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
