"""The attn-oracle pytest plugin (entry point pytest11 "attn_oracle"; loaded by `pip install .`).

    import attn_oracle as ao

    @ao.cases("corpus/edge")                 # one test per case line; the line is the test id
    def test_my_kernel(case):
        case.check(my_kernel)                # AssertionError: case line, failing metrics, explain, report

    def test_fuzz_my_kernel(ao_fuzz):
        ao_fuzz(my_kernel, op="sdpa")        # a short campaign (--ao-fuzz-budget); found cases saved, shrunk

Options: --ao-corpus PATH (repeatable) replaces every @cases corpus; --ao-fuzz-budget N|30s (0 skips the
fuzz tests); --ao-fuzz-out DIR keeps found files (default: a folder of the session's temporary folder, one
per test); --ao-report-dir DIR writes a report directory per failing case (its path is in the failure text)
and an index of them (index.md, index.json); --ao-strict fails a WEAK case (a gate that an all-zero or NaN
answer passes: docs/tolerances.md, "WEAK"), which is otherwise an expected failure (xfail); the terminal
summary counts weak cases and fuzz cases apart; --ao-summary FILE writes it as JSON.

pytest-xdist (`-n N`): the @cases tests are distributed as any tests are; each ao_fuzz test is split into
--ao-fuzz-shards K tests (default: N, the workers; 1 without xdist), shard i running the campaign's case
numbers i, i+K, ... of the same seed (attn_oracle.shards: the same cases whatever K), xdist deciding
which worker runs which. Found files go to one folder per test shared by its shards, saved once per
signature across the workers (the core's lock and signature check). The summary, --ao-summary and the
report index are the controller's, merged from every worker's test reports (their user_properties, also
in --junitxml). The fixture ao_device names the worker's device: cuda:(worker number mod GPU count), or cpu.
A corpus path is taken as given, else from the working directory, else from the test file's folder
and the folders above it (so "corpus/edge" finds the repository's corpus from examples/).
"""
import json
import os
import re

import pytest

import attn_oracle
from attn_oracle import case as _case  # the in-process check's module state: strict mode, weak cases seen
from attn_oracle import shards as _shards

# What a test reports to the summary, as its report's user_properties (which pytest-xdist carries from the
# workers to the controller and --junitxml writes): a case's verdict, a fuzz shard's result.
VERDICT_PROPERTY, FUZZ_PROPERTY = "ao_verdict", "ao_fuzz"


def pytest_addoption(parser):
    g = parser.getgroup("attn_oracle", "attn-oracle")
    g.addoption("--ao-corpus", action="append", default=[], metavar="PATH",
                help="corpus files/directories for @attn_oracle.cases tests (replaces the decorator's)")
    g.addoption("--ao-fuzz-budget", default="20", metavar="N|TIME",
                help="budget of each ao_fuzz campaign: N cases or a time (30s, 5m); 0 skips them (default 20)")
    g.addoption("--ao-fuzz-out", default=None, metavar="DIR",
                help="where ao_fuzz saves found (shrunk) cases, one file per failure signature across workers "
                     "(default: a folder per test under the session's temporary folder)")
    g.addoption("--ao-report-dir", default=None, metavar="DIR",
                help="write a report directory per checked case under DIR, and index.md/index.json over them")
    g.addoption("--ao-strict", action="store_true", default=False,
                help="a WEAK case (a gate an all-zero or NaN answer passes) fails instead of xfailing")
    g.addoption("--ao-fuzz-shards", default="auto", metavar="K|auto",
                help="split each ao_fuzz campaign into K tests (shards of the same cases and seed); auto: the "
                     "pytest-xdist worker count, 1 without xdist (default auto)")
    g.addoption("--ao-summary", default=None, metavar="FILE",
                help="write the session's attn-oracle summary (verdict counts, merged fuzz campaigns) as JSON")


def pytest_configure(config):
    config.addinivalue_line("markers", "ao_cases(*corpus): parametrize over attn-oracle corpus case lines "
                                       "(the fixture `case`)")
    _case.strict_weak = bool(config.getoption("--ao-strict"))


def _is_worker(config):
    return hasattr(config, "workerinput")  # a pytest-xdist worker: the controller summarizes


