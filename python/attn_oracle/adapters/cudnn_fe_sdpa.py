#!/usr/bin/env python3
"""`exec:` adapter: the cuDNN frontend's own Python SDPA forward (nvidia-cudnn-frontend 1.32.0: the FROST /
CuTe DSL engines of `cudnn/sdpa/fwd/engines.py`, ranked with the cuDNN backend's engines by the Python graph
API `cudnn.pygraph`), called on the case's padded THD the way TransformerEngine calls it.

  usage: cudnn_fe_sdpa.py [--path graph|wrapper_sm90|wrapper_sm80] [--engine auto|frost|backend]
                          [--bug none|derived-offsets] [--offset-units elements|tokens]
                          [--offset-dtype int64|int32] CASE_DIR

--path graph (default): one `cudnn.pygraph` SDPA over all documents (B = the case's documents):
  * Q/K/V/O are (B, H, S_max, D) descriptors over the whole buffers with the token-major THD strides
    (S_max*H*D, D, H*D, 1) and a (B+1, 1, 1, 1) ragged offset each, Stats (B, Hq, S_max, 1) fp32 with
    strides (S_max*Hq, 1, Hq, 1) and its own ragged offset: TransformerEngine's padded THD binding, one
    offset array per tensor from its `cu_seqlens_padded` (the case's q/kv/o/stats offsets, capacity last).
    --offset-units elements (TE's binding): offset = row * the tensor's row elements (H*D, Hq for Stats),
    multiplier 1; tokens: offset = row with ragged_offset_multiplier = the row elements (the 9.24+ form).
  * seq_len_q / seq_len_kv (B, 1, 1, 1) int32 = the documents' q_len / kv_len, use_padding_mask=True.
  * Masks: topleft = use_causal_mask, bottomright = use_causal_mask_bottom_right (cuDNN aligns the
    diagonal to the end of the keys, which is the oracle's shift kv_len - q_len), window w > 0 =
    sliding_window_length w (cuDNN's length convention: keys s > p - w); mask=none: no mask.
  * Stats: generate_stats=True, natural log (the oracle's lse).
  * --engine auto: the graph's own walk (build_plans from the top of graph.plans); frost: the first plan of
    graph.plans whose engine is a python (FROST) engine, pinned with select_plan; backend: the first cuDNN
    backend plan, pinned. Which one served (FROST engine name with its knobs, or the backend plan's name and
    engine id) goes to $AO_TIMING_LOG and stderr.
  * O and Stats are the case's own buffers, filled with the sentinel (O: the sentinel's bf16/fp16 bits) and
    handed to the kernel whole: what the kernel wrote is returned, pad slots keep the sentinel unless the
    kernel wrote them.
  * --bug derived-offsets (the seed's defect, cpu-bug:derived-offsets, planted): every ragged offset is the
    packed prefix of the lengths (cu_seqlens, not cu_seqlens_padded), so the oracle must catch it here.
--path wrapper_sm90: `cudnn.sdpa.fwd.sdpa_fwd_wrapper_dsl_sm90` (BHSD with per-batch seq_q_lens /
  seq_kv_lens): the documents are gathered into a zero-padded (B, H, S_max, D) batch, the valid rows of its
  O / LSE are scattered back to the case's O / Stats rows.
--path wrapper_sm80: `cudnn.sdpa.fwd.sdpa_fwd_wrapper_sm80` THD (cum_seqlen_q/k + max_s_q): its THD leg
  takes no per-sequence lengths (lengths = adjacent differences of cum_seqlen), so the valid rows are
  packed into [1, T, H, D] buffers and the output rows scattered back.
  The wrappers allocate their outputs with torch.empty: only the rows they compute are copied.

Declines are skips (exit 125) with the frontend's own words: what the graph API raises when no plan serves
(or the pinned engine kind has none: the python engines' check_support reasons, the backend's decline),
what a wrapper raises. Checked before any import: op=indexer, CP (cuDNN's sdpa takes no per-sequence causal
offset), empty_rows=posinf (cuDNN's empty rows are LSE = -inf), two-sided bands and FlashAttention's window
convention (not mapped here).
Env: AO_SITE_DIR (the device campaign's unpacked wheels, added before the frontend is imported).
Only numpy at module level: the binding is tested on CPU (python/tests/adapters/test_cudnn_fe_sdpa.py).
"""
import argparse
import sys
import time

import numpy as np

