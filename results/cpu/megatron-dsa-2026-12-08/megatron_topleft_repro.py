#!/usr/bin/env python3
"""Standalone reproduction (no attn-oracle): Megatron-Core's packed-CP DSA indexer top-k through cuDNN on a
two-document THD pack, one context-parallel rank, checked against an exact numpy reference.

  pip install megatron-core==0.19.2 "nvidia-cudnn-frontend[cutedsl]==1.32.0"   # an SM90/SM100 GPU, torch
  python megatron_topleft_repro.py [--docs 8192,4096] [--cp 32] [--rank 15] [--rows 64]

It calls `dsa_cudnn_kernels.run_fused_qk_topk` as `DSAttention.forward` does for packed THD under CP
(`use_local_indexer_varlen=True`, bounds from `dsa_masking`, positions from `dsa_layout`), once as released and
once with the cuDNN wrapper handed `q_causal_offsets` = each segment's key length minus its query length, and
prints, per run, the overlap of each sampled row's top-k with the exact top-k (fp64 over the bf16 inputs,
allowed keys [starts, ends) of the row) and how many picks lie outside the row's causal range.
"""
import argparse

import numpy as np
import torch
from megatron.core.packed_seq_params import PackedSeqParams
from megatron.core.transformer.enums import AttnMaskType
from megatron.core.transformer.experimental_attention_variant import dsa_cudnn_kernels, dsa_layout, dsa_masking

ap = argparse.ArgumentParser()
ap.add_argument("--docs", default="8192,4096")
ap.add_argument("--cp", type=int, default=32)
ap.add_argument("--rank", type=int, default=15)
ap.add_argument("--heads", type=int, default=32)
ap.add_argument("--topk", type=int, default=2048)
ap.add_argument("--rows", type=int, default=64)
ap.add_argument("--device", default="cuda")
a = ap.parse_args()
lens = [int(x) for x in a.docs.split(",")]
dev, cp, rank, H, D, K = torch.device(a.device), a.cp, a.rank, a.heads, 128, a.topk
total = sum(lens)
sq = total // cp
g = torch.Generator().manual_seed(0)
q_glob = torch.randn(total, H, D, generator=g).bfloat16()
k_glob = torch.randn(total, D, generator=g).bfloat16()
w_glob = torch.randn(total, H, generator=g).bfloat16()

cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int32, device=dev)
psp = PackedSeqParams(qkv_format="thd", cu_seqlens_q=cu, cu_seqlens_kv=cu, max_seqlen_q=max(lens), max_seqlen_kv=max(lens))
qpos, _reorder = dsa_layout.build_packed_allgather_cp_query_positions_and_key_reorder(
    cu, cu, cp, rank, dev, local_output_size=sq, key_local_output_size=sq, global_output_size=total)
_, (starts, ends, kpos), _ = dsa_masking.build_dsattention_forward_mask(
    sq=sq, skv=total, b=1, device=dev, cp_size=cp, cp_rank=rank, cp_comm_type="allgather", cp_group=None,
    attn_mask_type=AttnMaskType.causal, attention_mask=None, position_ids=None, packed_seq_params=psp,
    packed_query_positions=qpos)
starts, ends = dsa_masking.build_fused_indexer_varlen_bounds(
    sq=sq, skv=total, device=dev, mask=None, varlen_starts=starts, varlen_ends=ends, key_positions=kpos)
rows = qpos.cpu()
q = q_glob[rows].to(dev).unsqueeze(1)           # [sq, 1, H, D]: this rank's rows, zigzag order
w = w_glob[rows].to(dev).unsqueeze(1)           # [sq, 1, H]
k = k_glob.to(dev).unsqueeze(1)                 # [total, 1, D]: the all-gathered K in global order


class WithOffsets:  # the fix: cuDNN is told where each segment's first query row sits
    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, n):
        return getattr(self.inner, n)

    def indexer_forward_wrapper(self, *args, **kw):
        if kw.get("cu_seqlens_q") is not None:
            cq, ck = kw["cu_seqlens_q"], kw["cu_seqlens_k"]
            kw["q_causal_offsets"] = ((ck[1:] - ck[:-1]) - (cq[1:] - cq[:-1])).int()
        return self.inner.indexer_forward_wrapper(*args, **kw)


def run(fixed):
    dsa_cudnn_kernels._ensure_dsa_namespace()
    inner = dsa_cudnn_kernels._cudnn_dsa
    dsa_cudnn_kernels._cudnn_dsa = WithOffsets(inner) if fixed else inner
    try:
        idx, length = dsa_cudnn_kernels.run_fused_qk_topk(
            q, k, w, K, starts, ends, 8192, use_relu=True, use_local_indexer_varlen=True,
            single_packed_thd_sequence=len(lens) == 1, local_packed_cp_rank=rank, local_packed_cp_query_start=0,
            local_packed_cp_query_len=sq, packed_seq_params=psp, cp_size=cp)
    finally:
        dsa_cudnn_kernels._cudnn_dsa = inner
    return idx[0].cpu().numpy(), length[0].cpu().numpy()


qf, kf, wf = (t.float().numpy().astype(np.float64) for t in (q_glob, k_glob, w_glob))
sample = np.unique(np.linspace(0, sq - 1, a.rows).astype(int))
st, en = starts.cpu().numpy(), ends.cpu().numpy()
for fixed in (False, True):
    idx, length = run(fixed)
    ov, bad = [], 0
    for r in sample:
        lo, hi = int(st[r]), int(en[r])
        s = (np.maximum(qf[rows[r]] @ kf[lo:hi].T, 0) * wf[rows[r]][:, None]).sum(0)
        want = set((lo + np.argsort(-s, kind="stable")[:K]).tolist())
        got = [int(x) for x in idx[r][:length[r]]]
        bad += sum(1 for x in got if not lo <= x < hi)
        ov.append(len(want & set(got)) / max(1, len(want)))
    print(f"{'with q_causal_offsets' if fixed else 'as released         '}: docs={lens} cp={cp} rank={rank} "
          f"rows={len(sample)} overlap min {min(ov):.4f} mean {np.mean(ov):.4f}  out-of-causal picks {bad}")
