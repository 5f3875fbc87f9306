"""CPU tests of cudnn_fe_indexer.py (numpy only): the THD layout mapping, knob parsing and the decline
paths, on fresh case directories written by the CLI (`attn-oracle repro ... --backend exec:<copy>`).

The kernel itself needs an SM90+ GPU; here a numpy model of its documented contract (frontend 1.32.0,
indexer_forward/indexer_fwd_sm90.py: key k of THD sequence b is scored iff k < seqlen_k[b] and
k < (q_causal_offsets[b] + q + 1) // ratio, -inf otherwise; indexer_top_k/api.py: row r's top-k over its
first seq_lens[r] columns, -1/-inf padding) stands in for it, so the tests check what the adapter hands
the kernel and how it maps the answer back: with the fix (offsets=1, seq_lens=row) the result must be
the exact causal top-k of every valid row; with the seed's bug (offsets=0) it must not be.

  AO_CLI=build/attn-oracle pytest python/tests/adapters/test_cudnn_fe_indexer.py     (numpy; the CLI default build/attn-oracle)
"""
import contextlib
import io
import math
import unittest

from casedirs import CaseDirTest, adapter_backend, client_backend, repro, warm_host
ADAPTER = "attn_oracle.adapters.cudnn_fe_indexer"
GLM = "heads=32 dim=128 topk=2048"

IMPORT_ERROR = None  # the ImportError text when numpy (or the adapter) is missing
try:
    import numpy as np
    from attn_oracle.adapters import cudnn_fe_indexer as fe
    from attn_oracle.adapters.numpy_sdpa_fp32 import rounder
    bf16_round = rounder("bf16")
except ImportError as e:  # reported by run_tests
    np = None
    IMPORT_ERROR = str(e)



