"""Shared by the adapters' CPU tests (test_*.py): case directories written by the attn-oracle CLI itself,
`repro` through an adapter, the warm host (ao_serve.py) on a socket, and the script entry that skips (125).

AO_CLI names the binary (default build-cpu/attn-oracle). Only the standard library at import time; numpy
(through ao_exec.CaseDir) is imported when a case is written, so a test file can still report "no numpy".
"""
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
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


def adapter_backend(adapter):
    """The exec: backend spec that runs an adapter script with this Python."""
    return f"exec:{sys.executable} {adapter}"


def repro(line, backend, *extra):
    """`attn-oracle repro <line> --backend <backend> <extra>`, its output captured as text."""
    return subprocess.run([AO, "repro", *line.split(), "--backend", backend, *extra], capture_output=True, text=True)


@contextlib.contextmanager
def warm_host(tmp):
    """ao_serve.py (no torch, exits when idle) on a socket in tmp, as the device campaigns run it; yields the
    socket path once it listens (an AssertionError if it never does); stopped on exit."""
    sock = os.path.join(tmp, "serve.sock")
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "ao_serve.py"), "--no-torch", "--idle-exit", "60",
                            "--socket", sock], stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if os.path.exists(sock):
                break
            subprocess.run(["sleep", "0.1"])
        if not os.path.exists(sock):
            raise AssertionError("ao_serve.py did not start")
        yield sock
    finally:
        srv.kill()
        srv.wait()


def client_backend(sock, adapter_name):
    """The exec: backend spec that runs an adapter inside the warm host (ao_client.py)."""
    return f"exec:{sys.executable} {os.path.join(HERE, 'ao_client.py')} --socket {sock} {adapter_name}"


def run_tests(name, import_error):
    """A test file's script entry: exit 125 (skipped, the reason on stderr) when numpy (import_error: the
    ImportError text, None when the imports worked) or the CLI is missing, else the tests' outcome."""
    if import_error is not None:
        print(f"{name}: skipped: {import_error}", file=sys.stderr)
        sys.exit(125)
    if not os.access(AO, os.X_OK):
        print(f"{name}: skipped: no attn-oracle CLI at {AO} (set AO_CLI)", file=sys.stderr)
        sys.exit(125)
    unittest.main()