from .protocol import CaseDir, add_site_dir, cuda_torch, log_timing, skip, unmapped_window_reason
from .registry import Adapter

ADAPTER = Adapter(
    name='cudnn_fe_sdpa', what="the cuDNN frontend's SDPA on padded THD: its graph (FROST or backend engine) or its SM90/SM80 wrappers",
    ops=("sdpa",), passes=("fwd",), requires=("torch", "cuda", "cudnn"),
    wheels=("nvidia-cudnn-frontend==1.32.0", "nvidia-cutlass-dsl==4.8.1", "nvidia-cutlass-dsl-libs-base==4.8.1", "nvidia-cutlass-dsl-libs-core==4.8.1", "nvidia-cutlass-dsl-libs-cu13==4.8.1", "apache-tvm-ffi==0.1.15.post2"),
    kernel="")

NAME = "cudnn_fe_sdpa"
FRONTEND_VERSION = "1.32.0"
SENTINEL_BITS = 0x7FE5A5A5  # the oracle's output sentinel (external.h)
PATHS = ("graph", "wrapper_sm90", "wrapper_sm80")
ENGINES = ("auto", "frost", "backend")
BUGS = ("none", "derived-offsets")


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser(prog=NAME)
    ap.add_argument("--path", default="graph", choices=PATHS)
    ap.add_argument("--engine", default="auto", choices=ENGINES,
                    help="graph path: let the graph choose, or pin its first FROST / backend plan")
    ap.add_argument("--bug", default="none", choices=BUGS,
                    help="derived-offsets: bind the packed prefix of the lengths as every ragged offset "
                         "(cpu-bug:derived-offsets, the seed's defect)")
    ap.add_argument("--offset-units", default="elements", choices=("elements", "tokens"),
                    help="ragged offsets in elements (multiplier 1, TE) or token rows with the multiplier")
    ap.add_argument("--offset-dtype", default="int64", choices=("int64", "int32"))
    ap.add_argument("case_dir")
    return ap


def parse_args(argv):
    ap = arguments()
    a = ap.parse_args(argv)
    if a.path != "graph" and (a.engine != "auto" or a.offset_units != "elements" or a.offset_dtype != "int64"):
        ap.error(f"--engine/--offset-units/--offset-dtype apply to --path graph only (got --path {a.path})")
    return a


def decline_reason(meta):
    """Why this adapter cannot express the case (checked before any import), or None."""
    if meta["op"] != "sdpa":
        return f"{NAME}: serves op=sdpa only"
    if int(meta["cp"]["size"]) > 1:
        return (f"{NAME}: cp={meta['cp']['size']}: cuDNN's sdpa takes no per-sequence causal offset, so CP "
                f"chunks are not expressible")
    if meta.get("empty_rows", "neginf") != "neginf":
        return (f"{NAME}: empty_rows={meta['empty_rows']}: cuDNN writes LSE = -inf for a row with no allowed key, "
                f"not this convention")
    return unmapped_window_reason(meta, NAME)


def mask_args(meta):
    """The sdpa() mask keywords for the case's mask and window."""
    mask, w = meta["mask"], int(meta["window"])
    kw = {}
    if mask == "topleft":
        kw["use_causal_mask"] = True
    elif mask == "bottomright":
        kw["use_causal_mask_bottom_right"] = True
    if mask != "none" and w > 0:
        kw["sliding_window_length"] = w
    return kw


