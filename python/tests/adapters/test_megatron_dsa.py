"""CPU tests of megatron_dsa (Megatron-Core's DSA top-k through its own layout helpers).

Numpy only (always run): what a Megatron THD batch is made of the case (cu_seqlens, padded offsets, max_seqlen, the
data pipeline's zigzag rows per rank, the all-gather order) and every decline, on fresh case directories written by
the CLI. With torch and megatron-core importable (megatron-core from AO_SITE_DIR, e.g. the unpacked 0.19.2 wheel),
the whole call runs on CPU: Megatron's torch reference (`--impl naive`) must pass, and its cuDNN path
(`--impl cudnn`) runs against fake_cudnn/ (a torch model of the two cuDNN wrappers' contract: causal offsets default
to 0, top-left), where the seed's defect must show on a packed CP rank and the outside fix must remove it.
Without them those tests skip, saying why.

  AO_SITE_DIR=<unpacked megatron-core> AO_CLI=build/attn-oracle pytest python/tests/adapters/test_megatron_dsa.py
"""
import os
import subprocess
import sys
import unittest

import numpy as np

from casedirs import CaseDirTest, repro
from attn_oracle.adapters import megatron_dsa as mdsa
from attn_oracle.adapters.protocol import Skip

GLM = "heads=32 dim=128 topk=64"
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_CUDNN = os.path.join(HERE, "fake_cudnn")