def _shard_count(config):
    text = str(config.getoption("--ao-fuzz-shards")).strip()
    if text == "auto":
        # Every worker collects the same tests: each reads the same count (its own session's, not one
        # inherited from a pytest that started this one).
        return int(config.workerinput["workercount"]) if _is_worker(config) else 1
    if not text.isdigit() or int(text) < 1:
        raise pytest.UsageError(f"--ao-fuzz-shards: {text!r}: expected a count >= 1 or auto")
    return int(text)


class _Session:
    """The session's verdicts and fuzz shards, read from the test reports (in this process or, under
    pytest-xdist, the controller's copies of the workers' reports)."""

    def __init__(self):
        self.verdicts, self.fuzz = [], {}  # [verdict dict]; test (node id less its shard) -> [shard result]

    def add(self, report):
        for name, value in getattr(report, "user_properties", ()):
            if name == VERDICT_PROPERTY:
                self.verdicts.append(json.loads(value))
            elif name == FUZZ_PROPERTY:
                r = json.loads(value)
                self.fuzz.setdefault(r["test"], []).append(r)

    def merged_fuzz(self):
        out = {}
        for test, rs in sorted(self.fuzz.items()):
            rs = sorted(rs, key=lambda r: r["shard"])
            m = _shards.merge(rs)
            m["shards"] = [f"{r['shard']}/{r['shards']}" for r in rs]
            out[test] = m
        return out

    def counts(self):
        kinds = ("pass", "fail", "error", "weak", "skipped")
        return {k: sum(v["verdict"] == k for v in self.verdicts) for k in kinds}


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _session.add(report)


_session = _Session()


def pytest_terminal_summary(terminalreporter, config):
    if _is_worker(config):
        return
    merged = _session.merged_fuzz()
    if merged:
        terminalreporter.write_sep("-", "attn-oracle: fuzz campaigns (merged over their shards)")
        for test, m in merged.items():
            terminalreporter.write_line(f"{test}: {len(m['shards'])} shard(s)")
            terminalreporter.write_line(_shards.summary_text(m, len(m["shards"])))
    weak = [v for v in _session.verdicts if v["verdict"] == "weak"]
    fuzz_weak = sum(m["weak"] for m in merged.values())
    if weak or fuzz_weak:
        terminalreporter.write_sep("-", "attn-oracle: weak cases (a gate an all-zero or NaN answer passes)")
        for v in weak:
            terminalreporter.write_line(f"WEAK {v['case']}: {v['reason']}")
        terminalreporter.write_line(f"{len(weak)} weak case(s) checked, {fuzz_weak} in fuzz campaigns")


def pytest_sessionfinish(session):
    config = session.config
    if _is_worker(config):
        return
    path = config.getoption("--ao-summary")
    if path:
        fuzz = {t: {k: v for k, v in m.items() if k not in ("summary", "errors")}
                for t, m in _session.merged_fuzz().items()}
        with open(path, "w") as f:
            json.dump({"verdicts": _session.counts(), "cases": _session.verdicts, "fuzz": fuzz}, f, indent=1)
    root = config.getoption("--ao-report-dir")
    reported = [v for v in _session.verdicts if v.get("report_dir")]
    if root and reported:
        _write_report_index(root, reported)


