#!/usr/bin/env python3
"""`exec:` adapter: FlashAttention-4 (PyPI `flash-attn-4` 4.0.0b36, CuTe DSL; SM90 forward) on the case's
padded THD, called the way a framework calls it on padded packed sequences:
`flash_attn.cute.interface.flash_attn_varlen_func` on the whole Q/K/V buffers.

  usage: fa4_varlen.py CASE_DIR

The call (one FA4 sequence per query segment; with cp=1 that is one per document):
  * cu_seqlens_q[b] = the segment's first Q buffer row (with cp=1 the document's bound q offset),
    cu_seqlens_k[b] = its document's bound kv offset; the last entries are the buffer capacities.
    seqused_q[b] = the segment's valid rows, seqused_k[b] = its key extent (below). FA4 reads
    sequence b at cu_seqlens[b] with length seqused[b] (seqlen_info.py), so pad slots between the
    documents are never part of a sequence: the padded-THD contract (TE's cu_seqlens_padded).
  * Masks. FA4's causal mask is bottom-right aligned (mask.py: key col allowed iff
    col <= row + seqlen_k - seqlen_q), which puts row i of a sequence at position
    seqused_k - seqused_q + i. The oracle's row sits at pos0 + i, so the key extent is
    seqused_k = pos0 + valid: with cp=1 and mask=bottomright that is the document's kv_len (no crop);
    mask=topleft crops the keys at the segment's last row (a framework's top-left = bottom-right over
    keys [0, q_len)); under CP each zigzag chunk sees its document's keys up to its end. When
    pos0 + valid > kv_len (rows past the document's keys, top-left with q_len > kv_len) the case is
    not expressible and is skipped. Rows that see no key (pos0 + valid <= 0) get seqused_k = 0.
    Sliding window w: window_size = (w - 1, 0) (FlashAttention: keys in [p - left, p + right]; the
    oracle: s > p - w). mask=none: causal=False over the document's kv_len keys.
  * GQA: K/V are passed with their hkv heads (FA4 maps query head h to h // (hq/hkv)).
  * LSE: return_lse=True; FA4's LSE is the natural log ((row_max*scale*log2e + log2(sum)) * ln2 in
    softmax.py), shape (hq, total_q), -inf for rows with no key: what the oracle's `lse` holds.
Backward (pass=bwd): `_flash_attn_bwd`, the function FlashAttnVarlenFunc.backward calls, with the same
sequences, masks and windows, on the case's own O and LSE (the exact forward's, handed over as a kernel's
forward would: the backward is judged apart from FA4's forward) and dO; out/lse read in the Q buffer's
rows (see q_rows). dQ/dK/dV are handed to FA4 pre-filled with a NaN marker, so an element FA4 did not
write keeps the case's sentinel (pad slots are judged as left). CP chunks of one document go into
separate calls whose dK/dV the adapter sums in fp32 (BackwardPlan), as a CP framework does.
Outputs: only the rows the kernel wrote (seqused_q rows at cu_seqlens_q of each sequence) are copied
to the case's O/stats rows (o_row0/stats_row0); pad slots keep the sentinel. Nothing is cleaned.

Env: AO_SITE_DIR=folder is added with site.addsitedir before FA4 is imported (the device campaign's
unpacked wheels). Exit 125 (skip) with FA4's own reason for what it does not serve (checked before any
import, the limits read from interface.py; see decline_reason), for op=indexer and without CUDA; an
assertion FA4 raises on the call is a skip with its message too. Only numpy at module level: the
mapping is tested on CPU (python/tests/adapters/test_fa4_varlen.py).
"""
import argparse
import sys
import time

import numpy as np

from .protocol import add_site_dir, cuda_torch, log_timing, main, skip, stored_input, unmapped_window_reason
from .registry import Adapter

