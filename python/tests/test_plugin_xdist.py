"""The pytest plugin under pytest-xdist: a small session (the edge corpus's GQA cases through a bug model, fuzz
campaigns of cpu-ref and a bug model) run with -n 2 gives what the same session gives in one process."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install '.[test]' installs it)")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "corpus", "edge", "masks-topk-gqa.case")

SESSION = """
import attn_oracle

@attn_oracle.cases("corpus/edge/masks-topk-gqa.case")
def test_gate(case):
    case.check("cpu-bug:gqa-modulo")

def test_fuzz_bug(ao_fuzz):
    ao_fuzz("cpu-bug:gqa-modulo", op="sdpa", dims="tiny", shrink_runs=60, confirm_runs=1)

def test_fuzz_ref(ao_fuzz):
    ao_fuzz("cpu-ref", dims="tiny", confirm_runs=1)
"""


def run_session(tmp_path, name, *args):
    d = tmp_path / name
    d.mkdir()
    (d / "test_session.py").write_text(SESSION)
    summary, found, junit = d / "summary.json", d / "found", d / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(d), "--ao-corpus", CORPUS,
                        "--ao-fuzz-budget", "25", "--ao-fuzz-out", str(found), "--ao-summary", str(summary),
                        "--junitxml", str(junit), *args], capture_output=True, text=True, cwd=d)
    assert r.returncode == 1, r.stdout + r.stderr  # the bug model fails cases: the session fails, and runs to its end
    return json.loads(summary.read_text()), found, junit, r.stdout


def signatures_of_files(folder):
    sigs = []
    for f in sorted(folder.glob("*.case")):
        sigs += [line.split(":", 1)[1].strip() for line in f.read_text().splitlines() if line.startswith("# signature:")]
    return sigs


def test_two_workers_give_the_one_process_session(tmp_path):
    one, found1, _, _ = run_session(tmp_path, "one", "-n", "0")
    two, found2, junit2, out2 = run_session(tmp_path, "two", "-n", "2")
    assert "fuzz-shard1of2" in (junit2.read_text()), "each campaign is split into one test per worker"
    assert one["verdicts"] == two["verdicts"] and one["verdicts"]["fail"] > 0 and one["verdicts"]["pass"] > 0
    assert sorted(one["cases"], key=str) == sorted(two["cases"], key=str)
    assert one["fuzz"].keys() == two["fuzz"].keys() and len(one["fuzz"]) == 2
    for test, m1 in one["fuzz"].items():
        m2 = two["fuzz"][test]
        assert (m1["shards"], m2["shards"]) == (["0/1"], ["0/2", "1/2"])
        for k in ("cases", "passed", "failed", "skipped", "weak", "invalid"):
            assert m1[k] == m2[k], (test, k, m1[k], m2[k])
        # The same failures, kept as one process keeps them: the same signatures, shrunk lines and merges.
        assert sorted((f["signature"], f["shrunk"], f["merged"]) for f in m1["found"]) == \
               sorted((f["signature"], f["shrunk"], f["merged"]) for f in m2["found"])
    bug = one["fuzz"][next(t for t in one["fuzz"] if t.endswith("test_fuzz_bug"))]
    assert bug["cases"] == 25 and bug["found"], bug
    # Saved once across the workers: one file per signature in the shared folder, the same signatures.
    sig2 = signatures_of_files(found2)
    assert len(sig2) == len(set(sig2))
    assert sorted(sig2) == sorted(signatures_of_files(found1)) == \
           sorted(f["signature"] for f in bug["found"])
    assert "attn-oracle: fuzz campaigns (merged over their shards)" in out2 and "merged from 2 shard(s)" in out2
    # One JUnit XML: every worker's tests, each shard's result among its test's properties.
    cases = list(ET.parse(junit2).getroot().iter("testcase"))
    assert len(cases) == len(one["cases"]) + 4
    props = [p.get("name") for tc in cases for p in tc.iter("property")]
    assert props.count("ao_fuzz") == 4


def test_report_index_lists_every_workers_reports(tmp_path):
    rep = tmp_path / "reports"
    two, _, _, _ = run_session(tmp_path, "two", "-n", "2", "--ao-report-dir", str(rep), "--ao-fuzz-budget", "0",
                               "-k", "test_gate")
    index = json.loads((rep / "index.json").read_text())
    assert len(index) == len(two["cases"]) and {v["verdict"] for v in index} >= {"pass", "fail"}
    assert all((rep / os.path.relpath(v["report_dir"], rep) / "report.json").exists() for v in index)
    assert (rep / "index.md").read_text().count("| FAIL |") == two["verdicts"]["fail"]
