"""The hostile battery's machinery: attacks an adversarial backend or a careless user would make on the attn-oracle CLI.

An attack (Attack) is a command line run in a fresh temp dir, in its own session, under a hard wall-clock limit
(the whole process group is killed on the limit), with its expected exit codes and a predicate on output, files
and processes; run() gives its Result, whose reason is None when the attack was handled (else why not).
Deterministic (fixed seeds), stdlib only. The test files beside this one (test_*.py) each build the attacks of a
few attack classes (CLASSES) and make each attack a test; conftest.py runs the selected attacks a few at a time.

AO_CLI names the CLI (default build/attn-oracle), AO_BUILD the build dir holding the test plugins (default
build: AO_BUILD/oracle/tests/libao_hostile_plugin_<mode>.so, libao_example_plugin_*.so); a relative path is
taken from the current directory. Without the CLI every attack skips, without a plugin the attacks that load it.
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
CLI = os.path.abspath(os.environ.get("AO_CLI") or os.path.join(ROOT, "build", "attn-oracle"))
BUILD = os.path.abspath(os.environ.get("AO_BUILD") or os.path.join(ROOT, "build"))
TESTS = os.path.join(BUILD, "oracle", "tests")
NUMPY_REF = f"/usr/bin/python3 {ROOT}/scripts/adapters/numpy_ref.py"
EDGE = os.path.join(ROOT, "corpus", "edge")
REPORT_CHECKER = os.path.join(ROOT, "report", "tests", "check_reports.py")

IDX = "op=indexer docs=512,256 cp=4 rank=2"
SMALL = "op=indexer docs=64,32 heads=2 dim=16 topk=8"
SDPA = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"
CLASSES = {
    1: "mutated inputs", 2: "plugin faults", 3: "bisect-run cmdline -> 128", 4: "exec outputs not regular",
    5: "huge header / stderr", 6: "memory cap / big cases", 7: "fuzz budget wall time", 8: "non-UTF-8 stderr",
    9: "bad .case files", 10: "report dirs / signals", 11: "leaked processes", 12: "ignored keys / bad options",
    13: "BOM / loops / long values / shard", 14: "fuzz dedup", 15: "random malformed lines",
    16: "forged bisect verdict", 17: "plugin isolation / claims / ABI swap", 18: "escaped supervision / stdout",
    19: "bug models off the buffer (explain on)", 20: "conventions honoured / OpenMP environment",
    21: "found files: foreign text, portable names", 22: "claims by backend identity",
    23: "corpus bounds, FIFOs, save failures, flaky", 24: "hostile text in reports",
    25: "stops: SIGHUP / single repro, explain / closed stdout", 26: "report write failures",
}


def plugin_path(name):
    """A test plugin library of the build (name: hostile_plugin_<mode> or example_plugin_<variant>)."""
    return os.path.join(TESTS, f"libao_{name}.so")


def plug(mode):
    return "plugin:" + plugin_path(f"hostile_plugin_{mode}")


OK_PLUGIN = "plugin:" + plugin_path("example_plugin_ok")


class Attack:
    """quick=False: only the full mode runs it (pytest marker hostile_full). alone: it needs the process to
    itself (a preexec hook: not safe beside threads), so it runs when no other attack does. needs: test plugin
    libraries it loads other than through its arguments (a setup, a claim in a corpus)."""

    def __init__(self, cls, name, args, rc, check=None, env=None, setup=None, limit=60, quick=True, during=None,
                 max_rss_mib=None, alone=False, needs=()):
        self.cls, self.name, self.args, self.rc = cls, name, args, set(rc)
        self.check, self.env, self.setup, self.limit, self.quick = check, env or {}, setup, limit, quick
        self.during, self.max_rss_mib, self.alone = during, max_rss_mib, alone
        self.needs = list(needs)

    def missing(self):
        """Why the attack cannot run here (no CLI, a test plugin not built), or None."""
        if not os.access(CLI, os.X_OK):
            return f"attn-oracle CLI not found at {CLI} (set AO_CLI)"
        libs = [x[len("plugin:"):].split(":")[0] for x in self.args if isinstance(x, str) and x.startswith("plugin:")]
        for lib in [x for x in libs if x.startswith(TESTS + os.sep)] + self.needs:  # not /nonexistent/lib.so
            if not os.path.exists(lib):
                return f"test plugin {lib} not built (the default build makes it; set AO_BUILD)"
        return None


class Result:
    pass


def write(path, text, mode=0o644):
    with open(path, "w" if isinstance(text, str) else "wb") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def exec_script(d, name, body):
    """An exec: backend: a sh script in the attack dir; the case dir is its last argument ($1)."""
    p = write(os.path.join(d, name), "#!/bin/sh\n" + body + "\n", 0o755)
    return "exec:/bin/sh " + p


def pids_alive(d):
    """pids recorded by exec backends in d/pids (one per line) that still run (and are not zombies)."""
    out = []
    path = os.path.join(d, "pids")
    if not os.path.exists(path):
        return out
    for tok in open(path).read().split():
        try:
            pid = int(tok)
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                out.append(pid)
        except (ValueError, OSError):
            pass
    return out


def run_one(bin_path, a, root):
    d = tempfile.mkdtemp(prefix="atk-", dir=root)
    r = Result()
    r.dir = d
    ctx = {"dir": d}
    args = a.setup(d, ctx) if a.setup else None
    if args is None:
        args = a.args
    argv = [bin_path] + [x.format(**ctx) if isinstance(x, str) else x for x in args]
    r.cmd = " ".join(shlex.quote(x) for x in argv)
    env = dict(os.environ)
    env.update({k: v.format(**ctx) for k, v in a.env.items()})
    outf, errf = open(os.path.join(d, "stdout"), "wb"), open(os.path.join(d, "stderr"), "wb")
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=outf, stderr=errf, stdin=subprocess.DEVNULL, env=env, cwd=d,
                         start_new_session=True)
    r.timed_out, status, ru = False, None, None
    fired = False
    while True:
        pid, st, rus = os.wait4(p.pid, os.WNOHANG)
        if pid:
            status, ru = st, rus
            break
        el = time.monotonic() - t0
        if a.during and not fired and el >= a.during[0]:
            fired = True
            a.during[1](p.pid, ctx)
        if el > a.limit:
            r.timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            _, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    p.returncode = 0  # reaped by wait4 above
    r.wall = time.monotonic() - t0
    outf.close()
    errf.close()
    r.rss_mib = ru.ru_maxrss / 1024.0 if ru else 0
    r.signal = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    r.rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    r.stdout = open(os.path.join(d, "stdout"), "rb").read().decode("utf-8", "replace")
    r.stderr = open(os.path.join(d, "stderr"), "rb").read().decode("utf-8", "replace")
    r.out = r.stdout + r.stderr
    time.sleep(0.05)
    leaked = pids_alive(d)
    # the harness's own group must be gone too
    try:
        os.killpg(p.pid, 0)
        group_left = True
    except OSError:
        group_left = False
    reason = None
    if r.timed_out:
        reason = f"hang: killed after {a.limit}s"
    elif r.signal is not None:
        reason = f"harness died by signal {r.signal}"
    elif r.rc not in a.rc:
        reason = f"wrong exit code {r.rc} (expected {sorted(a.rc)})" + (" -- accepted/PASS"
                                                                          if r.rc == 0 and 0 not in a.rc else "")
    elif leaked:
        reason = f"leaked process(es) {leaked}"
    elif group_left:
        reason = "harness process group still alive after exit"
    elif a.max_rss_mib and r.rss_mib > a.max_rss_mib:
        reason = f"peak RSS {r.rss_mib:.0f} MiB > {a.max_rss_mib} MiB"
    elif a.check:
        try:
            reason = a.check(r, ctx)
        except Exception as e:  # a predicate that cannot evaluate is a finding about the output
            reason = f"check raised {type(e).__name__}: {e}"
    for pid in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if group_left:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    r.reason = reason
    subprocess.run(["chmod", "-R", "u+rwx", d], stderr=subprocess.DEVNULL)
    subprocess.run(["rm", "-rf", d], stderr=subprocess.DEVNULL)
    return r


def attempt(a, root):
    """run_one, with an attack that could not start (e.g. E2BIG) a Result that says so: counted, never hidden."""
    try:
        return run_one(CLI, a, root)
    except Exception as e:
        r = Result()
        r.reason, r.rc, r.signal, r.wall, r.rss_mib, r.cmd, r.out = (f"attack setup failed: {e!r}", None, None,
                                                                   0.0, 0.0, a.name, "")
        return r


def verdict(a, r):
    """Fails the running test with the attack's reason, its command line and its output's tail."""
    if r.reason is not None:
        pytest.fail(f"NOT HANDLED ({a.cls}: {CLASSES[a.cls]}) {a.name}: {r.reason}\n    $ {r.cmd}\n"
                    f"    rc={r.rc} sig={r.signal} {r.wall:.1f}s {r.rss_mib:.0f}MiB\n    output tail: {r.out[-300:]!r}",
                    pytrace=False)


def params(attacks):
    """The attacks as pytest parameters: id the attack's name, marker hostile_full where only the full mode runs it."""
    return [pytest.param(a, id=a.name, marks=() if a.quick else pytest.mark.hostile_full) for a in attacks]