def megatron_missing():
    """Why the whole-call tests cannot run here, or None."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return f"torch does not import ({e})"
    code = ("import os, site, sys; d = os.environ.get('AO_SITE_DIR');"
            " d and (sys.path.insert(0, d), site.addsitedir(d));"
            " import megatron.core.transformer.experimental_attention_variant.dsa")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True)
    return None if r.returncode == 0 else f"megatron-core does not import (AO_SITE_DIR?): {r.stderr.strip()[-200:]}"


class Batch(CaseDirTest):
    prefix = "ao-megatron-"

    def batch(self, line, **kw):
        return mdsa.MegatronBatch(self.case(line).meta, **kw)

    def test_packed_cp_rank(self):
        c = self.case(f"op=indexer docs=256,128 cp=4 rank=1 {GLM}")
        b = mdsa.MegatronBatch(c.meta)
        self.assertEqual(b.cu_seqlens.tolist(), [0, 256, 384])
        self.assertIsNone(b.cu_seqlens_padded)  # no document padded: Megatron's batch has no padded offsets
        self.assertEqual((b.cp, b.rank, b.sq, b.sk), (4, 1, 96, 384))
        self.assertEqual((b.max_seqlen_q, b.max_seqlen_kv), (256, 256))
        # the data pipeline's zigzag rows of this rank are the case's segments, row for row
        want = np.concatenate([c.meta["docs"][s["doc"]]["kv_off"] + s["pos0"] + np.arange(s["rows"])
                               for s in c.meta["segments"]])
        self.assertEqual(b.rank_rows(1).tolist(), want.tolist())
        # the all-gather holds every global row once
        self.assertEqual(sorted(b.gather_order().tolist()), list(range(384)))

    def test_padded_offsets_and_max_seqlen(self):
        line = f"op=indexer docs=8000,37 padded_offsets=0,8064,8128 cp=32 rank=31 {GLM}"
        b = self.batch(line)
        self.assertEqual(b.cu_seqlens.tolist(), [0, 8000, 8037])
        self.assertEqual(b.cu_seqlens_padded.tolist(), [0, 8064, 8128])
        self.assertEqual(b.max_seqlen_q, 8064)
        self.assertEqual(self.batch(line, max_seqlen="unpadded").max_seqlen_q, 8000)
        with self.assertRaises(ValueError):
            self.batch(line, max_seqlen="longest")

    def test_cp1(self):
        b = self.batch(f"op=indexer docs=300,100 {GLM}")
        self.assertEqual((b.cp, b.sq, b.sk), (1, 400, 400))
        self.assertEqual(b.rank_rows(0).tolist(), list(range(400)))

    def test_declines_name_what_megatron_takes(self):
        cases = {
            f"op=indexer docs=64 ratio=2 {GLM}": "ratio",
            f"op=indexer docs=64 mask=none {GLM}": "mask=none",
            f"op=indexer q_lens=32 kv_lens=64 {GLM}": "one cu_seqlens",
            f"op=indexer docs=64,64 pad=3 {GLM}": "pad token",
            f"op=indexer docs=64,64 q_offsets=0,70 kv_offsets=0,64 capacity=140 {GLM}": "cu_seqlens_padded",
            f"op=indexer docs=64 capacity=80 {GLM}": "pad token",  # a tail is a padded document in Megatron's terms
            f"op=indexer docs=64 cp=4 rank=1 cp_scheme=contiguous {GLM}": "zigzag",
            f"op=indexer docs=200,60 padded_offsets=0,256,320 cp=4 rank=1 {GLM}": "pad token",
            f"op=indexer pass=bwd docs=64 {GLM}": "pass=bwd",
            "op=sdpa docs=64": "op=indexer only",
        }
        for line, words in cases.items():
            with self.subTest(line=line):
                c = self.case(line)
                why = mdsa.MegatronBatch.decline_reason(c.meta)
                self.assertIsNotNone(why)
                self.assertIn(words, why)
                with self.assertRaises(Skip):
                    mdsa.kernel(c, c.inputs(), impl="naive", device="cpu")

    def test_buffers_other_than_the_padded_tokens(self):
        meta = dict(self.case(f"op=indexer docs=64,64 cp=2 rank=1 {GLM}").meta)
        self.assertIsNone(mdsa.MegatronBatch.decline_reason(meta))
        meta["rows"] = dict(meta["rows"], q=meta["rows"]["q"] + 1)
        self.assertIn("padded tokens exactly", mdsa.MegatronBatch.decline_reason(meta))

    def test_served_cases_are_not_declined(self):
        for line in (f"op=indexer docs=256,128 cp=4 rank=3 {GLM}", f"op=indexer docs=300,100 {GLM}",
                     f"op=indexer docs=8000,37 padded_offsets=0,8064,8128 cp=32 rank=31 {GLM}"):
            with self.subTest(line=line):
                self.assertIsNone(mdsa.MegatronBatch.decline_reason(self.case(line).meta))

    def test_naive_memory_decline(self):
        meta = self.case(f"op=indexer docs=4096 cp=2 rank=0 {GLM}").meta
        self.assertIsNone(mdsa.impl_decline_reason(meta, "naive", 9, 80 * 2**30))
        self.assertIn("GiB", mdsa.impl_decline_reason(meta, "naive", 9, 2**30))

    def test_knobs_rejected(self):
        c = self.case(f"op=indexer docs=64 {GLM}")
        for kw in ({"impl": "flash"}, {"fix": "offsets"}):
            with self.assertRaises(ValueError):
                mdsa.kernel(c, c.inputs(), device="cpu", **kw)


class WholeCall(unittest.TestCase):
    """Megatron's own code on CPU: the verdicts through the CLI."""

    @classmethod
    def setUpClass(cls):
        why = megatron_missing()
        if why:
            raise unittest.SkipTest(f"megatron_dsa's whole call: {why}")
        cls.env = dict(os.environ)
        cls.env["PYTHONPATH"] = os.pathsep.join([FAKE_CUDNN, cls.env.get("PYTHONPATH", "")])

    def verdict(self, line, *knobs):
        be = f"exec:{sys.executable} -W ignore -m attn_oracle.adapters.megatron_dsa --device cpu {' '.join(knobs)}"
        old = dict(os.environ)
        os.environ.update(self.env)
        try:
            r = repro(line, be)
        finally:
            os.environ.clear()
            os.environ.update(old)
        for ln in r.stdout.splitlines():
            if ln.startswith("verdict:"):
                return ln.split()[1], r.stdout
        raise AssertionError(f"no verdict for {line} {knobs}:\n{r.stdout}\n{r.stderr}")

    def test_naive_passes_on_megatron_layouts(self):
        for line in (f"op=indexer docs=256,128 cp=4 rank=1 {GLM} seed=3", f"op=indexer docs=512 cp=4 rank=2 {GLM}",
                     f"op=indexer docs=300,100 {GLM}", f"op=indexer docs=40 {GLM}",  # fewer keys than top-k
                     f"op=indexer docs=8000,37 padded_offsets=0,8064,8128 cp=32 rank=31 {GLM} rows=32"):
            with self.subTest(line=line):
                v, out = self.verdict(line, "--impl naive")
                self.assertEqual(v, "PASS", out)

    def test_cudnn_path_shows_the_seed_defect_and_the_outside_fix_removes_it(self):
        line = f"op=indexer docs=256,128 cp=4 rank=1 {GLM} seed=5"
        v, out = self.verdict(line, "--impl cudnn", "--fix none")
        self.assertEqual(v, "FAIL", out)
        self.assertIn("tie_aware_recall_min", out)
        v, out = self.verdict(line, "--impl cudnn", "--fix q-causal-offsets")
        self.assertEqual(v, "PASS", out)

    def test_cp1_cudnn_path_scores_in_torch(self):
        v, out = self.verdict(f"op=indexer docs=300,100 {GLM}", "--impl cudnn")
        self.assertEqual(v, "PASS", out)


if __name__ == "__main__":
    unittest.main()