def _write_report_index(root, verdicts):
    """One index of the session's report directories (each worker wrote its own cases' directories)."""
    verdicts = sorted(verdicts, key=lambda v: v["report_dir"])
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.json"), "w") as f:
        json.dump(verdicts, f, indent=1)
    lines = ["# attn-oracle reports", "", "| verdict | case | report |", "| --- | --- | --- |"]
    for v in verdicts:
        rel = os.path.relpath(v["report_dir"], root)
        lines.append(f"| {v['verdict'].upper()} | `{v['case']}` | [{rel}]({rel}/report.md) |")
    with open(os.path.join(root, "index.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


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
    if "ao_fuzz_shard" in metafunc.fixturenames:
        _parametrize_fuzz_shards(metafunc)
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


def _parametrize_fuzz_shards(metafunc):
    k = _shard_count(metafunc.config)
    if k > 1:
        metafunc.parametrize("ao_fuzz_shard", [(i, k) for i in range(k)],
                             ids=[f"fuzz-shard{i}of{k}" for i in range(k)])


class _CaseForTest(attn_oracle.Case):
    """A Case whose check/judge/run write a report directory per case under --ao-report-dir."""

    report_root = None
    node = None  # the test item: each verdict goes into its report (user_properties) for the summary

    def _report(self, kw):
        if self.report_root and "report_dir" not in kw:
            kw["report_dir"] = os.path.join(self.report_root, _case._slug(self.line))
        return kw

    def _record(self, v):
        if self.node is not None:
            self.node.user_properties.append((VERDICT_PROPERTY, json.dumps(
                {"case": v.case, "verdict": v.verdict, "reason": v.reason, "report_dir": v.report_dir or None})))
        return v

    def judge(self, outputs, **kw):
        return self._record(super().judge(outputs, **self._report(kw)))

    def run(self, kernel, **kw):
        return self._record(super().run(kernel, **self._report(kw)))


@pytest.fixture
def case(request):
    """The attn_oracle.Case of the test's case line (@attn_oracle.cases); inputs generated on first use."""
    line = getattr(request, "param", None)
    if line is None:
        raise pytest.UsageError("the fixture `case` comes with @attn_oracle.cases(corpus)")
    c = _CaseForTest(line)
    c.report_root = request.config.getoption("--ao-report-dir")
    c.node = request.node
    return c


@pytest.fixture
def ao_fuzz_shard():
    """(shard, shards) of the ao_fuzz campaign this test runs: (0, 1) unless --ao-fuzz-shards (or -n N)
    splits it, then each shard is its own test."""
    return (0, 1)


@pytest.fixture(scope="session")
def ao_session_dir(tmp_path_factory, ao_worker_id):
    """A folder of the session shared by its pytest-xdist workers (each worker's temporary folder is inside
    the controller's), where the shards of an ao_fuzz test save their found files by default."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if ao_worker_id else base) / "attn-oracle"


@pytest.fixture(scope="session")
def ao_worker_id(request):
    """The pytest-xdist worker's id ("gw0", ...), or None outside a worker."""
    return getattr(request.config, "workerinput", {}).get("workerid")


@pytest.fixture(scope="session")
def ao_device(ao_worker_id):
    """The device this worker's kernels should run on: cuda:(worker number mod the visible GPUs) where
    torch sees GPUs (one GPU per worker with -n equal to the GPU count), else "cpu"."""
    try:
        import torch
        count = torch.cuda.device_count()
    except Exception:  # no torch, or no CUDA runtime: the CPU
        count = 0
    if count == 0:
        return "cpu"
    return f"cuda:{int((ao_worker_id or 'gw0')[2:]) % count}"


@pytest.fixture
def ao_fuzz(request, ao_fuzz_shard, ao_session_dir):
    """ao_fuzz(kernel, op=None, **fuzz_kw): a campaign of --ao-fuzz-budget generated cases through kernel
    (a callable or a registry spec such as "cpu-bug:gqa-modulo"), or this test's shard of it; fails with
    each unique failure's shrunk line, failing metrics and saved file."""
    budget = request.config.getoption("--ao-fuzz-budget")
    test = request.node.nodeid.split("[")[0]  # the campaign's test, whichever shard this is
    out = request.config.getoption("--ao-fuzz-out") or str(ao_session_dir / "found" / _case._slug(test))
    shard, shards = ao_fuzz_shard

    def run(kernel, op=None, **kw):
        if re.fullmatch(r"\s*0+[smh]?\s*", str(budget)):  # no cases or no time, in any unit: skipped
            pytest.skip(f"--ao-fuzz-budget {budget}")
        share = _shards.shard_budget(budget, shard, shards)
        if share == "0":
            pytest.skip(f"fuzz shard {shard}/{shards}: no case of the budget {budget} falls to it")
        r = attn_oracle.fuzz(kernel, op=op, budget=share, out=out, shard=shard, shards=shards, **kw)
        found = [{k: v for k, v in f.items() if k != "text"} for f in r["found"]]  # the files are in `out`
        request.node.user_properties.append((FUZZ_PROPERTY, json.dumps(
            {"test": test, "shard": shard, "shards": shards, **{k: r[k] for k in _shards.COUNTS},
             "seconds": r["seconds"], "exit_code": r["exit_code"], "found": found})))
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
