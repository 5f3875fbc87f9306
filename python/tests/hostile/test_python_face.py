"""The hostile battery, class 27: the in-process Python face (attn_oracle) attacked by its kernel: inputs
rewritten so that the verdict is computed against them (a fingerprint kept, or a thread writing after the
kernel returned), input arrays used after their run or their case, Ctrl-C in a kernel.

Each attack is a Python program run in its own process (a crash is that process's signal, not a dead test
run) under a time limit; it prints one JSON line, the observed behaviour, which the test checks against the
expected. docs/threat-model.md says what the in-process face protects against and what it cannot."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import json, os, signal, sys, threading, time
import numpy as np
import attn_oracle as ao
from attn_oracle.adapters import numpy_ref
def say(**kw):
    print("RESULT " + json.dumps(kw), flush=True)
"""


def face(code, limit=60, cwd=None):
    """Runs code (after PRELUDE) in a fresh Python; returns (returncode, the RESULT dict or None, output)."""
    try:
        import attn_oracle._core  # noqa: F401
    except ImportError as e:
        pytest.skip(f"attn_oracle's extension is not built: {e}")
    import attn_oracle
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(attn_oracle.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_root, os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=limit, env=env, cwd=cwd)
    out = r.stdout + r.stderr
    res = [json.loads(l[len("RESULT "):]) for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    return r.returncode, (res[-1] if res else None), out


# Rewrites q's first element and its 9th and 10th so that the harness's old unkeyed fingerprint of q (lane 0
# of block 0 of oracle/inputs/input_fingerprint.cpp's hash, with its constant seed) stays the same.
FORGE = """
M = (1 << 64) - 1
KMUL = 0x9fb21c651e98df25
def mixstep(x):
    y = (x * KMUL) & M
    return y ^ (y >> 32)
def forge_q(q):
    bits = q.reshape(-1).view(np.uint32)
    seed = 0x9e3779b97f4a7c15
    w1 = int(bits[0]) | (int(bits[1]) << 32)
    w2 = int(bits[8]) | (int(bits[9]) << 32)
    a = mixstep(seed ^ w1)
    for k in range(1, 100000):
        f0 = np.array([q.reshape(-1)[0] + 0.25 * k], np.float32).view(np.uint32)[0]
        w1n = int(f0) | (int(bits[1]) << 32)
        w2n = a ^ w2 ^ mixstep(seed ^ w1n)
        pair = np.array([w2n & 0xffffffff, w2n >> 32], np.uint32)
        lo, hi = pair.view(np.float32)
        if np.isfinite(lo) and np.isfinite(hi) and abs(lo) < 4 and abs(hi) < 4:
            bits[0], bits[8], bits[9] = f0, pair[0], pair[1]
            return
    raise RuntimeError("no forgery found")
"""

SDPA = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=8 dim=128 seed=5"


def test_kernel_rewriting_its_input_keeping_the_fingerprint_never_passes():
    # expected: ERROR (the kernel's inputs are its own copy, compared bit for bit) or FAIL; never PASS
    rc, res, out = face(FORGE + f"""
def forger(case, inputs):
    forge_q(inputs["q"])
    return numpy_ref.kernel(case, inputs)
v = ao.Case({SDPA!r}).run(forger, explain=False)
say(verdict=v.verdict, reason=v.reason)
""")
    assert res is not None, out
    assert res["verdict"] in ("error", "fail"), res


def test_case_inputs_rewritten_keeping_the_fingerprint_never_pass_judge():
    rc, res, out = face(FORGE + f"""
case = ao.Case({SDPA!r})
inputs = case.inputs()
forge_q(inputs["q"])
v = case.judge(numpy_ref.kernel(case, inputs), explain=False)
say(verdict=v.verdict, reason=v.reason)
""")
    assert res is not None, out
    assert res["verdict"] in ("error", "fail"), res


def test_a_thread_rewriting_inputs_after_the_kernel_returned_never_passes():
    # The kernel answers for q/2 and leaves a thread that writes q/2 into its inputs for a while after it
    # returned (from at once to 30 ms later); the verdict is computed while it writes.
    rc, res, out = face("""
line = "op=sdpa docs=384,128 hq=4 hkv=2 dim=64 seed=3"
verdicts = []
for delay in (0.0, 0.0, 0.002, 0.01, 0.03):
    def kernel(case, inputs, delay=delay):
        fake = {k: v.copy() for k, v in inputs.items()}
        fake["q"] *= 0.5
        out = numpy_ref.kernel(case, fake)
        def later():
            time.sleep(delay)
            end = time.time() + 0.3
            while time.time() < end:
                np.copyto(inputs["q"], fake["q"])
        threading.Thread(target=later, daemon=True).start()
        return out
    verdicts.append(ao.Case(line).run(kernel, explain=False).verdict)
    time.sleep(0.35)
say(verdicts=verdicts)
""", limit=120)
    assert res is not None, out
    assert "pass" not in res["verdicts"], res


BIG = "op=sdpa docs=8192 hq=8 hkv=1 dim=128"  # q is 32 MiB: freed memory goes back to the system


def test_case_inputs_outlive_the_restore_after_a_write():
    # expected: the written array stays readable and writable (it owns its copy), the judge an ERROR
    rc, res, out = face(f"""
case = ao.Case({BIG!r})
a = case.inputs()
a["q"][0, 0, 0] += 1.0
v = case.judge({{"o": np.zeros_like(case.outputs()["o"]), "lse": np.zeros_like(case.outputs()["lse"])}},
               explain=False)
total = float(np.nansum(a["q"][:64]))
a["q"][:] = 0.0
fresh = case.inputs()["q"]
say(verdict=v.verdict, reason=v.reason, fresh_untouched=bool(np.any(fresh != 0)))
""", limit=120)
    assert rc == 0 and res is not None, f"rc {rc}: {out[-2000:]}"
    assert res["verdict"] == "error" and "wrote its input" in res["reason"], res
    assert res["fresh_untouched"], res


def test_kernel_inputs_kept_after_gate_returns_are_safe(tmp_path):
    # The kernel keeps its inputs and skips; after ao.gate returns they are read and written.
    (tmp_path / "big.case").write_text(BIG + "\n")
    rc, res, out = face(f"""
kept = []
def keeper(case, inputs):
    kept.append(inputs)
    raise ao.Skip("kept")
g = ao.gate(keeper, {str(tmp_path / "big.case")!r}, explain=False)
s = float(np.nansum(kept[0]["q"][:64]))
kept[0]["q"][:] = 1.0
kept[0]["k"][:] = 1.0
say(n=len(kept), skipped=[v.verdict for v in g.verdicts])
""", limit=120)
    assert rc == 0 and res is not None, f"rc {rc}: {out[-2000:]}"
    assert res["n"] == 1 and res["skipped"] == ["skipped"], res


def test_a_write_through_case_1s_kept_inputs_never_reaches_case_2(tmp_path):
    line = "op=sdpa docs=200,56 hq=4 hkv=2 dim=64"
    (tmp_path / "two.case").write_text(f"{line} seed=1\n{line} seed=2\n")
    rc, res, out = face(f"""
kept = []
def kernel(case, inputs):
    for old in kept:  # case 1's arrays: their memory is no other case's
        for a in old.values():
            a[...] = 0.0
    kept.append(inputs)
    return numpy_ref.kernel(case, inputs)
g = ao.gate(kernel, {str(tmp_path / "two.case")!r}, explain=False)
say(verdicts=[v.verdict for v in g.verdicts], reasons=[v.reason for v in g.verdicts])
""", limit=120)
    assert rc == 0 and res is not None, f"rc {rc}: {out[-2000:]}"
    assert res["verdicts"] == ["pass", "pass"], res


CTRL_C_KERNEL = """
calls = [0]
def kernel(case, inputs):
    calls[0] += 1
    if calls[0] == STOP_AT:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the kernel runs: KeyboardInterrupt here
    return numpy_ref.kernel(case, inputs)
"""


def test_ctrl_c_in_a_kernel_stops_gate_and_blames_nothing(tmp_path):
    line = "op=sdpa docs=64,20 hq=2 dim=16"
    (tmp_path / "c.case").write_text("".join(f"{line} seed={s}\n" for s in range(1, 5)))
    rc, res, out = face("STOP_AT = 2\n" + CTRL_C_KERNEL + f"""
try:
    g = ao.gate(kernel, {str(tmp_path / "c.case")!r}, explain=False)
    say(raised=False, calls=calls[0], verdicts=[v.verdict for v in g.verdicts])
except KeyboardInterrupt:
    say(raised=True, calls=calls[0])
""")
    assert res is not None, out
    assert res == {"raised": True, "calls": 2}, res


def test_ctrl_c_in_a_kernel_stops_fuzz_and_saves_no_found_file(tmp_path):
    found = tmp_path / "found"
    rc, res, out = face("STOP_AT = 3\n" + CTRL_C_KERNEL + f"""
try:
    r = ao.fuzz(kernel, op="sdpa", budget="20", seed=2, out={str(found)!r})
    say(raised=False, calls=calls[0], failed=r["failed"])
except KeyboardInterrupt:
    say(raised=True, calls=calls[0])
""", limit=120)
    assert res is not None, out
    saved = sorted(p.name for p in found.rglob("*") if p.is_file()) if found.exists() else []
    assert res == {"raised": True, "calls": 3} and not saved, (res, saved)


def test_ctrl_c_in_a_checked_kernel_ends_pytest_with_exit_2(tmp_path):
    (tmp_path / "test_it.py").write_text(textwrap.dedent(f"""
        import signal
        import attn_oracle as ao
        from attn_oracle.adapters import numpy_ref
        def kernel(case, inputs):
            signal.raise_signal(signal.SIGINT)
            return numpy_ref.kernel(case, inputs)
        def test_one():
            ao.Case({SDPA!r}).check(kernel)
        def test_two():
            pass
    """))
    rc, res, out = face(f"""
import subprocess
r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", {str(tmp_path)!r}],
                   capture_output=True, text=True, cwd={str(tmp_path)!r})
say(rc=r.returncode, tail=r.stdout[-600:])
""", limit=120)
    assert res is not None, out
    assert res["rc"] == 2, res


# Arguments the CLI checks, given to the Python face: each a BadInput (ReportDirError for a report folder)
# naming the argument, raised before any kernel runs. (label, call, the words the message must hold)
ARGUMENT_ATTACKS = [
    ("max_mem_gib nan", "ao.Case(LINE, max_mem_gib=float('nan'))", ["max_mem_gib", "nan"]),
    ("max_mem_gib 1e30", "ao.Case(LINE, max_mem_gib=1e30)", ["max_mem_gib", "1e+30"]),
    ("max_mem_gib -1", "ao.Case(LINE, max_mem_gib=-1)", ["max_mem_gib", "-1"]),
    ("max_mem_gib text", "ao.Case(LINE, max_mem_gib='8')", ["max_mem_gib", "'8'"]),
    ("gate max_mem_gib inf", "ao.gate(kernel, CORPUS, max_mem_gib=float('inf'))", ["max_mem_gib", "inf"]),
    ("fuzz seed -1", "ao.fuzz(kernel, budget='2', seed=-1)", ["seed", "-1"]),
    ("fuzz seed 2**64", "ao.fuzz(kernel, budget='2', seed=2**64)", ["seed", "18446744073709551616"]),
    ("fuzz seed 1.5", "ao.fuzz(kernel, budget='2', seed=1.5)", ["seed", "1.5"]),
    ("fuzz shrink_runs 2**40", "ao.fuzz(kernel, budget='2', shrink_runs=2**40)", ["shrink_runs", "1099511627776"]),
    ("fuzz max_failures -1", "ao.fuzz(kernel, budget='2', max_failures=-1)", ["max_failures", "-1"]),
    ("fuzz confirm_runs 101", "ao.fuzz(kernel, budget='2', confirm_runs=101)", ["confirm_runs", "101"]),
    ("fuzz op lone surrogate", "ao.fuzz(kernel, budget='2', op='sd\\ud800pa')", ["op", "\\ud800"]),
    ("fuzz dims lone surrogate", "ao.fuzz(kernel, budget='2', dims='\\udc80')", ["dims", "\\udc80"]),
    ("Case line lone surrogate", "ao.Case('op=sdpa docs=\\ud800')", ["line", "\\ud800"]),
    ("gate corpus lone surrogate", "ao.gate(kernel, 'c\\ud800.case')", ["corpus", "\\ud800"]),
    ("fuzz out unwritable", "ao.fuzz(kernel, budget='2', out='/proc/self/no/such')", ["out", "/proc/self/no/such"]),
    ("fuzz out a file", "ao.fuzz(kernel, budget='2', out=CORPUS)", ["out", "c.case"]),
    ("gate report_dir unwritable", "ao.gate(kernel, CORPUS, report_dir='/proc/self/no/such')", ["/proc/self/no/such"]),
    ("run report_dir a file", "ao.Case(LINE).run(kernel, report_dir=CORPUS)", [".case"]),
]


@pytest.fixture(scope="module")
def argument_results(tmp_path_factory):
    d = tmp_path_factory.mktemp("args")
    corpus = d / "c.case"
    corpus.write_text("op=sdpa docs=64,20 hq=2 dim=16\n")
    table = [(label, call) for label, call, _ in ARGUMENT_ATTACKS]
    rc, res, out = face(f"""
LINE, CORPUS = "op=sdpa docs=64,20 hq=2 dim=16", {str(corpus)!r}
calls = [0]
def kernel(case, inputs):
    calls[0] += 1
    return numpy_ref.kernel(case, inputs)
got = {{}}
for label, call in {table!r}:
    calls[0] = 0
    try:
        eval(call)
        got[label] = {{"raised": None, "calls": calls[0]}}
    except BaseException as e:
        got[label] = {{"raised": type(e).__name__, "bad_input": isinstance(e, (ao.BadInput, ao.ReportDirError)),
                      "msg": str(e).encode("ascii", "backslashreplace").decode(), "calls": calls[0]}}
say(**got)
""", limit=120)
    assert res is not None, out
    return res


@pytest.mark.parametrize("label,call,words", ARGUMENT_ATTACKS, ids=[a[0] for a in ARGUMENT_ATTACKS])
def test_python_arguments_are_refused_naming_the_field(argument_results, label, call, words):
    r = argument_results[label]
    assert r["raised"] and r["bad_input"], r
    assert all(w in r["msg"] for w in words), (words, r["msg"])
    assert r["calls"] == 0, r  # refused before any kernel ran


def test_a_kernel_named_with_a_lone_surrogate_still_gets_its_verdict():
    rc, res, out = face(f"""
def kernel(case, inputs):
    return numpy_ref.kernel(case, inputs)
kernel.ao_name = "bad\\udc80name"
v = ao.Case({SDPA!r}).run(kernel, explain=False)
say(verdict=v.verdict, backend=v.backend.encode("ascii", "backslashreplace").decode())
""")
    assert res is not None, out
    assert res["verdict"] == "pass" and "bad" in res["backend"], res


def test_pytest_report_folders_are_unique_per_case(tmp_path):
    # Two failing cases whose lines share their first 120 characters: two report folders.
    base = "op=sdpa docs=" + ",".join(str(i) for i in range(1, 45)) + " hq=2 dim=16"
    pytest.importorskip("attn_oracle._core")
    import attn_oracle
    assert len(attn_oracle.Case(base).line) > 120  # the canonical lines share their first 120 characters
    (tmp_path / "c.case").write_text(f"{base} seed=1\n{base} seed=2\n")
    (tmp_path / "test_it.py").write_text(textwrap.dedent("""
        import attn_oracle as ao
        from attn_oracle.adapters import numpy_ref
        def wrong(case, inputs):
            out = numpy_ref.kernel(case, inputs)
            out["o"] = out["o"] * 0.5
            return out
        @ao.cases("c.case")
        def test_it(case):
            case.check(wrong, explain=False)
    """))
    rc, res, out = face(f"""
import subprocess
r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--ao-report-dir",
                    {str(tmp_path / "rep")!r}, {str(tmp_path)!r}], capture_output=True, text=True, cwd={str(tmp_path)!r})
say(rc=r.returncode, tail=r.stdout[-800:])
""", limit=120)
    assert res is not None and res["rc"] == 1, (res, out)
    folders = [p for p in (tmp_path / "rep").iterdir() if (p / "report.json").exists()]
    assert len(folders) == 2, folders


@pytest.mark.parametrize("budget", ["0", "0s", "0m", "0h"])
def test_pytest_fuzz_budget_zero_skips_in_every_unit(tmp_path, budget):
    (tmp_path / "test_it.py").write_text(textwrap.dedent("""
        from attn_oracle.adapters import numpy_ref
        def test_fuzz(ao_fuzz):
            ao_fuzz(numpy_ref.kernel, op="sdpa")
    """))
    rc, res, out = face(f"""
import subprocess
r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--ao-fuzz-budget",
                    {budget!r}, {str(tmp_path)!r}], capture_output=True, text=True, cwd={str(tmp_path)!r})
say(rc=r.returncode, tail=r.stdout[-800:])
""", limit=120)
    assert res is not None and res["rc"] == 0 and "skipped" in res["tail"], (res, out)


@pytest.mark.hostile_full  # waits out the 10 s bound (the CLI's gate attack on a FIFO runs in quick mode)
def test_a_fifo_corpus_with_no_writer_is_refused_not_hung(tmp_path):
    fifo = tmp_path / "lonely.case"
    os.mkfifo(fifo)
    rc, res, out = face(f"""
t0 = time.time()
try:
    ao.gate(lambda c, i: numpy_ref.kernel(c, i), {str(fifo)!r}, explain=False)
    say(raised=None)
except Exception as e:
    say(raised=type(e).__name__, msg=str(e), seconds=time.time() - t0)
""", limit=40)
    assert res is not None, out
    assert res["raised"] == "CaseFileError" and "no writer" in res["msg"] and res["seconds"] < 20, res
