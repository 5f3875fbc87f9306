"""One verdict schema (docs/report-schema.md): a case run through the CLI into report.json and the same case run
in process give objects with the same fields, and the same values where the run is deterministic; the Python
`Verdict` reads a report.json case as it reads its own; every field is documented.

  PYTHONPATH=python AO_CLI=build/attn-oracle python -m pytest -q python/tests/test_verdict_schema.py
"""
import json
import math
import os
import re
import subprocess
import sys

import pytest

import attn_oracle
from attn_oracle.adapters import numpy_ref

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# CP rank 1: the planted bug (topleft-cp) fails it, so metrics, worst rows and the explanation are all filled.
LINE = "op=sdpa docs=40,24 cp=2 rank=1 hq=4 hkv=2 dtype=fp16 seed=13"
# What differs between two runs of one case: wall times, where the report went, the build and backend that ran
# (the text prints the times).
NOT_DETERMINISTIC = {"seconds", "report_dir", "versions", "backend", "backend_version", "text"}


def cli():
    for c in (os.environ.get("AO_CLI"), os.path.join(ROOT, "build", "attn-oracle")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def fields(x, path=""):
    """Every field of a schema object as a path (metric names and list positions are not fields: "metrics.*",
    "worst_rows[]"), with the type of JSON value found there."""
    out = set()
    if isinstance(x, dict):
        for k, v in x.items():
            p = f"{path}.*" if path == "metrics" else (f"{path}.{k}" if path else k)
            out.add(p)
            out |= fields(v, p)
    elif isinstance(x, list):
        for v in x:
            out |= fields(v, path + "[]")
    return out


def renamed(x, old, new):
    """x with the string `old` (a backend's name) replaced by `new` in every string: the explanation names it."""
    if isinstance(x, dict):
        return {k: renamed(v, old, new) for k, v in x.items()}
    if isinstance(x, list):
        return [renamed(v, old, new) for v in x]
    return x.replace(old, new) if isinstance(x, str) else x


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The case's object from the CLI's report.json and from the in-process run (and its own report.json)."""
    ao = cli()
    if ao is None:
        pytest.skip("no build/attn-oracle (set AO_CLI): the CLI side of the comparison")
    tmp = tmp_path_factory.mktemp("schema")
    r = subprocess.run([ao, "repro", *LINE.split(), "--backend",
                        f"exec:{sys.executable} -m attn_oracle.adapters.numpy_ref --bug topleft-cp",
                        "--report-dir", str(tmp / "cli")], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr  # the planted bug fails the case
    with open(tmp / "cli" / "report.json") as f:
        report = json.load(f)
    assert report["schema_version"] == 5
    v = attn_oracle.Case(LINE).run(numpy_ref.planted_bug, report_dir=tmp / "py")
    with open(tmp / "py" / "report.json") as f:
        own = json.load(f)["cases"][0]
    return report["cases"][0], v, own


def test_cli_report_and_in_process_verdict_have_the_same_fields_and_values(both):
    cli_case, v, own = both
    py = v.as_dict()
    assert v.verdict == "fail" and py["explanation"] is not None, v.message()
    assert sorted(fields(cli_case)) == sorted(fields(py))
    assert list(cli_case) == list(py) and list(cli_case["metrics"]) == list(py["metrics"])  # one order too
    # The deterministic values: verdict, reason, metrics, worst rows, gate checks, the explanation (bitwise the
    # same outputs: the exec: adapter runs the function the in-process run calls).
    a = renamed({k: x for k, x in cli_case.items() if k not in NOT_DETERMINISTIC}, cli_case["backend"], "B")
    b = renamed({k: x for k, x in py.items() if k not in NOT_DETERMINISTIC}, py["backend"], "B")
    assert a == b
    # The in-process run's report.json holds the very object the verdict was read from.
    assert own == py and own["report_dir"] == v.report_dir


def test_verdict_reads_a_report_json_case_as_its_own(both):
    cli_case, v, _ = both
    w = attn_oracle.Verdict(cli_case)  # from report.json: the same reader, no compiled extension needed
    assert w.verdict == v.verdict == "fail" and w.label == "FAIL" and not w
    assert [m.name for m in w.metrics] == [m.name for m in v.metrics]
    for m, n in zip(w.metrics, v.metrics):
        assert (m.value, m.rule, m.gated, m.failed, m.gate, m.gate_ratio) == \
               (n.value, n.rule, n.gated, n.failed, n.gate, n.gate_ratio), m.name
    assert w.worst_rows == v.worst_rows and w.gate_checks == v.gate_checks
    assert w.explanation["best"] == v.explanation["best"] and "topleft-cp" in w.explanation["best"][0]
    assert w.message().replace(w.backend, "B").split("\n  report:")[0] == \
           v.message().replace(v.backend, "B").split("\n  report:")[0]
    assert w.report_dir and w.report_dir.endswith("cli")


def test_deprecated_python_names_are_aliases(both):
    _, v, _ = both
    assert v.kind == v.verdict and v.failing_rows == v.worst_rows
    assert v.explain == v.explanation["headline"] and v.explain_text == v.explanation["text"]
    assert v.explain_best == v.explanation["best"]
    assert (v.backend_seconds, v.ref_seconds, v.inputs_seconds, v.run_setup_seconds, v.judge_seconds,
            v.gate_check_seconds) == tuple(v.seconds[k] for k in ("backend", "reference", "inputs", "run_setup",
                                                                  "judge", "gate_check"))
    assert all(m.ratio == m.gate_ratio for m in v.metrics)
    for name in ("kind", "failing_rows", "explain", "explain_text", "explain_best", "backend_seconds", "ref_seconds",
                 "inputs_seconds", "run_setup_seconds", "judge_seconds", "gate_check_seconds"):
        assert "Deprecated" in getattr(attn_oracle.Verdict, name).__doc__, name
    assert "Deprecated" in attn_oracle.Metric.ratio.__doc__


def test_non_finite_numbers_are_read_back_as_floats(both):
    cli_case, _, _ = both
    d = json.loads(json.dumps(cli_case))
    name = next(iter(d["metrics"]))
    d["metrics"][name].update(value="nan", gate="inf", gate_ratio="-inf")
    d["worst_rows"][0]["value"] = "inf"
    w = attn_oracle.Verdict(json.dumps(d))  # the JSON text, as the core returns it
    m = w.metric(name)
    assert math.isnan(m.value) and m.gate == math.inf and m.gate_ratio == -math.inf
    assert w.worst_rows[0]["value"] == math.inf and "inf" in w.message()


def test_every_field_is_documented(both):
    cli_case, _, _ = both
    with open(os.path.join(ROOT, "docs", "report-schema.md")) as f:
        doc = f.read()
    named = set(re.findall(r"`([a-z_]+)`", doc))
    last = lambda p: [s for s in re.split(r"[.\[\]*]+", p) if s][-1]  # noqa: E731
    missing = sorted(p for p in fields(cli_case) if not p.endswith("*") and last(p) not in named)
    # versions' keys ("attn-oracle", "backend") are named in the versions row.
    missing = [p for p in missing if not p.startswith("versions.")]
    assert not missing, f"fields not in docs/report-schema.md: {missing}"
