"""The attn_oracle package against the CLI's own paths: inputs bit-identical to exec:'s files (one copy per
case, the trial's own kept private), a verdict from the same trial, every way a Python kernel can go wrong an ERROR or a named
SKIP (never a pass), and the campaign saving and shrinking what it finds.

  scripts/tools/py-test.sh          (pip install . and pytest python/tests examples/)
Seeds are recorded in the case lines; the lines are fresh random draws of the generator's kinds of layouts.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import attn_oracle

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
from attn_oracle.adapters import numpy_ref  # noqa: E402

LINES = ["op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=8 dim=128 seed=5",
         "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright seed=9",
         "op=indexer docs=96,48 cp=3 rank=1 topk=16 seed=4",
         "op=sdpa docs=40,24 cp=2 rank=1 hq=4 hkv=2 dtype=fp16 seed=13"]


def cli():
    for c in (os.environ.get("AO_CLI"), os.path.join(ROOT, "build", "attn-oracle")):
        if c and os.access(c, os.X_OK):
            return c
    return None


@pytest.mark.parametrize("line", LINES, ids=LINES)
def test_layout_arrays_and_canonical_line(line):
    case = attn_oracle.Case(line)
    assert attn_oracle.Case(case.line).line == case.line  # canonical
    assert case.cu_seqlens_q[0] == 0 and list(np.diff(case.cu_seqlens_q)) == list(case.q_lens)
    assert len(case.q_offsets) == len(case.q_lens) + 1  # cu_seqlens_padded: the capacity last
    assert len(case.pos0) == len(case.segments) and case.max_seqlen_q >= case.q_lens.max()


def test_the_te_example_layout():
    case = attn_oracle.Case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=8 dim=128")
    assert list(case.cu_seqlens_q) == [0, 3, 5, 9]
    assert list(case.cu_seqlens_q_padded) == [0, 4, 8, 13]
    assert case.max_seqlen_q == 4 and list(case.pos0) == [0, 0, 0]
    assert case.inputs()["q"].shape == (13, 8, 128) and case.outputs()["lse"].shape == (13, 8)


@pytest.mark.parametrize("line", LINES, ids=LINES)
def test_inputs_are_one_copy_per_case_and_bit_identical_to_exec(line, tmp_path):
    case = attn_oracle.Case(line)
    a, b = case.inputs(), case.inputs()
    for name in a:  # the same memory both times: no copy per call
        assert a[name].dtype == np.float32 and np.shares_memory(a[name], b[name])
    ao = cli()
    if ao is None:
        pytest.skip("no build/attn-oracle (set AO_CLI): the exec: side of the comparison")
    # exec: writes the case directory; a command keeps a copy of it (then fails, which is fine).
    keep = tmp_path / "dir"
    r = subprocess.run([ao, "repro", *case.line.split(), "--backend", f"exec:cp -r \"$AO_CASE_DIR\" {keep}; false",
                        "--no-explain"], capture_output=True, text=True)
    assert (keep / "meta.json").exists(), r.stdout + r.stderr
    from attn_oracle.adapters.protocol import CaseDir
    d = CaseDir(str(keep))
    for name, arr in a.items():
        assert np.array_equal(d.input(name).view(np.uint32), arr.view(np.uint32)), name  # bitwise, NaN poison too
    for name, arr in case.outputs().items():
        assert np.array_equal(d.output(name).view(np.uint32), arr.view(np.uint32)), name  # the sentinels
    exec_meta = dict(d.meta)
    for k in ("inputs", "outputs", "sentinel"):
        exec_meta.pop(k, None)
    assert exec_meta == case.meta  # one meta.json for both paths


@pytest.mark.parametrize("line", LINES, ids=LINES)
def test_numpy_reference_passes_in_process(line):
    v = attn_oracle.Case(line).run(numpy_ref.kernel)
    assert v.passed, v.message()
    assert v.metrics and all(m.gated or not m.failed for m in v.metrics)
    # The stages' wall times: the judgement ran (the comparator with its exact answer) and took time;
    # the inputs were made before the run (Case holds the trial), so none is counted against it.
    assert v.seconds["judge"] > 0 and v.seconds["backend"] > 0 and v.seconds["run_setup"] >= 0
    assert v.seconds["inputs"] == 0
    # The built-in reference runs where the comparator reads it (the indexer's top-k), not for SDPA.
    assert v.reference_ran == line.startswith("op=indexer"), (line, v.reference_ran)


def test_judge_of_outputs_computed_outside_and_report_dir(tmp_path):
    case = attn_oracle.Case(LINES[3])  # CP rank 1: its rows start at pos0 > 0, where the bug shows
    out = numpy_ref.planted_bug(case, case.inputs())
    v = case.judge(out, report_dir=tmp_path / "rep")
    assert v.verdict == "fail" and v.failing and v.worst_rows
    assert any("topleft-cp" in b for b in v.explanation["best"]), v.message()
    assert v.report_dir and (tmp_path / "rep" / "report.json").exists()
    msg = v.message()
    assert case.line in msg and "failing:" in msg and "explain:" in msg and "report:" in msg
    ok = case.judge(numpy_ref.kernel(case, case.inputs()))
    assert ok.passed and bool(ok)


def test_a_gate_that_cannot_reject_a_zero_answer_is_weak_never_a_pass():
    # atol=1e9 makes O's gates accept anything finite: the exact answer is WEAK naming o, never a pass;
    # the same case without the override discriminates (a zero O fails it).
    case = attn_oracle.Case("op=sdpa docs=64,20 hq=2 dim=16 atol=1e9 rtol=0")
    v = case.run(numpy_ref.kernel)
    assert v.verdict == "weak" and v.weak and not v.passed and not bool(v), v.message()
    assert v.weak_outputs == ["o"], v.gate_checks
    assert "weak:o" in v.reason and "gate check:" in v.message()
    with pytest.raises(BaseException):  # pytest's xfail outcome, or AssertionError outside pytest
        case.check(numpy_ref.kernel)
    plain = attn_oracle.Case("op=sdpa docs=64,20 hq=2 dim=16")
    ok = plain.run(numpy_ref.kernel)
    assert ok.passed and not ok.weak_outputs
    out = numpy_ref.kernel(plain, plain.inputs())
    out["o"] = np.zeros_like(out["o"])  # no pad slots in this layout: only the gates can fail it
    zero = plain.judge(out)
    assert zero.verdict == "fail" and "rel_l2_err" in [m.name for m in zero.failing], zero.message()


def test_a_raising_kernel_is_an_error_never_a_pass():
    def boom(case, inputs):
        raise RuntimeError("kernel exploded")
    v = attn_oracle.Case(LINES[0]).run(boom)
    assert v.verdict == "error" and not v and "kernel exploded" in v.reason


def test_a_kernel_writing_its_inputs_is_caught():
    def writes(case, inputs):
        out = numpy_ref.kernel(case, inputs)
        inputs["k"][0, 0, 0] += 1.0
        return out
    case = attn_oracle.Case(LINES[0])
    before = case.inputs()["k"].copy()
    v = case.run(writes)
    assert v.verdict == "error" and "wrote its input" in v.reason, v.reason
    assert np.array_equal(case.inputs()["k"].view(np.uint32), before.view(np.uint32))  # restored
    assert case.run(numpy_ref.kernel).passed  # the next run sees pristine inputs


def test_judge_catches_inputs_written_before_it():
    case = attn_oracle.Case(LINES[0])
    inputs = case.inputs()
    out = numpy_ref.kernel(case, inputs)
    inputs["q"][1, 2, 3] = 0.5
    v = case.judge(out)
    assert v.verdict == "error" and "wrote its input" in v.reason, v.reason


@pytest.mark.parametrize("bad,why", [
    (lambda o: {k: v.astype(np.float64) for k, v in o.items()}, "must be float32"),
    (lambda o: {k: v[:-1] for k, v in o.items()}, "must have shape"),
    (lambda o: {"o": o["o"]}, "lse is missing"),
    (lambda o: dict(o, extra=o["o"]), "unknown output 'extra'"),
    (lambda o: [o["o"], o["lse"]], "not a dict"),
    (lambda o: {k: np.asfortranarray(v) for k, v in o.items()}, "C-contiguous"),
])
def test_malformed_outputs_are_named_errors(bad, why):
    case = attn_oracle.Case(LINES[0])
    v = case.run(lambda c, i: bad(numpy_ref.kernel(c, i)))
    assert v.verdict == "error" and why in v.reason, v.reason
    assert case.judge(bad(numpy_ref.kernel(case, case.inputs()))).verdict == "error"


def test_unwritten_outputs_fail():
    case = attn_oracle.Case(LINES[0])
    v = case.judge(case.outputs())  # the sentinel buffers as they came
    assert v.verdict == "fail", v.message()


def test_skip_is_a_named_skip():
    def declines(case, inputs):
        raise attn_oracle.Skip("my kernel: no fp16")
    v = attn_oracle.Case(LINES[0]).run(declines)
    assert v.verdict == "skipped" and "my kernel: no fp16" in v.reason and not v
    from attn_oracle.adapters.protocol import skip  # the adapters' skip() is the same in process

    def adapter_declines(case, inputs):
        skip("adapter: declined")
    v = attn_oracle.Case(LINES[0]).run(adapter_declines)
    assert v.verdict == "skipped" and "adapter: declined" in v.reason


def test_bad_case_lines_name_the_key():
    with pytest.raises(attn_oracle.BadInput, match="hq"):
        attn_oracle.Case("op=sdpa hq=0")
    with pytest.raises(attn_oracle.BadInput, match="nokey"):
        attn_oracle.Case("op=sdpa nokey=1")


def test_gate_over_a_corpus_file():
    corpus = os.path.join(ROOT, "corpus", "edge", "cp-padding.case")  # (examples/ gates the whole edge corpus)
    g = attn_oracle.gate(numpy_ref.kernel, corpus, explain=False)
    assert g.passed, g.summary()
    assert g.count("pass") == len(g.results) == len(attn_oracle.corpus_lines(corpus))
    bad = attn_oracle.gate(numpy_ref.planted_bug, corpus, explain=False)
    assert not bad.passed and bad.count("fail") > 0
    assert all(where.startswith(corpus + ":") for where, _ in bad.results)


def test_fuzz_finds_saves_and_shrinks_the_planted_bug(tmp_path):
    # dims=tiny: short documents, so numpy's loops stay fast; the campaign's defaults otherwise.
    r = attn_oracle.fuzz(numpy_ref.planted_bug, op="sdpa", budget="40", seed=3, out=tmp_path, max_failures=1,
                         dims="tiny")
    assert r["failed"] >= 1 and r["found"], r["summary"]
    f = r["found"][0]
    assert f["file"] and os.path.exists(f["file"])
    text = open(f["file"]).read()
    assert "python:attn_oracle.adapters.numpy_ref.kernel:bug=topleft-cp" in text and f["shrunk"] in text
    assert f["shrunk"] != f["original"] and len(f["shrunk"]) <= len(f["original"])  # shrunk
    ok = attn_oracle.fuzz(numpy_ref.kernel, op="sdpa", budget="10", seed=3, dims="tiny")
    assert ok.passed, ok["summary"]


def test_fuzz_of_a_raising_kernel_reports_errors_not_passes():
    def boom(case, inputs):
        raise ValueError("nope")
    r = attn_oracle.fuzz(boom, op="sdpa", budget="3", seed=1, max_failures=1, dims="tiny")
    assert r["failed"] >= 1 and not r.passed


@pytest.mark.skipif(shutil.which("sh") is None, reason="no /bin/sh")
def test_numpy_ref_is_one_code_path_with_exec(tmp_path):
    ao = cli()
    if ao is None:
        pytest.skip("no build/attn-oracle (set AO_CLI)")
    line = LINES[2]
    r = subprocess.run([ao, "repro", *line.split(), "--backend",
                        f"exec:{sys.executable} -m attn_oracle.adapters.numpy_ref --bug topleft-cp",
                        "--no-explain"], capture_output=True, text=True)
    inproc = attn_oracle.Case(line).run(numpy_ref.planted_bug, explain=False)
    assert ("verdict: FAIL" in r.stdout) == (inproc.verdict == "fail"), r.stdout


def test_fa4_adapter_is_one_kernel_function_in_process():
    # fa4_varlen.kernel is what its exec: wrapper runs; in process its declines are named skips and a rank
    # with no valid row passes without launching (neither needs torch or a GPU).
    from attn_oracle.adapters import fa4_varlen
    v = attn_oracle.Case("op=sdpa docs=16 dim=4").run(fa4_varlen.kernel)
    assert v.verdict == "skipped" and "is not supported on SM90" in v.reason, v.message()
    for line in ("op=sdpa docs=5 padded_offsets=0,64 cp=4 rank=2 dim=16 seed=3",
                 "op=sdpa pass=bwd docs=5 padded_offsets=0,64 cp=4 rank=2 dim=16 seed=3"):
        v = attn_oracle.Case(line).run(fa4_varlen.kernel, explain=False)
        assert v.verdict == "pass", v.message()


def _fe_indexer_bwd(**kw):
    """cudnn_fe_indexer's backward mapping with a numpy model of frontend 1.32.0's SM90 kernel in place of
    the GPU call (python/tests/adapters/test_cudnn_fe_indexer.py: bf16 dS into the dQ/dK products, bf16 dQ/dW)."""
    import functools
    from attn_oracle.adapters import cudnn_fe_indexer
    import test_cudnn_fe_indexer
    return functools.partial(cudnn_fe_indexer.backward, launch=test_cudnn_fe_indexer.fake_indexer_bwd_sm90, **kw)


FE_BWD_LINES = ["op=indexer pass=bwd docs=296 cp=4 rank=1 heads=4 dim=16 topk=16 seed=5",
                "op=indexer pass=bwd docs=100,60 q_pad=4,0 kv_pad=0,8 heads=4 dim=16 topk=32 loss_mean=valid seed=6",
                "op=indexer pass=bwd docs=96,40 cp=2 rank=0 heads=8 dim=16 topk=64 loss_mean=keyed seed=7",
                "op=indexer pass=bwd docs=512 heads=4 dim=32 topk=256 loss_mean=sum seed=8"]


@pytest.mark.parametrize("line", FE_BWD_LINES)
def test_a_16_bit_indexer_backward_passes_its_gates(line):
    # bf16 dS before the dQ/dK products and bf16 stored gradients are within the gates (the 16-bit terms of
    # compare_indexer_bwd.cpp); fp32 d_index_k too.
    for dk_dtype in ("bf16", "fp32"):
        v = attn_oracle.Case(line).run(_fe_indexer_bwd(slot_fill="zero", dk_dtype=dk_dtype), explain=False)
        assert v.verdict == "pass", v.message()


def test_a_one_slot_error_on_a_long_row_still_fails_the_16_bit_gates():
    import test_cudnn_fe_indexer
    line = "op=indexer pass=bwd docs=1024 heads=4 dim=32 topk=512 seed=12"

    def drop_best_slot(call, dk_dtype):  # the longest row's best key read as missing
        t = call.topk[0]
        r = int(np.argmax((t >= 0).sum(1)))
        for a in (call.topk, call.target, call.predict):
            a[0, r, 0] = -1 if a is call.topk else 0
        return test_cudnn_fe_indexer.fake_indexer_bwd_sm90(call, dk_dtype)
    import functools
    from attn_oracle.adapters import cudnn_fe_indexer
    v = attn_oracle.Case(line).run(functools.partial(cudnn_fe_indexer.backward, launch=drop_best_slot, slot_fill="zero"),
                                   explain=False)
    assert v.verdict == "fail" and v.metric("dq_err_over_gate").failed, v.message()


def test_the_kernel_reads_the_minus_one_slots():
    # Its score-grad sums every slot of a row: NaN there drops out (fmax, a failed compare), a finite
    # stand-in (poison=none: 0.25) or inf does not; zeroed slots (a framework's masked softmax) pass.
    line = "op=indexer pass=bwd docs=64,32 heads=4 dim=16 topk=32 seed=13"
    assert attn_oracle.Case(line).run(_fe_indexer_bwd(slot_fill="case"), explain=False).verdict == "pass"
    for poison, metric in (("none", "dq_err_over_gate"), ("inf", "nonfinite")):
        v = attn_oracle.Case(f"{line} poison={poison}").run(_fe_indexer_bwd(slot_fill="case"), explain=False)
        assert v.verdict == "fail" and v.metric(metric).failed, v.message()
        v = attn_oracle.Case(f"{line} poison={poison}").run(_fe_indexer_bwd(slot_fill="zero"), explain=False)
        assert v.verdict == "pass", v.message()


# The eight failures a 17-minute fuzz of cuDNN frontend 1.32.0's SM90 indexer backward found on the H200
# (shrunk: corpus/found/cudnn-fe-indexer-bwd/, one in results/gpu/indexer-backward-inprocess-2026-12-04/): the
# numpy model of its arithmetic gives each failing ratio exactly, and without rounding dS to bf16 it passes.
# Equal values round alike (values=plateau/extreme: the roundings add up, not as sqrt(n)) and tiny gradients
# underflow: the oracle's gates were too tight (fixed in compare_indexer_bwd.cpp), not the kernel wrong.
FE_BWD_DEVICE_FOUND = [
    "op=indexer docs=33 q_pad=0 kv_pad=1 mask=topleft max_seqlen_q=132 heads=64 dim=128 topk=1024 seed=726238 poison=none values=plateau loss_mean=sum pass=bwd",
    "op=indexer docs=132,4 cp=2 heads=64 dim=128 topk=2048 values=extreme pass=bwd",
    "op=indexer docs=1024 cp=8 rank=4 cp_scheme=contiguous crop=1 heads=64 dim=128 topk=2048 values=extreme pass=bwd",
    "op=indexer q_lens=74,2 kv_lens=37,1 start_pos=0 heads=64 dim=128 topk=2048 ratio=2 values=extreme pass=bwd",
    "op=indexer docs=71 heads=64 dim=128 topk=2048 values=plateau pass=bwd",
    "op=indexer q_lens=1,1 kv_lens=189,1 heads=64 dim=128 topk=2048 ratio=2 values=plateau pass=bwd",
    "op=indexer q_lens=63 kv_lens=62 heads=64 dim=128 topk=2048 ratio=2 values=plateau pass=bwd",
    "op=indexer docs=144,4,4 cp=2 heads=64 dim=128 topk=2048 values=plateau pass=bwd",
]


@pytest.mark.parametrize("line", FE_BWD_DEVICE_FOUND)
def test_the_device_found_indexer_backward_cases_pass_the_16_bit_gates(line):
    v = attn_oracle.Case(line).run(_fe_indexer_bwd(slot_fill="zero"), explain=False)
    assert v.verdict == "pass", v.message()