ADAPTER = Adapter(
    name='fa4_varlen', what="FlashAttention-4's varlen forward and backward (CuTe DSL) on padded THD",
    ops=("sdpa",), passes=("fwd", "bwd"), requires=("torch", "cuda", "flash_attn.cute"),
    wheels=("flash-attn-4==4.0.0b36", "quack-kernels==0.6.5", "torch-c-dlpack-ext==0.1.5", "nvidia-cutlass-dsl==4.8.1", "nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-core==4.8.1", "nvidia-cutlass-dsl-libs-cu13==4.8.1", "apache-tvm-ffi==0.1.15.post2"),
    kernel="kernel")

NAME = "fa4_varlen"
FA4_VERSION = "4.0.0b36"


def decline_reason(meta, arch_major=9):
    """Why FA4's forward does not serve this case (its own words, flash_attn/cute/interface.py), or None."""
    if meta["op"] != "sdpa":
        return f"{NAME}: serves op=sdpa only"
    if unmapped_window_reason(meta, NAME):
        return unmapped_window_reason(meta, NAME)
    if arch_major not in (8, 9, 10, 11, 12):
        return "Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, 12.x"
    if meta.get("pass", "fwd") == "bwd" and arch_major not in (9, 10, 11, 12):  # _flash_attn_bwd
        return "Unsupported compute capability. Supported: 9.x, 10.x, 11.x, 12.x"
    if meta["dtype"] not in ("bf16", "fp16"):  # _flash_attn_fwd: assert v.dtype in [...]
        return "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2"
    dims = meta["dims"]
    d, dv = int(dims["dim"]), int(dims["dim_v"])
    hq, hkv = int(dims["hq"]), int(dims["hkv"])
    if hq % hkv != 0:
        return "num_head must be divisible by num_head_kv"
    align = 8  # 16 // element_size for fp16/bf16
    if arch_major == 9:  # _validate_head_dims
        if not (8 <= d <= 256 and 8 <= dv <= 256 and d % align == 0 and dv % align == 0):
            return (f"(head_dim, head_dim_v)=({d}, {dv}) is not supported on SM90. "
                    f"head_dim and head_dim_v must be between 8 and 256 and divisible by {align}.")
    elif arch_major in (10, 11):
        ok = ((8 <= d <= 128 and 8 <= dv <= 128) or (d, dv) == (192, 128) or (d, dv) == (256, 256)
              or ((d == 64 or d == dv) and dv == 512))
        if not (ok and d % align == 0 and dv % align == 0):
            return (f"(head_dim, head_dim_v)=({d}, {dv}) is not supported on SM100/SM110. head_dim and "
                    f"head_dim_v must be between 8 and 128 and divisible by {align}, or (192, 128) for "
                    f"DeepSeek, or (256, 256) for hd256.")
    return None


class VarlenPlan:
    """The varlen call for a case: per FA4 sequence its buffer offsets and used lengths.

    seqs: the case's segments in order (one FA4 sequence each; pad-only segments have seqused_q = 0).
    reason: why the case's mask is not expressible this way (None when it is).
    """

    def __init__(self, meta, segments=None):
        docs, rows = meta["docs"], meta["rows"]
        mask = meta["mask"]
        self.causal = mask != "none"
        w = int(meta["window"])
        self.window_size = (w - 1, 0) if (self.causal and w > 0) else (None, None)
        self.reason = None
        self.seqs = list(meta["segments"] if segments is None else segments)
        cq, ck, uq, uk = [], [], [], []
        for s in self.seqs:
            d = docs[int(s["doc"])]
            valid, pos0, kv_len = int(s["valid"]), int(s["pos0"]), int(d["kv_len"])
            if not self.causal:
                key_hi = kv_len
            else:
                key_hi = max(pos0 + valid, 0)
                if key_hi > kv_len and valid > 0 and self.reason is None:
                    self.reason = (f"{NAME}: rows at positions {pos0}..{pos0 + valid - 1} of a document with "
                                   f"{kv_len} keys: FA4's bottom-right causal cannot place rows past the keys")
            cq.append(int(s["row0"]))
            ck.append(int(d["kv_off"]))
            uq.append(valid)
            uk.append(min(key_hi, kv_len))
        self.cu_seqlens_q = np.array(cq + [int(rows["q"])], dtype=np.int32)
        self.cu_seqlens_k = np.array(ck + [int(rows["kv"])], dtype=np.int32)
        self.seqused_q = np.array(uq, dtype=np.int32)
        self.seqused_k = np.array(uk, dtype=np.int32)
        self.max_seqlen_q = int(max(uq, default=0))
        self.max_seqlen_k = int(max(uk, default=0))

    def copies(self):
        """(src_row0, o_row0, stats_row0, n) per sequence: the rows the kernel writes and where they go."""
        return [(int(s["row0"]), int(s["o_row0"]), int(s["stats_row0"]), int(s["valid"]))
                for s in self.seqs if int(s["valid"]) > 0]


