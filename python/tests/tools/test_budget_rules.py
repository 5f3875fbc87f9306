"""The time-budget guard (test-budget.py) fails when one test, one phase or
the whole run is over its budget, or a test has no budget line, and passes when all are within."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir, "scripts", "tools",
                       "test-budget.py")
BUDGET = "test slow_one 100\ntest Suite\\.Fast.* 10\nphase build 50\nphase ctest 200\ntotal 240\n"


def junit(tests):
    cases = "".join(f'<testcase name="{n}" time="{t}" status="{s}"/>' for n, t, s in tests)
    return f'<?xml version="1.0"?><testsuite tests="{len(tests)}">{cases}</testsuite>'


class Budget(unittest.TestCase):
    def run_checker(self, budget, phases, tests):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, text in (("budget.txt", budget), ("phases.tsv", phases), ("junit.xml", junit(tests))):
                paths.append(os.path.join(d, name))
                with open(paths[-1], "w") as f:
                    f.write(text)
            p = subprocess.run([sys.executable, CHECKER, *paths], capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

    def test_within_budget_passes(self):
        rc, out = self.run_checker(BUDGET, "build\t40.0\nctest\t150.0\n",
                                   [("slow_one", 90, "run"), ("Suite.FastA", 9.9, "run")])
        self.assertEqual(rc, 0, out)

    def test_a_slow_test_fails_naming_it(self):
        rc, out = self.run_checker(BUDGET, "build\t40.0\nctest\t150.0\n",
                                   [("slow_one", 90, "run"), ("Suite.FastA", 10.5, "run")])
        self.assertEqual(rc, 1, out)
        self.assertIn("test Suite.FastA: 10.5 s > budget 10 s", out)

    def test_a_slow_phase_and_total_fail(self):
        rc, out = self.run_checker(BUDGET, "build\t60.0\nctest\t190.0\n", [])
        self.assertEqual(rc, 1, out)
        self.assertIn("phase build: 60.0 s > budget 50 s", out)
        self.assertIn("total: 250.0 s > budget 240 s", out)

    def test_a_test_without_a_budget_line_fails(self):
        rc, out = self.run_checker(BUDGET, "build\t1\n", [("Other.Test", 1, "run")])
        self.assertEqual(rc, 1, out)
        self.assertIn("test Other.Test: no budget line matches it", out)

    def test_a_test_not_run_is_not_judged(self):
        rc, out = self.run_checker(BUDGET, "build\t1\n", [("Other.Test", 0, "notrun")])
        self.assertEqual(rc, 0, out)

    def test_a_bad_budget_line_is_a_usage_error(self):
        rc, out = self.run_checker("test only_a_pattern\n", "build\t1\n", [])
        self.assertEqual(rc, 2, out)
        self.assertIn("budget.txt:1", out)

