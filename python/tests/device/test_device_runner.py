"""The device runner without a GPU (pytest): scripts/device/runner.py runs small plans against
the built CLI with the built-in backends (cpu-ref, cpu-bug:<id>): the verdicts it records, the expectations
(plan words, `expect_at` per line, a case file's `# catches:` claim read as expect=fail), a run whose
expectation does not hold exits 1, a claim the gate finds not held is not held whatever the plan says, a step
that does not fit the time left is not run (exit 3), and a bad plan is exit 2 naming the field.

  AO_CLI=build/attn-oracle pytest python/tests/device/test_device_runner.py
"""
import importlib.util
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

import pytest
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
HERE = os.path.join(ROOT, "scripts", "device")  # what these tests test
AO = os.environ.get("AO_CLI", os.path.join(ROOT, "build", "attn-oracle"))
if not os.access(AO, os.X_OK):
    pytest.skip(f"no attn-oracle CLI at {AO} (set AO_CLI)", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("device_runner", os.path.join(HERE, "runner.py"))
runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runner)

# Line 1: three packed documents at explicit offsets, which cpu-bug:derived-offsets gets wrong; line 3 the
# same with a claim; line 4 one document, which the model gets right.
CASES = """op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2
# catches: cpu-bug:derived-offsets
op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 seed=3
op=sdpa docs=8 hq=1 dim=8
"""


def plan_text(cases, bug_extra="", plan_extra="", ref_extra=""):
    return f"""
name = "cpu-check"
{plan_extra}
[[step]]
kind = "gate"
name = "ref"
backend = "cpu-ref"
cases = "{cases}"
{ref_extra}

[[step]]
kind = "gate"
name = "bug"
backend = "cpu-bug:derived-offsets"
cases = "{cases}"
{bug_extra}

[[step]]
kind = "table"
name = "verdicts"
of = ["ref", "bug"]
"""