def assemble(o_buf, lse_buf, plan, out, lse):
    """Copies the kernel's rows (out: (total_q, hq, dv), lse: (total_q, hq)) into the case's buffers."""
    for src, o0, l0, n in plan.copies():
        o_buf[o0:o0 + n] = out[src:src + n]
        lse_buf[l0:l0 + n] = lse[src:src + n]
    return o_buf, lse_buf


# --- the backward (pass=bwd) ---------------------------------------------------------------------------
# A NaN payload of the dtype that no arithmetic produces (quiet NaNs come out as 0x7FC0 / 0x7E00): the
# gradient buffers handed to FA4 hold it, and an element that still holds it was not written by the kernel.
MARKER = {"bf16": 0x7FA5, "fp16": 0x7E5A}
POISON_BITS = {"bf16": {"nan": 0x7FC0, "inf": 0x7F80, "large": 0x7F7F, "none": 0},
               "fp16": {"nan": 0x7E00, "inf": 0x7C00, "large": 0x7BFF, "none": 0}}
POISON_F32 = {"nan": np.nan, "inf": np.inf, "large": np.finfo(np.float32).max, "none": 0.0}


def raw_fill(raw, dtype, poison):
    """The case's poison as an element of `raw` (an input as stored: bf16 bit patterns as uint16, fp16 as
    float16), for the rows q_rows adds."""
    bits = np.array(POISON_BITS[dtype][poison], dtype=np.uint16)
    return bits if raw.dtype == np.uint16 else bits.view(raw.dtype)


class BackwardPlan:
    """The backward's FA4 calls. A call writes dK/dV per sequence (it does not add to what the buffer
    holds), and CP's zigzag chunks of one document are two sequences over the same K/V rows; so the
    segments go into waves of at most one segment per document, one call each, and the adapter sums the
    waves' dK/dV in fp32: what a CP framework does with its chunks' partial gradients.

    cropped: (lo, hi) K/V buffer rows of a document past every launched sequence's key extent (the keys
    the mask mapping cut off: top-left as bottom-right, a CP chunk's causal end). No call covers them; their
    gradient is 0, as in a framework's dK/dV buffer, which starts zeroed."""

    def __init__(self, meta):
        waves = []
        for s in meta["segments"]:
            j = 0
            while j < len(waves) and any(int(t["doc"]) == int(s["doc"]) for t in waves[j]):
                j += 1
            if j == len(waves):
                waves.append([])
            waves[j].append(s)
        self.waves = [VarlenPlan(meta, w) for w in waves]
        self.reason = next((w.reason for w in self.waves if w.reason), None)
        self.cropped = []
        for i, d in enumerate(meta["docs"]):
            ext = [int(w.seqused_k[b]) for w in self.waves for b, s in enumerate(w.seqs)
                   if int(s["doc"]) == i and int(s["valid"]) > 0]
            lo, hi = int(d["kv_off"]) + max(ext, default=0), int(d["kv_off"]) + int(d["kv_len"])
            if lo < hi:
                self.cropped.append((lo, hi))


def q_rows(a, meta, key, fill):
    """`a` (a segment's rows at its `key` row: o_row0 or stats_row0) in the Q buffer's rows, where FA4's
    backward reads out and lse: `a` itself when the two layouts coincide (its pad slots handed over as
    they are), else a copy whose rows outside the segments hold `fill` (the case's poison)."""
    rows_q = int(meta["rows"]["q"])
    segs = meta["segments"]
    if a.shape[0] == rows_q and all(int(s[key]) == int(s["row0"]) for s in segs):
        return a
    out = np.full((rows_q,) + a.shape[1:], fill, dtype=a.dtype)
    for s in segs:
        n, src, dst = int(s["valid"]), int(s[key]), int(s["row0"])
        out[dst:dst + n] = a[src:src + n]
    return out


