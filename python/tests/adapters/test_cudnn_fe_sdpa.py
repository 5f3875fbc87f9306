"""CPU tests of cudnn_fe_sdpa.py (numpy only): the padded-THD graph binding (per-tensor ragged offsets, units,
strides), the planted defect, the wrappers' copies, knob parsing and the decline paths, on fresh case
directories written by the CLI (`attn-oracle repro ... --backend exec:<copy>`).

The kernels need a GPU; here a numpy model of the graph's documented padded-THD contract stands in for them
(cudnn sdpa with ragged offsets: sequence b of a tensor starts at element ragged_offset[b] * multiplier and
runs seq_len[b] token rows of the token stride; causal top-left allows key s <= i, bottom-right
s <= i + seq_len_kv - seq_len_q, sliding_window_length w additionally s > p - w; Stats = natural-log LSE).
A kernel that honours the binding must then reproduce the oracle's semantics on every valid row and leave
the pad slots alone; the planted defect must not.

  AO_CLI=build/attn-oracle pytest python/tests/adapters/test_cudnn_fe_sdpa.py     (numpy; the CLI default build/attn-oracle)
"""
import unittest

from casedirs import CaseDirTest, adapter_backend, repro
ADAPTER = "attn_oracle.adapters.cudnn_fe_sdpa"

IMPORT_ERROR = None  # the ImportError text when numpy (or the adapter) is missing
try:
    import numpy as np
    from attn_oracle.adapters import cudnn_fe_sdpa as fe
    from test_fa4_varlen import reference  # the oracle's semantics in numpy (fp64)
except ImportError as e:  # reported by run_tests
    np = None
    IMPORT_ERROR = str(e)


