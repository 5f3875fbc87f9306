"""CPU tests of numpy_ref.py (numpy only): the conventions it must honour from meta.json, through the CLI
(`attn-oracle repro ... --backend exec:numpy_ref.py`), and a convention it does not know ending in a skip
that names it (never a silent wrong answer).

  AO_CLI=build/attn-oracle pytest python/tests/adapters/test_numpy_ref.py     (numpy; the CLI default build/attn-oracle)
"""
import json
import os
import subprocess
import sys

from casedirs import CaseDirTest, adapter_backend, repro
ADAPTER = "attn_oracle.adapters.numpy_ref"

IMPORT_ERROR = None  # the ImportError text when numpy (or the adapter) is missing
try:
    import numpy as np
except ImportError as e:  # reported by run_tests
    np = None
    IMPORT_ERROR = str(e)


class EmptyRows(CaseDirTest):
    prefix = "ao-test-numpy-ref-"
    # Cases with rows that have no allowed key: an empty document, bottom-right with q_len > kv_len, a
    # window that leaves the first rows of a bottom-right document without keys.
    LINES = ["op=sdpa q_lens=1,2 kv_lens=0,1 hq=1 dim=8",
             "op=sdpa q_lens=6 kv_lens=2 mask=bottomright hq=2 hkv=1 dim=8",
             "op=sdpa q_lens=5,3 kv_lens=2,3 mask=bottomright window=1 hq=1 dim=8 seed=4"]

    def test_both_conventions_pass(self):
        for line in self.LINES:
            for rows in ("neginf", "posinf"):
                r = repro(f"{line} empty_rows={rows}", adapter_backend(ADAPTER))
                self.assertEqual(r.returncode, 0, f"{line} empty_rows={rows}\n{r.stdout}{r.stderr}")
                self.assertIn("PASS", r.stdout)

    def test_posinf_is_written(self):
        case = self.case(self.LINES[0] + " empty_rows=posinf")
        subprocess.run([sys.executable, "-m", ADAPTER, case.path], check=True)
        lse = np.load(os.path.join(case.path, "lse.npy"))
        d0 = case.segments[0]  # document 0 has no key: its row's LSE is +inf
        self.assertEqual(case.docs[d0["doc"]]["kv_len"], 0)
        self.assertTrue(np.all(lse[d0["stats_row0"]] == np.inf), lse[d0["stats_row0"]])

    def test_unknown_convention_is_a_named_skip(self):
        case = self.case(self.LINES[0])
        meta = os.path.join(case.path, "meta.json")
        with open(meta) as f:
            m = json.load(f)
        m["empty_rows"] = "zero"
        with open(meta, "w") as f:
            json.dump(m, f)
        r = subprocess.run([sys.executable, "-m", ADAPTER, case.path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("empty_rows=zero", r.stderr.strip().splitlines()[-1])


class IndexerBackward(CaseDirTest):
    """The indexer's KL loss and gradients (pass=bwd), written here from the definition in meta.json: passes
    the oracle's gates on CP ranks and packs under every loss_mean, and a wrong denominator fails them."""
    prefix = "ao-test-numpy-ref-bwd-"
    LINES = ["op=indexer pass=bwd docs=256 cp=4 rank=3 heads=4 dim=16 topk=24 seed=3",
             "op=indexer pass=bwd docs=256 cp=4 rank=0 cp_scheme=contiguous heads=4 dim=16 topk=24 seed=8",
             "op=indexer pass=bwd docs=96,64 pad=5 heads=2 dim=8 topk=40 seed=11",
             "op=indexer pass=bwd docs=120 heads=2 dim=4 topk=16 levels=2 scale=0.5 seed=2"]

    def test_every_loss_mean_passes(self):
        for line in self.LINES:
            for mean in ("rows", "valid", "keyed", "sum"):
                r = repro(f"{line} loss_mean={mean}", adapter_backend(ADAPTER))
                self.assertEqual(r.returncode, 0, f"{line} loss_mean={mean}\n{r.stdout}{r.stderr}")
                self.assertIn("PASS", r.stdout)

    def test_an_honest_fp32_implementation_passes_the_gates(self):
        fp32 = f"exec:{sys.executable} -m {ADAPTER} --fp32"
        # The last three: targets near the clip (e^-100 ~ 2^-144) put dz below fp32's normal range; the
        # gates had no underflow term for fp32 and failed them (a 10-minute fuzz of this adapter found them).
        for line in self.LINES + ["op=indexer pass=bwd docs=700,300 heads=8 dim=64 topk=256 seed=5 dtype=fp16",
                                  "op=indexer pass=bwd docs=512 heads=4 dim=32 topk=64 dtype=fp32 seed=6",
                                  "op=indexer docs=1,4*3 heads=1 dim=4 topk=4 dtype=fp32 values=extreme pass=bwd",
                                  "op=indexer docs=222 heads=8 dim=4 topk=221 dtype=fp32 values=extreme pass=bwd",
                                  "op=indexer q_lens=1984,64 kv_lens=0,64 heads=1 dim=128 topk=63 dtype=fp32 "
                                  "values=plateau pass=bwd"]:
            r = repro(line, fp32)
            self.assertEqual(r.returncode, 0, f"{line}\n{r.stdout}{r.stderr}")

    def test_a_wrong_denominator_fails(self):
        line = self.LINES[2] + " loss_mean=valid"  # pad rows: the buffer's rows are not the valid rows
        bug = f"exec:{sys.executable} -m {ADAPTER} --bug loss-mean-buffer-rows"
        r = repro(line, bug)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("loss_err_over_gate", r.stdout)

    def test_unknown_loss_mean_is_a_named_skip(self):
        case = self.case(self.LINES[0])
        meta = os.path.join(case.path, "meta.json")
        with open(meta) as f:
            m = json.load(f)
        m["loss_mean"] = "tokens"
        with open(meta, "w") as f:
            json.dump(m, f)
        r = subprocess.run([sys.executable, "-m", ADAPTER, case.path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn("loss_mean=tokens", r.stderr.strip().splitlines()[-1])


class SdpaBackward(CaseDirTest):
    """SDPA's dQ/dK/dV (pass=bwd), written here from the formulas: the fp64 answer and honest fp32 kernels
    (dense, key tiles, P and dS rounded to the dtype) pass the derived gates on CP ranks, GQA, pad slots,
    windows and rows without a key; a gradient pad row zeroed fails untouched and passes grad_pad=zero."""
    prefix = "ao-test-numpy-sdpa-bwd-"
    NUMPY_SDPA = "-m attn_oracle.adapters.numpy_sdpa_fp32"
    LINES = ["op=sdpa pass=bwd docs=300,77 pad=3 hq=4 hkv=2 dim=32 seed=3",
             "op=sdpa pass=bwd docs=256 cp=2 rank=1 hq=2 dim=64 seed=5",
             "op=sdpa pass=bwd docs=256 cp=4 rank=0 cp_scheme=contiguous hq=2 hkv=1 dim=16 seed=6",
             "op=sdpa pass=bwd q_lens=70,9 kv_lens=40,30 mask=bottomright window=8 hq=2 dim=16 seed=7",
             "op=sdpa pass=bwd docs=500 hq=2 dim=128 dtype=fp16 values=extreme seed=9",
             "op=sdpa pass=bwd docs=200,1 q_pad=4,0 kv_pad=0,2 hq=8 hkv=1 dim=64 dtype=fp32 seed=12"]

    def test_fp64_and_honest_fp32_pass(self):
        backends = [adapter_backend(ADAPTER), f"exec:{sys.executable} -m {ADAPTER} --fp32",
                    f"exec:{sys.executable} {self.NUMPY_SDPA} --impl dense",
                    f"exec:{sys.executable} {self.NUMPY_SDPA} --impl online --tile 32 --round"]
        for line in self.LINES:
            for b in backends:
                r = repro(line, b)
                self.assertEqual(r.returncode, 0, f"{line} {b}\n{r.stdout}{r.stderr}")
                self.assertIn("PASS", r.stdout)

    def test_cudnn_rounding_passes_and_a_few_ulps_on_one_key_row_fail(self):
        """cuDNN's SDPA backward rounds scale * dS (small scaled dS fall into fp16's subnormals) and each query
        head's dK/dV before the GQA sum: a numpy backward making those two choices gave cuDNN's worst dK
        err/gate on eight single-row fp16 cases to three digits, 1.15 and 1.04 on the two its fuzz found
        against an emulation that made neither. The emulation makes both: they pass (both failed before),
        and 16 fp16 ulps added to one dK element still fail."""
        cudnn = f"exec:{sys.executable} {self.NUMPY_SDPA} --impl online --tile 64 --cudnn-rounding"
        one_row = "op=sdpa q_lens=1 kv_lens=1985 mask=none hq=2 hkv=1 dim=16 dim_v=8 dtype=fp16 pass=bwd"
        for line in [one_row,
                     "op=sdpa q_lens=1 kv_lens=1984 mask=bottomright hq=2 hkv=1 dtype=fp16 seed=286822 pass=bwd",
                     "op=sdpa q_lens=1 kv_lens=1985 mask=none hq=8 hkv=1 dim=16 dim_v=8 dtype=fp16 pass=bwd",
                     "op=sdpa pass=bwd docs=300,77 pad=3 hq=4 hkv=2 dim=32 dtype=fp16 seed=3",
                     "op=sdpa pass=bwd docs=256 cp=2 rank=1 hq=4 hkv=1 dim=64 seed=5"]:
            r = repro(line, cudnn)
            self.assertEqual(r.returncode, 0, f"{line}\n{r.stdout}{r.stderr}")
        script = os.path.join(self.case(one_row).path, "..", "bump_dk.py")
        with open(script, "w") as f:
            f.write(BUMP_DK.format(adapter=self.NUMPY_SDPA.split()[-1]))
        r = repro(one_row, f"exec:{sys.executable} {script}")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("dk_violations", r.stdout)

    def test_zeroed_pad_rows_fail_untouched_and_pass_zero(self):
        line = self.LINES[0]
        case = self.case(line)
        subprocess.run([sys.executable, "-m", ADAPTER, case.path], check=True)
        dq = np.load(os.path.join(case.path, "dq.npy"))
        valid = {seg["row0"] + i for seg in case.segments for i in range(seg["valid"])}
        pad = [r for r in range(dq.shape[0]) if r not in valid]
        self.assertTrue(pad, "the case must have Q pad slots")
        self.assertFalse(np.any(dq[pad] == 0), "pad rows must keep the sentinel")
        # The same answer with its pad rows zeroed, as a kernel that clears the whole gradient buffer.
        script = os.path.join(case.path, "..", "zero_pads.py")
        with open(script, "w") as f:
            f.write(ZERO_PADS.format(adapter=ADAPTER))
        backend = f"exec:{sys.executable} {script}"
        r = repro(line, backend)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("dq_clobbered_pad_slots", r.stdout)
        r = repro(line + " grad_pad=zero", backend)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


# An exec: adapter: numpy_ref's backward, then every dQ row outside the segments' valid rows set to 0.
ZERO_PADS = """import subprocess, sys, os, json
import numpy as np
d = sys.argv[1]
subprocess.run([sys.executable, "-m", {adapter!r}, d], check=True)
m = json.load(open(os.path.join(d, "meta.json")))
path = os.path.join(d, m["outputs"]["dq"]["file"])
dq = np.load(path)
valid = {{s["row0"] + i for s in m["segments"] for i in range(s["valid"])}}
for r in range(dq.shape[0]):
    if r not in valid:
        dq[r] = 0
np.save(path, dq)
"""

# An exec: adapter: numpy_sdpa_fp32's backward with cuDNN's rounding, then 16 fp16 ulps added to the dK
# element of the first key row (head 0, element 0).
BUMP_DK = """import subprocess, sys, os, json
import numpy as np
d = sys.argv[1]
subprocess.run([sys.executable, "-m", {adapter!r}, "--impl", "online", "--cudnn-rounding", d], check=True)
m = json.load(open(os.path.join(d, "meta.json")))
path = os.path.join(d, m["outputs"]["dk"]["file"])
dk = np.load(path)
x = np.float16(dk[0, 0, 0])
dk[0, 0, 0] = np.float32(x) + 16 * np.float32(np.spacing(x))
np.save(path, dk)
"""

