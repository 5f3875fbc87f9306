"""The pytest plugin from the outside: a test file run by pytest in a subprocess, as a user runs it."""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import attn_oracle

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "corpus", "edge", "cp-padding.case")


def run_pytest(tmp_path, text, *args):
    (tmp_path / "test_it.py").write_text(text)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(tmp_path), *args],
                          capture_output=True, text=True, cwd=tmp_path)


def test_cases_ids_are_the_lines_and_failures_carry_the_report(tmp_path):
    text = ("import attn_oracle\nfrom attn_oracle.adapters import numpy_ref\n"
            "@attn_oracle.cases('no/such/corpus')  # replaced by --ao-corpus\n"
            "def test_bug(case):\n"
            "    case.check(numpy_ref.planted_bug)\n")
    rep, junit = tmp_path / "reports", tmp_path / "junit.xml"
    r = run_pytest(tmp_path, text, "--ao-corpus", CORPUS, "--ao-report-dir", str(rep), "--junitxml", str(junit),
                   "--collect-only", "-q")
    lines = [row[2] for row in attn_oracle.corpus_lines(CORPUS)]
    for line in lines:  # one test per case line, the line as its id
        assert f"test_bug[{line}]" in r.stdout, r.stdout
    r = run_pytest(tmp_path, text, "--ao-corpus", CORPUS, "--ao-report-dir", str(rep), "--junitxml", str(junit))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "AssertionError: FAIL: op=sdpa docs=128,64 cp=2 rank=1 hkv=2" in r.stdout, r.stdout
    assert "report: " + str(rep) in r.stdout
    failures = [tc.find("failure") for tc in ET.parse(junit).getroot().iter("testcase")]
    texts = [f.get("message", "") + (f.text or "") for f in failures if f is not None]
    assert texts and all("explain: " in t and "failing: " in t for t in texts)  # what a CI system shows
    assert any((d / "report.json").exists() for d in rep.iterdir())


def test_fuzz_fixture_fails_with_the_shrunk_case_and_keeps_its_file(tmp_path):
    text = ("from attn_oracle.adapters import numpy_ref\n"
            "def test_fuzz(ao_fuzz):\n"
            "    ao_fuzz(numpy_ref.planted_bug, op='sdpa', dims='tiny', max_failures=1)\n")
    out = tmp_path / "found"
    r = run_pytest(tmp_path, text, "--ao-fuzz-budget", "40", "--ao-fuzz-out", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "shrunk: op=sdpa" in r.stdout and "saved: " + str(out) in r.stdout, r.stdout
    assert list(out.glob("*.case"))
    r = run_pytest(tmp_path, text, "--ao-fuzz-budget", "0")
    assert r.returncode == 0 and "--ao-fuzz-budget 0" in r.stdout, r.stdout  # skipped, visibly


def test_a_missing_corpus_is_a_usage_error(tmp_path):
    text = ("import attn_oracle\n"
            "@attn_oracle.cases('no/such/corpus')\n"
            "def test_x(case):\n"
            "    pass\n")
    r = run_pytest(tmp_path, text)
    assert r.returncode != 0 and "no/such/corpus" in (r.stdout + r.stderr)