def fake_kernel(plan, case, kk, offsets):
    """numpy model of indexer_forward_wrapper (THD) + indexer_top_k_wrapper(next_n=1), fp64."""
    q, k, w = case.input("q").astype(np.float64), case.input("k").astype(np.float64), case.input("w")
    ratio = int(case.dims["ratio"])
    n = len(plan.q_rows)
    scores = np.full((n, plan.max_seqlen_k), -np.inf)
    for b in range(len(plan.cu_seqlens_q) - 1):
        r0, r1 = plan.cu_seqlens_q[b], plan.cu_seqlens_q[b + 1]
        k0, k1 = plan.cu_seqlens_k[b], plan.cu_seqlens_k[b + 1]
        off = int(plan.q_causal_offsets[b]) if offsets else 0
        kb = k[plan.k_rows[k0:k1]]                                     # the keys the adapter gathered
        for t in range(r0, r1):
            i = t - r0
            s = case.scale * (np.maximum(q[plan.q_rows[t]] @ kb.T, 0) * w[plan.q_rows[t]][:, None]).sum(0)
            lim = min((off + i + 1) // ratio, k1 - k0)
            scores[t, :max(lim, 0)] = s[:max(lim, 0)]
    idx = np.full((n, kk), -1, dtype=np.int64)
    val = np.full((n, kk), -np.inf)
    for t in range(n):
        L = int(plan.seq_lens[t])
        order = np.lexsort((np.arange(L), -scores[t, :L]))[:kk]       # larger first, ties to lower index
        idx[t, :len(order)] = order
        val[t, :len(order)] = scores[t, order]
    return idx, val.astype(np.float32)


def exact_topk_sets(case):
    """Per checked Q row: the set of K/V buffer rows of its exact top-k (DESIGN semantics, fp64)."""
    q, k, w = case.input("q").astype(np.float64), case.input("k").astype(np.float64), case.input("w")
    K = int(case.dims["topk"])
    out = {}
    for seg in case.segments:
        d = case.docs[seg["doc"]]
        for i in range(seg["rows"]):
            row = seg["row0"] + i
            if i >= seg["valid"]:
                out[row] = None  # pad row
                continue
            lo, hi = case.allowed_hi_lo(seg["doc"], seg["pos0"] + i)
            kd = k[d["kv_off"] + lo:d["kv_off"] + hi]
            s = case.scale * (np.maximum(q[row] @ kd.T, 0) * w[row][:, None]).sum(0)
            order = np.lexsort((np.arange(len(s)), -s))[:K]
            out[row] = set((d["kv_off"] + lo + order).tolist())
    return out


CLIP_PROB_MIN = math.exp(-100.0)


def bf16_value(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def fake_indexer_bwd_sm90(call, dk_dtype, round_ds=True):
    """A numpy model of frontend 1.32.0's SM90 indexer backward on a BackwardCall, as its source computes:
    score-grad (indexer_backward_sm90.py ScoreGradSm90) over every slot of a row, -1 slots included:
    target_eff = fmax(target, e^-100), counted where predict >= e^-100, g = -target_eff*mask*grad_scale
    (grad_scale = loss_coeff/(B*S_q) * grad_loss), grad_signal = g - predict*sum(g); then per row (kernel 2)
    K rows of invalid ids read as 0, s = (q.k)*sm_scale in fp32, dS = bf16(grad_signal*w) where s > 0,
    dW = sum grad_signal*s (s > 0), dQ = sm_scale*dS.K and dK += sm_scale*dS^T.q (fp32 atomics) for valid
    ids; dQ/dW stored in bf16, dK in dk_dtype. Returns (dq, dw, dk, written) as launch_cudnn does."""
    f = np.float32
    q, w, k = bf16_value(call.q_bits)[0], bf16_value(call.w_bits)[0], bf16_value(call.k_bits)[0]
    topk, tgt, pr = call.topk[0], call.target[0], call.predict[0]
    s_q, s_k = topk.shape[0], k.shape[0]
    scale = f(f(call.loss_coeff / s_q) * call.grad_loss[0])
    sm = f(call.sm_scale)
    with np.errstate(invalid="ignore", over="ignore"):
        t_eff = np.fmax(tgt, f(CLIP_PROB_MIN))
        mask = (pr >= f(CLIP_PROB_MIN)).astype(f)
        g = -t_eff * mask * scale
        gs = g - pr * g.sum(axis=1, dtype=f)[:, None]
        dq = np.zeros(q.shape, dtype=f)
        dw = np.zeros(w.shape, dtype=f)
        dk = np.zeros(k.shape, dtype=f)
        for r in range(s_q):
            keys = topk[r].astype(np.int64)
            ok = (keys >= 0) & (keys < s_k)
            ks = np.where(ok[:, None], k[np.clip(keys, 0, s_k - 1)], f(0))           # (T, D)
            s = (q[r] @ ks.T).astype(f) * sm                                          # (H, T)
            pos = s > 0
            ds = gs[r][None, :] * w[r][:, None]
            ds = np.where(pos, bf16_round(ds) if round_ds else ds, f(0))                    # (H, T)
            dw[r] = np.where(pos, gs[r][None, :] * s, f(0)).sum(axis=1, dtype=f)
            dq[r] = (ds @ ks).astype(f) * sm
            np.add.at(dk, keys[ok], ((ds.T @ q[r]).astype(f) * sm)[ok])
    dk_out = dk if dk_dtype == "fp32" else bf16_round(dk)
    written = {n: np.ones((1,) + a.shape, dtype=bool) for n, a in (("dq", dq), ("dw", dw), ("dk", dk))}
    return bf16_round(dq)[None], bf16_round(dw)[None], dk_out[None], written


@unittest.skipIf(np is None, "numpy is not importable")
class CudnnFeIndexer(CaseDirTest):
    prefix = "ao-fe-test-"

    def run_fake(self, case, offsets=True, seq_lens="row"):
        plan = fe.ThdPlan(case.meta, offsets=offsets, seq_lens=seq_lens)
        kk = plan.top_k(case.dims["topk"])
        idx, val = fake_kernel(plan, case, kk, offsets)
        topk, scores = fe.assemble(case.output("topk"), case.output("scores"), plan, idx, val)
        return plan, topk, scores

    def assert_exact(self, case, topk):
        want = exact_topk_sets(case)
        for row, s in want.items():
            got = topk[row]
            if s is None:
                self.assertTrue((got == -1).all(), f"pad row {row}: {got}")
                continue
            picks = got[got >= 0]
            self.assertEqual(len(picks), len(set(picks.tolist())), f"row {row}: duplicate picks")
            self.assertEqual(set(picks.tolist()), s, f"row {row}")
            self.assertTrue((got[len(s):] == -1).all(), f"row {row}: fill after the picks")

    def assert_plan_matches_zigzag(self, case, plan, crop):
        """cu_seqlens / key extents / offsets against the zigzag definition, derived here from cp/rank."""
        cp, rank = case.meta["cp"]["size"], case.meta["cp"]["rank"]
        ratio = int(case.dims["ratio"])
        want_q, want_k, want_off, want_rows, want_krows = [0], [0], [], [], []
        local0 = 0
        for d in case.docs:
            c = d["q_padded"] // (2 * cp)
            # bottom-right: the queries are the document's last q_len of kv_len*ratio positions (docs/case.md)
            shift = d["kv_len"] * ratio - d["q_len"] if case.mask == "bottomright" else 0
            for j, chunk in enumerate((rank, 2 * cp - 1 - rank)):
                pos0 = shift + chunk * c
                valid = min(max(d["q_len"] - chunk * c, 0), c)
                if valid == 0:
                    continue
                key_len = min(d["kv_len"], max(0, -(-(pos0 + c) // ratio))) if crop else d["kv_len"]
                want_q.append(want_q[-1] + valid)
                want_k.append(want_k[-1] + key_len)
                want_off.append(pos0)
                want_rows += list(range(local0 + j * c, local0 + j * c + valid))
                want_krows += list(range(d["kv_off"], d["kv_off"] + key_len))
            local0 += 2 * c
        self.assertEqual(plan.cu_seqlens_q.tolist(), want_q)
        self.assertEqual(plan.cu_seqlens_k.tolist(), want_k)
        self.assertEqual(plan.cu_seqlens_q.dtype, np.int32)
        self.assertEqual(plan.q_causal_offsets.tolist(), want_off)
        self.assertEqual(plan.q_causal_offsets.dtype, np.int32)
        self.assertEqual(plan.q_rows.tolist(), want_rows)
        self.assertEqual(plan.k_rows.tolist(), want_krows)
        self.assertEqual(plan.max_seqlen_q, max(np.diff(want_q)))
        self.assertEqual(plan.max_seqlen_k, max(np.diff(want_k)))

    # --- layout mapping -------------------------------------------------------------------------
    def test_zigzag_multi_doc_cp4(self):
        for rank in (0, 1, 3):
            case = self.case(f"op=indexer docs=512,256,64 cp=4 rank={rank} heads=4 dim=16 topk=32 crop=1 seed={11 + rank}")
            plan, topk, scores = self.run_fake(case)
            self.assertEqual(len(plan.seqs), 6)
            self.assert_plan_matches_zigzag(case, plan, crop=True)
            self.assert_exact(case, topk)
            # scores.npy: the kernel's values beside its picks, -inf after them
            self.assertTrue(np.isfinite(scores[topk >= 0]).all())
            self.assertTrue(np.isneginf(scores[topk == -1]).all())
            # The seed's bug: without q_causal_offsets every chunk but rank 0's front one is chunk-local.
            _, bad, _ = self.run_fake(case, offsets=False)
            front = case.segments[0]
            same = [np.array_equal(np.sort(bad[r]), np.sort(topk[r])) for r in range(len(topk))]
            self.assertFalse(all(same), f"rank {rank}: offsets=0 changed nothing")
            if rank == 0:
                self.assertTrue(all(same[front["row0"]:front["row0"] + front["valid"]]))

    def test_column_mapping_to_buffer_rows(self):
        case = self.case("op=indexer docs=128,64 cp=2 rank=1 heads=4 dim=16 topk=8 crop=1 seed=5")
        plan = fe.ThdPlan(case.meta)
        kv_off = [case.docs[s["doc"]]["kv_off"] for s in plan.seqs]
        n = len(plan.q_rows)
        local = np.tile(np.array([[0, 3, -1, 7]]), (n, 1))
        mapped = fe.map_columns(local, plan.col_base)
        self.assertEqual(mapped.dtype, np.int32)
        for b, off in enumerate(kv_off):
            for t in range(plan.cu_seqlens_q[b], plan.cu_seqlens_q[b + 1]):
                self.assertEqual(mapped[t].tolist(), [off, off + 3, -1, off + 7])
        self.assertEqual(sorted(set(kv_off)), [0, 128])
        # a garbage column is shifted like any other (no cleaning), saturating at int32
        self.assertEqual(fe.map_columns(np.array([[2**31 - 2]]), np.array([128]))[0, 0], 2**31 - 1)

    def test_padded_cp_partly_and_wholly_padded_chunks(self):
        # docs 500 and 37 padded to 512 / 64 (cu_seqlens_padded 0,512,576), cp=4: c = 64 and 8.
        line = "op=indexer docs=500,37 padded_offsets=0,512,576 cp=4 heads=4 dim=16 topk=16 crop=1"
        for rank, n_seqs in ((0, 3), (3, 4)):
            case = self.case(f"{line} rank={rank} seed={rank + 2}")
            plan, topk, _ = self.run_fake(case)
            self.assertEqual(len(plan.seqs), n_seqs)
            self.assert_plan_matches_zigzag(case, plan, crop=True)
            for s in case.segments:  # pad rows are not sent, and come back all -1
                pad = range(s["row0"] + s["valid"], s["row0"] + s["rows"])
                self.assertFalse(set(pad) & set(plan.q_rows.tolist()))
            self.assertEqual(len(plan.pad_rows()), sum(s["rows"] - s["valid"] for s in case.segments))
            self.assert_exact(case, topk)
        wholly = [s for s in fe.ThdPlan(self.case(f"{line} rank=0 seed=2").meta).segments if s["valid"] == 0]
        self.assertEqual([(s["doc"], s["pos0"]) for s in wholly], [(1, 56)])

    def test_wholly_padded_rank_runs_without_the_kernel(self):
        # Every row of rank 2 is padding (doc of 5 tokens padded to 64, cp=4): the adapter sends
        # nothing, writes all -1, and the oracle passes it — no GPU needed.
        line = f"op=indexer docs=5 padded_offsets=0,64 cp=4 rank=2 {GLM} crop=1 seed=3"
        r = repro(line, adapter_backend(ADAPTER))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("PASS", r.stdout)

    def test_crop_1_vs_crop_0(self):
        base = "op=indexer docs=256,128 cp=4 rank=1 heads=4 dim=16 topk=16 seed=9"
        c1, c0 = self.case(base + " crop=1"), self.case(base + " crop=0")
        p1, p0 = fe.ThdPlan(c1.meta), fe.ThdPlan(c0.meta)
        self.assert_plan_matches_zigzag(c1, p1, crop=True)
        self.assert_plan_matches_zigzag(c0, p0, crop=False)
        self.assertEqual(np.diff(p0.cu_seqlens_k).tolist(), [256, 256, 128, 128])   # whole documents
        self.assertEqual(np.diff(p1.cu_seqlens_k).tolist(), [64, 224, 32, 112])     # cut at the chunk end
        self.assertEqual(p1.q_causal_offsets.tolist(), p0.q_causal_offsets.tolist())
        for case in (c1, c0):
            _, topk, _ = self.run_fake(case)
            self.assert_exact(case, topk)
        # seq_lens=chunk is the chunk's key extent: crop changes it, and it covers -inf keys
        self.assertEqual(sorted(set(fe.ThdPlan(c0.meta, seq_lens="chunk").seq_lens.tolist())), [128, 256])
        self.assertEqual(sorted(set(fe.ThdPlan(c1.meta, seq_lens="chunk").seq_lens.tolist())), [32, 64, 112, 224])

    def test_ratio_2(self):
        case = self.case("op=indexer docs=512,256 cp=2 rank=1 heads=4 dim=16 topk=32 ratio=2 crop=1 seed=4")
        plan, topk, _ = self.run_fake(case)
        self.assert_plan_matches_zigzag(case, plan, crop=True)
        for b, s in enumerate(plan.seqs):  # per-row lengths are compressed: floor((pos0+i+1)/2)
            t0 = plan.cu_seqlens_q[b]
            want = np.minimum((s["pos0"] + np.arange(s["valid"]) + 1) // 2, s["key_len"])
            self.assertEqual(plan.seq_lens[t0:t0 + s["valid"]].tolist(), want.tolist())
        self.assert_exact(case, topk)

    def test_seq_lens_chunk_keeps_masked_picks(self):
        # The trap: with seq_lens = the chunk's key end, rows with fewer than k allowed
        # keys get indices of -inf keys. The adapter hands those back uncleaned (the oracle judges them).
        case = self.case("op=indexer docs=256 cp=2 rank=0 heads=4 dim=16 topk=64 crop=1 seed=6")
        plan, topk, scores = self.run_fake(case, seq_lens="chunk")
        first = case.segments[0]["row0"]  # position 0: one allowed key, 64 picks asked for
        self.assertTrue((topk[first] >= 0).all())
        self.assertEqual(int(np.isfinite(scores[first]).sum()), 1)
        self.assertTrue(np.isneginf(scores[first][1:]).all())
        _, good, _ = self.run_fake(case, seq_lens="row")
        self.assertEqual((good[first] >= 0).sum(), 1)

    def test_top_k_capped_at_max_seqlen_k(self):
        case = self.case("op=indexer docs=64 cp=2 rank=0 heads=4 dim=16 topk=100 crop=1 seed=8")
        plan, topk, _ = self.run_fake(case)
        self.assertEqual(plan.top_k(100), plan.max_seqlen_k)
        self.assertTrue((topk[:, plan.max_seqlen_k:] == -1).all())
        self.assert_exact(case, topk)

    # --- the backward (pass=bwd) -------------------------------------------------------------------
    def test_backward_call_is_the_whole_buffers_as_one_batch(self):
        case = self.case("op=indexer pass=bwd docs=96,40 cp=2 rank=1 q_pad=8,8 kv_pad=4,4 heads=4 dim=16 topk=16 seed=21")
        inputs = case.inputs()
        call = fe.BackwardCall(case, inputs)
        rows_q, rows_kv = case.meta["rows"]["q"], case.meta["rows"]["kv"]
        self.assertEqual(call.q_bits.shape, (1, rows_q, 4, 16))
        self.assertEqual(call.k_bits.shape, (1, rows_kv, 16))
        self.assertEqual(call.q_bits.tobytes(), case.raw_input("q")[None].tobytes())  # the exact bf16 elements
        np.testing.assert_array_equal(call.topk[0], inputs["topk"])  # K buffer rows: B = 1, local = global
        self.assertEqual(call.loss_coeff, 1.0)  # loss_mean=rows: the kernel's own B*S_q
        want_q = [s["row0"] + i for s in case.segments for i in range(s["valid"])]
        want_k = [d["kv_off"] + j for d in case.docs for j in range(d["kv_len"])]
        self.assertEqual(call.q_rows.tolist(), want_q)
        self.assertEqual(call.k_rows.tolist(), want_k)
        # the -1 slots: the case's poison by default, 0 with slot_fill=zero
        bad = inputs["topk"] < 0
        self.assertTrue(bad.any())
        self.assertTrue(np.isnan(call.target[0][bad]).all())
        zero = fe.BackwardCall(case, inputs, slot_fill="zero")
        self.assertTrue((zero.target[0][bad] == 0).all() and (zero.predict[0][bad] == 0).all())
        np.testing.assert_array_equal(zero.target[0][~bad], call.target[0][~bad])

    def test_backward_loss_means_become_loss_coeff(self):
        line = "op=indexer pass=bwd docs=64,16 cp=2 rank=0 q_pad=4,4 heads=2 dim=8 topk=8 seed=22"
        for mean in ("rows", "valid", "keyed", "sum"):
            case = self.case(f"{line} loss_mean={mean}")
            call = fe.BackwardCall(case, case.inputs())
            s_q = case.meta["rows"]["q"]
            topk = case.input("topk")
            denom = {"rows": s_q, "valid": len(call.q_rows), "sum": 1,
                     "keyed": sum(int((topk[r] >= 0).any()) for r in call.q_rows)}[mean]
            self.assertAlmostEqual(call.loss_coeff / s_q, 1.0 / denom, msg=mean)  # grad_scale = 1/denominator

    def test_backward_copies_only_the_frameworks_rows_and_keeps_unwritten_elements(self):
        case = self.case("op=indexer pass=bwd docs=40,24 pad=8 heads=2 dim=8 topk=8 seed=23")
        call = fe.BackwardCall(case, case.inputs())
        dq, dw, dk = (np.full((1,) + case.output(n).shape, 7.0, dtype=np.float32) for n in ("dq", "dw", "dk"))
        written = {n: np.ones(a.shape, dtype=bool) for n, a in (("dq", dq), ("dw", dw), ("dk", dk))}
        written["dq"][0, call.q_rows[0], 1, :] = False  # one head of a valid row left as handed over
        out = call.outputs(case, dq, dw, dk, written)
        sentinel = case.output("dq")
        pad_q = np.setdiff1d(np.arange(dq.shape[1]), call.q_rows)
        pad_k = np.setdiff1d(np.arange(dk.shape[1]), call.k_rows)
        self.assertTrue(len(pad_q) and len(pad_k))
        self.assertEqual(out["dq"][pad_q].tobytes(), sentinel[pad_q].tobytes())  # pad rows: the sentinel
        self.assertEqual(out["dk"][pad_k].tobytes(), case.output("dk")[pad_k].tobytes())
        self.assertEqual(out["dq"][call.q_rows[0], 1].tobytes(), sentinel[call.q_rows[0], 1].tobytes())
        self.assertTrue((out["dq"][call.q_rows[0], 0] == 7).all() and (out["dk"][call.k_rows] == 7).all())

    def test_backward_declines(self):
        base = "op=indexer pass=bwd docs=256 heads=64 dim=128 topk=128 seed=1"
        self.assertIsNone(fe.decline_reason(self.case(base).meta))
        self.assertIsNone(fe.decline_reason(self.case(base + " mask=none").meta))  # slots are given: no mask
        want = {"heads=32": "IndexerBackwardSm90: heads >= 64",
                "topk=96": "IndexerBackwardSm90: topk % block_I == 0",
                "dtype=fp16": "index_q must be torch.bfloat16, got fp16"}
        for change, reason in want.items():
            key = change.split("=")[0]
            line = " ".join(change if t.startswith(key + "=") else t for t in base.split())
            if key not in base:
                line += " " + change
            self.assertIn(reason, fe.decline_reason(self.case(line).meta) or "", line)
        meta = self.case(base.replace("heads=64", "heads=32")).meta
        self.assertIsNone(fe.decline_reason(meta, arch_major=10))  # the default SM100 backend serves H=32
        self.assertIn("requires SM90 or SM100+", fe.decline_reason(self.case(base).meta, arch_major=8))

    # --- knobs ------------------------------------------------------------------------------------
    def test_knob_parsing(self):
        a = fe.parse_args(["/x"])
        self.assertEqual((a.offsets, a.seq_lens, a.deterministic, a.tie_break, a.w_dtype, a.slot_fill, a.dk_dtype),
                         (True, "row", False, 0, "fp32", "case", "bf16"))
        a = fe.parse_args(["--slot-fill", "zero", "--dk-dtype", "fp32", "/x"])
        self.assertEqual((a.slot_fill, a.dk_dtype), ("zero", "fp32"))
        a = fe.parse_args(["--offsets", "0", "--seq-lens", "chunk", "--deterministic", "1", "--tie-break", "2",
                           "--w-dtype", "bf16", "/x"])
        self.assertEqual((a.offsets, a.seq_lens, a.deterministic, a.tie_break, a.w_dtype, a.case_dir),
                         (False, "chunk", True, 2, "bf16", "/x"))
        self.assertFalse(fe.parse_args(["--bug", "topleft-cp", "d"]).offsets)  # one defect, one name
        self.assertTrue(fe.parse_args(["--bug", "none", "d"]).offsets)
        self.assertFalse(fe.parse_args(["--bug", "topleft-cp", "--offsets", "0", "d"]).offsets)
        for bad in (["--bug", "topleft"], ["--bug", "none", "--offsets", "0"]):
            with self.assertRaises(SystemExit):
                with contextlib.redirect_stderr(io.StringIO()):
                    fe.parse_args(bad + ["d"])
        for bad in (["--offsets", "2"], ["--seq-lens", "doc"], ["--tie-break", "3"], ["--deterministic", "yes"],
                    ["--slot-fill", "nan"], ["--dk-dtype", "fp16"]):
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()) as err:
                fe.parse_args(bad + ["/x"])
            self.assertIn("invalid choice", err.getvalue())
            self.assertEqual(e.exception.code, 2, bad)
        case = self.case("op=indexer docs=128 cp=2 rank=1 heads=4 dim=16 topk=8 crop=1 seed=1")
        self.assertIsNone(fe.ThdPlan(case.meta, offsets=False).q_causal_offsets)

    # --- declines -------------------------------------------------------------------------------
    def test_decline_reasons(self):
        base = "op=indexer docs=128 cp=2 rank=1 crop=1 seed=1"
        want = {
            "heads=32 dim=64 topk=64": "head_dim must be 128, got 64",
            "heads=8 dim=128 topk=64": "qhead_per_kv_head must be one of (16, 32, 64), got 8",
            "heads=32 dim=128 topk=4096": "top_k must be in (0, 2048], got 4096",
            "heads=32 dim=128 topk=64 dtype=fp16": "q must be bfloat16, got torch.float16",
        }
        for dims, reason in want.items():
            meta = self.case(f"{base} {dims}").meta
            self.assertEqual(fe.decline_reason(meta), reason)
        self.assertIsNone(fe.decline_reason(self.case(f"{base} {GLM}").meta))
        # SM100 serves smaller head groups (indexer_forward/_support.py); Hopper does not
        meta8 = self.case(f"{base} heads=8 dim=128 topk=64").meta
        self.assertIsNone(fe.decline_reason(meta8, arch_major=10))
        self.assertEqual(fe.decline_reason(meta8, arch_major=8), "IndexerTopK requires SM90+ compute capability, found SM8")
        self.assertIn("op=indexer only", fe.decline_reason(self.case("op=sdpa lens=8").meta))
        self.assertIn("mask=none", fe.decline_reason(self.case(f"op=indexer docs=64 mask=none {GLM}").meta))

    def test_declines_through_the_cli_are_skips_with_the_reason(self):
        # Exit 125 with the kernel's reason as the last stderr line; torch is never imported.
        for dims, reason in (("heads=32 dim=64 topk=64", "head_dim must be 128, got 64"),
                             ("heads=32 dim=128 topk=64 dtype=fp16", "q must be bfloat16, got torch.float16")):
            line = f"op=indexer docs=128 cp=2 rank=1 crop=1 seed=1 {dims}"
            r = repro(line, adapter_backend(ADAPTER))
            self.assertEqual(r.returncode, 125, r.stdout + r.stderr)
            self.assertIn("SKIPPED", r.stdout)
            self.assertIn(reason, r.stdout)

    def test_served_by_the_warm_host(self):
        # The device campaign runs the adapter in the warm host through its client: same skips, same passes.
        with warm_host(self.tmp) as sock:
            client = client_backend(sock, "cudnn_fe_indexer")
            for line, code, text in (
                    ("op=indexer docs=128 cp=2 rank=1 crop=1 seed=1 heads=8 dim=128 topk=64", 125,
                     "qhead_per_kv_head must be one of (16, 32, 64), got 8"),
                    (f"op=indexer docs=5 padded_offsets=0,64 cp=4 rank=3 {GLM} crop=1 seed=3", 0, "PASS")):
                r = repro(line, client + " --bug topleft-cp")
                self.assertEqual(r.returncode, code, r.stdout + r.stderr)
                self.assertIn(text, r.stdout)

