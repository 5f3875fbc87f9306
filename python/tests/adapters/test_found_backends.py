"""Every `# backend:` line of corpus/found/ that names an adapter replays: the old scripts/adapters/ paths are
shims that run the package's module, and the warm host's client reaches it. Each found file is gated with the
backend its own line names (python3 is this interpreter; `<tmp>/NAME.sock` and the portable `exec:ao_client` become
a warm host started here): no case may end in an ERROR, and where the adapter cannot run here (no torch, no CUDA)
every case is SKIPPED with the adapter's own reason, which shows the adapter itself ran."""
import collections
import glob
import os
import re
import subprocess
import sys

import pytest

from attn_oracle.adapters.registry import find
from casedirs import AO, ROOT, warm_host

SUMMARY = re.compile(r"^gate: (\d+) cases x 1 backend\(s\): (\d+) passed, (\d+) failed, (\d+) weak, (\d+) skipped", re.M)


def found_backends():
    """{spec as the found files write it: [files]} for the exec: specs (built-in backends are other tests')."""
    by_spec = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(ROOT, "corpus", "found", "**", "*.case"), recursive=True)):
        with open(path) as f:
            for line in f:
                m = re.match(r"# backend: (?:\S+ = )?(exec:.*?)   vs: ", line)
                if m:
                    by_spec[m.group(1)].append(path)
                    break
    return dict(by_spec)


def replayable(spec, sock):
    """The spec as run here, and the adapter it names."""
    client = f"{sys.executable} {os.path.join(ROOT, 'scripts', 'adapters', 'ao_client.py')} --socket {sock}"
    spec = re.sub(r"^exec:ao_client ", f"exec:{client} ", spec)
    spec = re.sub(r"--socket <tmp>/\S+\.sock", f"--socket {sock}", spec)
    spec = re.sub(r"^exec:python3 ", f"exec:{sys.executable} ", spec)
    m = (re.search(r"(?:ao_client\.py|-m attn_oracle\.adapters\.client) --socket \S+ (\w+)", spec)
         or re.search(r"scripts/adapters/(\w+)\.py", spec) or re.search(r"-m attn_oracle\.adapters\.(\w+)", spec))
    assert m, f"no adapter named in {spec}"
    return spec, find(m.group(1))


SPECS = found_backends()


def test_the_found_corpus_names_adapters():
    assert len(SPECS) >= 6 and sum(map(len, SPECS.values())) >= 50


@pytest.mark.parametrize("spec", sorted(SPECS), ids=sorted(SPECS))
def test_found_backend_line_replays(spec, tmp_path):
    if not os.access(AO, os.X_OK):
        pytest.skip(f"no attn-oracle CLI at {AO} (set AO_CLI)")
    files = SPECS[spec]
    with warm_host(str(tmp_path)) as sock:
        backend, adapter = replayable(spec, sock)
        r = subprocess.run([AO, "gate", *files, "--backend", backend, "--no-explain"], capture_output=True, text=True,
                           cwd=ROOT)
    out = r.stdout + r.stderr
    assert "ERROR" not in out and "can't open file" not in out, out
    summary = SUMMARY.search(out)
    assert summary, out
    total, passed, failed, weak, skipped = map(int, summary.groups())
    assert total >= len(files), out
    if adapter.missing():  # it cannot run here: every case is its own named skip
        assert skipped == total, out
        reasons = [ln for ln in out.splitlines() if ln.startswith("SKIPPED ")]
        assert len(reasons) == total and all(f"{adapter.name}: " in ln for ln in reasons), out
