#!/usr/bin/env python3
"""`exec:` adapter: Megatron-Core's DSA indexer top-k (megatron-core 0.19.2,
`megatron/core/transformer/experimental_attention_variant/`), run the way `DSAttention.forward` runs it on one
context-parallel rank of a packed THD batch: the framework's own layout helpers and its own kernel hook, the
adapter supplying only what the training step holds (the batch's `PackedSeqParams`, the rank's local Q rows, the
all-gathered K).

  usage: megatron_dsa.py [--impl cudnn|tilelang|naive] [--fix none|q-causal-offsets]
                         [--max-seqlen padded|unpadded] [--device cuda|cpu] CASE_DIR

The call, step by step as `DSAttention.forward` makes it (dsa.py, cp_comm_type allgather, causal mask):
  * `PackedSeqParams(qkv_format="thd", cu_seqlens_q/kv = the documents' real lengths packed,
    cu_seqlens_q/kv_padded = the case's offsets where a document is padded, max_seqlen_q/kv)`;
  * `dsa_layout.get_packed_qk_cu_seqlens`, then (cp > 1)
    `dsa_layout.build_packed_allgather_cp_query_positions_and_key_reorder`: the rank's query positions and the
    permutation that puts the all-gathered K back in global order;
  * K all-gathered as a CP all-gather returns it: every rank's local rows (the data pipeline's zigzag split:
    chunks r and 2cp-1-r of each padded document), rank after rank, then `k.index_select(0, kv_reorder_idx)`;
  * `dsa_masking.build_dsattention_forward_mask` (row bounds from the positions) and
    `dsa_masking.build_fused_indexer_varlen_bounds`;
  * `--impl cudnn|tilelang`: `dsa_kernels.run_fused_qk_topk(config, q, k, weights, topk, starts, ends, ...)` with
    `config.dsa_kernel_backend = impl` (the hook dispatches: one document under CP takes cuDNN's
    `_indexer_topk_single_packed_cp_segments`, several `_indexer_topk_multi_packed_cp_thd`, cp = 1 the global-row
    score chunks); `--impl naive`: `dsa.fused_qk_topk_naive`, Megatron's own torch reference, the fallback
    DSAttention takes when the hook declines. A hook that declines (returns None) is a skip saying so.
Inputs: q [sq, 1, H, D], weights [sq, 1, H] and k [sk, 1, D] in the case's dtype (SBHD, b = 1), use_relu, the
indexer's scale 1 (Megatron's `_INDEXER_SOFTMAX_SCALE`: a positive case scale does not change a top-k).
Output: Megatron's top-k indices [1, sq, topk] as returned (the naive path's min(topk, sk) columns followed by -1
where sk < topk): global K rows, which are the case's K/V buffer rows
(both are the padded THD order); -1 stays -1, a masked pick stays a pick, the rows are the rank's local rows in
Megatron's order, which are the case's Q rows. Nothing is cleaned; pad rows get what Megatron computed for them.

Knobs:
  --fix q-causal-offsets  the fix of `topleft-cp` (the defect's one name: cpu-bug:topleft-cp, the other adapters'
      `--bug topleft-cp`), the seed PR's, applied from outside: cuDNN's `indexer_forward_wrapper`, where Megatron
      calls it with cu_seqlens, is handed `q_causal_offsets` = each sequence's key length minus its query length
      (its rows' first position: Megatron's segments end their queries at their keys' end). Proves the diagnosis
      of `topleft-cp` on the framework's own code; never the default.
  --max-seqlen padded|unpadded  what the caller passes as max_seqlen_q/kv: the longest padded document (the
      default) or the case's max_seqlen_q/kv (by default the longest real length). Megatron divides it by 2*cp for
      cuDNN's varlen grid.

Env: AO_SITE_DIR=folder (the unpacked wheels: megatron-core, the cuDNN frontend) is added before the imports.
Declines (exit 125, before torch is imported where the layout decides): what a Megatron THD batch cannot
express (see MegatronBatch), the cuDNN kernel's own limits for --impl cudnn, no CUDA (unless --device cpu),
no megatron-core. `pass=bwd` is declined: Megatron's `run_fused_qk_topk_with_loss` computes its KL target from
the main attention's query and key (FlashMLA's layout, kv_lora_rank 512), not from a given target, so it is not
the oracle's indexer backward contract. The layout mapping is tested on CPU (python/tests/adapters/
test_megatron_dsa.py; with torch and megatron-core there, the whole call runs on CPU against a torch stand-in of
the cuDNN wrappers).
"""
import argparse
import sys
import time
from types import SimpleNamespace

import numpy as np

