"""Shared by the adapters' CPU tests (test_*.py): case directories written by the attn-oracle CLI itself,
`repro` through an adapter (`python -m attn_oracle.adapters.<name>`, the repository's package: conftest.py
puts it on the adapters' PYTHONPATH) and the warm host on a socket.

AO_CLI names the binary (default build/attn-oracle); without one the tests that need it skip, saying so.
"""
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
AO = os.environ.get("AO_CLI") or os.path.join(ROOT, "build", "attn-oracle")


def write_case(line, dest):
    """The CLI writes the case directory; an exec: command copies it out and skips (exit 125)."""
    from attn_oracle.adapters.protocol import CaseDir
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
    """The exec: backend spec that runs an adapter module (attn_oracle.adapters.<name>) with this Python."""
    return f"exec:{sys.executable} -m {adapter}"


def repro(line, backend, *extra):
    """`attn-oracle repro <line> --backend <backend> <extra>`, its output captured as text."""
    return subprocess.run([AO, "repro", *line.split(), "--backend", backend, *extra], capture_output=True, text=True)


@contextlib.contextmanager
def warm_host(tmp):
    """The warm host (no torch, exits when idle) on a socket in tmp, as the device campaigns run it; yields the
    socket path once it listens (an AssertionError if it never does); stopped on exit."""
    sock = os.path.join(tmp, "serve.sock")
    srv = subprocess.Popen([sys.executable, "-m", "attn_oracle.adapters.serve", "--no-torch", "--idle-exit", "60",
                            "--socket", sock], stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if os.path.exists(sock):
                break
            subprocess.run(["sleep", "0.1"])
        if not os.path.exists(sock):
            raise AssertionError("the warm host (attn_oracle.adapters.serve) did not start")
        yield sock
    finally:
        srv.kill()
        srv.wait()


def client_backend(sock, adapter_name):
    """The exec: backend spec that runs an adapter inside the warm host (attn_oracle.adapters.client)."""
    return f"exec:{sys.executable} -m attn_oracle.adapters.client --socket {sock} {adapter_name}"

