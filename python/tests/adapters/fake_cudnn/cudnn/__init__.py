"""A torch stand-in for the two cuDNN frontend 1.32.0 DSA wrappers Megatron-Core's top-k path calls (`from cudnn
import DSA`), so that python/tests/adapters/test_megatron_dsa.py runs Megatron's own code on CPU. It models the
contract read in the frontend's source, not its kernels:

* `indexer_forward_wrapper` (indexer_forward/_interface_sm90.py, indexer_fwd_sm90.py): scores = sm_scale *
  sum_h relu(q_h . k) * w_h; row i of a sequence (dense: the batch row; THD: a cu_seqlens_q sequence) may see the
  keys s < (q_causal_offsets[b] + i + 1) // ratio of its sequence, -inf elsewhere; q_causal_offsets defaults to 0
  (top-left). THD: scores are (total_q, max_seqlen_k), columns local to the sequence; rows past max_seqlen_q are
  not computed (the kernel's output is torch.empty: this stand-in leaves NaN there).
* `indexer_top_k_wrapper` (indexer_top_k/api.py): per row the top_k best of the first seq_lens[r] columns, best
  first (ties: lower column first), -1 past seq_lens[r].
"""
import torch


class _DSA:
    calls = []

    @staticmethod
    def indexer_forward_wrapper(q, k, w, ratio=4, sm_scale=1.0, cu_seqlens_q=None, cu_seqlens_k=None,
                                max_seqlen_q=None, max_seqlen_k=None, q_causal_offsets=None, **_):
        _DSA.calls.append(("indexer_forward_wrapper", cu_seqlens_q is not None, q_causal_offsets is not None))

        def seq_scores(qs, ks, ws, off):
            dots = torch.einsum("ihd,sd->ihs", qs.float(), ks[:, 0].float()).relu()
            s = (dots * ws.float()[:, :, None]).sum(1) * sm_scale
            lim = (off + torch.arange(qs.shape[0]) + 1) // ratio
            return s.masked_fill(torch.arange(ks.shape[0])[None, :] >= lim[:, None], float("-inf"))

        if cu_seqlens_q is None:
            out = torch.stack([seq_scores(q[b], k[b], w[b], 0 if q_causal_offsets is None else int(q_causal_offsets[b]))
                               for b in range(q.shape[0])])
            return {"scores": out}
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        out = torch.full((q.shape[0], int(max_seqlen_k)), float("nan"))
        for b in range(len(cq) - 1):
            nq = min(cq[b + 1] - cq[b], int(max_seqlen_q))
            nk = min(ck[b + 1] - ck[b], int(max_seqlen_k))
            off = 0 if q_causal_offsets is None else int(q_causal_offsets[b])
            out[cq[b]:cq[b] + nq, :nk] = seq_scores(q[cq[b]:cq[b] + nq], k[ck[b]:ck[b] + nk],
                                                    w[cq[b]:cq[b] + nq], off)
            out[cq[b]:cq[b] + nq, nk:] = float("-inf")
        return {"scores": out}

    @staticmethod
    def indexer_top_k_wrapper(scores, seq_lens, top_k, next_n=1, return_val=False, **_):
        _DSA.calls.append(("indexer_top_k_wrapper",))
        n, cols = scores.shape
        live = torch.arange(cols)[None, :] < seq_lens.long()[:, None]
        keyed = scores.masked_fill(~live, float("-inf")).nan_to_num(nan=float("-inf"))
        # best first, ties to the lower column: a stable sort of the negated scores
        order = torch.sort(-keyed, dim=1, stable=True).indices[:, :top_k]
        idx = torch.where(torch.arange(top_k)[None, :] < seq_lens.long()[:, None], order, -1).to(torch.int32)
        vals = torch.gather(scores, 1, order.clamp(min=0)) if return_val else None
        return {"indices": idx, "values": vals}


DSA = _DSA()