from .protocol import CaseMeta, add_site_dir, import_torch, log_timing, main, skip
from .registry import Adapter

ADAPTER = Adapter(
    name="megatron_dsa",
    what="Megatron-Core 0.19.2's DSA indexer top-k hook (cuDNN, TileLang or its torch reference) on a packed THD "
         "CP rank, through the framework's own layout and mask helpers",
    ops=("indexer",), passes=("fwd",), requires=("torch", "cuda", "megatron.core"),
    wheels=("megatron-core==0.19.2",),
    kernel="kernel")

NAME = "megatron_dsa"
MEGATRON_VERSION = "0.19.2"
IMPLS = ("cudnn", "tilelang", "naive")
FIXES = ("none", "q-causal-offsets")
MAX_SEQLENS = ("padded", "unpadded")
# fused_qk_topk_naive materialises relu(q.k) * w as fp32 [sq, b, H, sk] (and its einsum input and product
# beside it): the adapter declines where those three copies would not fit the device.
NAIVE_COPIES = 3


class MegatronBatch:
    """The packed THD batch a Megatron training step holds for the case, or a skip where the case's layout is not
    one (numpy only: declared before any import).

    cu_seqlens: the real lengths packed (int32, B+1); cu_seqlens_padded: the documents' starts in the padded THD
    order with the end last (None where no document is padded); max_seqlen: what the caller passes; cp, rank;
    sq: the rank's local rows; sk: the global (all-gathered) rows; rank_rows(r): the global THD rows rank r
    holds, in its local order (the data pipeline's zigzag split, what the all-gather concatenates).
    """

    def __init__(self, meta, max_seqlen="padded"):
        if max_seqlen not in MAX_SEQLENS:
            raise ValueError(f"{NAME}: max_seqlen={max_seqlen!r} (expected one of {MAX_SEQLENS})")
        why = self.decline_reason(meta)
        if why:
            skip(why)
        docs = meta["docs"]
        cp = meta.get("cp", {})
        self.cp, self.rank = int(cp.get("size", 1)), int(cp.get("rank", 0))
        lens = [int(d["q_len"]) for d in docs]
        offs = [int(x) for x in meta["q_offsets"]]
        self.padded = [offs[i + 1] - offs[i] for i in range(len(docs))]
        self.cu_seqlens = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        self.offsets = np.array(offs[:len(docs) + 1], dtype=np.int32)
        self.cu_seqlens_padded = None if self.padded == lens else self.offsets
        self.sk = int(offs[len(docs)])
        self.sq = self.sk // self.cp
        if max_seqlen == "padded":
            self.max_seqlen_q = self.max_seqlen_kv = max(self.padded)
        else:
            self.max_seqlen_q = int(meta["max_seqlen"]["q"])
            self.max_seqlen_kv = int(meta["max_seqlen"]["kv"])

    @staticmethod
    def decline_reason(meta):
        """Why the case is not a Megatron DSA THD batch (the words say what Megatron takes), or None."""
        if meta["op"] != "indexer":
            return f"{NAME}: serves op=indexer only"
        if meta.get("pass", "fwd") != "fwd":
            return (f"{NAME}: pass=bwd is not served: Megatron's run_fused_qk_topk_with_loss computes its KL target "
                    "from the main attention's query/key (FlashMLA layout), not from a given target")
        if int(meta["dims"]["ratio"]) != 1:
            return f"{NAME}: Megatron's DSA indexer runs ratio 1 (_INDEXER_RATIO), got ratio={meta['dims']['ratio']}"
        if meta["mask"] == "none":
            return f"{NAME}: DSAttention supports the causal mask only (AttnMaskType.causal), got mask=none"
        if int(meta.get("window", 0)) != 0:
            return f"{NAME}: DSAttention's indexer has no window, got window={meta['window']}"
        docs = meta["docs"]
        if any(int(d["q_len"]) != int(d["kv_len"]) for d in docs):
            return (f"{NAME}: Megatron's THD self-attention gives Q and K/V one cu_seqlens; q_lens="
                    f"{[d['q_len'] for d in docs]} kv_lens={[d['kv_len'] for d in docs]}")
        if list(meta["q_offsets"]) != list(meta["kv_offsets"]):
            return (f"{NAME}: Megatron's THD batch gives Q and K/V one cu_seqlens_padded; q_offsets="
                    f"{meta['q_offsets']} kv_offsets={meta['kv_offsets']}")
        offs = [int(x) for x in meta["q_offsets"]]
        if len(offs) != len(docs) + 1:
            return f"{NAME}: the case's offsets must carry the end (B+1 entries), got {offs}"
        if any(int(d["q_off"]) != offs[i] or int(d["kv_off"]) != offs[i] for i, d in enumerate(docs)):
            return f"{NAME}: the documents do not start at the case's offsets (a gap before a document)"
        cp = meta.get("cp", {})
        size = int(cp.get("size", 1))
        if size > 1 and cp.get("scheme", "zigzag") != "zigzag":
            return f"{NAME}: Megatron's DSA CP shards zigzag (cp_comm_type allgather), got cp_scheme={cp['scheme']}"
        padded = [offs[i + 1] - offs[i] for i in range(len(docs))]
        if size > 1 and any(p % (2 * size) for p in padded):
            return (f"{NAME}: Packed DSA CP expects per-sequence padded lengths divisible by 2*cp_size={2 * size}, "
                    f"got {padded}")
        rows = meta["rows"]
        if int(rows["kv"]) != offs[-1] or int(rows["q"]) * size != offs[-1]:
            return (f"{NAME}: Megatron's THD buffers are the padded tokens exactly: K/V rows {rows['kv']} and Q rows "
                    f"{rows['q']} x cp {size} against the padded total {offs[-1]} (a capacity tail is not expressible)")
        pad_rows = int(rows["q"]) - sum(int(s["valid"]) for s in meta["segments"])
        if pad_rows:
            return (f"{NAME}: the rank's Q rows hold {pad_rows} THD pad token(s): Megatron computes a top-k for a pad "
                    "token like any other (its loss masks them with real_token_mask_q), where the oracle's contract is "
                    "all -1; a rank with pad rows is not judged")
        return None

    def rank_rows(self, r):
        """The global THD rows rank r holds, in its local order (per document: chunk r, then chunk 2cp-1-r)."""
        if self.cp == 1:
            return np.arange(self.sk, dtype=np.int64)
        out = []
        for i, p in enumerate(self.padded):
            c, o = p // (2 * self.cp), int(self.offsets[i])
            out.append(np.arange(o + r * c, o + (r + 1) * c, dtype=np.int64))
            b = 2 * self.cp - 1 - r
            out.append(np.arange(o + b * c, o + (b + 1) * c, dtype=np.int64))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def gather_order(self):
        """The global rows of an all-gathered K before Megatron's reorder: rank 0's local rows, rank 1's, ..."""
        return np.concatenate([self.rank_rows(r) for r in range(self.cp)])