def merge_waves(outputs, parts, cropped):
    """outputs: name -> the case's sentinel buffer (float32); parts: per call, name -> (values as float32,
    written: bool). Every written element is summed over the calls (dQ's rows belong to one call each);
    the cropped K/V rows' unwritten elements are 0; every other element keeps the sentinel."""
    for name, buf in outputs.items():
        seen = np.zeros(buf.shape, dtype=bool)
        acc = np.zeros(buf.shape, dtype=np.float32)
        for part in parts:
            val, wr = part[name]
            acc[wr] += val[wr]
            seen |= wr
        if name in ("dk", "dv"):
            for lo, hi in cropped:
                seen[lo:hi] = True  # acc is 0 where no call wrote
        buf[seen] = acc[seen]
    return outputs


def run_backward(case, inputs, torch):
    """pass=bwd: FA4's varlen backward (`_flash_attn_bwd`, what FlashAttnVarlenFunc.backward calls) on the
    case's own O and LSE (the exact forward's, handed over as a kernel's forward would), so the backward is
    judged apart from FA4's forward; dQ/dK/dV in the dtype into marker-filled buffers (see MARKER)."""
    from flash_attn.cute.interface import _flash_attn_bwd
    plan = BackwardPlan(case.meta)
    if plan.reason:
        skip(plan.reason)
    meta, dtype = case.meta, case.meta["dtype"]
    outputs = {n: case.output(n) for n in ("dq", "dk", "dv")}
    waves = [w for w in plan.waves if w.copies()]  # run_bwd launches nothing when no wave has a row
    dev = torch.device("cuda")
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
    q, k, v, dout = (_tensor(torch, case, inputs, n).to(dev) for n in ("q", "k", "v", "dout"))
    poison = meta.get("poison", "nan")
    o_stored = stored_input(case, inputs, "o")
    o_raw = np.ascontiguousarray(q_rows(o_stored, meta, "o_row0", raw_fill(o_stored, dtype, poison)))
    out = torch.from_numpy(o_raw.view(np.int16)).view(tdt).to(dev)
    lse_q = q_rows(np.asarray(inputs["lse"], dtype=np.float32), meta, "stats_row0", POISON_F32[poison])
    lse = torch.from_numpy(np.ascontiguousarray(lse_q.T)).to(dev)  # (hq, total_q), as FA4 keeps it
    i32 = lambda x: torch.from_numpy(x).to(dev)  # noqa: E731
    parts, secs = [], 0.0
    for w in waves:
        bufs = {n: torch.full(t.shape, MARKER[dtype], dtype=torch.int16, device=dev).view(tdt)
                for n, t in (("dq", q), ("dk", k), ("dv", v))}
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            _flash_attn_bwd(q, k, v, out, dout, lse, softmax_scale=case.scale, causal=w.causal,
                            window_size_left=w.window_size[0], window_size_right=w.window_size[1],
                            cu_seqlens_q=i32(w.cu_seqlens_q), cu_seqlens_k=i32(w.cu_seqlens_k),
                            seqused_q=i32(w.seqused_q), seqused_k=i32(w.seqused_k),
                            max_seqlen_q=w.max_seqlen_q, max_seqlen_k=w.max_seqlen_k,
                            dq=bufs["dq"], dk=bufs["dk"], dv=bufs["dv"])
        except (AssertionError, NotImplementedError, ValueError) as e:  # FA4's own refusals
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            skip(f"{NAME}: _flash_attn_bwd declined the case: {msg}")
        torch.cuda.synchronize()
        secs += time.perf_counter() - t0
        parts.append({n: (b.float().cpu().numpy(), (b.view(torch.int16) != MARKER[dtype]).cpu().numpy())
                      for n, b in bufs.items()})
    return merge_waves(outputs, parts, plan.cropped), secs


