"""What a check returns: the verdict of one case (`Verdict`, its `Metric`s), of a corpus (`GateResult`) and of a
fuzz campaign (`FuzzResult`). A `Verdict` reads the verdict schema: the JSON object the core writes for a case
(case_json() in report/include/attn_oracle/report/report.h), the same object as a case of report.json, so a
Verdict is made alike from an in-process check and from a report.json case; its attributes are the schema's
field names (docs/report-schema.md). Plain Python: importing this module needs no compiled extension."""
import json


def _number(x):
    """A number of the schema: JSON has no inf/nan, so the core writes them as "inf", "-inf", "nan"."""
    return float(x) if isinstance(x, str) else x


class Metric:
    """One measured metric (a value of the schema's "metrics", keyed by its name): value, rule (the gate in
    words; empty: informational), gated, failed, gate (the derived bound, or None), gate_ratio (the worst
    row's error / its gate, or None; > 1 fails)."""

    def __init__(self, d, name=None):
        self.name = d["name"] if name is None else name
        self.value, self.rule, self.gated, self.failed = _number(d["value"]), d["rule"], d["gated"], d["failed"]
        self.gate, self.gate_ratio = _number(d["gate"]), _number(d["gate_ratio"])

    @property
    def ratio(self):
        """Deprecated (removed in the next release): gate_ratio."""
        return self.gate_ratio

    def __repr__(self):
        gate = f", gate={self.gate:g}" if self.gate is not None else ""
        ratio = f", gate_ratio={self.gate_ratio:.3g}" if self.gate_ratio is not None else ""
        return f"Metric({self.name}={self.value:.6g} {self.rule}{gate}{ratio}{' FAILED' if self.failed else ''})"


class Verdict:
    """The verdict of one case, as the CLI's, read from the verdict schema (a dict, or its JSON text): verdict
    ("pass", "fail", "skipped", "error", "weak"), label, reason, failing_summary, metrics (Metric, in the
    comparator's order), worst_rows, gate_checks (the discrimination check of each output), explanation (on a
    FAIL, when asked: outcome, headline, best, text, ...; else None), seconds (backend, reference, inputs,
    run_setup, judge, gate_check), reference_ran, report_dir (when asked) and text. True only for a pass: a
    skipped, errored or weak case (no metric failed, but a gate cannot reject an all-zero or NaN answer of an
    output: docs/tolerances.md, "WEAK") is never a pass. as_dict() is the schema's object as given.

    Deprecated names (one release, then removed): kind (verdict), failing_rows (worst_rows), explain,
    explain_text, explain_best (explanation's headline, text, best), backend_seconds, ref_seconds,
    inputs_seconds, run_setup_seconds, judge_seconds, gate_check_seconds (seconds[...])."""

    def __init__(self, d):
        if isinstance(d, (str, bytes)):
            d = json.loads(d)
        self._d = d
        self.case, self.backend, self.backend_version, self.vs = d["case"], d["backend"], d["backend_version"], d["vs"]
        self.versions = d["versions"]
        self.verdict, self.label, self.reason = d["verdict"], d["label"], d["reason"]
        self.failing_summary = d["failing_summary"]
        self.metrics = [Metric(m, name) for name, m in d["metrics"].items()]
        self.worst_rows = [dict(r, value=_number(r["value"])) for r in d["worst_rows"]]
        # Per judged output: what an all-zero and a NaN answer score against this case's gates.
        self.gate_checks = [dict(g, zero_ratio=_number(g["zero_ratio"]), moved_ratio=_number(g["moved_ratio"]))
                            for g in d["gate_checks"]]
        self.explanation = d["explanation"]
        # The check's wall times: the backend's and the reference's runs, making the inputs, the sentinel
        # outputs and input checks around the runs, the judgement and of it the discrimination check.
        self.seconds = d["seconds"]
        # False where the built-in reference was not needed (SDPA's comparators recompute the exact answer).
        self.reference_ran = d["reference_ran"]
        self.report_dir = d["report_dir"]
        self.text = d["text"]

    def as_dict(self):
        """The verdict schema's object this verdict was read from (a copy; non-finite numbers as text)."""
        return json.loads(json.dumps(self._d))

    @property
    def passed(self):
        return self.verdict == "pass"

    @property
    def weak(self):
        """No metric failed, but a gate of the case cannot reject an all-zero or NaN answer (weak_outputs)."""
        return self.verdict == "weak"

    @property
    def weak_outputs(self):
        return [g["output"] for g in self.gate_checks if g["weak"]]

    @property
    def failing(self):
        return [m for m in self.metrics if m.failed]

    def metric(self, name):
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    # Deprecated names of the Python verdict before the one schema (removed in the next release).
    @property
    def kind(self):
        """Deprecated: verdict."""
        return self.verdict

    @property
    def failing_rows(self):
        """Deprecated: worst_rows."""
        return self.worst_rows

    @property
    def explain(self):
        """Deprecated: explanation["headline"] (None without an explanation)."""
        return self.explanation["headline"] if self.explanation else None

    @property
    def explain_text(self):
        """Deprecated: explanation["text"] (None without an explanation)."""
        return self.explanation["text"] if self.explanation else None

    @property
    def explain_best(self):
        """Deprecated: explanation["best"] ([] without an explanation)."""
        return self.explanation["best"] if self.explanation else []

    @property
    def backend_seconds(self):
        """Deprecated: seconds["backend"]."""
        return self.seconds["backend"]

    @property
    def ref_seconds(self):
        """Deprecated: seconds["reference"]."""
        return self.seconds["reference"]

    @property
    def inputs_seconds(self):
        """Deprecated: seconds["inputs"]."""
        return self.seconds["inputs"]

    @property
    def run_setup_seconds(self):
        """Deprecated: seconds["run_setup"]."""
        return self.seconds["run_setup"]

    @property
    def judge_seconds(self):
        """Deprecated: seconds["judge"]."""
        return self.seconds["judge"]

    @property
    def gate_check_seconds(self):
        """Deprecated: seconds["gate_check"]."""
        return self.seconds["gate_check"]

    def __bool__(self):
        return self.passed

    def message(self):
        """What a failing test says: the case line, the verdict with its failing metrics (value, rule, gate
        ratio), the worst rows, explain's answer and the report path."""
        lines = [f"{self.label}: {self.case}", f"  backend: {self.backend}   vs: {self.vs}"]
        if self.failing:
            for m in self.failing:
                ratio = ""  # the worst row's error / its gate, unless the rule already says it
                if (m.gate_ratio is not None and m.gate is not None and "ratio" not in m.rule
                        and "err/gate" not in m.rule):
                    ratio = f"  (worst row {m.gate_ratio:.3g}x its gate {m.gate:g})"
                lines.append(f"  failing: {m.name} = {m.value:.6g}  (gate {m.rule}){ratio}")
        elif self.reason:
            lines.append(f"  reason: {self.reason}")
        if self.weak:
            lines += [f"  gate check: {g['text']}" for g in self.gate_checks]
        for r in self.worst_rows[:3]:
            lines.append(f"  worst row {r['row']} (doc {r['doc']}, chunk {r['chunk']}, pos {r['pos']}): {r['value']:.4g}")
        if self.explanation:
            lines.append(f"  explain: {self.explanation['headline']}")
        if self.report_dir:
            lines.append(f"  report: {self.report_dir}")
        return "\n".join(lines)

    def __repr__(self):
        return f"<Verdict {self.label} {self.case!r}{' (' + self.reason + ')' if self.reason else ''}>"