def impl_decline_reason(meta, impl, arch_major=9, device_bytes=None):
    """Why `impl` does not serve the case (its own limits), or None."""
    if impl == "cudnn":
        from .cudnn_fe_indexer import decline_reason
        return decline_reason(meta, arch_major)
    if impl == "naive" and device_bytes:
        b = meta["rows"]
        need = NAIVE_COPIES * 4 * int(b["q"]) * int(meta["dims"]["heads"]) * int(b["kv"])
        if need > device_bytes:
            return (f"{NAME}: fused_qk_topk_naive materialises fp32 [sq, b, H, sk] scores: about {need / 2**30:.1f} GiB "
                    f"for this rank, over the device's {device_bytes / 2**30:.1f} GiB")
    return None


class OffsetsFix:
    """cuDNN's DSA namespace with the seed PR's fix applied from outside: a varlen `indexer_forward_wrapper` call
    (cu_seqlens given) without `q_causal_offsets` gets each sequence's key length minus its query length."""

    def __init__(self, inner, torch):
        self._inner, self._torch = inner, torch
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def indexer_forward_wrapper(self, *args, **kw):
        cq, ck = kw.get("cu_seqlens_q"), kw.get("cu_seqlens_k")
        if cq is not None and ck is not None and kw.get("q_causal_offsets") is None:
            kw["q_causal_offsets"] = ((ck[1:] - ck[:-1]) - (cq[1:] - cq[:-1])).to(self._torch.int32).contiguous()
            self.calls += 1
        return self._inner.indexer_forward_wrapper(*args, **kw)


def import_megatron():
    """Megatron-Core's modules the call uses, or a skip naming what does not import."""
    add_site_dir(NAME)
    try:
        from megatron.core.packed_seq_params import PackedSeqParams
        from megatron.core.transformer.enums import AttnMaskType
        from megatron.core.transformer.experimental_attention_variant import (
            dsa, dsa_cudnn_kernels, dsa_kernels, dsa_layout, dsa_masking)
        import megatron.core as mc
    except ImportError as e:
        skip(f"{NAME}: megatron-core does not import ({e})")
    return SimpleNamespace(PackedSeqParams=PackedSeqParams, AttnMaskType=AttnMaskType, dsa=dsa,
                           dsa_cudnn_kernels=dsa_cudnn_kernels, dsa_kernels=dsa_kernels, dsa_layout=dsa_layout,
                           dsa_masking=dsa_masking, version=getattr(mc, "__version__", "?"))