def fake_graph_kernel(plan, case):
    """numpy model of the padded-THD graph kernel: reads and writes where the binding says. Returns the
    case's O / Stats buffers (sentinel where nothing was written)."""
    q, k, v = (case.input(n).astype(np.float64) for n in ("q", "k", "v"))
    o_buf, lse_buf = case.output("o"), case.output("lse")
    g = plan.hq // plan.hkv
    mask, w = case.mask, case.window
    row = lambda n, b: plan.element_offset(n, b) // plan.row_elems[n]  # noqa: E731
    for b in range(plan.b):
        sq, skv = int(plan.q_lens[b]), int(plan.kv_lens[b])
        q0, k0, v0, o0, s0 = row("q", b), row("k", b), row("v", b), row("o", b), row("stats", b)
        for i in range(sq):
            s = np.arange(skv)
            p = i + (skv - sq if mask == "bottomright" else 0)
            allowed = np.ones(skv, bool) if mask == "none" else s <= p
            if mask != "none" and w > 0:
                allowed &= s > p - w
            for h in range(plan.hq):
                if not allowed.any():
                    o_buf[o0 + i, h] = 0.0
                    lse_buf[s0 + i, h] = -np.inf
                    continue
                sc = case.scale * (k[k0:k0 + skv, h // g] @ q[q0 + i, h])
                sc = np.where(allowed, sc, -np.inf)
                m = sc.max()
                e = np.exp(sc - m)
                o_buf[o0 + i, h] = (e @ v[v0:v0 + skv, h // g]) / e.sum()
                lse_buf[s0 + i, h] = m + np.log(e.sum())
    return o_buf, lse_buf


@unittest.skipIf(np is None, "numpy is not importable")
class CudnnFeSdpa(CaseDirTest):
    prefix = "ao-fe-sdpa-test-"

    def matches_oracle(self, case, o_buf, lse_buf):
        """(all valid rows equal the oracle, every pad slot kept the sentinel)."""
        want = reference(case)
        ok = True
        for (orow, lrow), (o, lse) in want.items():
            ok &= np.allclose(o_buf[orow], o, rtol=1e-5, atol=1e-5) and np.allclose(lse_buf[lrow], lse, rtol=1e-5, atol=1e-5)
        sent_o, sent_l = case.output("o"), case.output("lse")
        vo, vl = {r for r, _ in want}, {r for _, r in want}
        pads = all(o_buf[r].tobytes() == sent_o[r].tobytes() for r in range(o_buf.shape[0]) if r not in vo) and \
            all(lse_buf[r].tobytes() == sent_l[r].tobytes() for r in range(lse_buf.shape[0]) if r not in vl)
        return bool(ok), pads

    PADDED = (
        "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=2 hkv=2 dim=16 seed=3",          # TE's example
        "op=sdpa lens=1,2,1,2 padded_offsets=0,2,4,7,9 mask=bottomright hq=4 hkv=2 dim=16 seed=4",
        "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 dim=16 mask=bottomright seed=5",
        "op=sdpa docs=16,16 pad=200 stats_offsets=0,100 hq=2 dim=16 seed=14",
        "op=sdpa docs=16,16 pad=8 o_offsets=0,16 hq=2 dim=16 seed=15",
        "op=sdpa docs=5,6 q_offsets=7,100 kv_offsets=0,50 capacity=200 hq=2 dim=16 seed=16",
        "op=sdpa docs=40,17 pad=5 window=6 hq=2 dim=16 dim_v=24 seed=17",
        "op=sdpa docs=30,17 pad=5 mask=none hq=4 hkv=2 dim=16 dim_v=24 seed=13",
    )

    # --- the graph binding ----------------------------------------------------------------------
    def test_te_example_offsets_per_tensor(self):
        case = self.case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 dim=16 dim_v=8 seed=1")
        plan = fe.GraphPlan(case.meta)
        self.assertEqual(plan.token_offsets["q"].tolist(), [0, 4, 8, 13])
        self.assertEqual(plan.offsets["q"].tolist(), [0, 4 * 64, 8 * 64, 13 * 64])   # hq*d = 64 elements a row
        self.assertEqual(plan.offsets["k"].tolist(), [0, 4 * 32, 8 * 32, 13 * 32])   # hkv*d = 32
        self.assertEqual(plan.offsets["v"].tolist(), [0, 4 * 16, 8 * 16, 13 * 16])   # hkv*dv = 16
        self.assertEqual(plan.offsets["o"].tolist(), [0, 4 * 32, 8 * 32, 13 * 32])   # hq*dv = 32
        self.assertEqual(plan.offsets["stats"].tolist(), [0, 16, 32, 52])           # hq = 4
        self.assertEqual(plan.q_lens.tolist(), [3, 2, 4])
        self.assertEqual(plan.q_lens.dtype, np.int32)
        self.assertEqual((plan.s_q, plan.s_kv), (4, 4))
        self.assertEqual(plan.stride("q"), [4 * 4 * 16, 16, 64, 1])
        self.assertEqual(plan.stride("stats"), [16, 1, 4, 1])
        self.assertEqual(plan.dim("o"), [3, 4, 4, 8])

    def test_max_seqlen_is_the_descriptor_s(self):
        plan = fe.GraphPlan(self.case("op=sdpa docs=5,3 max_seqlen_q=16 max_seqlen_kv=20 hq=2 dim=16").meta)
        self.assertEqual((plan.s_q, plan.s_kv), (16, 20))
        self.assertEqual(plan.dim("k"), [2, 2, 20, 16])

    def test_token_units_bind_the_same_places(self):
        for line in self.PADDED[:4]:
            case = self.case(line)
            el, tok = fe.GraphPlan(case.meta), fe.GraphPlan(case.meta, units="tokens")
            for n in ("q", "k", "v", "o", "stats"):
                self.assertEqual(tok.multiplier[n], el.row_elems[n])
                self.assertEqual([el.element_offset(n, b) for b in range(el.b + 1)],
                                 [tok.element_offset(n, b) for b in range(tok.b + 1)], f"{line} {n}")

    def test_honest_binding_reproduces_the_oracle_and_keeps_pads(self):
        for line in self.PADDED:
            case = self.case(line)
            for units in ("elements", "tokens"):
                o, lse = fake_graph_kernel(fe.GraphPlan(case.meta, units=units), case)
                self.assertEqual(self.matches_oracle(case, o, lse), (True, True), f"{line} {units}")

    def test_derived_offsets_is_caught_on_padded_and_harmless_when_packed(self):
        for line in self.PADDED[:6]:
            case = self.case(line)
            plan = fe.GraphPlan(case.meta, bug="derived-offsets")
            cq = np.concatenate([[0], np.cumsum(case.meta["q_lens"])])
            self.assertEqual(plan.token_offsets["q"].tolist(), cq.tolist())
            self.assertEqual(plan.token_offsets["stats"].tolist(), cq.tolist())
            self.assertNotEqual(self.matches_oracle(case, *fake_graph_kernel(plan, case)), (True, True), line)
        for line in ("op=sdpa lens=3,2,4 hq=2 dim=16 seed=3", "op=sdpa docs=30,17 hq=4 hkv=2 dim=16 seed=6"):
            case = self.case(line)  # packed: offsets = prefix sums, the defect changes nothing
            plan = fe.GraphPlan(case.meta, bug="derived-offsets")
            self.assertEqual(plan.offsets["q"].tolist(), fe.GraphPlan(case.meta).offsets["q"].tolist())
            self.assertEqual(self.matches_oracle(case, *fake_graph_kernel(plan, case)), (True, True), line)

    def test_mask_keywords(self):
        cases = {"op=sdpa docs=16 dim=16": {"use_causal_mask": True},
                 "op=sdpa docs=16 dim=16 mask=bottomright window=5": {"use_causal_mask_bottom_right": True,
                                                                      "sliding_window_length": 5},
                 "op=sdpa docs=16 dim=16 mask=none": {}}
        for line, kw in cases.items():
            self.assertEqual(fe.mask_args(self.case(line).meta), kw, line)

    def test_sentinel_survives_a_half_precision_round_trip(self):
        sent = self.case("op=sdpa docs=4 dim=16").output("o")
        for dt in ("bf16", "fp16"):
            bits = np.full(sent.shape, fe.fill_bits(dt), dtype=np.uint16)
            vals = np.zeros(sent.shape, np.float32)
            bits[0, 0, 0] = 0x3F80  # one element the "kernel" wrote
            vals[0, 0, 0] = 1.0
            out = fe.restore_sentinel(bits, vals, sent, dt)
            self.assertEqual(out[0, 0, 0], 1.0)
            self.assertEqual(out.reshape(-1)[1:].tobytes(), sent.reshape(-1)[1:].tobytes(), dt)
        self.assertEqual(int(fe.fill_bits("fp32")), fe.SENTINEL_BITS)

    # --- the wrappers' copies -------------------------------------------------------------------
    def test_wrapper_copies(self):
        case = self.case("op=sdpa docs=5,3 q_offsets=2,20 kv_offsets=0,9 capacity=30 hq=2 dim=16 seed=2")
        wp = fe.WrapperPlan(case.meta)
        q = case.input("q")
        qb = wp.batch(q, "q")
        self.assertEqual(qb.shape, (2, 5, 2, 16))
        np.testing.assert_array_equal(qb[1, :3], q[20:23])
        self.assertTrue((qb[1, 3:] == 0).all())
        qp = wp.packed(q, "q")
        np.testing.assert_array_equal(qp, np.concatenate([q[2:7], q[20:23]]))
        self.assertEqual(wp.cu_q.tolist(), [0, 5, 8])
        o, lse = case.output("o"), case.output("lse")
        o_p = np.arange(8 * 2 * 16, dtype=np.float32).reshape(8, 2, 16)
        lse_p = np.arange(16, dtype=np.float32).reshape(8, 2)
        o, lse = wp.scatter_packed(o, lse, o_p, lse_p)
        d = case.meta["docs"]
        np.testing.assert_array_equal(o[d[1]["o_off"]:d[1]["o_off"] + 3], o_p[5:8])
        np.testing.assert_array_equal(lse[d[1]["stats_off"]:d[1]["stats_off"] + 3], lse_p[5:8])

    # --- knobs ----------------------------------------------------------------------------------
    def test_knobs(self):
        a = fe.parse_args(["dir"])
        self.assertEqual((a.path, a.engine, a.bug, a.offset_units, a.offset_dtype),
                         ("graph", "auto", "none", "elements", "int64"))
        a = fe.parse_args(["--engine", "frost", "--bug", "derived-offsets", "--offset-units", "tokens", "dir"])
        self.assertEqual((a.engine, a.bug, a.offset_units), ("frost", "derived-offsets", "tokens"))
        for bad in (["--bug", "topleft-cp", "d"], ["--engine", "fa4", "d"], ["--path", "wrapper_sm90", "--engine", "frost", "d"]):
            with self.assertRaises(SystemExit, msg=str(bad)):
                import contextlib
                import io
                with contextlib.redirect_stderr(io.StringIO()):
                    fe.parse_args(bad)
        self.assertEqual(fe.pick_plan(["backend", "frost", "backend"], "frost"), 1)
        self.assertEqual(fe.pick_plan(["backend", "frost"], "backend"), 0)
        self.assertEqual(fe.pick_plan(["backend"], "frost"), -1)
        self.assertIsNone(fe.pick_plan(["backend"], "auto"))

    # --- declines -------------------------------------------------------------------------------
    def test_decline_reasons(self):
        want = {"op=indexer docs=16 topk=4": "serves op=sdpa only",
                "op=sdpa docs=64 cp=2 rank=1 dim=16": "CP chunks are not expressible",
                "op=sdpa docs=16 dim=16 window=4 window_right=2": "two-sided band",
                "op=sdpa docs=16 dim=16 window=4 window_convention=fa": "window_convention=fa",
                "op=sdpa q_lens=1,1 kv_lens=0,2 empty_rows=posinf dim=16": "LSE = -inf"}
        for line, reason in want.items():
            self.assertIn(reason, fe.decline_reason(self.case(line).meta), line)
        self.assertIsNone(fe.decline_reason(self.case("op=sdpa docs=16 dim=512 dtype=fp16").meta))

    def test_declines_through_the_cli_are_skips_with_the_reason(self):
        for line, reason in (("op=indexer docs=16 topk=4", "serves op=sdpa only"),
                             ("op=sdpa docs=64 cp=2 rank=0 dim=16", "CP chunks are not expressible")):
            r = repro(line, adapter_backend(ADAPTER))
            self.assertEqual(r.returncode, 125, r.stdout + r.stderr)
            self.assertIn("SKIPPED", r.stdout)
            self.assertIn(reason, r.stdout)

