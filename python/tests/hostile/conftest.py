"""Runs the selected attacks of the hostile battery (battery.py) a few at a time: most of an attack's time is the
harness waiting on a backend that sleeps, hangs or is timed out. When the first attack's test starts, every
selected attack that can run here goes to a pool of AO_HOSTILE_JOBS threads (default 4; 1: each attack runs in
its own test), in the order of the attack classes; each test waits for its own attack's verdict. An attack that
needs the process to itself (Attack.alone: a preexec hook, not safe beside threads) runs in its test once the
pool has drained.

The default run is the quick mode: attacks marked hostile_full (only the full mode runs them) are deselected
unless --hostile-full (the full mode: every attack) is given or the -m expression names hostile_full."""
import concurrent.futures
import os
import shutil
import signal
import tempfile

import pytest

from . import battery


def pytest_collection_modifyitems(config, items):
    if config.getoption("--hostile-full", default=False) or "hostile_full" in (config.option.markexpr or ""):
        return
    full = [item for item in items if item.get_closest_marker("hostile_full")]
    if full:
        config.hook.pytest_deselected(items=full)
        items[:] = [item for item in items if not item.get_closest_marker("hostile_full")]


class Runner:
    def __init__(self, jobs):
        self.jobs, self.attacks, self.futures, self.pool, self.root = jobs, [], {}, None, None

    def start(self):
        self.root = tempfile.mkdtemp(prefix="ao-attack-")
        # The harness keeps SIGHUP ignored when it started so (nohup): a battery run under nohup must not hand
        # the ignored signal on to the harness it attacks (class 25 sends SIGHUP).
        if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if self.jobs > 1:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs)
            # in class order, as the battery's classes were numbered: an attack keeps the neighbours its limits
            # were measured beside (a wall-time check beside the 50 MB outputs of class 5 is another check)
            for a in sorted(self.attacks, key=lambda a: a.cls):
                if not a.alone and a.missing() is None:
                    self.futures[a] = self.pool.submit(battery.attempt, a, self.root)

    def check(self, a):
        why = a.missing()
        if why:
            pytest.skip(why)
        if a in self.futures:
            r = self.futures[a].result()
        else:
            if a.alone and self.pool:
                concurrent.futures.wait(list(self.futures.values()))
                self.pool.shutdown(wait=True)
            r = battery.attempt(a, self.root)
        battery.verdict(a, r)

    def close(self):
        if self.pool:
            self.pool.shutdown(wait=True, cancel_futures=True)  # a started attack ends within its limit
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)


_runner = None


def pytest_collection_finish(session):
    global _runner
    v = os.environ.get("AO_HOSTILE_JOBS", "4")
    if not v.isdigit() or int(v) < 1:
        raise pytest.UsageError(f"AO_HOSTILE_JOBS must be a whole number of at least 1, got {v!r}")
    _runner = Runner(int(v))
    _runner.attacks = [item.callspec.params["attack"] for item in session.items
                       if isinstance(getattr(item, "callspec", None) and item.callspec.params.get("attack"),
                                     battery.Attack)]


@pytest.fixture(scope="session")
def hostile():
    """The battery's runner: hostile.check(attack) fails the test unless the attack was handled."""
    _runner.start()
    yield _runner
    _runner.close()
