"""CPU tests of fa4_varlen.py (numpy only): the padded-THD varlen mapping, the mask mapping and the decline
paths, on fresh case directories written by the CLI (`attn-oracle repro ... --backend exec:<copy>`).

FA4 itself needs a GPU; here a numpy model of its documented contract (flash-attn-4 4.0.0b36:
seqlen_info.py reads sequence b at cu_seqlens[b] with length seqused[b]; mask.py allows key col of row i
iff col <= i + seqlen_k - seqlen_q (causal, bottom-right) and col >= i + seqlen_k - seqlen_q - left
(local); softmax.py's LSE is the natural log, -inf and O = 0 for a row with no key; out/lse are
torch.empty, so rows outside the sequences hold garbage) stands in for it. The tests check what the
adapter hands the kernel and how it maps the answer back: the result must equal the oracle's semantics
(DESIGN: row i of a segment at pos0 + i sees s <= p, s > p - window) on every valid row, and the pad
slots must keep the sentinel.

  AO_CLI=build/attn-oracle pytest python/tests/adapters/test_fa4_varlen.py     (numpy; the CLI default build/attn-oracle)
"""
import unittest

from casedirs import CaseDirTest, adapter_backend, client_backend, repro, warm_host
ADAPTER = "attn_oracle.adapters.fa4_varlen"

IMPORT_ERROR = None  # the ImportError text when numpy (or the adapter) is missing
try:
    import numpy as np
    from attn_oracle.adapters import fa4_varlen as fa
    from attn_oracle.adapters import numpy_ref as nr
except ImportError as e:  # reported by run_tests
    np = None
    IMPORT_ERROR = str(e)



