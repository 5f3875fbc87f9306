"""The GPU knob plan without a GPU (pytest): scripts/device/catalog-plan.py on the built
CLI's `catalog --json` and on small hand-made catalogs. The plan of catalog-knobs.sh covers every bug knob
of the build with its model's trigger and outside cases on every seed; it fails, naming the knob, on a
knob value with no model and on a knob whose model has no trigger case for the kernel's op.

  AO_CLI=build/attn-oracle pytest python/tests/device/test_catalog_plan.py
"""
import copy
import importlib.util
import io
import json
import os
import subprocess
import sys
import unittest

import pytest
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
HERE = os.path.join(ROOT, "scripts", "device")  # what these tests test
AO = os.environ.get("AO_CLI", os.path.join(ROOT, "build", "attn-oracle"))
if not os.access(AO, os.X_OK):
    pytest.skip(f"no attn-oracle CLI at {AO} (set AO_CLI)", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("catalog_plan", os.path.join(HERE, "catalog-plan.py"))
cp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cp)


def model(id_, ops, triggers, outside=(), production=()):
    return {"id": id_, "ops": ops, "catalog": "",
            "triggers": [{"case": c, "fails": f, "scale": "production" if c in production else "ordinary"}
                         for c, f in triggers],
            "outside": [{"case": c, "why": "outside", "scale": "production" if c in production else "ordinary"}
                        for c in outside]}


def kernel(name, bug, inputs=True):
    knobs = {"bug": ["none", *bug]}
    if inputs:
        knobs["inputs"] = ["device", "host"]
    return {"backend": name, "values": bug, "knobs": knobs}


FIXTURE = {
    "schema": "attn-oracle.catalog", "seeds": [3, 101],
    "models": [
        model("toy-model-a", ["indexer"], [("op=indexer docs=100,37 topk=64", ["unwritten_rows", "out_of_causal"]),
                                     ("op=indexer docs=300 topk=32 values=extreme", ["out_of_range"])],
              ["op=indexer docs=100 mask=none topk=16"]),
        model("toy-model-b", ["indexer", "sdpa"], [("op=indexer docs=300 topk=32", ["out_of_causal"]),
                                                ("op=sdpa docs=300", ["tol_violations"])],
              ["op=indexer docs=30 mask=none topk=8", "op=sdpa docs=30 mask=none"]),
        model("toy-model-c", ["sdpa"], [("op=sdpa q_lens=1 kv_lens=40 mask=none", ["nonfinite_valid"]),
                                 ("op=sdpa q_lens=1*32 kv_lens=4000*32 mask=none", ["nonfinite_valid"])],
              ["op=sdpa docs=40", "op=sdpa q_lens=1*32 kv_lens=4096*32 mask=none"],
              production=("op=sdpa q_lens=1*32 kv_lens=4000*32 mask=none", "op=sdpa q_lens=1*32 kv_lens=4096*32 mask=none")),
    ],
    "bug_knobs": [kernel("no-inputs-knob", ["toy-model-a"], inputs=False), kernel("cuda-indexer", ["toy-model-a", "toy-model-b"]),
                  kernel("cuda-sdpa", ["toy-model-c"])],
}


KERNEL_OPS = {"cuda-indexer": {"indexer"}, "cuda-sdpa": {"sdpa"}}  # as catalog-knobs.sh gives them


def run_main(argv, stdin_text=None):
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    if stdin_text is not None:
        sys.stdin = io.StringIO(stdin_text)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = cp.main(argv)
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


