"""The hostile battery, classes 24, 26: reports: hostile text in them still parses; a report that cannot be written
costs only itself.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os
import resource

import pytest

from .battery import (params, SMALL, SDPA, CLI, Attack, write, exec_script, has, all_of, reports_ok, corpus,
                      with_exec, chain, side_run, side_ok)


def attacks():
    A = []
    # (24) hostile text in reports: every report parses with a real parser (check_reports.py: json,
    # xml.etree for report.xml and report.html, a GFM table check for report.md) when a backend's stderr or
    # name holds what XML forbids (U+FFFE, U+FFFF, C0 controls), a line that would start a heading, `|`,
    # an HTML comment, `]]>` or backticks.
    hostile_err = (r"printf 'bad \357\277\276 \357\277\277 \001\033[31m\n# heading\n## x | y || z\n"
                   r"<!-- hidden ]]> ``tick`` ` \n' >&2; exit 3")
    A.append(Attack(24, "gate: exec stderr with U+FFFE, # line, |, <!--, ]]>", ["gate", "{corpus}", "--backend",
                    "{be}", "--report-dir", "rep"], {1}, setup=chain(with_exec(hostile_err), corpus([SMALL, SDPA])),
                    check=reports_ok(2)))
    A.append(Attack(24, "repro: exec stderr with U+FFFE, # line, |, <!--", ["repro", SMALL, "--backend", "{be}",
                    "--report-dir", "rep"], {1}, setup=with_exec(hostile_err), check=reports_ok(1), quick=False))

    def hostile_name(d, ctx):
        corpus([SMALL])(d, ctx)
        p = write(os.path.join(d, "be.sh"), "#!/bin/sh\necho fails >&2\nexit 3\n", 0o755)
        ctx["be"] = "exec:/bin/sh " + p + " '\ufffe\uffff <!-- # x | `y` ]]>' #"
        return None
    A.append(Attack(24, "gate: backend name with U+FFFE, <!--, |, backtick", ["gate", "{corpus}", "--backend", "{be}",
                    "--report-dir", "rep"], {1}, setup=hostile_name, check=reports_ok(1)))

    # (26) report write failures: a directory a backend puts where a report goes during the run is
    # replaced (the report is not lost); one there before the run is refused before any case runs; a file
    # size limit costs only the report it cuts, is named, and exits 2 with the summary printed; never a
    # death by SIGXFSZ.
    def isdir_backend(d, ctx):
        corpus([SMALL])(d, ctx)
        ctx["be"] = exec_script(d, "be.sh", f"mkdir -p {d}/rep/report.json/x; exit 3")
        return None
    A.append(Attack(26, "backend makes report.json a directory", ["gate", "{corpus}", "--backend", "{be}",
                    "--report-dir", "rep"], {1}, setup=isdir_backend,
                    check=all_of(has("gate: 1 cases"), reports_ok(1))))
    def fifo_backend(d, ctx):
        corpus([SMALL])(d, ctx)
        ctx["be"] = exec_script(d, "be.sh", f"mkfifo {d}/rep/report.html; exit 3")
        return None
    A.append(Attack(26, "backend makes report.html a FIFO", ["gate", "{corpus}", "--backend", "{be}",
                    "--report-dir", "rep"], {1}, setup=fifo_backend, check=reports_ok(1), limit=30))

    def isdir_before(d, ctx):
        corpus([SMALL])(d, ctx)
        os.makedirs(os.path.join(d, "rep", "report.md", "x"))
        return None
    A.append(Attack(26, "report.md a directory before the gate", ["gate", "{corpus}", "--backend", "cpu-ref",
                    "--report-dir", "rep"], {2}, setup=isdir_before,
                    check=all_of(has("report.md"), lambda r, c: None if "PASS" not in r.out else "ran cases first")))

    def fsize_gate(d, ctx):
        os.mkdir(os.path.join(d, "tmp"))
        corpus(["op=indexer docs=64,32 heads=2 dim=16 topk=8 cp=2 rank=1"])(d, ctx)
        return [CLI, "gate", ctx["corpus"], "--backend", "cpu-bug:topleft-cp", "--no-explain", "--report-dir",
                os.path.join(d, "rep")]

    def fsize(n):
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    A.append(Attack(26, "RLIMIT_FSIZE below report.html's size", [], {0},
                    setup=side_run(fsize_gate, preexec=fsize(24 << 10)), alone=True,
                    check=side_ok(2, "report.html", "File too large", "gate: 1 cases x 1 backend(s)",
                                  then=reports_ok(1, extra=("--missing", "report.html")))))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_reports(attack, hostile):
    hostile.check(attack)