class GraphPlan:
    """The padded-THD graph binding of a case: dims, strides, lengths and the five ragged offsets."""

    def __init__(self, meta, bug="none", units="elements"):
        d = meta["dims"]
        self.hq, self.hkv, self.d, self.dv = int(d["hq"]), int(d["hkv"]), int(d["dim"]), int(d["dim_v"])
        docs, rows = meta["docs"], meta["rows"]
        self.b = len(docs)
        self.q_lens = np.array([int(x["q_len"]) for x in docs], dtype=np.int32)
        self.kv_lens = np.array([int(x["kv_len"]) for x in docs], dtype=np.int32)
        # S_max: the max_seqlen a framework hands the kernel (the case's max_seqlen_q/kv, >= every length).
        ms = meta.get("max_seqlen", {})
        self.s_q = max(int(self.q_lens.max(initial=0)), int(ms.get("q", 0)), 1)
        self.s_kv = max(int(self.kv_lens.max(initial=0)), int(ms.get("kv", 0)), 1)
        self.rows = {n: int(rows[n]) for n in ("q", "kv", "o", "stats")}
        # Row elements of each THD tensor (the token stride): what an element offset is a multiple of.
        self.row_elems = {"q": self.hq * self.d, "k": self.hkv * self.d, "v": self.hkv * self.dv,
                          "o": self.hq * self.dv, "stats": self.hq}
        if bug == "derived-offsets":
            cq = np.concatenate([[0], np.cumsum(self.q_lens, dtype=np.int64)])
            ck = np.concatenate([[0], np.cumsum(self.kv_lens, dtype=np.int64)])
            tok = {"q": cq, "k": ck, "v": ck, "o": cq, "stats": cq}
        else:
            q = [int(x["q_off"]) for x in docs] + [self.rows["q"]]
            kv = [int(x["kv_off"]) for x in docs] + [self.rows["kv"]]
            o = [int(x["o_off"]) for x in docs] + [self.rows["o"]]
            st = [int(x["stats_off"]) for x in docs] + [self.rows["stats"]]
            tok = {"q": q, "k": kv, "v": kv, "o": o, "stats": st}
        self.token_offsets = {n: np.asarray(v, dtype=np.int64) for n, v in tok.items()}
        self.units = units
        if units == "elements":
            self.offsets = {n: v * self.row_elems[n] for n, v in self.token_offsets.items()}
            self.multiplier = {n: 1 for n in tok}
        else:
            self.offsets = dict(self.token_offsets)
            self.multiplier = dict(self.row_elems)

    def dim(self, name):
        return {"q": [self.b, self.hq, self.s_q, self.d], "k": [self.b, self.hkv, self.s_kv, self.d],
                "v": [self.b, self.hkv, self.s_kv, self.dv], "o": [self.b, self.hq, self.s_q, self.dv],
                "stats": [self.b, self.hq, self.s_q, 1]}[name]

    def stride(self, name):
        """Token-major THD strides (batch stride: S_max rows, a placeholder the ragged offset replaces)."""
        _, h, s, dd = self.dim(name)
        if name == "stats":
            return [s * h, 1, h, 1]
        return [s * h * dd, dd, h * dd, 1]

    def element_offset(self, name, b):
        """Where the binding tells the kernel document b of `name` starts, in elements."""
        return int(self.offsets[name][b]) * int(self.multiplier[name])


def fill_bits(dtype_name):
    """The output sentinel in O's storage dtype: its float32 bits, or their upper half for bf16 / fp16
    (bf16: the same NaN truncated; fp16: a quiet NaN with the sentinel's high payload bits)."""
    if dtype_name == "bf16":
        return np.uint16(SENTINEL_BITS >> 16)
    if dtype_name == "fp16":
        return np.uint16(0x7E5A)
    return np.uint32(SENTINEL_BITS)


def restore_sentinel(o_bits, o_float, sentinel_f32, dtype_name):
    """O as read back (its storage bits and float32 values) -> the case's float32 O: elements that still hold
    the fill bits get the oracle's sentinel back (the kernel did not write them), the rest are the kernel's."""
    untouched = o_bits == fill_bits(dtype_name)
    return np.where(untouched, sentinel_f32, o_float).astype(np.float32)