# ---------- predicates ----------
def has(*words):
    def f(r, ctx):
        for w in words:
            if w.lower() not in r.out.lower():
                return f"output does not mention {w!r}: {r.out[-300:]!r}"
        return None
    return f


def all_of(*fs):
    def f(r, ctx):
        for g in fs:
            if g is None:
                continue
            why = g(r, ctx)
            if why:
                return why
        return None
    return f


def short_output(limit):
    return lambda r, ctx: None if len(r.out) <= limit else f"output {len(r.out)} bytes > {limit}"


def faster(sec):
    return lambda r, ctx: None if r.wall <= sec else f"took {r.wall:.1f}s > {sec}s"


def report_json(status=None, where="rep"):
    def f(r, ctx):
        p = os.path.join(ctx["dir"], where, "report.json")
        if not os.path.exists(p):
            return "missing report.json"
        try:
            j = json.load(open(p, encoding="utf-8"))
        except Exception as e:
            return f"report.json does not parse: {e}"
        if status and j.get("status") != status:
            return f"report status {j.get('status')!r}, expected {status!r}"
        return None
    return f


def reports_ok(n=None, status="complete", where="rep", extra=()):
    """Every report parses with a real parser (report/tests/check_reports.py: json, xml.etree for report.xml
    and report.html, a GFM table check for report.md), lists n cases (None: as many as report.json lists)
    and has the given status."""
    def f(r, ctx):
        cases = ["--cases", str(n)] if n is not None else []
        p = subprocess.run([sys.executable, REPORT_CHECKER, os.path.join(ctx["dir"], where), *cases, "--status",
                            status, *extra], capture_output=True, text=True)
        return None if p.returncode == 0 else (p.stderr.strip() or f"check_reports exit {p.returncode}")[-300:]
    return f