class Fixture(unittest.TestCase):
    def test_plan_lines_per_trigger_metric_seed_and_outside_case(self):
        lines, summary = cp.plan(FIXTURE, "cuda-.*")
        plan = [x for x in lines if x.startswith("expect=")]
        short = "op=indexer docs=100,37 topk=64"
        self.assertIn(f"expect=fail:unwritten_rows backend=cuda-indexer:bug=toy-model-a {short} seed=3", plan)
        self.assertIn(f"expect=fail:out_of_causal backend=cuda-indexer:bug=toy-model-a {short} seed=101", plan)
        self.assertIn("expect=pass backend=cuda-indexer op=indexer docs=100,37 topk=64 seed=3", plan)
        self.assertIn("expect=fail:out_of_causal backend=cpu-bug:toy-model-a op=indexer docs=100,37 topk=64 seed=101", plan)
        self.assertIn("expect=pass backend=cuda-indexer:bug=toy-model-a op=indexer docs=100 mask=none topk=16 seed=3", plan)
        # values= inputs are shaped on the host: the kernel's inputs=host knob, on the knob and the plain kernel
        self.assertIn("expect=fail:out_of_range backend=cuda-indexer:bug=toy-model-a,inputs=host "
                      "op=indexer docs=300 topk=32 values=extreme seed=3", plan)
        self.assertIn("expect=pass backend=cuda-indexer:inputs=host op=indexer docs=300 topk=32 values=extreme seed=3",
                      plan)
        # cuda-indexer serves the indexer (its single-op model says so): toy-model-b' sdpa cases are left out
        self.assertFalse([x for x in plan if "cuda-indexer" in x and "op=sdpa" in x])
        self.assertIn("expect=fail:out_of_causal backend=cuda-indexer:bug=toy-model-b op=indexer docs=300 topk=32 seed=3",
                      plan)
        self.assertFalse([x for x in plan if "cpu-bug:toy-model-a" in x.split()[1] and "expect=pass" in x])
        # toy-model-a, per seed: 3 knob fail lines (3 metrics), 2 knob-less pass lines, 3 cpu-bug lines, 1 outside case
        self.assertEqual(dict((k, n) for k, _, _, n in summary)["cuda-indexer:bug=toy-model-a"], 2 * (3 + 2 + 3 + 1))
        self.assertEqual([k for k, *_ in summary], ["cuda-indexer:bug=toy-model-a", "cuda-indexer:bug=toy-model-b",
                                                    "cuda-sdpa:bug=toy-model-c"])

    def test_production_scale_cases_run_on_the_first_seed(self):
        lines, _ = cp.plan(FIXTURE, "cuda-sdpa")
        big = [x for x in lines if "*32" in x]
        self.assertEqual(len(big), 3 + 1, big)  # knob fail, knob-less pass, cpu-bug fail; one outside case
        self.assertTrue(all(x.endswith(" seed=3") for x in big), big)
        self.assertEqual(len([x for x in lines if "kv_lens=40 " in x]), 2 * 3)

    def test_seeds_and_memcheck(self):
        lines, _ = cp.plan(FIXTURE, "cuda-.*", seeds=1)
        self.assertFalse([x for x in lines if x.endswith("seed=101")])
        mem, _ = cp.plan(FIXTURE, "cuda-.*", memcheck=True)
        mem = [x for x in mem if x.startswith("expect=")]
        self.assertTrue(mem)
        for x in mem:
            self.assertTrue(x.startswith("expect=fail:") and ":bug=" in x.split()[1] and x.endswith("seed=3"), x)
            self.assertNotIn("*32", x)

    def test_backend_filter(self):
        lines, summary = cp.plan(FIXTURE, "cuda-sdpa")
        self.assertEqual([k for k, *_ in summary], ["cuda-sdpa:bug=toy-model-c"])
        lines, summary = cp.plan(FIXTURE)
        self.assertEqual(summary[0][0], "no-inputs-knob:bug=toy-model-a")
        # a backend without an `inputs` knob gets none added
        self.assertIn("expect=fail:out_of_range backend=no-inputs-knob:bug=toy-model-a op=indexer docs=300 topk=32 "
                      "values=extreme seed=3", lines)

    def test_knob_with_no_model_fails(self):
        bad = copy.deepcopy(FIXTURE)
        bad["bug_knobs"][1]["values"].append("no-such-model")
        with self.assertRaisesRegex(cp.PlanError, r"cuda-indexer:bug=no-such-model: no model"):
            cp.plan(bad, "cuda-.*")
        rc, out, err = run_main(["--catalog", "-", "--backends", "cuda-.*"], json.dumps(bad))
        self.assertEqual(rc, 1)
        self.assertIn("no-such-model", err)
        self.assertEqual(out, "")

    def test_knob_whose_model_has_no_trigger_fails(self):
        bad = copy.deepcopy(FIXTURE)
        bad["models"][2]["triggers"] = []
        with self.assertRaisesRegex(cp.PlanError, r"cuda-sdpa:bug=toy-model-c: model toy-model-c has no trigger case"):
            cp.plan(bad, "cuda-.*")
        # a trigger only for an op the kernel does not serve counts as none
        bad = copy.deepcopy(FIXTURE)
        bad["bug_knobs"][2]["values"].append("toy-model-a")
        bad["bug_knobs"][2]["values"].remove("toy-model-c")
        with self.assertRaisesRegex(cp.PlanError, r"cuda-sdpa:bug=toy-model-a: model toy-model-a has no trigger case for sdpa"):
            cp.plan(bad, "cuda-.*", ops_of={"cuda-sdpa": {"sdpa"}})
        rc, _, err = run_main(["--catalog", "-", "--ops", "cuda-sdpa=sdpa"], json.dumps(bad))
        self.assertEqual(rc, 1)
        self.assertIn("cuda-sdpa:bug=toy-model-a: model toy-model-a has no trigger case for sdpa", err)
        rc, _, err = run_main(["--catalog", "-", "--ops", "cuda-sdpa=backward"], json.dumps(FIXTURE))
        self.assertEqual(rc, 2)

    def test_not_a_catalog(self):
        rc, _, err = run_main(["--catalog", "-"], json.dumps({"schema": "attn-oracle.report"}))
        self.assertEqual(rc, 2)
        self.assertIn("not an attn-oracle catalog", err)


