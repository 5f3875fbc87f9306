"""The hostile battery, classes 11, 18: processes a backend leaves behind or that escape supervision: none outlives
the run.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os
import subprocess

import pytest

from .battery import (params, IDX, SMALL, SDPA, CLI, NUMPY_REF, Attack, plug, plugin_path, write, faster,
                      error_verdict, corpus, with_exec, chain)


def attacks():
    A = []
    # (11) leaked processes
    for name, body in [("setsid sleep", "setsid sleep 300 & echo $! >> @D@/pids; exit 125"),
                       ("double fork", "( sleep 300 & echo $! >> @D@/pids ) ; exit 125"),
                       ("setsid nohup double fork", "( setsid nohup sleep 300 >/dev/null 2>&1 & echo $! >> @D@/pids ) ;"
                                                    " sleep 0.3; exit 1"),
                       ("daemon then pass", f"( setsid sleep 300 & echo $! >> @D@/pids ); exec {NUMPY_REF} \"$1\""),
                       ("child ignores SIGTERM", "( trap '' TERM; exec sleep 300 ) & echo $! >> @D@/pids; exit 125")]:
        for sub in ["repro", "gate", "fuzz", "bisect-run"]:
            args = {"repro": ["repro", IDX, "--backend", "{be}"],
                    "gate": ["gate", "{corpus}", "--backend", "{be}"],
                    "fuzz": ["fuzz", "--backend", "{be}", "--budget", "2", "--no-save", "--op", "indexer"],
                    "bisect-run": ["bisect-run", IDX, "--backend", "{be}", "--timeout", "20"]}[sub]
            A.append(Attack(11, f"{sub} exec {name}", args, {0, 1, 125}, setup=chain(with_exec(body), corpus([IDX])),
                            quick=(sub == "repro")))
    A.append(Attack(11, "bisect-run --timeout 2 with a sleeping sh", ["bisect-run", SMALL, "--backend", "{be}",
                                                                       "--timeout", "2"], {1},
                    setup=with_exec("echo $$ >> @D@/pids; sleep 300 & echo $! >> @D@/pids; wait"),
                    check=faster(15)))
    A.append(Attack(11, "repro AO_EXEC_TIMEOUT=2 with a grandchild", ["repro", SMALL, "--backend", "{be}"], {1},
                    env={"AO_EXEC_TIMEOUT": "2"},
                    setup=with_exec("echo $$ >> @D@/pids; (setsid sleep 300 & echo $! >> @D@/pids); sleep 300"),
                    check=faster(15)))

    # (18) escaped supervision: a setsid daemon that kills its supervisor (exec: and plugin), the lock it
    # must not keep; exec stdout flooding its case dir
    daemon = "echo $$ >> @D@/pids; (setsid sh -c 'echo $$ >> @D@/pids; exec sleep 300' &); sleep 0.3; kill -9 $PPID; sleep 300"
    for sub in (["repro", SMALL], ["gate", "{corpus}"], ["explain", SMALL]):
        A.append(Attack(18, f"{sub[0]}: exec: setsid daemon kills its reaper",
                        sub + ["--backend", "{be}"], {1}, setup=chain(corpus([SMALL]), with_exec(daemon)),
                        check=error_verdict))
    A.append(Attack(18, "fuzz: exec: setsid daemon kills its reaper",
                    ["fuzz", "--backend", "{be}", "--budget", "1", "--shrink-runs", "1", "--no-save"], {1},
                    setup=with_exec(daemon)))

    def plugin_daemon_first_gate(d, ctx):
        write(os.path.join(d, "c.case"), SDPA + "\n")
        ctx["corpus"] = os.path.join(d, "c.case")
        env = dict(os.environ, AO_HOSTILE_PID_FILE=os.path.join(d, "pids"))
        first = subprocess.run([CLI, "gate", ctx["corpus"], "--no-explain", "--report-dir", os.path.join(d, "rep"),
                                "--backend", plug("daemon_kill_reaper")], env=env, cwd=d, timeout=60,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ctx["first_rc"] = first.returncode
        return None
    # the first gate (in the setup) starts the daemon; the attack is the second gate on the same report dir
    A.append(Attack(18, "plugin daemon kills its reaper; the next gate takes the report-dir lock",
                    ["gate", "{corpus}", "--no-explain", "--report-dir", "rep", "--backend", "cpu-ref"], {0},
                    setup=plugin_daemon_first_gate, limit=90, needs=[plugin_path("hostile_plugin_daemon_kill_reaper")],
                    check=lambda r, c: None if c["first_rc"] == 1 else f"first gate exited {c['first_rc']}"))
    A.append(Attack(18, "exec: 40 MB of stdout leaves a bounded stdout.txt",
                    ["repro", SMALL, "--backend", "{be}"], {1},
                    setup=with_exec("yes flood | head -c 40000000; exit 3"), env={"AO_EXEC_KEEP": "1", "AO_EXEC_DIR": "{dir}"},
                    check=lambda r, c: next((f"{os.path.join(dp, f)} is {os.path.getsize(os.path.join(dp, f))} bytes"
                                             for dp, _, fs in os.walk(c["dir"]) for f in fs if f == "stdout.txt"
                                             and os.path.getsize(os.path.join(dp, f)) > (16 << 20) + 200), None)))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_processes(attack, hostile):
    hostile.check(attack)