@unittest.skipUnless(os.access(AO, os.X_OK), f"no attn-oracle at {AO} (set AO_CLI)")
class RunnerOnCpu(unittest.TestCase):
    def setUp(self):
        os.environ["PY"] = sys.executable  # what the version header asks (a pyenv shim costs a second a call)
        self.tmp = tempfile.mkdtemp(prefix="ao-runner-test-")
        self.cases = os.path.join(self.tmp, "cases.case")
        with open(self.cases, "w") as f:
            f.write(CASES)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_plan(self, text, *args):
        plan = os.path.join(self.tmp, "p.toml")
        with open(plan, "w") as f:
            f.write(text)
        out = os.path.join(self.tmp, "out")
        shutil.rmtree(out, ignore_errors=True)
        so, se = io.StringIO(), io.StringIO()
        with redirect_stdout(so), redirect_stderr(se):
            code = runner.main(["run", plan, "--out", out, "--ao", AO, *args])
        res = None
        if os.path.exists(os.path.join(out, "results.json")):
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
        return code, res, so.getvalue() + se.getvalue(), out

    @staticmethod
    def step(res, name):
        return next(s for s in res["steps"] if s["name"] == name)

    def test_records_verdicts_and_expectations_hold(self):
        code, res, text, out = self.run_plan(plan_text(self.cases, 'expect_at = { 1 = "fail:unwritten_rows" }'))
        self.assertEqual(code, 0, text)
        ref, bug = self.step(res, "ref"), self.step(res, "bug")
        self.assertEqual([c["verdict"] for c in ref["cases"]], ["pass", "pass", "pass"])
        self.assertEqual([c["verdict"] for c in bug["cases"]], ["fail", "fail", "pass"])
        self.assertEqual([c["at"].rsplit(":", 1)[1] for c in bug["cases"]], ["1", "3", "4"])
        self.assertEqual([c["expect"] for c in bug["cases"]], ["fail:unwritten_rows", "fail", "pass"])
        self.assertEqual(bug["cases"][1]["expect_from"], "claim")  # the corpus's claim, read as expect=fail
        self.assertIn("unwritten_rows", bug["cases"][0]["failed"])
        self.assertTrue(all(c["held"] for s in (ref, bug) for c in s["cases"]))
        self.assertEqual(res["summary"], {"expectations": 6, "held": 6, "steps_not_run": [], "exit": 0})
        self.assertEqual(sorted(os.listdir(out)), ["env.txt", "logs.tgz", "results.json", "runner.log", "verdicts.tsv"])
        with open(os.path.join(out, "verdicts.tsv")) as f:
            rows = [r.rstrip("\n").split("\t") for r in f]
        self.assertEqual(rows[0], ["at", "case", "ref", "bug"])
        self.assertEqual([r[2] for r in rows[1:]], ["pass"] * 3)
        self.assertTrue(rows[1][3].startswith("fail (") and rows[3][3] == "pass", rows)

    def test_an_expectation_that_does_not_hold_fails_the_run(self):
        code, res, text, _ = self.run_plan(plan_text(self.cases, 'expect_at = { 1 = "fail", 4 = "fail" }'))
        self.assertEqual(code, 1, text)
        bug = self.step(res, "bug")
        self.assertEqual([c["held"] for c in bug["cases"]], [True, True, False])
        self.assertEqual(res["summary"]["held"], 5)
        self.assertIn("NOT pass    expect fail", text)

    def test_set_overrides_a_step_field(self):
        code, res, _, _ = self.run_plan(plan_text(self.cases), "--set", "ref.expect=fail",
                                        "--set", "bug.expect_at={ 1 = 'fail', 4 = 'fail' }")
        self.assertEqual(code, 1)
        self.assertEqual(self.step(res, "ref")["settings"]["expect"], "fail")
        self.assertEqual([c["held"] for c in self.step(res, "ref")["cases"]], [False] * 3)
        self.assertEqual([c["held"] for c in self.step(res, "bug")["cases"]], [True, True, False])

    def test_plan_lines_of_ao_gpu_campaign(self):
        lines = os.path.join(self.tmp, "plan.txt")
        with open(lines, "w") as f:
            f.write("# the grammar of ao-gpu-campaign and catalog-plan.py\n"
                    "expect=pass backend=cpu-ref op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2\n"
                    "expect=fail:unwritten_rows backend=cpu-bug:derived-offsets "
                    "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2\n"
                    "expect=pass backend=cpu-bug:derived-offsets op=sdpa docs=8 hq=1 dim=8\n"
                    "expect=fail backend=cuda-sdpa:bug=tail-read op=sdpa docs=8 hq=1 dim=8\n"
                    "expect=fail backend=cpu-ref op=sdpa docs=8 hq=1 dim=8   # does not hold\n")
        text = f'name = "lines"\n[[step]]\nkind = "lines"\nname = "cpu"\nlines = "{lines}"\nbackends = "cpu-.*"\n'
        code, res, out_text, _ = self.run_plan(text)
        self.assertEqual(code, 1, out_text)
        step = self.step(res, "cpu")
        self.assertEqual(step["backends"], ["cpu-ref", "cpu-bug:derived-offsets"])  # the cuda line left out
        got = sorted((c["at"].rsplit(":", 1)[1], c["backend"], c["verdict"], c["held"]) for c in step["cases"])
        self.assertEqual(got, [("2", "cpu-ref", "pass", True), ("3", "cpu-bug:derived-offsets", "fail", True),
                               ("4", "cpu-bug:derived-offsets", "pass", True), ("6", "cpu-ref", "pass", False)])
        with open(lines, "a") as f:
            f.write("expect=maybe backend=cpu-ref op=sdpa docs=8\n")
        code, _, out_text, _ = self.run_plan(text)
        self.assertEqual(code, 2)
        self.assertIn(f"{lines}:7: expect=maybe", out_text)

    def test_weak_is_its_own_word(self):
        # A gate made vacuous (atol=1e9): cpu-ref's verdict is weak, which `weak` holds and `pass` does not.
        weak = os.path.join(self.tmp, "weak.case")
        with open(weak, "w") as f:
            f.write("op=sdpa docs=64,20 hq=2 dim=16 atol=1000000000 rtol=0\n")
        step = '[[step]]\nkind = "gate"\nname = "ref"\nbackend = "cpu-ref"\ncases = "%s"\nexpect = "%s"\n'
        code, res, text, _ = self.run_plan('name = "w"\n' + step % (weak, "weak"))
        self.assertEqual(code, 0, text)
        self.assertEqual(res["steps"][0]["cases"][0]["verdict"], "weak")
        code, res, text, _ = self.run_plan('name = "w"\n' + step % (weak, "pass"))
        self.assertEqual(code, 1, text)

    def test_a_metric_that_did_not_fail_does_not_hold(self):
        code, res, _, _ = self.run_plan(plan_text(self.cases, 'expect_at = { 1 = "fail:dq_violations" }'))
        self.assertEqual(code, 1)
        self.assertFalse(self.step(res, "bug")["cases"][0]["held"])

    def test_the_plan_expecting_the_reference_to_fail_does_not_hold(self):
        code, res, _, _ = self.run_plan(plan_text(self.cases, ref_extra='expect = "fail"'))
        self.assertEqual(code, 1)
        self.assertEqual([c["held"] for c in self.step(res, "ref")["cases"]], [False] * 3)

    def test_a_claim_not_held_is_not_held_whatever_the_plan_says(self):
        with open(self.cases, "w") as f:  # the claim now sits before the one-document case, which the model passes
            f.write(CASES.replace("# catches: cpu-bug:derived-offsets\n", "").replace(
                "op=sdpa docs=8", "# catches: cpu-bug:derived-offsets\nop=sdpa docs=8"))
        code, res, text, _ = self.run_plan(plan_text(self.cases, 'expect = "fail"'))
        self.assertEqual(code, 1, text)
        last = self.step(res, "bug")["cases"][-1]
        self.assertEqual(last["verdict"], "fail")
        self.assertTrue(last["reason"].startswith("claim not held"), last)
        self.assertFalse(last["held"])

    def test_a_step_that_does_not_fit_the_time_left_is_not_run(self):
        code, res, text, _ = self.run_plan(plan_text(self.cases, "need_s = 10000", plan_extra="budget_s = 300"))
        self.assertEqual(code, 3, text)
        self.assertEqual(self.step(res, "bug")["status"], "not run")
        self.assertIn("needs ~10000 s", res["summary"]["steps_not_run"][0])

    def test_a_bad_plan_names_the_field(self):
        for extra, words in [('colour = "red"', "unknown field 'colour'"),
                             ('expect = "fails"', "expect 'fails'"),
                             ('knobs = "--x 1"', "knobs = '--x 1' without an adapter")]:
            code, res, text, _ = self.run_plan(plan_text(self.cases, extra))
            self.assertEqual(code, 2, extra)
            self.assertIn(words, text)
            self.assertIsNone(res)
        code, _, text, _ = self.run_plan(plan_text(self.cases), "--set", "nope.expect=fail")
        self.assertEqual(code, 2)
        self.assertIn("--set 'nope.expect=fail': STEP.FIELD=VALUE with STEP a step of the plan "
                      "(ref, bug, verdicts)", text)
        code, _, text, _ = self.run_plan(plan_text(os.path.join(self.tmp, "nothing.case")))
        self.assertEqual(code, 2)
        self.assertIn("no such file or folder", text)

    def test_fuzz_steps_expect_what_the_campaign_found(self):
        fuzz = 'budget = "{n}"\nseed = 1\nop = "sdpa"\ndims = "tiny"\nshrink_runs = 0\nconfirm_runs = 0\n'
        text = f"""name = "fuzz"
[[step]]
kind = "fuzz"
name = "bug"
backend = "cpu-bug:derived-offsets"
max_failures = 1
expect = "fail"
{fuzz.format(n=20)}
[[step]]
kind = "fuzz"
name = "ref"
backend = "cpu-ref"
shards = 2
{fuzz.format(n=6)}
[[step]]
kind = "fuzz"
name = "bug-expected-clean"
backend = "cpu-bug:derived-offsets"
max_failures = 1
{fuzz.format(n=20)}
"""
        code, res, text, _ = self.run_plan(text)
        self.assertEqual(code, 1, text)
        bug, ref, clean = (self.step(res, n) for n in ("bug", "ref", "bug-expected-clean"))
        self.assertEqual((bug["cases"][0]["verdict"], bug["cases"][0]["held"]), ("fail", True))
        self.assertGreaterEqual(bug["fuzz_result"]["failed"], 1)
        self.assertEqual((ref["cases"][0]["verdict"], ref["cases"][0]["held"]), ("pass", True))
        self.assertEqual(len(ref["exit"]), 2)  # two shards
        self.assertGreaterEqual(ref["fuzz_result"]["cases"], 6)
        self.assertEqual((clean["cases"][0]["verdict"], clean["cases"][0]["held"]), ("fail", False))

    def test_subst_table_script_and_bench(self):
        with open(self.cases, "w") as f:
            f.write("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=4 hkv=2 @DIM@\n")
        text = f"""name = "misc"
[[step]]
kind = "gate"
name = "d16"
backend = "cpu-bug:derived-offsets"
cases = "{self.cases}"
subst = {{ DIM = "dim=16" }}
expect = "fail:unwritten_rows"

[[step]]
kind = "table"
name = "bwd"
of = ["d16"]
script = "{sys.executable} scripts/device/bwd-table.py {{out}} {{reports}}"

[[step]]
kind = "bench"
name = "backends"
command = ["{{ao}}", "backends"]
repeat = 2
"""
        code, res, out_text, out = self.run_plan(text)
        self.assertEqual(code, 0, out_text)
        d16 = self.step(res, "d16")
        self.assertEqual(d16["cases"][0]["at"], self.cases + ":1")  # the file as the plan names it, not the copy
        self.assertIn("dim=16", d16["cases"][0]["case"])
        with open(os.path.join(out, "bwd.tsv")) as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[1].split("\t")[:3], ["d16", d16["cases"][0]["case"], "fail"])
        self.assertEqual(self.step(res, "backends")["seconds"]["runs"], 2)
        self.assertTrue(self.step(res, "backends")["cases"][0]["held"])
        code, _, out_text, _ = self.run_plan(text.replace('subst = { DIM = "dim=16" }', 'subst = { D = "dim=16" }'))
        self.assertEqual(code, 2)
        self.assertIn("keeps a placeholder @DIM@", out_text)