class GateResult:
    """The verdicts of a corpus: results, [(file:line, Verdict)] (each read from the schema's dict or text)."""

    def __init__(self, rows):
        self.results = [(where, Verdict(d)) for where, d in rows]

    @property
    def verdicts(self):
        return [v for _, v in self.results]

    def count(self, kind):
        return sum(v.verdict == kind for v in self.verdicts)

    @property
    def passed(self):
        """No case that ran failed and at least one passed (skips and weak cases are listed and counted
        apart, not passed; strict_passed also fails on a weak case)."""
        return all(v.verdict in ("pass", "skipped", "weak") for v in self.verdicts) and self.count("pass") > 0

    @property
    def strict_passed(self):
        """passed, and no case was weak (`attn-oracle gate --strict`)."""
        return self.passed and self.count("weak") == 0

    def __bool__(self):
        return self.passed

    def summary(self):
        lines = [f"{v.label:<7} {where}  {v.case}" + (f"  ({v.reason})" if v.reason else "") +
                 (f"\n        explain: {v.explanation['headline']}" if v.explanation else "")
                 for where, v in self.results if v.verdict != "pass"]
        lines.append(f"gate: {len(self.results)} cases: {self.count('pass')} passed, "
                     f"{self.count('fail') + self.count('error')} failed, {self.count('weak')} weak, "
                     f"{self.count('skipped')} skipped")
        return "\n".join(lines)



class FuzzResult(dict):
    """The campaign's summary: cases, passed, failed, weak (no metric failed but a gate could not reject an
    all-zero answer), weak_redrawn (drawn cases replaced for a weak gate), skipped, found (one shrunk case
    per failure signature, with its saved file), summary (the CLI's text)."""

    @property
    def passed(self):
        return self["failed"] == 0 and self["invalid"] == 0 and self["cases"] > self["skipped"]