class WrapperPlan:
    """The wrappers' copies: per document its Q rows, K/V rows and where its output rows go."""

    def __init__(self, meta):
        self.docs = [(int(x["q_off"]), int(x["kv_off"]), int(x["o_off"]), int(x["stats_off"]),
                      int(x["q_len"]), int(x["kv_len"])) for x in meta["docs"]]
        self.q_lens = np.array([x[4] for x in self.docs], dtype=np.int32)
        self.kv_lens = np.array([x[5] for x in self.docs], dtype=np.int32)
        self.s_q = max(int(self.q_lens.max(initial=0)), 1)
        self.s_kv = max(int(self.kv_lens.max(initial=0)), 1)
        self.cu_q = np.concatenate([[0], np.cumsum(self.q_lens, dtype=np.int64)]).astype(np.int32)
        self.cu_kv = np.concatenate([[0], np.cumsum(self.kv_lens, dtype=np.int64)]).astype(np.int32)

    def batch(self, buf, which):
        """(B, S_max, H, D) zero-padded gather of each document's rows (which: 'q' or 'kv')."""
        s = self.s_q if which == "q" else self.s_kv
        out = np.zeros((len(self.docs), s) + buf.shape[1:], dtype=buf.dtype)
        for b, (qo, ko, _, _, ql, kl) in enumerate(self.docs):
            off, n = (qo, ql) if which == "q" else (ko, kl)
            out[b, :n] = buf[off:off + n]
        return out

    def packed(self, buf, which):
        """(T, H, D) valid rows of every document, packed in document order."""
        parts = [buf[(qo if which == "q" else ko):(qo if which == "q" else ko) + (ql if which == "q" else kl)]
                 for qo, ko, _, _, ql, kl in self.docs]
        return np.concatenate(parts) if parts else buf[:0]

    def scatter_batch(self, o_buf, lse_buf, o_b, lse_b):
        """o_b (B, S, Hq, Dv), lse_b (B, S, Hq) -> the case's O / Stats rows (valid rows only)."""
        for b, (_, _, oo, so, ql, _) in enumerate(self.docs):
            o_buf[oo:oo + ql] = o_b[b, :ql]
            lse_buf[so:so + ql] = lse_b[b, :ql]
        return o_buf, lse_buf

    def scatter_packed(self, o_buf, lse_buf, o_p, lse_p):
        """o_p (T, Hq, Dv), lse_p (T, Hq) packed in document order -> the case's O / Stats rows."""
        for b, (_, _, oo, so, ql, _) in enumerate(self.docs):
            t0 = int(self.cu_q[b])
            o_buf[oo:oo + ql] = o_p[t0:t0 + ql]
            lse_buf[so:so + ql] = lse_p[t0:t0 + ql]
        return o_buf, lse_buf


def first_line(exc):
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0] if msg else ''}".strip()


def pick_plan(kinds, engine):
    """Index into graph.plans for --engine (kinds: per plan 'frost' or 'backend'); None = let the graph walk."""
    if engine == "auto":
        return None
    for i, k in enumerate(kinds):
        if k == engine:
            return i
    return -1


# --- device side ------------------------------------------------------------------------------------------
def _torch_input(torch, case, name):
    raw = np.ascontiguousarray(case.raw_input(name))
    if case.meta["dtype"] == "bf16":
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw)


def _o_fill(torch, shape, dtype_name, dev):
    bits = fill_bits(dtype_name)
    if dtype_name in ("bf16", "fp16"):
        t = torch.full(shape, int(np.int16(bits.view(np.int16))), dtype=torch.int16, device=dev)
        return t.view(torch.bfloat16 if dtype_name == "bf16" else torch.float16)
    return torch.full(shape, int(np.int32(bits.view(np.int32))), dtype=torch.int32, device=dev).view(torch.float32)


def _o_back(torch, o, case):
    """O tensor on device -> (storage bits, float32 values) on host."""
    dt = case.meta["dtype"]
    if dt in ("bf16", "fp16"):
        return o.view(torch.int16).cpu().numpy().view(np.uint16), o.float().cpu().numpy()
    return o.view(torch.int32).cpu().numpy().view(np.uint32), o.cpu().numpy()


def frontend_version(cudnn):
    got = getattr(cudnn, "__version__", "?")
    if got != FRONTEND_VERSION:
        print(f"{NAME}: note: cudnn frontend {got} imported, the adapter was written for {FRONTEND_VERSION}",
              file=sys.stderr)
    return got