class AdapterKnobs(unittest.TestCase):
    """A plan's knobs are checked against the adapter's own, from the registry (needs numpy: it lists the
    adapters by importing their modules)."""

    def setUp(self):
        try:
            self.ad = runner.Adapters(sys.executable)
            self.ad.all()
        except runner.PlanError as e:
            self.skipTest(f"the registry does not list with {sys.executable}: {str(e)[-120:]}")

    def test_knobs_from_the_registry(self):
        a = self.ad.get("torch_varlen_sdpa", "t")
        self.ad.check_knobs(a, "--impl sdpa --sdpa-backend math", "t")
        with self.assertRaisesRegex(runner.PlanError, "'--sdpa-backend' 'nope' is not one of|--sdpa-backend 'nope'"):
            self.ad.check_knobs(a, "--impl sdpa --sdpa-backend nope", "t")
        with self.assertRaisesRegex(runner.PlanError, "'--colour' is not a knob of torch_varlen_sdpa"):
            self.ad.check_knobs(a, "--colour red", "t")
        with self.assertRaisesRegex(runner.PlanError, "no such adapter"):
            self.ad.get("nope", "t")
        self.assertEqual(self.ad.spec(a, "--impl sdpa"),
                         f"exec:{sys.executable} -m attn_oracle.adapters.torch_varlen_sdpa --impl sdpa")

    @unittest.skipUnless(os.access(AO, os.X_OK), f"no attn-oracle at {AO} (set AO_CLI)")
    def test_an_adapter_step_through_the_warm_host(self):
        tmp = tempfile.mkdtemp(prefix="ao-runner-test-")
        try:
            with open(os.path.join(tmp, "c.case"), "w") as f:
                f.write(CASES)
            with open(os.path.join(tmp, "p.toml"), "w") as f:
                f.write(f'name = "warm"\n[[step]]\nkind = "gate"\nname = "np"\nadapter = "numpy_ref"\nwarm = true\n'
                        f'cases = "{tmp}/c.case"\nexpect_at = {{ 4 = "fail" }}\n')
            os.environ["PY"] = sys.executable
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                code = runner.main(["run", os.path.join(tmp, "p.toml"), "--out", os.path.join(tmp, "o"), "--ao", AO])
            with open(os.path.join(tmp, "o", "results.json")) as f:
                step = json.load(f)["steps"][0]
            self.assertIn("-m attn_oracle.adapters.client --socket", step["backend"])
            self.assertEqual([c["verdict"] for c in step["cases"]], ["pass"] * 3)
            self.assertEqual([c["held"] for c in step["cases"]], [True, True, False])  # line 4 expected to fail
            self.assertEqual(code, 1)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_the_committed_plans_check(self):
        plans = os.path.join(HERE, "plans")
        for f in sorted(os.listdir(plans)):
            with self.subTest(plan=f), redirect_stdout(io.StringIO()):
                os.environ["PY"] = sys.executable
                self.assertEqual(runner.main(["run", os.path.join(plans, f), "--dry-run", "--ao", AO]), 0)

