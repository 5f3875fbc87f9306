"""Shared by the adapters' CPU tests (test_*.py): case directories written by the attn-oracle CLI itself.

AO_CLI names the binary (default build-cpu/attn-oracle). Only the standard library at import time; numpy
(through ao_exec.CaseDir) is imported when a case is written, so a test file can still report "no numpy".
"""
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AO = os.environ.get("AO_CLI", os.path.join(ROOT, "build-cpu", "attn-oracle"))


def write_case(line, dest):
    """The CLI writes the case directory; an exec: command copies it out and skips (exit 125)."""
    from ao_exec import CaseDir
    copy = f"exec:sh -c 'cp -R \"$1\" {shlex.quote(dest)}; exit 125' copy"
    r = subprocess.run([AO, "repro", *line.split(), "--backend", copy], capture_output=True, text=True)
    if not os.path.exists(os.path.join(dest, "meta.json")):
        raise AssertionError(f"no case dir for {line}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return CaseDir(dest)


class CaseDirTest(unittest.TestCase):
    """A test class whose self.case(line) gives a fresh case directory (one temp folder per class)."""
    prefix = "ao-test-"

    @classmethod
    def setUpClass(cls):
        if not os.access(AO, os.X_OK):
            raise unittest.SkipTest(f"attn-oracle CLI not found at {AO} (set AO_CLI)")
        cls.tmp = tempfile.mkdtemp(prefix=cls.prefix)
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def case(self, line):
        type(self).n += 1
        return write_case(line, os.path.join(self.tmp, f"c{self.n}"))