def error_verdict(r, ctx):
    return None if "ERROR" in r.out or "error" in r.out.lower() else "no ERROR verdict in output"


def side_run(argv_of, preexec=None, stdout_pipe_head=False):
    """Runs the harness from the setup (the attack's own argv cannot hold a pipe or a limit); the
    check reads ctx['side'] = (exit status or -signal, stdout+stderr)."""
    def s(d, ctx):
        argv = argv_of(d, ctx)
        if stdout_pipe_head:  # `... | head -1`, the harness's stderr kept
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(os.path.join(d, "side.err"), "wb"),
                                 cwd=d, env=dict(os.environ, TMPDIR=os.path.join(d, "tmp")),
                                 start_new_session=True)
            p.stdout.readline()
            p.stdout.close()
        else:
            p = subprocess.Popen(argv, stdout=open(os.path.join(d, "side.err"), "wb"), stderr=subprocess.STDOUT,
                                 cwd=d, env=dict(os.environ, TMPDIR=os.path.join(d, "tmp")),
                                 start_new_session=True, preexec_fn=preexec)
        try:
            rc = p.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
        ctx["side"] = (rc, open(os.path.join(d, "side.err"), "rb").read().decode("utf-8", "replace"))
        return ["keys"]  # the attack's own run: a no-op
    return s

def side_ok(rc, *words, then=None):
    def f(r, ctx):
        got, out = ctx["side"]
        if got != rc:
            return f"side run: exit {got} (negative: killed by that signal), expected {rc}: {out[-300:]!r}"
        for w in words:
            if w not in out:
                return f"side run output does not mention {w!r}: {out[-300:]!r}"
        return then(r, ctx) if then else None
    return f


# ---------- setups ----------
def corpus(lines, name="c.case"):
    def s(d, ctx):
        write(os.path.join(d, name), "\n".join(lines) + "\n")
        ctx["corpus"] = os.path.join(d, name)
        return None
    return s


def with_exec(body, extra=None):
    """setup making an exec backend; ctx['be'] is its --backend value."""
    def s(d, ctx):
        ctx["be"] = exec_script(d, "be.sh", body.replace("@D@", d))
        if extra:
            extra(d, ctx)
        return None
    return s


def chain(*ss):
    def s(d, ctx):
        for x in ss:
            if x:
                x(d, ctx)
        return None
    return s


def npy_header(descr, shape):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)) +
                                                                        ("," if len(shape) == 1 else ""))
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode()