def run_graph(a, case, torch, cudnn):
    meta = case.meta
    plan = GraphPlan(meta, a.bug, units=a.offset_units)
    dev = torch.device("cuda")
    io = {"bf16": cudnn.data_type.BFLOAT16, "fp16": cudnn.data_type.HALF, "fp32": cudnn.data_type.FLOAT}[meta["dtype"]]
    odt = cudnn.data_type.INT64 if a.offset_dtype == "int64" else cudnn.data_type.INT32
    from cudnn.engines.base import decline_types
    from cudnn.engines.engine_ids import is_python_engine
    declines = tuple(decline_types())
    handle = cudnn.create_handle()
    try:
        g = cudnn.pygraph(handle=handle, io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT)
        rag = {n: g.tensor(name=f"ragged_{n}", dim=[plan.b + 1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=odt)
               for n in ("q", "k", "v", "o", "stats")}
        t = {}
        for n in ("q", "k", "v"):
            t[n] = g.tensor(name=n, dim=plan.dim(n), stride=plan.stride(n), data_type=io, ragged_offset=rag[n],
                            ragged_offset_multiplier=plan.multiplier[n])
        sq = g.tensor(name="seq_len_q", dim=[plan.b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=cudnn.data_type.INT32)
        skv = g.tensor(name="seq_len_kv", dim=[plan.b, 1, 1, 1], stride=[1, 1, 1, 1], data_type=cudnn.data_type.INT32)
        try:
            o_t, st_t = g.sdpa(name="sdpa", q=t["q"], k=t["k"], v=t["v"], generate_stats=True, attn_scale=case.scale,
                               use_padding_mask=True, seq_len_q=sq, seq_len_kv=skv, **mask_args(meta))
            o_t.set_output(True).set_dim(plan.dim("o")).set_stride(plan.stride("o")).set_data_type(io)
            o_t.set_ragged_offset(rag["o"])
            st_t.set_output(True).set_dim(plan.dim("stats")).set_stride(plan.stride("stats"))
            st_t.set_data_type(cudnn.data_type.FLOAT).set_ragged_offset(rag["stats"])
            if a.offset_units == "tokens":
                o_t.set_ragged_offset_multiplier(plan.multiplier["o"])
                st_t.set_ragged_offset_multiplier(plan.multiplier["stats"])
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        except declines as e:
            skip(f"{NAME}: the graph declined: {first_line(e)}")
        except (ValueError, RuntimeError) as e:  # the frontend's validation of the graph
            skip(f"{NAME}: the graph was rejected: {first_line(e)}")
        cfgs = g.plans
        kinds = ["frost" if is_python_engine(c.engine_id) else "backend" for c in cfgs]
        names = []
        for i in range(len(cfgs)):
            try:
                names.append(g.get_plan_name_at_index(i))
            except Exception as e:  # noqa: BLE001 - a name only
                names.append(f"? ({first_line(e)})")
        print(f"{NAME}: plans: " + ", ".join(f"{i}:{k}:{n}[id {c.engine_id}]" for i, (k, n, c) in
                                            enumerate(zip(kinds, names, cfgs))), file=sys.stderr)
        idx = pick_plan(kinds, a.engine)
        if idx == -1:
            why = ""
            if a.engine == "frost":
                reasons = []
                for eng in g._candidate_engines():
                    try:
                        eng.check_support(g)
                    except Exception as e:  # noqa: BLE001 - the engine's own reason
                        reasons.append(first_line(e))
                # This device's engine first: the other architectures' rows only say "requires SMxx".
                reasons.sort(key=lambda r: "requires SM" in r)
                why = "; ".join(reasons) or "no python engine is a candidate for this graph"
            else:
                why = str(getattr(g, "_backend_declined", None) or "the backend proposed no plan")
            skip(f"{NAME}: no {a.engine} plan in graph.plans ({why})".splitlines()[0][:900])
        try:
            if idx is not None:
                g.select_plan(idx)
            g.build_plans()
        except declines as e:
            skip(f"{NAME}: engine={a.engine}: build_plans declined: {first_line(e)}")
        sel = g._plan_index
        eng = g.selected_engine
        served = {"engine_kind": kinds[sel], "engine": (eng.name if eng is not None else names[sel]),
                  "plan_name": names[sel], "engine_id": int(cfgs[sel].engine_id), "plan_index": int(sel),
                  "plans": [f"{k}:{n}" for k, n in zip(kinds, names)]}
        print(f"{NAME}: served by {served}", file=sys.stderr)

        q, k, v = (_torch_input(torch, case, n).to(dev) for n in ("q", "k", "v"))
        o = _o_fill(torch, tuple(case.meta["outputs"]["o"]["shape"]), meta["dtype"], dev)
        lse = torch.from_numpy(np.ascontiguousarray(case.output("lse"))).to(dev)
        i64 = lambda x: torch.from_numpy(np.asarray(x, dtype=np.int64 if a.offset_dtype == "int64" else np.int32)).to(dev)  # noqa: E731
        pack = {t["q"]: q, t["k"]: k, t["v"]: v, o_t: o, st_t: lse,
                sq: torch.from_numpy(plan.q_lens.reshape(-1, 1, 1, 1)).to(dev),
                skv: torch.from_numpy(plan.kv_lens.reshape(-1, 1, 1, 1)).to(dev)}
        for n in rag:
            pack[rag[n]] = i64(plan.offsets[n].reshape(-1, 1, 1, 1))
        ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g.execute(pack, ws, handle=handle)
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        bits, vals = _o_back(torch, o, case)
        o_out = restore_sentinel(bits, vals, case.output("o"), meta["dtype"])
        return o_out, lse.cpu().numpy(), secs, served
    finally:
        cudnn.destroy_handle(handle)


def run_wrapper(a, case, torch, cudnn):
    meta = case.meta
    wp = WrapperPlan(meta)
    dev = torch.device("cuda")
    causal = meta["mask"] != "none"
    br = meta["mask"] == "bottomright"
    w = int(meta["window"])
    raw = {n: np.ascontiguousarray(case.raw_input(n)) for n in ("q", "k", "v")}

    def to_dev(arr):
        if meta["dtype"] == "bf16":
            return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16).to(dev)
        return torch.from_numpy(np.ascontiguousarray(arr)).to(dev)
    from cudnn.sdpa import fwd
    o_buf, lse_buf = case.output("o"), case.output("lse")
    try:
        if a.path == "wrapper_sm90":
            qb, kb, vb = (to_dev(wp.batch(raw[n], "q" if n == "q" else "kv")).transpose(1, 2) for n in ("q", "k", "v"))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            res = fwd.sdpa_fwd_wrapper_dsl_sm90(
                qb, kb, vb, is_causal=causal, causal_bottom_right=br, window_size_left=(w - 1 if causal and w > 0 else None),
                scale_softmax=case.scale, seq_q_lens=torch.from_numpy(wp.q_lens).to(dev),
                seq_kv_lens=torch.from_numpy(wp.kv_lens).to(dev))
        else:
            qp, kp, vp = (to_dev(wp.packed(raw[n], "q" if n == "q" else "kv"))[None] for n in ("q", "k", "v"))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            res = fwd.sdpa_fwd_wrapper_sm80(
                qp, kp, vp, is_causal=causal, causal_bottom_right=br, window_size=((w - 1, 0) if causal and w > 0 else (-1, -1)),
                scale_softmax=case.scale, cum_seqlen_q_tensor=torch.from_numpy(wp.cu_q).to(dev),
                cum_seqlen_k_tensor=torch.from_numpy(wp.cu_kv).to(dev), max_s_q=wp.s_q)
        torch.cuda.synchronize()
    except (NotImplementedError, ValueError, AssertionError, TypeError) as e:
        skip(f"{NAME}: {a.path} declined: {first_line(e)}")
    secs = time.perf_counter() - t0
    o, lse = res["o_tensor"], res["lse_tensor"]
    hq = int(meta["dims"]["hq"])
    if a.path == "wrapper_sm90":
        o_b = o.transpose(1, 2).float().cpu().numpy()        # (B, S, Hq, Dv)
        lse_b = lse.float().cpu().numpy()
        if lse_b.ndim == 3 and lse_b.shape[1] == hq:           # (B, Hq, S) -> (B, S, Hq)
            lse_b = lse_b.transpose(0, 2, 1)
        o_buf, lse_buf = wp.scatter_batch(o_buf, lse_buf, o_b, lse_b)
    else:
        o_p = o.float().cpu().numpy().reshape(-1, hq, o.shape[-1])  # [1, T, Hq, Dv]
        lse_p = lse.float().cpu().numpy()
        lse_p = lse_p.reshape(-1, lse_p.shape[-1])
        if lse_p.shape[0] == hq and lse_p.shape[1] != hq:      # (Hq, T) -> (T, Hq)
            lse_p = lse_p.T
        o_buf, lse_buf = wp.scatter_packed(o_buf, lse_buf, o_p, lse_p)
    served = {"engine_kind": "wrapper", "engine": a.path, "lse_shape": list(lse.shape)}
    return o_buf, lse_buf, secs, served


def run(argv):
    a = parse_args(argv)
    case = CaseDir(a.case_dir)
    reason = decline_reason(case.meta)
    if reason:
        skip(reason)
    torch = cuda_torch(NAME)
    add_site_dir(NAME)
    import cudnn
    got = frontend_version(cudnn)
    if a.path == "graph":
        o, lse, secs, served = run_graph(a, case, torch, cudnn)
    else:
        o, lse, secs, served = run_wrapper(a, case, torch, cudnn)
    case.save("o", o)
    case.save("lse", lse)
    log_timing(NAME, secs, case=case.meta["case"], path=a.path, engine_knob=a.engine, planted_defect=a.bug,
               offset_units=a.offset_units, offset_dtype=a.offset_dtype, frontend=got,
               cudnn_backend=int(cudnn.backend_version()), torch=torch.__version__,
               device=torch.cuda.get_device_name(), **served)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
