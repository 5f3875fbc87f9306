"""What a check returns: the verdict of one case (`Verdict`, its `Metric`s), of a corpus (`GateResult`) and of a
fuzz campaign (`FuzzResult`). Plain Python over the dictionaries the extension returns: importing this module
needs no compiled extension."""

class Metric:
    """One measured metric: value, its gate (the derived bound), the worst row's error / gate ratio."""

    def __init__(self, d):
        self.name, self.value, self.rule = d["name"], d["value"], d["rule"]
        self.failed, self.gated, self.gate, self.ratio = d["failed"], d["gated"], d["gate"], d["ratio"]

    def __repr__(self):
        gate = f", gate={self.gate:g}" if self.gate is not None else ""
        ratio = f", ratio={self.ratio:.3g}" if self.ratio is not None else ""
        return f"Metric({self.name}={self.value:.6g} {self.rule}{gate}{ratio}{' FAILED' if self.failed else ''})"


class Verdict:
    """The verdict of one case, as the CLI's: kind ("pass", "fail", "skipped", "error", "weak"), label,
    metrics, the failing metrics and rows, the discrimination check of each output (gate_checks), explain's
    answer (on a FAIL, when asked) and the report directory (when asked). True only for a pass: a skipped,
    errored or weak case (no metric failed, but a gate cannot reject an all-zero or NaN answer of an
    output: docs/tolerances.md, "WEAK") is never a pass."""

    def __init__(self, d):
        self._d = d
        self.case, self.backend, self.vs = d["case"], d["backend"], d["vs"]
        self.kind, self.label, self.reason = d["kind"], d["label"], d["reason"]
        self.metrics = [Metric(m) for m in d["metrics"]]
        self.failing_rows = d["worst_rows"]
        # Per judged output: what an all-zero and a NaN answer score against this case's gates.
        self.gate_checks = d["gate_checks"]
        self.failing_summary = d["failing"]
        self.explain, self.explain_text, self.explain_best = d["explain"], d["explain_text"], d["explain_best"]
        self.report_dir = d["report_dir"]
        self.text = d["text"]
        self.backend_seconds, self.ref_seconds = d["backend_seconds"], d["ref_seconds"]
        # The rest of the check: making the inputs, the sentinel outputs and input checks around the runs, the judgement.
        self.inputs_seconds, self.run_setup_seconds = d["inputs_seconds"], d["run_setup_seconds"]
        self.judge_seconds = d["judge_seconds"]
        self.gate_check_seconds = d["gate_check_seconds"]  # of the judgement: the discrimination check
        # False where the built-in reference was not needed (SDPA's comparators recompute the exact answer).
        self.reference_ran = d["reference_ran"]

    @property
    def passed(self):
        return self.kind == "pass"

    @property
    def weak(self):
        """No metric failed, but a gate of the case cannot reject an all-zero or NaN answer (weak_outputs)."""
        return self.kind == "weak"

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

    def __bool__(self):
        return self.passed

    def message(self):
        """What a failing test says: the case line, the verdict with its failing metrics (value, rule, gate
        ratio), the worst rows, explain's answer and the report path."""
        lines = [f"{self.label}: {self.case}", f"  backend: {self.backend}   vs: {self.vs}"]
        if self.failing:
            for m in self.failing:
                ratio = ""  # the worst row's error / its gate, unless the rule already says it
                if m.ratio is not None and m.gate is not None and "ratio" not in m.rule and "err/gate" not in m.rule:
                    ratio = f"  (worst row {m.ratio:.3g}x its gate {m.gate:g})"
                lines.append(f"  failing: {m.name} = {m.value:.6g}  (gate {m.rule}){ratio}")
        elif self.reason:
            lines.append(f"  reason: {self.reason}")
        if self.weak:
            lines += [f"  gate check: {g['text']}" for g in self.gate_checks]
        for r in self.failing_rows[:3]:
            lines.append(f"  worst row {r['row']} (doc {r['doc']}, chunk {r['chunk']}, pos {r['pos']}): {r['value']:.4g}")
        if self.explain:
            lines.append(f"  explain: {self.explain}")
        if self.report_dir:
            lines.append(f"  report: {self.report_dir}")
        return "\n".join(lines)

    def __repr__(self):
        return f"<Verdict {self.label} {self.case!r}{' (' + self.reason + ')' if self.reason else ''}>"



class GateResult:
    def __init__(self, rows):
        self.results = [(where, Verdict(d)) for where, d in rows]

    @property
    def verdicts(self):
        return [v for _, v in self.results]

    def count(self, kind):
        return sum(v.kind == kind for v in self.verdicts)

    @property
    def passed(self):
        """No case that ran failed and at least one passed (skips and weak cases are listed and counted
        apart, not passed; strict_passed also fails on a weak case)."""
        return all(v.kind in ("pass", "skipped", "weak") for v in self.verdicts) and self.count("pass") > 0

    @property
    def strict_passed(self):
        """passed, and no case was weak (`attn-oracle gate --strict`)."""
        return self.passed and self.count("weak") == 0

    def __bool__(self):
        return self.passed

    def summary(self):
        lines = [f"{v.label:<7} {where}  {v.case}" + (f"  ({v.reason})" if v.reason else "") +
                 (f"\n        explain: {v.explain}" if v.explain else "")
                 for where, v in self.results if v.kind != "pass"]
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