def kernel(case, inputs, impl="cudnn", fix="none", max_seqlen="padded", device="cuda"):
    """Megatron's DSA top-k on one case (an exec: CaseDir or an attn_oracle.Case): {"topk"} as returned."""
    if impl not in IMPLS or fix not in FIXES:
        raise ValueError(f"{NAME}: impl={impl!r} fix={fix!r} (expected one of {IMPLS}, {FIXES})")
    meta = CaseMeta.of(case).meta
    batch = MegatronBatch(meta, max_seqlen)
    if impl == "cudnn":
        why = impl_decline_reason(meta, impl)  # the Hopper limits; the device's own major is checked below
        if why:
            skip(why)
    torch = import_torch(NAME, device)
    dev = torch.device(device)
    if dev.type == "cuda":
        major = torch.cuda.get_device_capability()[0]
        why = impl_decline_reason(meta, impl, major, torch.cuda.get_device_properties(dev).total_memory)
        if why:
            skip(why)
    mc = import_megatron()
    if impl == "tilelang":
        try:
            import tilelang  # noqa: F401  (Megatron's TileLang ops import it at call time)
        except ImportError as e:
            skip(f"{NAME}: --impl tilelang: tilelang does not import ({e})")

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[meta["dtype"]]
    q = torch.from_numpy(np.ascontiguousarray(inputs["q"], dtype=np.float32)).to(dev).to(dt)   # [sq, H, D]
    w = torch.from_numpy(np.ascontiguousarray(inputs["w"], dtype=np.float32)).to(dev).to(dt)   # [sq, H]
    kg = torch.from_numpy(np.ascontiguousarray(inputs["k"], dtype=np.float32)).to(dev).to(dt)  # [sk, D] global
    sq, sk, cp, rank = batch.sq, batch.sk, batch.cp, batch.rank
    i32 = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int32)).to(dev)  # noqa: E731
    psp = mc.PackedSeqParams(
        qkv_format="thd", cu_seqlens_q=i32(batch.cu_seqlens), cu_seqlens_kv=i32(batch.cu_seqlens),
        cu_seqlens_q_padded=None if batch.cu_seqlens_padded is None else i32(batch.cu_seqlens_padded),
        cu_seqlens_kv_padded=None if batch.cu_seqlens_padded is None else i32(batch.cu_seqlens_padded),
        max_seqlen_q=batch.max_seqlen_q, max_seqlen_kv=batch.max_seqlen_kv)

    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    # DSAttention.forward, packed THD branch (dsa.py): positions, the gathered K's reorder, the row bounds.
    cu_q, cu_kv = mc.dsa_layout.get_packed_qk_cu_seqlens(psp)
    single = cp > 1 and cu_q.numel() == 2 and cu_kv.numel() == 2
    qpos, reorder = None, None
    if cp > 1:
        cover_q = single and isinstance(psp.max_seqlen_q, int) and psp.max_seqlen_q == sq * cp
        cover_k = single and isinstance(psp.max_seqlen_kv, int) and psp.max_seqlen_kv == sq * cp
        qpos, reorder = mc.dsa_layout.build_packed_allgather_cp_query_positions_and_key_reorder(
            cu_seqlens_q=cu_q, cu_seqlens_kv=cu_kv, cp_size=cp, cp_rank=rank, device=dev,
            local_output_size=sq, key_local_output_size=sq, global_output_size=sq * cp,
            query_cu_seqlens_cover_output=cover_q, key_cu_seqlens_cover_output=cover_k)
        qpos = qpos.contiguous()
        gathered = kg.index_select(0, torch.from_numpy(batch.gather_order()).to(dev))
        k = gathered.index_select(0, reorder)
    else:
        k = kg
    float_mask, varlen, _plain = mc.dsa_masking.build_dsattention_forward_mask(
        sq=sq, skv=sk, b=1, device=dev, cp_size=cp, cp_rank=rank, cp_comm_type="allgather", cp_group=None,
        attn_mask_type=mc.AttnMaskType.causal, attention_mask=None, position_ids=None, packed_seq_params=psp,
        packed_query_positions=qpos)
    starts, ends, key_positions = varlen if varlen is not None else (None, None, None)
    use_local = cp > 1 and starts is not None and ends is not None and key_positions is None
    q_s, w_s, k_s = q.unsqueeze(1), w.unsqueeze(1), k.unsqueeze(1)      # SBHD, b = 1
    topk = int(meta["dims"]["topk"])
    fixer = None
    with torch.no_grad():
        if impl == "naive":
            _scores, idx = mc.dsa.fused_qk_topk_naive(
                q_s, k_s, w_s, topk, mask=float_mask, varlen_starts=starts, varlen_ends=ends,
                key_positions=key_positions, use_relu=True)
        else:
            bounds = mc.dsa_masking.build_fused_indexer_varlen_bounds(
                sq=sq, skv=sk, device=dev, mask=float_mask, varlen_starts=starts, varlen_ends=ends,
                key_positions=key_positions)
            if bounds is None:
                skip(f"{NAME}: build_fused_indexer_varlen_bounds gave no bounds: DSAttention would not call the hook")
            dck = mc.dsa_cudnn_kernels
            saved = None
            if impl == "cudnn":
                try:
                    dck._ensure_dsa_namespace()
                except ImportError as e:
                    skip(f"{NAME}: Megatron's cuDNN backend: {e} ({e.__cause__})")
                if fix == "q-causal-offsets":
                    saved, fixer = dck._cudnn_dsa, OffsetsFix(dck._cudnn_dsa, torch)
                    dck._cudnn_dsa = fixer
            try:
                config = SimpleNamespace(dsa_kernel_backend=impl, attention_backend="auto")
                out = mc.dsa_kernels.run_fused_qk_topk(
                    config, q_s, k_s, w_s, topk, bounds[0], bounds[1], block_size=8192, use_relu=True,
                    use_local_indexer_varlen=use_local, single_packed_thd_sequence=single,
                    local_packed_cp_rank=rank, local_packed_cp_query_start=0, local_packed_cp_query_len=sq,
                    packed_seq_params=psp, cp_size=cp)
            finally:
                if saved is not None:
                    dck._cudnn_dsa = saved
            if out is None:
                skip(f"{NAME}: dsa_kernels.run_fused_qk_topk declined (returned None) for --impl {impl}: "
                     "DSAttention would fall back to fused_qk_topk_naive (--impl naive)")
            idx = out[0]
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    got = idx.reshape(-1, idx.shape[-1]).to("cpu")
    if got.dtype != torch.int32:
        got = got.to(torch.int64).clamp(-2**31, 2**31 - 1).to(torch.int32)
    if got.shape[1] < topk:  # the naive path returns min(topk, sk) columns: the rest selects nothing
        got = torch.cat([got, torch.full((got.shape[0], topk - got.shape[1]), -1, dtype=torch.int32)], dim=1)
    mismatched = -1
    if qpos is not None:  # diagnosis only: where Megatron's positions disagree with the case's rows
        mine = np.concatenate([batch.offsets[s["doc"]] + int(s["pos0"]) + np.arange(int(s["rows"]))
                               for s in meta["segments"]]) if meta["segments"] else np.zeros(0)
        theirs = qpos.to("cpu").numpy()
        mismatched = int((mine != theirs).sum()) if mine.shape == theirs.shape else int(theirs.size)
    log_timing(NAME, secs, case=meta["case"], impl=impl, fix=fix, max_seqlen=max_seqlen,
               path=("naive" if impl == "naive" else "single-packed-cp" if single else
                     "multi-packed-cp" if use_local else "global-rows"),
               fix_calls=fixer.calls if fixer is not None else 0, position_mismatches=mismatched,
               megatron=mc.version, torch=torch.__version__,
               device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu")
    return {"topk": got.numpy()}


def arguments():
    """The adapter's command line: its knobs (what `python -m attn_oracle.adapters list` shows) and the case directory."""
    ap = argparse.ArgumentParser(prog=NAME)
    ap.add_argument("--impl", default="cudnn", choices=list(IMPLS),
                    help="Megatron's DSA kernel backend (config.dsa_kernel_backend), or naive: its torch reference")
    ap.add_argument("--fix", default="none", choices=list(FIXES),
                    help="q-causal-offsets: the fix of topleft-cp (cpu-bug:topleft-cp, the seed PR's) applied from "
                         "outside: each varlen sequence's first position handed to cuDNN; none: Megatron as released")
    ap.add_argument("--max-seqlen", default="padded", choices=list(MAX_SEQLENS),
                    help="max_seqlen_q/kv in PackedSeqParams: the longest padded document, or the case's max_seqlen")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("case_dir")
    return ap


def run(argv):
    a = arguments().parse_args(argv)
    return main(kernel, [a.case_dir], impl=a.impl, fix=a.fix, max_seqlen=a.max_seqlen, device=a.device)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
