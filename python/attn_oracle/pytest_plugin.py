"""The attn-oracle pytest plugin (entry point pytest11 "attn_oracle"; loaded by `pip install .`).

    import attn_oracle as ao

    @ao.cases("corpus/edge")                 # one test per case line; the line is the test id
    def test_my_kernel(case):
        case.check(my_kernel)                # AssertionError: case line, failing metrics, explain, report

    def test_fuzz_my_kernel(ao_fuzz):
        ao_fuzz(my_kernel, op="sdpa")        # a short campaign (--ao-fuzz-budget); found cases saved, shrunk

Options: --ao-corpus PATH (repeatable) replaces every @cases corpus; --ao-fuzz-budget N|30s (0 skips the
fuzz tests); --ao-fuzz-out DIR keeps found files (default: the test's tmp_path); --ao-report-dir DIR
writes a report directory per failing case (its path is in the failure text); --ao-strict fails a WEAK
case (a gate that an all-zero or NaN answer passes: docs/tolerances.md, "WEAK"), which is otherwise an expected
failure (xfail); the terminal summary counts weak cases and fuzz cases apart.
A corpus path is taken as given, else from the working directory, else from the test file's folder
and the folders above it (so "corpus/edge" finds the repository's corpus from examples/).
"""
import os
import re

import pytest

import attn_oracle
from attn_oracle import case as _case  # the in-process check's module state: strict mode, weak cases seen


def pytest_addoption(parser):
    g = parser.getgroup("attn_oracle", "attn-oracle")
    g.addoption("--ao-corpus", action="append", default=[], metavar="PATH",
                help="corpus files/directories for @attn_oracle.cases tests (replaces the decorator's)")
    g.addoption("--ao-fuzz-budget", default="20", metavar="N|TIME",
                help="budget of each ao_fuzz campaign: N cases or a time (30s, 5m); 0 skips them (default 20)")
    g.addoption("--ao-fuzz-out", default=None, metavar="DIR",
                help="where ao_fuzz saves found (shrunk) cases (default: the test's tmp_path)")
    g.addoption("--ao-report-dir", default=None, metavar="DIR",
                help="write a report directory per failing case under DIR")
    g.addoption("--ao-strict", action="store_true", default=False,
                help="a WEAK case (a gate an all-zero or NaN answer passes) fails instead of xfailing")


def pytest_configure(config):
    config.addinivalue_line("markers", "ao_cases(*corpus): parametrize over attn-oracle corpus case lines "
                                       "(the fixture `case`)")
    _case.strict_weak = bool(config.getoption("--ao-strict"))


_fuzz_weak = [0]  # weak cases of the ao_fuzz campaigns of this session


def pytest_terminal_summary(terminalreporter):
    if not _case.weak_seen and not _fuzz_weak[0]:
        return
    terminalreporter.write_sep("-", "attn-oracle: weak cases (a gate an all-zero or NaN answer passes)")
    for case, reason in _case.weak_seen:
        terminalreporter.write_line(f"WEAK {case}: {reason}")
    terminalreporter.write_line(f"{len(_case.weak_seen)} weak case(s) checked, {_fuzz_weak[0]} in fuzz campaigns")


def _resolve(path, start):
    if os.path.isabs(path) or os.path.exists(path):
        return path
    d = start
    while True:
        cand = os.path.join(d, path)
        if os.path.exists(cand):
            return cand
        up = os.path.dirname(d)
        if up == d:
            raise pytest.UsageError(f"attn_oracle: corpus path {path!r} not found (from the working directory "
                                    f"or {start} and the folders above it)")
        d = up


def pytest_generate_tests(metafunc):
    mark = metafunc.definition.get_closest_marker("ao_cases")
    if mark is None:
        return
    if "case" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @attn_oracle.cases needs the fixture `case`")
    given = metafunc.config.getoption("--ao-corpus") or list(mark.args)
    if not given:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: @attn_oracle.cases names no corpus")
    start = os.path.dirname(str(metafunc.definition.path))
    try:
        rows = attn_oracle.corpus_lines([_resolve(p, start) for p in given])
    except (attn_oracle.CaseFileError, attn_oracle.BadInput) as e:
        raise pytest.UsageError(f"attn_oracle: {e}") from None
    lines = list(dict.fromkeys(r[2] for r in rows))  # each line once, in corpus order
    metafunc.parametrize("case", lines, ids=lines, indirect=True)


class _CaseForTest(attn_oracle.Case):
    """A Case whose check/judge/run write a report directory per case under --ao-report-dir."""

    report_root = None

    def _report(self, kw):
        if self.report_root and "report_dir" not in kw:
            kw["report_dir"] = os.path.join(self.report_root, _case._slug(self.line))
        return kw

    def judge(self, outputs, **kw):
        return super().judge(outputs, **self._report(kw))

    def run(self, kernel, **kw):
        return super().run(kernel, **self._report(kw))


@pytest.fixture
def case(request):
    """The attn_oracle.Case of the test's case line (@attn_oracle.cases); inputs generated on first use."""
    line = getattr(request, "param", None)
    if line is None:
        raise pytest.UsageError("the fixture `case` comes with @attn_oracle.cases(corpus)")
    c = _CaseForTest(line)
    c.report_root = request.config.getoption("--ao-report-dir")
    return c


@pytest.fixture
def ao_fuzz(request, tmp_path):
    """ao_fuzz(kernel, op=None, **fuzz_kw): a campaign of --ao-fuzz-budget generated cases through kernel;
    fails with each unique failure's shrunk line, failing metrics and saved file."""
    budget = request.config.getoption("--ao-fuzz-budget")
    out = request.config.getoption("--ao-fuzz-out") or str(tmp_path / "found")

    def run(kernel, op=None, **kw):
        if re.fullmatch(r"\s*0+[smh]?\s*", str(budget)):  # no cases or no time, in any unit: skipped
            pytest.skip(f"--ao-fuzz-budget {budget}")
        r = attn_oracle.fuzz(kernel, op=op, budget=budget, out=out, **kw)
        _fuzz_weak[0] += r["weak"]
        if r["failed"] or r["invalid"]:
            lines = [f"fuzz: {r['failed']} of {r['cases']} cases failed ({len(r['found'])} unique)"]
            for f in r["found"]:
                lines += [f"  shrunk: {f['shrunk']}", f"    failing: {f['failing']}",
                          f"    saved: {f['file']}" if f["file"] else "    (not saved)"]
            raise AssertionError("\n".join(lines))
        if r["cases"] == r["skipped"]:
            pytest.skip(f"fuzz: every one of {r['cases']} cases was skipped by the kernel")
        return r

    return run