def _tensor(torch, case, inputs, name):
    """The case's input with its exact values, in its dtype (bf16 from its bit patterns)."""
    raw = np.ascontiguousarray(stored_input(case, inputs, name))
    if case.meta["dtype"] == "bf16":
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw)


def import_fa4(case):
    """torch with its CUDA device (else a skip) and FA4 importable; returns (torch, FA4's version)."""
    torch = cuda_torch(NAME, decline_reason, case.meta)
    add_site_dir(NAME)
    import flash_attn.cute.interface  # noqa: F401 - the import error, if any, is the adapter's error
    try:
        import importlib.metadata as md
        got = md.version("flash-attn-4")
    except Exception:  # noqa: BLE001 - a version note only
        got = "?"
    if got != FA4_VERSION:  # the limits in decline_reason were read from FA4_VERSION's source
        print(f"{NAME}: note: flash-attn-4 {got} imported, the adapter was written for {FA4_VERSION}", file=sys.stderr)
    return torch, got


def backward(case, inputs):
    plan = BackwardPlan(case.meta)  # the mapping's declines before any import
    if plan.reason:
        skip(plan.reason)
    if not any(w.copies() for w in plan.waves):
        return merge_waves({n: case.output(n) for n in ("dq", "dk", "dv")}, [], plan.cropped)
    torch, got = import_fa4(case)
    outputs, secs = run_backward(case, inputs, torch)
    log_timing(NAME, secs, case=case.meta["case"], fa4=got, calls=len(plan.waves), torch=torch.__version__,
               device=torch.cuda.get_device_name(), pass_="bwd")
    return outputs


def kernel(case, inputs):
    """FA4 on one case (an exec: CaseDir or an attn_oracle.Case): the outputs by name."""
    reason = decline_reason(case.meta)  # before importing torch: the common declines cost nothing
    if reason:
        skip(reason)
    if case.meta.get("pass", "fwd") == "bwd":
        return backward(case, inputs)
    plan = VarlenPlan(case.meta)
    if plan.reason:
        skip(plan.reason)
    o_buf, lse_buf = case.output("o"), case.output("lse")
    if not plan.copies():  # no valid row: a framework launches nothing
        return {"o": o_buf, "lse": lse_buf}
    torch, got = import_fa4(case)
    from flash_attn.cute.interface import flash_attn_varlen_func

    dev = torch.device("cuda")
    q, k, v = (_tensor(torch, case, inputs, n).to(dev) for n in ("q", "k", "v"))
    i32 = lambda x: torch.from_numpy(x).to(dev)  # noqa: E731
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    try:
        out, lse = flash_attn_varlen_func(
            q, k, v, cu_seqlens_q=i32(plan.cu_seqlens_q), cu_seqlens_k=i32(plan.cu_seqlens_k),
            seqused_q=i32(plan.seqused_q), seqused_k=i32(plan.seqused_k),
            max_seqlen_q=plan.max_seqlen_q, max_seqlen_k=plan.max_seqlen_k, softmax_scale=case.scale,
            causal=plan.causal, window_size=plan.window_size, return_lse=True)
    except (AssertionError, NotImplementedError, ValueError) as e:  # FA4's own refusals
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        skip(f"{NAME}: flash_attn_varlen_func declined the case: {msg}")
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    out_np = out.float().cpu().numpy()
    lse_np = lse.float().transpose(0, 1).cpu().numpy()  # (hq, total_q) -> (total_q, hq)
    assemble(o_buf, lse_buf, plan, out_np, lse_np)
    log_timing(NAME, secs, case=case.meta["case"], fa4=got, n_seqs=len(plan.seqs),
               max_seqlen_q=plan.max_seqlen_q, max_seqlen_k=plan.max_seqlen_k, causal=plan.causal,
               window=list(plan.window_size), torch=torch.__version__, device=torch.cuda.get_device_name())
    return {"o": o_buf, "lse": lse_buf}


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser(prog=NAME)
    ap.add_argument("case_dir")
    return ap


def run(argv):
    a = arguments().parse_args(argv)
    return main(kernel, [a.case_dir])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
