# A planted defect (numpy_ref's --bug topleft-cp: query rows placed at position i instead of pos0 + i) is
# caught, and the failing test says so readably: the case line, the failing metric, explain's answer.
import subprocess
import sys

import attn_oracle
from attn_oracle.adapters import numpy_ref

LINE = "op=sdpa docs=128,64 cp=2 rank=1 hq=4 hkv=2"
TEST = f"""
import attn_oracle
from attn_oracle.adapters import numpy_ref
def test_bug():
    attn_oracle.Case({LINE!r}).check(numpy_ref.planted_bug)
"""


def test_the_planted_bug_fails_with_a_readable_message(tmp_path):
    (tmp_path / "test_bug.py").write_text(TEST)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # one test, failed
    assert f"AssertionError: FAIL: {attn_oracle.Case(LINE).line}" in r.stdout, r.stdout  # the canonical line
    assert "failing: " in r.stdout and "explain: best explanation" in r.stdout and "topleft-cp" in r.stdout, r.stdout


def test_the_verdict_names_the_defect():
    v = attn_oracle.Case(LINE).run(numpy_ref.planted_bug)
    assert v.verdict == "fail" and v.failing
    assert any("topleft-cp" in b for b in v.explanation["best"]), v.message()