class BuiltCatalog(unittest.TestCase):
    """The plan from this build's own list: every model could be a knob (a kernel per model), every bug
    knob the build has is planned, and catalog-knobs.sh --dry-run prints that plan."""

    @classmethod
    def setUpClass(cls):
        if not os.access(AO, os.X_OK):
            raise unittest.SkipTest(f"attn-oracle CLI not found at {AO} (set AO_CLI)")
        cls.catalog = json.loads(subprocess.run([AO, "catalog", "--json"], check=True, capture_output=True,
                                                text=True).stdout)

    def test_every_model_plans_as_a_knob(self):
        c = copy.deepcopy(self.catalog)
        c["bug_knobs"] = [kernel(f"knob-{m['id']}", [m["id"]]) for m in c["models"]]
        lines, summary = cp.plan(c)
        self.assertEqual(len(summary), len(c["models"]))
        for (k, nt, no, n), m in zip(summary, c["models"]):
            self.assertEqual(k, f"knob-{m['id']}:bug={m['id']}")
            self.assertGreater(nt, 0, k)
            self.assertGreater(no, 0, k)
            runs = [len(c["seeds"]) if x["scale"] == "ordinary" else 1 for x in m["triggers"] + m["outside"]]
            lines_per = [2 * len(t["fails"]) + 1 for t in m["triggers"]] + [1] * len(m["outside"])
            self.assertEqual(n, sum(r * p for r, p in zip(runs, lines_per)), k)

    def test_every_bug_knob_of_the_build_is_planned(self):
        lines, summary = cp.plan(self.catalog, "cuda-.*", ops_of=KERNEL_OPS)
        planned = {k for k, *_ in summary}
        for b in self.catalog["bug_knobs"]:
            if b["backend"].startswith("cuda-"):
                for v in b["values"]:
                    self.assertIn(f"{b['backend']}:bug={v}", planned)

    def test_catalog_knobs_dry_run(self):
        r = subprocess.run(["bash", os.path.join(HERE, "catalog-knobs.sh"), "--dry-run"], capture_output=True,
                           text=True, env={**os.environ, "AO_CLI": AO}, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines, summary = cp.plan(self.catalog, "cuda-.*", ops_of=KERNEL_OPS)
        self.assertEqual(r.stdout.rstrip("\n"), "\n".join(lines))
        self.assertIn(f"{len(summary)} knobs, ", r.stderr)

