"""The hostile battery, classes 10, 25: report dirs and stops: SIGINT, SIGTERM, SIGHUP and SIGPIPE end a run with its
reports and no case dir left.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os
import signal
import subprocess
import time

import pytest

from .battery import (params, IDX, SMALL, SDPA, CLI, Attack, exec_script, has, all_of, faster, report_json,
                      reports_ok, corpus, with_exec, chain, side_run, side_ok)


def attacks():
    A = []
    # (10) report dirs and signals
    A.append(Attack(10, "--report-dir ''", ["repro", SMALL, "--report-dir", ""], {2}, check=has("report-dir")))
    A.append(Attack(10, "--report-dir under /proc", ["repro", SMALL, "--report-dir", "/proc/ao-nope/x"], {2},
                    check=has("report")))
    A.append(Attack(10, "--report-dir is a file", ["gate", "{corpus}", "--backend", "cpu-ref", "--report-dir", "{corpus}"], {2},
                    setup=corpus([SMALL])))
    A.append(Attack(10, "gate --report-dir unwritable (/proc) checked first", ["gate", "{corpus}", "--backend",
                    "{be}", "--report-dir", "/proc/self/ao"], {2},
                    setup=chain(with_exec("echo ran >> @D@/ran; exit 125"), corpus([SMALL, SDPA])),
                    check=lambda r, c: None if not os.path.exists(os.path.join(c["dir"], "ran"))
                    else "cases ran before the report dir was checked"))

    def concurrent(d, ctx):
        corpus([SMALL, SDPA])(d, ctx)
        ctx["be"] = exec_script(d, "be.sh", "sleep 2; exit 125")
        os.mkdir(os.path.join(d, "rep"))
        ctx["first"] = subprocess.Popen([CLI, "gate", ctx["corpus"], "--backend", ctx["be"], "--report-dir",
                                         os.path.join(d, "rep")], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.8)
        return None

    def concurrent_check(r, ctx):
        first = ctx["first"]
        try:
            rc1 = first.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            return "first gate hung"
        if rc1 != 125:
            return f"first gate exit {rc1}, expected 125"
        if "pid" not in r.out.lower():
            return "second gate's refusal does not name the holder's pid"
        return report_json("complete")(r, ctx)
    A.append(Attack(10, "two gates on one report dir", ["gate", "{corpus}", "--backend", "cpu-ref", "--report-dir",
                                                        "rep"], {2}, setup=concurrent, check=concurrent_check))

    for sig, code, kind in [(signal.SIGINT, 130, "gate"), (signal.SIGTERM, 143, "gate"),
                            (signal.SIGINT, 130, "repro"), (signal.SIGTERM, 143, "fuzz")]:
        def sigsetup(d, ctx, kind=kind):
            corpus([SMALL, SDPA, IDX, SMALL + " seed=2"])(d, ctx)
            ctx["be"] = exec_script(d, "be.sh", "echo $$ >> @D@/pids; sleep 3; exit 125".replace("@D@", d))
            if kind == "gate":
                return ["gate", ctx["corpus"], "--backend", ctx["be"], "--report-dir", "rep"]
            if kind == "repro":
                return ["repro", SMALL, "--backend", ctx["be"], "--backend", ctx["be"], "--backend", ctx["be"],
                        "--report-dir", "rep"]
            return ["fuzz", "--backend", ctx["be"], "--budget", "20", "--no-save"]

        def send(pid, ctx, sig=sig):
            os.kill(pid, sig)
        chk = report_json("interrupted") if kind != "fuzz" else has("INTERRUPTED")
        A.append(Attack(10, f"{signal.Signals(sig).name} during {kind}", [], {code}, setup=sigsetup,
                        during=(4.0, send), check=all_of(chk, faster(12)), limit=40))

    # (25) stops: SIGHUP is a stop like SIGINT/SIGTERM for every command that runs backends, and a
    # single-backend repro or an explain stopped mid-run removes its case dir (TMPDIR is the attack's
    # tmp/); `gate | head -1` stops with its reports (exit 141) instead of dying by SIGPIPE.

    def slow_backend(d, ctx):
        os.mkdir(os.path.join(d, "tmp"))
        corpus([SMALL, SDPA, SMALL + " seed=2"])(d, ctx)
        ctx["be"] = exec_script(d, "be.sh", f"echo $$ >> {d}/pids; touch {d}/running; sleep 30; exit 3")
        return None

    def send_when_running(sig):
        def f(pid, ctx):
            t0 = time.monotonic()
            while not os.path.exists(os.path.join(ctx["dir"], "running")) and time.monotonic() - t0 < 20:
                time.sleep(0.02)
            os.kill(pid, sig)
        return f

    def no_case_dir(r, ctx):
        left = os.listdir(os.path.join(ctx["dir"], "tmp"))
        return None if not left else f"left in TMPDIR: {left}"

    stop_args = {"gate": ["gate", "{corpus}", "--backend", "{be}", "--report-dir", "rep"],
                 "repro": ["repro", SMALL, "--backend", "{be}", "--report-dir", "rep"],
                 "explain": ["explain", SMALL, "--backend", "{be}"],
                 "fuzz": ["fuzz", "--backend", "{be}", "--budget", "20", "--no-save"]}
    for kind, sig, quick in [("gate", signal.SIGHUP, True), ("fuzz", signal.SIGHUP, True),
                             ("repro", signal.SIGHUP, False), ("repro", signal.SIGINT, False),
                             ("repro", signal.SIGTERM, True), ("explain", signal.SIGHUP, False),
                             ("explain", signal.SIGINT, True), ("explain", signal.SIGTERM, False)]:
        name = signal.Signals(sig).name
        checks = [no_case_dir, has("INTERRUPTED"), faster(15)]
        if kind in ("gate", "repro"):
            checks.append(reports_ok(1, "interrupted", extra=("--signal", name)))  # the case cut short
        A.append(Attack(25, f"{name} during {kind} (one exec backend)", stop_args[kind], {128 + sig},
                        env={"TMPDIR": "{dir}/tmp"}, setup=slow_backend, during=(0.2, send_when_running(sig)),
                        check=all_of(*checks), limit=40, quick=quick))

    def head_gate(d, ctx):
        os.mkdir(os.path.join(d, "tmp"))
        corpus([SMALL + f" seed={i}" for i in range(10)])(d, ctx)
        be = exec_script(d, "be.sh", "sleep 0.3; exit 3")
        return [CLI, "gate", ctx["corpus"], "--backend", be, "--report-dir", os.path.join(d, "rep")]
    A.append(Attack(25, "gate | head -1: stops with its reports (141)", [], {0}, setup=side_run(head_gate,
                    stdout_pipe_head=True), check=side_ok(141, "INTERRUPTED by SIGPIPE", then=all_of(
                        no_case_dir, reports_ok(None, "interrupted", extra=("--signal", "SIGPIPE")))), limit=70))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_signals(attack, hostile):
    hostile.check(attack)