def fake_fa4(plan, case):
    """numpy model of flash_attn_varlen_func(..., seqused_q/k, causal, window_size, return_lse=True), fp64.

    Returns out (total_q, hq, dv) and lse (total_q, hq) in the Q buffer's rows; rows no sequence covers
    are NaN (FA4 allocates them with torch.empty)."""
    q, k, v = (case.input(n).astype(np.float64) for n in ("q", "k", "v"))
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    out = np.full((q.shape[0], hq, v.shape[2]), np.nan)
    lse = np.full((q.shape[0], hq), np.nan)
    left = plan.window_size[0]
    for b in range(len(plan.seqused_q)):
        oq, ok_ = int(plan.cu_seqlens_q[b]), int(plan.cu_seqlens_k[b])
        sq, sk = int(plan.seqused_q[b]), int(plan.seqused_k[b])
        for i in range(sq):
            col = np.arange(sk)
            allowed = np.ones(sk, dtype=bool)
            if plan.causal or left is not None:
                allowed &= col <= i + sk - sq
            if left is not None:
                allowed &= col >= i + sk - sq - left
            for h in range(hq):
                if not allowed.any():
                    out[oq + i, h] = 0.0
                    lse[oq + i, h] = -np.inf
                    continue
                s = case.scale * (k[ok_:ok_ + sk, h // g] @ q[oq + i, h])
                s = np.where(allowed, s, -np.inf)
                m = s.max()
                p = np.exp(s - m)
                out[oq + i, h] = (p @ v[ok_:ok_ + sk, h // g]) / p.sum()
                lse[oq + i, h] = m + np.log(p.sum())
    return out, lse


def fake_fa4_bwd(plan, case, out, lse):
    """numpy model of _flash_attn_bwd(q, k, v, out, dout, lse, ..., cu_seqlens/seqused, dq=, dk=, dv=), fp64,
    for one call (a BackwardPlan wave): out/lse in the Q buffer's rows (lse (total_q, hq) here); per
    sequence P = exp(scale q.k - lse) under the same masks as fake_fa4, D = rowsum(dO o O), dV = P^T dO,
    dQ = scale dS K, dK = scale dS^T Q with dS = P o (dO V^T - D), GQA summed. It writes dQ's used rows and
    dK/dV's rows [cu_seqlens_k[b], + seqused_k[b]) of every sequence (with seqused_q = 0 too: zeros), and
    nothing else: name -> (values, written)."""
    q, k, v, do = (case.input(n).astype(np.float64) for n in ("q", "k", "v", "dout"))
    out, lse = out.astype(np.float64), lse.astype(np.float64)
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    res = {n: np.zeros(t.shape) for n, t in (("dq", q), ("dk", k), ("dv", v))}
    wr = {n: np.zeros(t.shape, dtype=bool) for n, t in (("dq", q), ("dk", k), ("dv", v))}
    left = plan.window_size[0]
    for b in range(len(plan.seqused_q)):
        oq, ok_ = int(plan.cu_seqlens_q[b]), int(plan.cu_seqlens_k[b])
        sq, sk = int(plan.seqused_q[b]), int(plan.seqused_k[b])
        i = np.arange(sq)[:, None]
        col = np.arange(sk)[None, :]
        allowed = np.ones((sq, sk), dtype=bool)
        if plan.causal or left is not None:
            allowed &= col <= i + sk - sq
        if left is not None:
            allowed &= col >= i + sk - sq - left
        for h in range(hq):
            kh = h // g
            qs, dos = q[oq:oq + sq, h], do[oq:oq + sq, h]
            ks, vs = k[ok_:ok_ + sk, kh], v[ok_:ok_ + sk, kh]
            l_ = lse[oq:oq + sq, h][:, None]
            p = np.where(allowed & np.isfinite(l_), np.exp(np.where(allowed, case.scale * (qs @ ks.T) - np.where(np.isfinite(l_), l_, 0), 0)), 0)
            dsum = (dos * out[oq:oq + sq, h]).sum(axis=1)[:, None]
            ds = p * (dos @ vs.T - dsum)
            res["dq"][oq:oq + sq, h] = case.scale * ds @ ks
            res["dk"][ok_:ok_ + sk, kh] += case.scale * ds.T @ qs
            res["dv"][ok_:ok_ + sk, kh] += p.T @ dos
        wr["dq"][oq:oq + sq] = True
        wr["dk"][ok_:ok_ + sk] = True
        wr["dv"][ok_:ok_ + sk] = True
    return {n: (res[n].astype(np.float32), wr[n]) for n in res}


def reference(case):
    """The oracle's semantics (docs/case.md, docs/ops.md), fp64: {o buffer row: (o, lse)} for every valid row."""
    q, k, v = (case.input(n).astype(np.float64) for n in ("q", "k", "v"))
    hq, hkv = int(case.dims["hq"]), int(case.dims["hkv"])
    g = hq // hkv
    want = {}
    for seg in case.segments:
        d = case.docs[seg["doc"]]
        for i in range(seg["valid"]):
            lo, hi = case.allowed_hi_lo(seg["doc"], seg["pos0"] + i)
            o = np.zeros((hq, v.shape[2]))
            lse = np.full(hq, -np.inf)
            for h in range(hq):
                if hi <= lo:
                    continue
                s = case.scale * (k[d["kv_off"] + lo:d["kv_off"] + hi, h // g] @ q[seg["row0"] + i, h])
                m = s.max()
                p = np.exp(s - m)
                o[h] = (p @ v[d["kv_off"] + lo:d["kv_off"] + hi, h // g]) / p.sum()
                lse[h] = m + np.log(p.sum())
            want[(seg["o_row0"] + i, seg["stats_row0"] + i)] = (o, lse)
    return want


@unittest.skipIf(np is None, "numpy is not importable")
class Fa4Varlen(CaseDirTest):
    prefix = "ao-fa4-test-"

    def run_fake(self, case):
        plan = fa.VarlenPlan(case.meta)
        self.assertIsNone(plan.reason)
        for name in ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k"):
            self.assertEqual(getattr(plan, name).dtype, np.int32, name)  # FA4 asserts int32
        self.assertEqual(len(plan.cu_seqlens_q), len(plan.seqused_q) + 1)
        out, lse = fake_fa4(plan, case)
        o_buf, lse_buf = fa.assemble(case.output("o"), case.output("lse"), plan, out, lse)
        return plan, o_buf, lse_buf

    def assert_matches_oracle(self, case, o_buf, lse_buf):
        sentinel = case.output("o")  # untouched copy: every slot holds the sentinel
        want = reference(case)
        for (orow, lrow), (o, lse) in want.items():
            np.testing.assert_allclose(o_buf[orow], o, rtol=1e-5, atol=1e-5, err_msg=f"o row {orow}")
            np.testing.assert_allclose(lse_buf[lrow], lse, rtol=1e-5, atol=1e-5, err_msg=f"lse row {lrow}")
        valid_o = {r for r, _ in want}
        valid_l = {r for _, r in want}
        for r in range(o_buf.shape[0]):  # pad slots: the sentinel, bit for bit
            if r not in valid_o:
                self.assertEqual(o_buf[r].tobytes(), sentinel[r].tobytes(), f"pad o row {r} written")
        for r in range(lse_buf.shape[0]):
            if r not in valid_l:
                self.assertEqual(lse_buf[r].tobytes(), case.output("lse")[r].tobytes(), f"pad lse row {r} written")

    # --- layout mapping -------------------------------------------------------------------------
    def test_te_padded_example_is_the_bound_offsets(self):
        # TE's [a a a 1 b b 2 2 c c c c 3]: cu_seqlens_padded [0,4,8,13] as cu_seqlens, lengths as seqused.
        case = self.case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=2 hkv=2 dim=16 seed=3")
        plan, o, lse = self.run_fake(case)
        self.assertEqual(plan.cu_seqlens_q.tolist(), [0, 4, 8, 13])
        self.assertEqual(plan.cu_seqlens_k.tolist(), [0, 4, 8, 13])
        self.assertEqual(plan.seqused_q.tolist(), [3, 2, 4])
        self.assertEqual(plan.seqused_k.tolist(), [3, 2, 4])
        self.assertEqual((plan.causal, plan.window_size), (True, (None, None)))
        self.assert_matches_oracle(case, o, lse)

    def test_bottomright_gqa_different_q_and_kv_padding(self):
        line = "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 dim=16 mask=bottomright seed=5"
        case = self.case(line)
        plan, o, lse = self.run_fake(case)
        self.assertEqual(plan.cu_seqlens_q.tolist(), case.meta["q_offsets"])
        self.assertEqual(plan.cu_seqlens_k.tolist(), case.meta["kv_offsets"])
        self.assertEqual(plan.seqused_k.tolist(), case.meta["kv_lens"])  # bottom-right: no crop
        self.assert_matches_oracle(case, o, lse)

    def test_bottomright_short_q_and_long_q(self):
        for line in ("op=sdpa q_lens=16 kv_lens=80 mask=bottomright hq=2 dim=16 seed=7",
                     "op=sdpa q_lens=80 kv_lens=16 mask=bottomright hq=2 dim=16 seed=8",  # first rows see no key
                     "op=sdpa q_lens=1 kv_lens=100 hq=8 hkv=2 dim=16 mask=bottomright seed=9"):
            case = self.case(line)
            plan, o, lse = self.run_fake(case)
            self.assertEqual(plan.seqused_k.tolist(), case.meta["kv_lens"], line)
            self.assert_matches_oracle(case, o, lse)
            if case.meta["q_lens"] == [80]:  # 80 queries over 16 keys: the first 64 rows see nothing
                self.assertTrue(np.isneginf(lse[:64]).all())
                self.assertTrue(np.isfinite(lse[64:80]).all())

    def test_topleft_crops_the_keys(self):
        case = self.case("op=sdpa q_lens=16,8 kv_lens=80,8 mask=topleft hq=2 dim=16 seed=10")
        plan, o, lse = self.run_fake(case)
        self.assertEqual(plan.seqused_k.tolist(), [16, 8])
        self.assert_matches_oracle(case, o, lse)

    def test_sliding_window_flash_convention(self):
        for line in ("op=sdpa docs=200 window=64 hq=2 dim=16 seed=11",
                     "op=sdpa q_lens=40 kv_lens=90 mask=bottomright window=7 hq=4 hkv=1 dim=16 seed=12"):
            case = self.case(line)
            plan, o, lse = self.run_fake(case)
            self.assertEqual(plan.window_size, (case.window - 1, 0))
            self.assert_matches_oracle(case, o, lse)

    def test_mask_none_and_dim_v(self):
        case = self.case("op=sdpa docs=30,17 pad=5 mask=none hq=4 hkv=2 dim=16 dim_v=24 seed=13")
        plan, o, lse = self.run_fake(case)
        self.assertFalse(plan.causal)
        self.assertEqual(plan.window_size, (None, None))
        self.assertEqual(plan.seqused_k.tolist(), case.meta["kv_lens"])
        self.assert_matches_oracle(case, o, lse)

    def test_separate_o_and_stats_offsets(self):
        # O / stats buffers laid out differently from Q: the kernel's rows (Q layout) are moved to them.
        for line in ("op=sdpa docs=16,16 pad=200 stats_offsets=0,100 hq=2 dim=16 seed=14",
                     "op=sdpa docs=16,16 pad=8 o_offsets=0,16 hq=2 dim=16 seed=15",
                     "op=sdpa docs=5,6 q_offsets=7,100 kv_offsets=0,50 capacity=200 hq=2 dim=16 seed=16"):
            case = self.case(line)
            plan, o, lse = self.run_fake(case)
            self.assertEqual(plan.cu_seqlens_q[:-1].tolist(), case.meta["q_offsets"][:-1], line)
            self.assert_matches_oracle(case, o, lse)

    def test_cp_zigzag_chunks_are_sequences(self):
        for rank in (0, 1):
            case = self.case(f"op=sdpa docs=128,64 cp=2 rank={rank} hq=4 hkv=2 dim=16 seed={17 + rank}")
            plan, o, lse = self.run_fake(case)
            segs = [s for s in case.segments]
            self.assertEqual(plan.cu_seqlens_q[:-1].tolist(), [s["row0"] for s in segs])
            self.assertEqual(plan.seqused_k.tolist(), [s["pos0"] + s["valid"] for s in segs])
            self.assert_matches_oracle(case, o, lse)

    def test_padded_cp_with_pad_only_chunks(self):
        line = "op=sdpa docs=50,7 padded_offsets=0,64,80 cp=4 hq=2 dim=16"
        for rank in (0, 3):
            case = self.case(f"{line} rank={rank} seed={20 + rank}")
            plan, o, lse = self.run_fake(case)
            empty = [b for b, s in enumerate(plan.seqs) if s["valid"] == 0]
            for b in empty:
                self.assertEqual(plan.seqused_q[b], 0)
            self.assert_matches_oracle(case, o, lse)

    # --- the backward ---------------------------------------------------------------------------
    def run_fake_bwd(self, case):
        plan = fa.BackwardPlan(case.meta)
        self.assertIsNone(plan.reason)
        meta, poison = case.meta, case.meta["poison"]
        out = fa.q_rows(case.input("o"), meta, "o_row0", fa.POISON_F32[poison])
        lse = fa.q_rows(case.input("lse"), meta, "stats_row0", fa.POISON_F32[poison])
        parts = [fake_fa4_bwd(w, case, out, lse) for w in plan.waves if w.copies()]
        got = fa.merge_waves({n: case.output(n) for n in ("dq", "dk", "dv")}, parts, plan.cropped)
        return plan, got

    def assert_gradients_match_oracle(self, case, got):
        view = nr.CaseBuffers(case, case)
        want = nr.sdpa_backward(view, case.inputs())
        for n in ("dq", "dk", "dv"):
            w, g = want[n], got[n]
            pad = np.isnan(w)  # the reference leaves pad slots as given: the sentinel, bit for bit
            self.assertEqual(g[pad].tobytes(), w[pad].tobytes(), f"{n}: a pad slot is not the sentinel")
            np.testing.assert_allclose(g[~pad], w[~pad], rtol=2e-5, atol=2e-5, err_msg=n)

    def test_backward_padded_thd_gqa_windows(self):
        for line in ("op=sdpa pass=bwd lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 dim=16 seed=31",
                     "op=sdpa pass=bwd docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 dim=16 mask=bottomright seed=32",
                     "op=sdpa pass=bwd q_lens=16,8 kv_lens=80,8 mask=topleft hq=2 dim=16 seed=33",  # cropped keys: dK 0
                     "op=sdpa pass=bwd q_lens=80 kv_lens=16 mask=bottomright hq=2 dim=16 seed=34",  # rows with no key
                     "op=sdpa pass=bwd docs=200 window=64 hq=2 dim=16 seed=35",
                     "op=sdpa pass=bwd docs=30,17 pad=5 mask=none hq=4 hkv=2 dim=16 dim_v=24 seed=36",
                     "op=sdpa pass=bwd docs=16,16 pad=8 o_offsets=0,16 stats_offsets=0,100,140 hq=2 dim=16 seed=37"):
            case = self.case(line)
            plan, got = self.run_fake_bwd(case)
            self.assertEqual(len(plan.waves), 1, line)  # cp=1: one call
            self.assert_gradients_match_oracle(case, got)

    def test_backward_cp_chunks_are_separate_calls_summed(self):
        for rank in (0, 1, 3):
            case = self.case(f"op=sdpa pass=bwd docs=128,64 padded_offsets=0,136,208 cp=4 rank={rank} hq=4 hkv=2 dim=16 "
                             f"seed={40 + rank}")
            plan, got = self.run_fake_bwd(case)
            self.assertEqual(len(plan.waves), 2)  # zigzag: two chunks of every document
            for w in plan.waves:
                docs = [int(s["doc"]) for s in w.seqs]
                self.assertEqual(len(docs), len(set(docs)), "one call holds one chunk per document")
            self.assert_gradients_match_oracle(case, got)

    def test_backward_out_in_q_rows_keeps_the_poison_in_both_16_bit_dtypes(self):
        # O laid out apart from Q: the copy FA4 reads holds the segments' O rows and the case's poison
        # elsewhere, as the stored dtype's element (bf16 bit patterns, fp16 values).
        for dtype, poison in (("bf16", "nan"), ("fp16", "nan"), ("fp16", "large"), ("bf16", "inf")):
            case = self.case(f"op=sdpa pass=bwd docs=16,16 pad=8 o_offsets=0,16 hq=2 dim=16 dtype={dtype} "
                             f"poison={poison} seed=46")
            raw = case.raw_input("o")
            got = fa.q_rows(raw, case.meta, "o_row0", fa.raw_fill(raw, dtype, poison))
            self.assertEqual(got.dtype, raw.dtype)
            as_f32 = (got.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16" else got.astype(np.float32)
            valid = np.zeros(got.shape[0], dtype=bool)
            for s in case.segments:
                valid[s["row0"]:s["row0"] + s["valid"]] = True
                np.testing.assert_array_equal(got[s["row0"]:s["row0"] + s["valid"]],
                                              raw[s["o_row0"]:s["o_row0"] + s["valid"]])
            want = {"nan": np.isnan, "inf": np.isposinf, "large": lambda a: a == np.float32(65504)}[poison]
            self.assertTrue(want(as_f32[~valid]).all(), (dtype, poison))

    def test_in_process_inputs_convert_back_to_the_stored_elements(self):
        # In process the kernel gets float32 arrays; protocol.as_stored must give back exactly the elements an
        # exec: case directory stores (bf16 bit patterns, fp16 values), pad-slot poison included.
        from attn_oracle.adapters import protocol as ao_exec
        for dtype, poison in (("bf16", "nan"), ("bf16", "large"), ("fp16", "nan"), ("fp16", "inf"), ("fp32", "nan")):
            case = self.case(f"op=sdpa pass=bwd docs=17,9 pad=3 o_offsets=0,24,40 hq=2 dim=16 dtype={dtype} "
                             f"poison={poison} seed=47")
            for n in ("q", "k", "v", "dout", "o"):
                raw = case.raw_input(n)
                got = ao_exec.as_stored(case.input(n), dtype)
                self.assertEqual(got.dtype, raw.dtype, (dtype, n))
                self.assertEqual(got.tobytes(), raw.tobytes(), (dtype, poison, n))

    def test_backward_merge_sums_and_keeps_unwritten_elements(self):
        buf = {"dq": np.full((4, 1, 2), np.nan, dtype=np.float32), "dk": np.full((4, 1, 2), np.nan, dtype=np.float32)}
        sentinel = buf["dk"].copy()
        one = np.ones((4, 1, 2), dtype=np.float32)
        rows = lambda *r: np.isin(np.arange(4), r)[:, None, None] & np.ones((4, 1, 2), dtype=bool)  # noqa: E731
        parts = [{"dq": (one, rows(0)), "dk": (one, rows(0, 1))}, {"dq": (2 * one, rows(1)), "dk": (2 * one, rows(1))}]
        got = fa.merge_waves(buf, parts, cropped=[(2, 3)])
        self.assertEqual(got["dq"][:2, 0, 0].tolist(), [1.0, 2.0])
        self.assertEqual(got["dk"][:3, 0, 0].tolist(), [1.0, 3.0, 0.0])  # summed; the cropped row is 0
        self.assertEqual(got["dq"][2:].tobytes(), sentinel[2:].tobytes())  # not written: the sentinel
        self.assertEqual(got["dk"][3:].tobytes(), sentinel[3:].tobytes())

    def test_backward_wrong_merge_fails_the_oracle(self):
        # A merge that keeps the last call's dK/dV (overwrite) gives a CP rank's partial that the
        # comparison above rejects: the check can fail.
        case = self.case("op=sdpa pass=bwd docs=128 cp=2 rank=0 hq=2 dim=16 seed=45")
        plan, got = self.run_fake_bwd(case)
        meta, poison = case.meta, case.meta["poison"]
        out = fa.q_rows(case.input("o"), meta, "o_row0", fa.POISON_F32[poison])
        lse = fa.q_rows(case.input("lse"), meta, "stats_row0", fa.POISON_F32[poison])
        parts = [fake_fa4_bwd(w, case, out, lse) for w in plan.waves]
        last = fa.merge_waves({n: case.output(n) for n in ("dq", "dk", "dv")}, parts[-1:], plan.cropped)
        with self.assertRaises(AssertionError):
            self.assert_gradients_match_oracle(case, {"dq": got["dq"], "dk": last["dk"], "dv": last["dv"]})

    def test_backward_without_a_valid_row_launches_nothing(self):
        line = "op=sdpa pass=bwd docs=5 padded_offsets=0,64 cp=4 rank=2 dim=16 seed=3"
        r = repro(line, adapter_backend(ADAPTER))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("PASS", r.stdout)

    # --- declines -------------------------------------------------------------------------------
    def test_decline_reasons(self):
        want = {
            "op=sdpa docs=16 dtype=fp32": "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 e5m2",
            "op=sdpa docs=16 dim=4": "(head_dim, head_dim_v)=(4, 4) is not supported on SM90. head_dim and "
                                     "head_dim_v must be between 8 and 256 and divisible by 8.",
            "op=sdpa docs=16 dim=20": "(head_dim, head_dim_v)=(20, 20) is not supported on SM90. head_dim and "
                                      "head_dim_v must be between 8 and 256 and divisible by 8.",
            "op=indexer docs=16 topk=4": "fa4_varlen: serves op=sdpa only",
        }
        for line, reason in want.items():
            self.assertEqual(fa.decline_reason(self.case(line).meta), reason, line)
        meta = self.case("op=sdpa docs=16 dim=16 dtype=fp16").meta
        self.assertIsNone(fa.decline_reason(meta))
        self.assertIn("Unsupported compute capability", fa.decline_reason(meta, arch_major=7))
        # Blackwell's narrower head-dim range (the same function, another branch)
        meta = self.case("op=sdpa docs=16 dim=160").meta
        self.assertIsNone(fa.decline_reason(meta, arch_major=9))
        self.assertIn("not supported on SM100/SM110", fa.decline_reason(meta, arch_major=10))

    def test_rows_past_the_keys_are_not_expressible(self):
        plan = fa.VarlenPlan(self.case("op=sdpa q_lens=80 kv_lens=16 mask=topleft window=5 dim=16").meta)
        self.assertIn("cannot place rows past the keys", plan.reason)

    def test_declines_through_the_cli_are_skips_with_the_reason(self):
        # Exit 125 with FA4's reason as the last stderr line; torch is never imported.
        for line, reason in (("op=sdpa docs=16 dtype=fp32", "inputs must be float16, bfloat16"),
                             ("op=sdpa docs=16 dim=4", "is not supported on SM90"),
                             ("op=sdpa q_lens=80 kv_lens=16 mask=topleft dim=16", "rows past the keys")):
            r = repro(line, adapter_backend(ADAPTER))
            self.assertEqual(r.returncode, 125, r.stdout + r.stderr)
            self.assertIn("SKIPPED", r.stdout)
            self.assertIn(reason, r.stdout)

    def test_wholly_padded_rank_runs_without_the_kernel(self):
        # Every row of rank 2 is padding: no sequence has a row, the buffers go back untouched, PASS.
        line = "op=sdpa docs=5 padded_offsets=0,64 cp=4 rank=2 dim=16 seed=3"
        r = repro(line, adapter_backend(ADAPTER))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("PASS", r.stdout)

    def test_served_by_the_warm_host(self):
        with warm_host(self.tmp) as sock:
            client = client_backend(sock, "fa4_varlen")
            for line, code, text in (("op=sdpa docs=16 dtype=fp32", 125, "inputs must be float16, bfloat16"),
                                     ("op=sdpa docs=5 padded_offsets=0,64 cp=4 rank=3 dim=16 seed=3", 0, "PASS")):
                r = repro(line, client)
                self.assertEqual(r.returncode, code, r.stdout + r.stderr)
                self.assertIn(text, r.stdout)

