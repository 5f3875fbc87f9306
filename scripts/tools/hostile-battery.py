#!/usr/bin/env python3
"""Hostile-input battery against the attn-oracle CLI: attacks an adversarial backend or a careless user would make.

usage: hostile-battery.py ATTN_ORACLE BUILD_DIR [--full] [--only CLASS] [--jobs N] [-v]

BUILD_DIR holds the test plugins (BUILD_DIR/oracle/tests/libao_hostile_plugin_<mode>.so, libao_example_plugin_ok.so).
Every attack runs in a fresh temp dir, in its own session, under a hard wall-clock limit (the whole process
group is killed on the limit). Each states its expected exit codes and a predicate on output, files and
processes; the verdict is HANDLED or NOT HANDLED with the reason. Deterministic (fixed seeds). Stdlib only.
Default: a quick subset (< 3 min); --full: everything (< 15 min on 2 busy cores). --jobs N (default 4): attacks
run N at a time, each in its own session and folder (most of an attack's time is a harness waiting on a
backend that sleeps, hangs or is timed out); an attack that needs the battery's process alone (a preexec
hook: not safe beside threads) runs after the others, alone.
Exit 0 if every attack was handled, 1 otherwise.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time

IDX = "op=indexer docs=512,256 cp=4 rank=2"
SMALL = "op=indexer docs=64,32 heads=2 dim=16 topk=8"
SDPA = "op=sdpa lens=3,2,4 padded_offsets=0,4,8,13"
PLUGIN_MODES = ["exit_run", "underscore_exit_run", "exit_ctor", "segv", "abort", "stack", "loop", "abi_data",
                "msg_nonul"]
CLASSES = {
    1: "mutated inputs", 2: "plugin faults", 3: "bisect-run cmdline -> 128", 4: "exec outputs not regular",
    5: "huge header / stderr", 6: "memory cap / big cases", 7: "fuzz budget wall time", 8: "non-UTF-8 stderr",
    9: "bad .case files", 10: "report dirs / signals", 11: "leaked processes", 12: "ignored keys / bad options",
    13: "BOM / loops / long values / shard", 14: "fuzz dedup", 15: "random malformed lines",
    16: "forged bisect verdict", 17: "plugin isolation / claims / ABI swap", 18: "escaped supervision / stdout",
    19: "bug models off the buffer (explain on)", 20: "conventions honoured / OpenMP environment",
}
CLASSES.update({21: "found files: foreign text, portable names", 22: "claims by backend identity",
                23: "corpus bounds, FIFOs, save failures, flaky"})
CLASSES.update({24: "hostile text in reports", 25: "stops: SIGHUP / single repro, explain / closed stdout",
                26: "report write failures"})


class Attack:
    def __init__(self, cls, name, args, rc, check=None, env=None, setup=None, limit=60, quick=True, during=None,
                 max_rss_mib=None, alone=False):
        self.cls, self.name, self.args, self.rc = cls, name, args, set(rc)
        self.check, self.env, self.setup, self.limit, self.quick = check, env or {}, setup, limit, quick
        self.during, self.max_rss_mib, self.alone = during, max_rss_mib, alone


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


def error_verdict(r, ctx):
    return None if "ERROR" in r.out or "error" in r.out.lower() else "no ERROR verdict in output"


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


def build(bin_path, bdir, full):
    A = []
    tests = os.path.join(bdir, "oracle", "tests")
    plug = lambda m: "plugin:" + os.path.join(tests, f"libao_hostile_plugin_{m}.so")
    ok_plugin = "plugin:" + os.path.join(tests, "libao_example_plugin_ok.so")
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    numpy_ref = f"/usr/bin/python3 {src}/scripts/adapters/numpy_ref.py"
    edge = os.path.join(src, "corpus", "edge")

    # (1) mutated inputs
    A.append(Attack(1, "plugin zero_inputs repro", ["repro", IDX, "--backend", plug("zero_inputs")], {1}))
    A.append(Attack(1, "plugin zero_inputs repro rank 3", ["repro", "op=indexer docs=512,256 cp=4 rank=3",
                                                           "--backend", plug("zero_inputs")], {1}))
    A.append(Attack(1, "plugin zero_inputs gate corpus/edge", ["gate", edge, "--backend", plug("zero_inputs")],
                    {1}, limit=120, quick=False,
                    check=lambda r, c: None if not re.search(r"(?<!\d)0 failed", r.out) else "no failures reported"))
    zq = ("python3 -c \"import sys;p=sys.argv[1]+'/q.npy';b=bytearray(open(p,'rb').read());"
          "n=128;b[n:]=bytes(len(b)-n);open(p,'wb').write(b)\" \"$1\"\n")
    A.append(Attack(1, "exec zeroes q.npy then numpy_ref", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec(zq + f"exec {numpy_ref} \"$1\"")))
    A.append(Attack(1, "exec zeroes q.npy then numpy_ref rank 0", ["repro", "op=indexer docs=512,256 cp=4 rank=0",
                                                                     "--backend", "{be}"], {1},
                    setup=with_exec(zq + f"exec {numpy_ref} \"$1\"")))
    A.append(Attack(1, "exec rewrites q.npy only (outputs unwritten)", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec(zq)))
    A.append(Attack(1, "exec honest numpy_ref passes (control)", ["repro", IDX, "--backend", f"exec:{numpy_ref}"],
                    {0}))

    # (2) plugin faults through repro, gate, fuzz, bisect-run
    env = {"AO_PLUGIN_TIMEOUT": "3"}
    for m in PLUGIN_MODES:
        load_fault = m in ("exit_ctor", "abi_data")
        rc_run = {1, 2} if load_fault else {1}
        A.append(Attack(2, f"plugin {m} repro", ["repro", IDX, "--backend", plug(m)], rc_run, env=env,
                        check=all_of(short_output(20000), has("hostile_plugin"))))
        A.append(Attack(2, f"plugin {m} repro --report-dir", ["repro", SMALL, "--backend", plug(m),
                                                               "--report-dir", "rep"], rc_run, env=env,
                        check=None if load_fault else report_json("complete"), quick=(m == "segv")))
        A.append(Attack(2, f"plugin {m} gate", ["gate", "{corpus}", "--backend", plug(m), "--report-dir", "rep"],
                        rc_run, env=env, setup=corpus([SMALL, SDPA]),
                        check=None if load_fault else report_json("complete")))
        # a time budget bounds fuzz (shrinking included) to the budget plus one run (AO_PLUGIN_TIMEOUT=3 s here)
        A.append(Attack(2, f"plugin {m} fuzz", ["fuzz", "--backend", plug(m), "--budget", "5s", "--seed", "3",
                                                "--no-save"], rc_run, env=env, check=faster(5 + 3 + 2),
                        quick=(m in ("exit_run", "stack"))))
        A.append(Attack(2, f"plugin {m} bisect-run", ["bisect-run", SMALL, "--backend", plug(m), "--timeout", "20"],
                        {1, 125, 128} if load_fault else {1}, env=env, quick=(m in ("abort", "loop"))))
        A.append(Attack(2, f"plugin {m} bisect-run --crash-is-skip", ["bisect-run", SMALL, "--backend", plug(m),
                                                                       "--timeout", "20", "--crash-is-skip"],
                        {1, 125, 128}, env=env, quick=False))
    A.append(Attack(2, "example plugin ok (control)", ["repro", IDX, "--backend", ok_plugin], {0}))
    A.append(Attack(2, "example plugin bug=topleft-cp", ["repro", IDX, "--backend", ok_plugin + ":bug=topleft-cp"], {1}))

    # (3) bisect-run command-line errors -> 128
    for name, args in [("typo option", ["bisect-run", SMALL, "--backnd", "cpu-ref"]),
                       ("missing backend", ["bisect-run", SMALL]),
                       ("missing case", ["bisect-run", "--backend", "cpu-ref"]),
                       ("--timeout abc", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "abc"]),
                       ("--timeout -1", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "-1"]),
                       ("--timeout nan", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "nan"]),
                       ("--timeout inf", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout", "inf"]),
                                              ("--timeout without value", ["bisect-run", SMALL, "--backend", "cpu-ref", "--timeout"]),
                       ("unknown backend", ["bisect-run", SMALL, "--backend", "no-such-backend"]),
                       ("bad case key", ["bisect-run", "op=indexer docs=64 bogus=1", "--backend", "cpu-ref"]),
                       ("missing case file", ["bisect-run", "/nonexistent/x.case", "--backend", "cpu-ref"]),
                       ("plugin not found", ["bisect-run", SMALL, "--backend", "plugin:/nonexistent/lib.so"])]:
        A.append(Attack(3, f"bisect-run {name}", args, {128}))

    # (4) exec outputs that are not regular files
    env5 = {"AO_EXEC_TIMEOUT": "5"}
    for kind, body in [("FIFO", 'rm -f "$1/{f}"; mkfifo "$1/{f}"'),
                       ("symlink to dir", 'rm -f "$1/{f}"; ln -s /tmp "$1/{f}"'),
                       ("symlink to file", 'rm -f "$1/{f}"; ln -s /etc/passwd "$1/{f}"'),
                       ("symlink to /dev/zero", 'rm -f "$1/{f}"; ln -s /dev/zero "$1/{f}"'),
                       ("directory", 'rm -f "$1/{f}"; mkdir "$1/{f}"'),
                       ("missing", 'rm -f "$1/{f}"')]:
        for case, f in [(IDX, "topk.npy"), (SDPA, "o.npy")]:
            A.append(Attack(4, f"exec output {f} is {kind}", ["repro", case, "--backend", "{be}"], {1}, env=env5,
                            setup=with_exec(body.format(f=f)), limit=30,
                            check=all_of(faster(15), short_output(20000),
                                         lambda r, c: None if "9223372036854775807" not in r.out
                                         else "absurd size in message")))

    # (5) huge .npy header, huge stderr
    def huge_npy(shape, sparse_gib=0):
        def s(d, ctx):
            hdr = npy_header("<i4", shape)
            py = (f"import sys;p=sys.argv[1]+'/topk.npy';f=open(p,'wb');f.write({hdr!r});"
                  + (f"f.truncate({sparse_gib}<<30);" if sparse_gib else "") + "f.close()")
            ctx["be"] = exec_script(d, "be.sh", f"python3 -c {shlex.quote(py)} \"$1\"")
        return s
    A.append(Attack(5, "npy header shape 1e9x8 (header only)", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((1000000000, 8)), max_rss_mib=1024))
    A.append(Attack(5, "npy header shape 1e9x8 sparse 3 GiB", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((1000000000, 8), 3), max_rss_mib=1024))
    A.append(Attack(5, "npy header shape 2^62", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((4611686018427387904,)), max_rss_mib=1024))
    A.append(Attack(5, "npy header negative shape", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=huge_npy((-1, 8)), max_rss_mib=1024))
    A.append(Attack(5, "npy header length 65535 garbage", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("python3 -c \"import sys;open(sys.argv[1]+'/topk.npy','wb').write("
                                    "b'\\x93NUMPY\\x01\\x00\\xff\\xff'+b'{' * 65535)\" \"$1\""),
                    max_rss_mib=1024))
    A.append(Attack(5, "npy v2 header 4 GiB length", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("python3 -c \"import sys;open(sys.argv[1]+'/topk.npy','wb').write("
                                    "b'\\x93NUMPY\\x02\\x00\\xff\\xff\\xff\\xff')\" \"$1\""), max_rss_mib=1024))
    A.append(Attack(5, "stderr 600 MB then exit 3", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("head -c 600000000 /dev/zero | tr '\\0' x >&2; exit 3"),
                    max_rss_mib=600, check=short_output(100000), limit=90, quick=False))
    A.append(Attack(5, "stderr 50 MB no newline then exit 0", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("head -c 50000000 /dev/zero | tr '\\0' y >&2; exit 0"),
                    max_rss_mib=600, check=short_output(100000)))
    A.append(Attack(5, "stdout 50 MB then exit 1", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec("head -c 50000000 /dev/zero | tr '\\0' z; exit 1"),
                    max_rss_mib=600, check=short_output(100000)))

    # (6) memory cap
    for v in ["nan", "inf", "-1", "", "0", "abc", "1e10", "-inf", "0.0001"]:
        A.append(Attack(6, f"--max-mem {v!r}", ["--max-mem", v, "repro", SMALL], {2}, check=has("max-mem"),
                        limit=20))
    A.append(Attack(6, "--max-mem 1 docs=64*500000", ["--max-mem", "1", "repro",
                                                      "op=indexer docs=64*500000 heads=1 dim=1 topk=1"], {2},
                    check=all_of(faster(5), has("docs")), max_rss_mib=600))
    # show is held to the cap too (a refusal is an answer); under a cap that admits it, it must not build rows
    A.append(Attack(6, "show docs=300000000", ["show", "op=indexer docs=300000000 heads=1 dim=1 topk=1"], {0, 2},
                    check=faster(5), max_rss_mib=600))
    A.append(Attack(6, "--max-mem 100 show docs=300000000", ["--max-mem", "100", "show",
                                                             "op=indexer docs=300000000 heads=1 dim=1 topk=1"], {0},
                    check=faster(5), max_rss_mib=600))
    A.append(Attack(6, "--max-mem 100 show rows=3999999 on 4M", ["--max-mem", "100", "show",
                    "op=indexer docs=4000000 heads=1 dim=1 topk=1 rows=3999999"], {0}, check=faster(20),
                    max_rss_mib=1500, quick=False))
    A.append(Attack(6, "cap names tail", ["--max-mem", "1", "repro", "op=sdpa docs=64 tail=4000000000"], {2},
                    check=all_of(faster(5), has("tail")), max_rss_mib=600))
    A.append(Attack(6, "cap names capacity/offsets", ["--max-mem", "1", "repro",
                                                      "op=sdpa lens=3 padded_offsets=0,4000000000"], {2},
                    check=all_of(faster(5), lambda r, c: None if ("capacity" in r.out or "offsets" in r.out)
                                 else "refusal names neither capacity nor offsets"), max_rss_mib=600))
    A.append(Attack(6, "cap names heads", ["--max-mem", "0.01", "repro", "op=indexer docs=4096 heads=100000 dim=64"],
                    {2}, check=all_of(faster(5), has("heads")), max_rss_mib=600))
    A.append(Attack(6, "docs=1e12 show", ["show", "op=indexer docs=1000000000000"], {0, 2}, check=faster(5),
                    max_rss_mib=600))

    # (7) fuzz --budget 1s --dims glm wall time
    def budget_ok(budget):
        def f(r, c):
            lr = 0.0
            for tok in r.out.split():
                if tok.startswith("longest_run_seconds="):
                    lr = float(tok.split("=", 1)[1])
            if "fuzz-result" not in r.out:
                return "no fuzz-result line"
            return None if r.wall <= budget + lr + 2.0 else f"wall {r.wall:.1f}s > budget {budget}s + run {lr:.1f}s + 2s"
        return f
    for be, seed in [("cpu-ref", 1), ("cpu-bug:topleft-cp", 1), ("cpu-bug:off-by-one-causal", 2), ("cpu-ref", 7)]:
        A.append(Attack(7, f"fuzz --budget 1s --dims glm {be} seed {seed}",
                        ["fuzz", "--backend", be, "--budget", "1s", "--dims", "glm", "--seed", str(seed), "--no-save"],
                        {0, 1}, check=budget_ok(1), quick=(seed == 1 and be == "cpu-ref")))
    A.append(Attack(7, "fuzz --budget 2s small off-by-one", ["fuzz", "--backend", "cpu-bug:off-by-one-causal",
                                                             "--budget", "2s", "--seed", "5", "--no-save"],
                    {1}, check=budget_ok(2)))

    # (8) non-UTF-8 stderr with --report-dir
    for name, body in [("raw 0xff 0xfe", "printf 'bad \\377\\376 bytes\\n' >&2; exit 1"),
                       ("cut mid-character", "python3 -c \"import sys;sys.stderr.buffer.write('é'.encode()*3001)\";"
                                             " exit 1"),
                       ("lone surrogate bytes", "printf '\\355\\240\\200\\n' >&2; exit 4"),
                       ("NUL and controls", "printf 'a\\000b\\001\\033[31mred\\n' >&2; exit 1"),
                       ("skip reason non-UTF-8", "printf 'skip \\377\\n' >&2; exit 125")]:
        A.append(Attack(8, f"repro exec stderr {name}", ["repro", IDX, "--backend", "{be}", "--report-dir", "rep"],
                        {1, 125}, setup=with_exec(body), check=report_json("complete")))
        A.append(Attack(8, f"gate exec stderr {name}", ["gate", "{corpus}", "--backend", "{be}", "--report-dir",
                                                        "rep"], {1, 125},
                        setup=chain(with_exec(body), corpus([SMALL, SDPA])), check=report_json("complete"),
                        quick=(name == "cut mid-character")))

    # (9) bad .case files in gate
    for name, content in [("empty", ""), ("comments only", "# nothing\n\n"), ("truncated", "op=indexer docs="),
                          ("truncated key", "op=indexer docs=64 hea"), ("binary", bytes(random.Random(9).randrange(256)
                                                                                       for _ in range(300))),
                          ("NUL inside", b"op=indexer docs=64\x00 heads=2\n"), ("only BOM", b"\xef\xbb\xbf"),
                          ("claim without case", "# catches: cpu-bug:topleft-cp\n")]:
        def s(d, ctx, content=content):
            os.mkdir(os.path.join(d, "corp"))
            write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
            write(os.path.join(d, "corp", "bad.case"), content)
            return None
        A.append(Attack(9, f"gate .case {name}", ["gate", "corp", "--backend", "cpu-ref"], {2}, setup=s,
                        check=has("bad.case")))

    def tmp_left(d, ctx):
        os.mkdir(os.path.join(d, "corp"))
        write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
        write(os.path.join(d, "corp", ".abc.case.tmp.12345"), "op=indexer docs=")
    A.append(Attack(9, "gate ignores crash-left temp file", ["gate", "corp", "--backend", "cpu-ref"], {0}, setup=tmp_left))

    def fuzz_known_empty(d, ctx):
        os.mkdir(os.path.join(d, "found"))
        write(os.path.join(d, "found", "deadbeef.case"), "")
    A.append(Attack(9, "fuzz --out with an empty .case: no empty file left", ["fuzz", "--backend",
                    "cpu-bug:topleft-cp", "--budget", "20", "--seed", "1", "--out", "found"], {1}, setup=fuzz_known_empty,
                    check=lambda r, c: None if any(os.path.getsize(os.path.join(c["dir"], "found", f)) > 0
                                                   for f in os.listdir(os.path.join(c["dir"], "found")))
                    else "no case saved"))

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
        ctx["first"] = subprocess.Popen([bin_path, "gate", ctx["corpus"], "--backend", ctx["be"], "--report-dir",
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

    # (11) leaked processes
    for name, body in [("setsid sleep", "setsid sleep 300 & echo $! >> @D@/pids; exit 125"),
                       ("double fork", "( sleep 300 & echo $! >> @D@/pids ) ; exit 125"),
                       ("setsid nohup double fork", "( setsid nohup sleep 300 >/dev/null 2>&1 & echo $! >> @D@/pids ) ;"
                                                    " sleep 0.3; exit 1"),
                       ("daemon then pass", f"( setsid sleep 300 & echo $! >> @D@/pids ); exec {numpy_ref} \"$1\""),
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

    # (12) ignored keys, bad option values, claims
    for line, key in [("op=indexer docs=64 o_offsets=0", "o_offsets"), ("op=indexer docs=64 stats_offsets=0",
                                                                         "stats_offsets"),
                      ("op=indexer docs=64 crop=1", "crop"), ("op=indexer docs=64 cp_scheme=contiguous", "cp_scheme"),
                      ("op=indexer docs=64 cp=1 crop=1", "crop"), ("op=indexer docs=64 mask=none ratio=4", "ratio"),
                      ("op=indexer docs=64 cp=2 rank=0 mask=none crop=1", "crop"),
                      ("op=sdpa docs=64 cp_scheme=zigzag", "cp_scheme")]:
        A.append(Attack(12, f"ignored key {line}", ["repro", line], {2}, check=has(key)))
    for name, args, opt in [("--seed -1", ["fuzz", "--backend", "cpu-ref", "--seed", "-1", "--budget", "1"], "seed"),
                            ("--seed 2^64", ["fuzz", "--backend", "cpu-ref", "--seed", "18446744073709551616", "--budget", "1"], "seed"),
                            ("--seed abc", ["fuzz", "--backend", "cpu-ref", "--seed", "abc", "--budget", "1"], "seed"),
                            ("--max-failures -1", ["fuzz", "--backend", "cpu-ref", "--max-failures", "-1", "--budget", "1"], "max-failures"),
                            ("--shrink-runs -5", ["fuzz", "--backend", "cpu-ref", "--shrink-runs", "-5", "--budget", "1"], "shrink-runs"),
                            ("--budget -1", ["fuzz", "--backend", "cpu-ref", "--budget", "-1"], "budget"),
                            ("--budget 0s", ["fuzz", "--backend", "cpu-ref", "--budget", "0s"], "budget"),
                            ("--budget 1x", ["fuzz", "--backend", "cpu-ref", "--budget", "1x"], "budget"),
                            ("--dims huge", ["fuzz", "--backend", "cpu-ref", "--dims", "huge", "--budget", "1"], "dims"),
                            ("--op bogus", ["fuzz", "--backend", "cpu-ref", "--op", "bogus", "--budget", "1"], "op"),
                            ("shrink --runs -1", ["shrink", SMALL, "--backend", "cpu-bug:topleft-cp", "--runs", "-1"],
                             "runs"),
                            ("unknown subcommand option", ["repro", SMALL, "--frobnicate"], "frobnicate"),
                            ("unknown backend", ["repro", SMALL, "--backend", "nope"], "nope")]:
        A.append(Attack(12, f"bad option {name}", args, {2}, check=has(opt), limit=30))
    A.append(Attack(12, "false # catches: claim", ["gate", "{corpus}", "--backend", "cpu-ref"], {1},
                    setup=corpus(["# catches: cpu-ref", SMALL]), check=has("claim not held")))
    A.append(Attack(12, "unknown # catches: backend", ["gate", "{corpus}", "--backend", "cpu-ref"], {2},
                    setup=corpus(["# catches: cpu-bug:no-such-model", SMALL]), check=has("c.case:1")))
    A.append(Attack(12, "double # catches: claim", ["gate", "{corpus}", "--backend", "cpu-ref"], {2},
                    setup=corpus(["# catches: cpu-bug:topleft-cp", "# catches: cpu-bug:topleft-cp", SMALL])))
    A.append(Attack(12, "true # catches: claim holds", ["gate", "{corpus}", "--backend", "cpu-bug:topleft-cp"], {1},
                    setup=corpus(["# catches: cpu-bug:topleft-cp", IDX]), check=has("1 of 1 claims held")))

    # (13) BOM, symlink loops, long values, --shard
    A.append(Attack(13, "BOM on a command-line case", ["repro", "\ufeff" + SMALL], {0}))
    A.append(Attack(13, "BOM + bad key names key", ["repro", "\ufeffop=indexer docs=64 bogus=1"], {2},
                    check=all_of(has("bogus"), lambda r, c: None if "'\ufeffop'" not in r.out else "BOM in key")))
    A.append(Attack(13, "BOM at start of corpus file", ["gate", "{corpus}", "--backend", "cpu-ref"], {0},
                    setup=lambda d, c: (write(os.path.join(d, "c.case"), b"\xef\xbb\xbf" + SMALL.encode() + b"\n"),
                                        c.update(corpus=os.path.join(d, "c.case")), None)[-1]))

    def loop_setup(d, ctx):
        os.makedirs(os.path.join(d, "corp", "sub"))
        write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
        os.symlink("a", os.path.join(d, "corp", "sub", "b"))
        os.symlink("b", os.path.join(d, "corp", "sub", "a"))
        os.symlink("..", os.path.join(d, "corp", "sub", "up"))
    A.append(Attack(13, "symlink loop in corpus dir", ["gate", "corp", "--backend", "cpu-ref"], {2}, setup=loop_setup,
                    check=has("cannot resolve")))

    def dangling(d, ctx):
        os.makedirs(os.path.join(d, "corp"))
        write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
        os.symlink("/nonexistent/x.case", os.path.join(d, "corp", "gone.case"))
    A.append(Attack(13, "dangling symlink in corpus dir ignored", ["gate", "corp", "--backend", "cpu-ref"], {0}, setup=dangling))
    big = "9" * 1000000
    for key in ["docs", "seed", "dtype", "bogus"]:
        A.append(Attack(13, f"120 kB value (argv limit) for {key}", ["repro", f"op=indexer docs=64 {key}={big[:120000]}" if key != "docs"
                                                      else f"op=indexer docs={big[:120000]}"], {2},
                        check=all_of(short_output(2000), has(key))))
    for key in ["docs", "seed", "dtype", "bogus"]:
        A.append(Attack(13, f"1 MB value for {key} in a corpus file", ["gate", "{corpus}", "--backend", "cpu-ref"],
                        {2}, setup=corpus([f"op=indexer docs=64 {key}={big}" if key != "docs"
                                           else f"op=indexer docs={big}"]), check=all_of(short_output(2000), has(key))))
    for v in ["5/4", "4/4", "a/b", "1/0", "-1/3", "1/", "/3", "1", "1/4/2", "99999999999999999999/3"]:
        A.append(Attack(13, f"--shard {v!r}", ["fuzz", "--backend", "cpu-ref", "--shard", v, "--budget", "1"], {2},
                        check=has("shard")))
    for v in ["0/4", "3/4"]:  # shards are 0-based (docs/subcommands.md: case numbers i, i+n, ...)
        A.append(Attack(13, f"--shard {v} (control)", ["fuzz", "--backend", "cpu-ref", "--shard", v, "--budget", "3",
                                                       "--no-save"], {0}))

    # (14) fuzz dedup: a case budget (a time budget draws more cases, hence more signatures, on a faster
    # machine), failures merged into a handful of files (at most 8, at most half the failures).
    def few_files(r, c):
        d = os.path.join(c["dir"], "found")
        n = len([f for f in os.listdir(d) if f.endswith(".case")]) if os.path.isdir(d) else 0
        m = re.search(r"fuzz-result cases=\d+ failed=(\d+)", r.out)
        failed = int(m.group(1)) if m else 0
        return None if 1 <= n <= 8 and 2 * n <= failed else f"{n} files saved for {failed} failures"
    # One thread: the dedup is what is attacked, and a campaign of small cases whose every reference call
    # opens an OpenMP team crawls when another test holds both cores (CI's model_sanitizer: 7 s became >120 s).
    A.append(Attack(14, "fuzz 40 cases off-by-one-causal leaves a handful of files",
                    ["fuzz", "--backend", "cpu-bug:off-by-one-causal", "--budget", "40", "--seed", "1",
                     "--out", "found"], {1}, limit=120, check=few_files, env={"OMP_NUM_THREADS": "1"}))
    A.append(Attack(14, "fuzz 200 cases topleft-cp leaves a handful of files",
                    ["fuzz", "--backend", "cpu-bug:topleft-cp", "--budget", "200", "--seed", "4", "--out", "found"],
                    {1}, limit=120, quick=False, check=few_files, env={"OMP_NUM_THREADS": "1"}))

    # (15) random malformed case lines (mutations of valid lines)
    rng = random.Random(20261203)
    valid = [IDX, SMALL, SDPA, "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright poison=nan",
             "op=indexer docs=8192,4096 cp=32 rank=15 heads=8 dim=64 topk=256", "op=sdpa lens=5,7 dtype=bf16 window=3"]
    bad_values = ["abc", "", "-7", "18446744073709551616", "1e999", "nan", "1,,2", "0x10", " ", "1.5.5", "+-1",
                  "\u00e9\u00e9", "9" * 40, "1/0", "*", "64*"]
    for i in range(60):
        toks = rng.choice(valid).split()
        kind = rng.randrange(4)
        if kind == 0:  # bad value for an existing key (never op, so the key stays known)
            j = rng.randrange(1, len(toks))
            key = toks[j].split("=")[0]
            # a value the key accepts is no mutation (poison=nan is valid)
            toks[j] = key + "=" + rng.choice([v for v in bad_values if key + "=" + v != toks[j]
                                              and not (key == "poison" and v == "nan")])
        elif kind == 1:  # unknown key
            key = rng.choice(["bogus", "doc", "head", "topK", "cp_sheme", "lens_q", "x"])
            toks.insert(rng.randrange(len(toks) + 1), key + "=1")
        elif kind == 2:  # duplicated key
            j = rng.randrange(len(toks))
            key = toks[j].split("=")[0]
            toks.append(toks[j])
        else:  # key without '='
            j = rng.randrange(1, len(toks))
            key = toks[j].split("=")[0]
            toks[j] = key
        line = " ".join(toks)
        A.append(Attack(15, f"malformed #{i} [{line[:70]}]", ["repro", line], {2}, check=has(key), limit=30,
                        quick=(i % 4 == 0)))

    # (16) forged bisect verdict: "0\ngood" written into every pipe a backend can reach (its inherited
    # descriptors, its ancestors' /proc/<pid>/fd), and a backend killing the step's supervisor
    # (the walk covers the attn-oracle processes only: the battery's own pipes are spared)
    forge = ("p=$PPID; seen=0\nwhile [ \"$p\" -gt 1 ]; do\n"
             "  case \"$(cut -d' ' -f2 /proc/$p/stat)\" in '(attn-oracle)') seen=1 ;; *) [ $seen -eq 1 ] && break ;; esac\n"
             "  if [ $seen -eq 1 ]; then for f in /proc/$p/fd/*; do\n"
             "    case \"${f##*/}\" in 0|1|2) continue ;; esac\n"
             "    case \"$(readlink \"$f\" 2>/dev/null)\" in pipe:*) printf '0\\ngood: forged\\n' 1<>\"$f\" 2>/dev/null ;; esac\n"
             "  done; fi\n  p=$(cut -d' ' -f4 /proc/$p/stat)\ndone\nexit 0")
    kill_step_reaper = ("p=$PPID; n=0\nwhile [ \"$p\" -gt 1 ]; do\n"
                        "  case \"$(cut -d' ' -f2 /proc/$p/stat)\" in '(attn-oracle)') n=$((n+1)) ;; esac\n"
                        "  if [ $n -eq 3 ]; then kill -9 $p; sleep 30; fi\n  p=$(cut -d' ' -f4 /proc/$p/stat)\ndone\nexit 3")
    for extra, rc in [([], {1}), (["--crash-is-skip"], {1})]:
        A.append(Attack(16, f"bisect-run exec: forges 'good' up the /proc chain {extra}",
                        ["bisect-run", SMALL, "--backend", "{be}"] + extra, rc, setup=with_exec(forge),
                        check=has("bad: ")))
    # (the plugin's forgery also spoils its host's own record: a crash of the plugin, skipped on request)
    for extra, rc, word in [([], {1}, "bad: "), (["--crash-is-skip"], {125}, "skip: ")]:
        A.append(Attack(16, f"bisect-run plugin forges 'good' into its inherited pipes {extra}",
                        ["bisect-run", SDPA, "--backend", plug("forge_verdict")] + extra, rc, check=has(word)))
    A.append(Attack(16, "bisect-run exec: kills the step's supervisor -> bad",
                    ["bisect-run", SMALL, "--backend", "{be}"], {1}, setup=with_exec(kill_step_reaper),
                    check=has("crashed (signal 9")))
    A.append(Attack(16, "bisect-run exec: kills the step's supervisor, --crash-is-skip -> skip",
                    ["bisect-run", SMALL, "--backend", "{be}", "--crash-is-skip"], {125},
                    setup=with_exec(kill_step_reaper)))

    # (17) plugin isolation: the descriptors library code holds, claims of plugins that are not run, an ABI
    # swapped mid-gate (a copied answer needs the reference's bytes: PluginIsolation.TheReferenceAnswer... in CTest)
    two = "op=sdpa docs=40,24 hq=2 hkv=1 dim=16 seed=4"
    A.append(Attack(17, "plugin holds no descriptor of the harness (report-dir lock)",
                    ["gate", "{corpus}", "--no-explain", "--report-dir", "rep", "--backend", plug("list_fds")], {1},
                    setup=corpus([two]),
                    check=lambda r, c: None if re.search(r"fds: 3=pipe:\[\d+\];4=/memfd:ao-plugin-request[^;]*;"
                                                         r"5=/memfd:ao-plugin-outputs[^;]*;\)", r.out)
                    else f"unexpected descriptors: {r.out[-300:]!r}"))
    A.append(Attack(17, "claim of a plugin the gate does not run loads nothing",
                    ["gate", "{corpus}", "--backend", "cpu-ref"], {0},
                    setup=corpus([f"# catches: {plug('mark_ctor')}", two]), env={"AO_HOSTILE_MARK_FILE": "{dir}/mark"},
                    check=lambda r, c: "the claimed plugin's constructor ran" if os.path.exists(
                        os.path.join(c["dir"], "mark")) else None))

    def swap_abi(pid, ctx):
        lib = os.path.join(ctx["dir"], "libswap.so")
        os.remove(lib)
        subprocess.run(["cp", os.path.join(tests, "libao_example_plugin_abi99.so"), lib])

    def swap_setup(d, ctx):
        subprocess.run(["cp", ok_plugin[len("plugin:"):], os.path.join(d, "libswap.so")])
        write(os.path.join(d, "c.case"), "\n".join(f"{two[:-1]}{s}" for s in range(1, 400)) + "\n")
        ctx["corpus"] = os.path.join(d, "c.case")
        return None
    A.append(Attack(17, "plugin .so swapped for ABI 99 mid-gate is refused at its next run",
                    ["gate", "{corpus}", "--no-explain", "--backend", "plugin:{dir}/libswap.so"], {1},
                    setup=swap_setup, during=(1.5, swap_abi), limit=120, check=has("plugin ABI version 99")))

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
        first = subprocess.run([bin_path, "gate", ctx["corpus"], "--no-explain", "--report-dir", os.path.join(d, "rep"),
                                "--backend", plug("daemon_kill_reaper")], env=env, cwd=d, timeout=60,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ctx["first_rc"] = first.returncode
        return None
    # the first gate (in the setup) starts the daemon; the attack is the second gate on the same report dir
    A.append(Attack(18, "plugin daemon kills its reaper; the next gate takes the report-dir lock",
                    ["gate", "{corpus}", "--no-explain", "--report-dir", "rep", "--backend", "cpu-ref"], {0},
                    setup=plugin_daemon_first_gate, limit=90,
                    check=lambda r, c: None if c["first_rc"] == 1 else f"first gate exited {c['first_rc']}"))
    A.append(Attack(18, "exec: 40 MB of stdout leaves a bounded stdout.txt",
                    ["repro", SMALL, "--backend", "{be}"], {1},
                    setup=with_exec("yes flood | head -c 40000000; exit 3"), env={"AO_EXEC_KEEP": "1", "AO_EXEC_DIR": "{dir}"},
                    check=lambda r, c: next((f"{os.path.join(dp, f)} is {os.path.getsize(os.path.join(dp, f))} bytes"
                                             for dp, _, fs in os.walk(c["dir"]) for f in fs if f == "stdout.txt"
                                             and os.path.getsize(os.path.join(dp, f)) > (16 << 20) + 200), None)))

    # (19) bug models whose wrong addressing points outside a buffer: each re-creates the wrong answer, and
    # explain (which runs every model) never takes repro, explain or gate down with it
    stride_cases = ["op=sdpa docs=5,3 max_seqlen_kv=100000 hq=1 dim=8", "op=sdpa docs=5,3 max_seqlen_kv=9 hq=1 dim=8",
                    "op=sdpa docs=5,3 max_seqlen_kv=1099511627776 hq=1 dim=8"]
    stride0_case = ("op=sdpa docs=3,63,260,106,5 padded_offsets=0,32,96,448,576,608 cp=16 rank=2 window=1 "
                    "max_seqlen_kv=324 num_splits=8 hq=2 hkv=1 dtype=fp16 seed=792779 poison=large")
    for i, line in enumerate(stride_cases):
        A.append(Attack(19, f"repro batch-stride-max-seqlen #{i}", ["repro", line, "--backend",
                                                                    "cpu-bug:batch-stride-max-seqlen"], {1},
                        check=has("FAIL"), max_rss_mib=2048))
    A.append(Attack(19, "repro split-combine-stride0 under CP", ["repro", stride0_case, "--backend",
                                                                 "cpu-bug:split-combine-stride0"], {1}, check=has("FAIL")))
    A.append(Attack(19, "explain batch-stride-max-seqlen", ["explain", stride_cases[0], "--backend",
                                                            "cpu-bug:batch-stride-max-seqlen"], {0},
                    check=has("best explanation", "batch-stride-max-seqlen")))
    A.append(Attack(19, "explain split-combine-stride0", ["explain", stride0_case, "--backend",
                                                          "cpu-bug:split-combine-stride0"], {0},
                    check=has("best explanation", "split-combine-stride0")))
    for model in ("batch-stride-max-seqlen", "split-combine-stride0"):
        A.append(Attack(19, f"gate {model} with explain writes reports", ["gate", "{corpus}", "--backend",
                                                                          f"cpu-bug:{model}", "--report-dir", "rep"],
                        {1}, setup=corpus(stride_cases + [stride0_case]),
                        check=all_of(report_json("complete"), has("explain:", "gate: ")), limit=120))

    # (20) conventions an adapter must honour, and an OpenMP environment the harness bounds: a team too large
    # to create would make libgomp exit 1, the FAIL code
    for v in ("3000", "100000"):
        A.append(Attack(20, f"OMP_NUM_THREADS={v} repro passes", ["repro", SDPA], {0}, env={"OMP_NUM_THREADS": v},
                        check=has("PASS")))
        A.append(Attack(20, f"OMP_NUM_THREADS={v} indexer repro passes", ["repro", IDX], {0},
                        env={"OMP_NUM_THREADS": v}, check=has("PASS")))
    A.append(Attack(20, "crop=1 with window_right=-1 is bad input",
                    ["repro", "op=sdpa docs=16 cp=2 rank=0 crop=1 window_right=-1 hq=1 dim=8"], {2},
                    check=has("crop", "window_right")))
    A.append(Attack(20, "numpy_ref honours empty_rows=posinf", ["repro", "op=sdpa q_lens=1,2 kv_lens=0,1 "
                                                                "mask=bottomright empty_rows=posinf hq=1 dim=8",
                                                                "--backend", f"exec:{numpy_ref}"], {0}, check=has("PASS")))
    sem_check = ("import json, sys; s = json.load(open(sys.argv[1] + '/meta.json'))['semantics']; "
                 "sys.exit(0 if all(k in s for k in ('window_right', 'window_convention', 'empty_rows', "
                 "'num_splits', 'max_seqlen')) else 3)")
    A.append(Attack(20, "meta.json semantics name every convention key", ["repro", SDPA, "--backend", "{be}"], {125},
                    setup=with_exec(f'/usr/bin/python3 -c "{sem_check}" "$1" || exit 3\n'
                                    'echo "semantics OK" >&2; exit 125'), check=has("semantics OK")))

    # (21) found files: foreign text is escaped onto one comment line; the backend is named portably
    poison = ("echo 'Traceback (most recent call last):' >&2; "
              "printf '  File x\\n# catches: cpu-ref\\nop=sdpa docs=16\\n' >&2; exit 1")

    def found_clean(r, ctx):
        out = os.path.join(ctx["dir"], "found")
        files = [f for f in os.listdir(out) if f.endswith(".case")] if os.path.isdir(out) else []
        if not files:
            return "no found file"
        for f in files:
            text = open(os.path.join(out, f), encoding="utf-8", errors="replace").read()
            lines = text.splitlines()
            if any(l.startswith("# catches:") for l in lines):
                return f"{f}: a claim from foreign text"
            if sum(1 for l in lines if l.strip() and not l.startswith("#")) != 1:
                return f"{f}: not exactly one case line"
            if ctx["dir"] in text or tempfile.gettempdir() + "/" in text:
                return f"{f}: machine-specific path in {text!r}"
        g = subprocess.run([bin_path, "gate", out, "--backend", "cpu-ref", "--no-explain"], capture_output=True,
                           text=True, timeout=120)
        if g.returncode != 0 or "claim" in g.stdout:
            return f"gate found/ -> {g.returncode}: {(g.stdout + g.stderr)[-300:]!r}"
        return None
    for name, tail in [("stderr with traceback, claim and case", ""), ("--backend ending in a newline", "\n")]:
        A.append(Attack(21, f"fuzz found file: {name}", ["fuzz", "--backend", "{be}" + tail, "--budget", "2",
                                                         "--shrink-runs", "5", "--out", "found"], {1},
                        setup=with_exec(poison), check=found_clean, limit=120))

    def two_temp_dirs(d, ctx):
        for sub in ("t1", "t2"):
            os.makedirs(os.path.join(d, sub))
            write(os.path.join(d, sub, "be.sh"), "echo boom >&2; exit 1\n", 0o755)
        return None

    def second_run_known(r, ctx):
        g = subprocess.run([bin_path, "fuzz", "--backend", "exec:/bin/sh " + os.path.join(ctx["dir"], "t2", "be.sh"),
                            "--budget", "1", "--shrink-runs", "5", "--out", "found"], capture_output=True, text=True,
                           cwd=ctx["dir"], timeout=120)
        if "known:" not in g.stdout:
            return f"the same script from another temp dir is a new failure: {g.stdout[-400:]!r}"
        return found_clean(r, ctx)
    A.append(Attack(21, "fuzz dedup across temp dirs (warm-host sockets)",
                    ["fuzz", "--backend", "exec:/bin/sh {dir}/t1/be.sh", "--budget", "1", "--shrink-runs", "5",
                     "--out", "found"], {1}, setup=two_temp_dirs, check=second_run_known, limit=120))

    # (22) # catches: claims are matched by backend identity, not spelling
    lib = ok_plugin[len("plugin:"):]
    dotted = os.path.join(os.path.dirname(lib), ".", os.path.basename(lib))
    for name, claim in [("./ in the path", "plugin:" + dotted), (":bug=none on one side", ok_plugin + ":bug=none"),
                        ("blanks around", "  " + ok_plugin + "  "),
                        ("../ in the path", "plugin:" + os.path.join(os.path.dirname(lib), "..",
                                                                     os.path.basename(os.path.dirname(lib)),
                                                                     os.path.basename(lib)))]:
        A.append(Attack(22, f"false claim spelled with {name}", ["gate", "{corpus}", "--backend", ok_plugin,
                                                                 "--no-explain"], {1},
                        setup=corpus(["# catches: " + claim, SMALL]), check=has("claim not held")))
    A.append(Attack(22, "true claim spelled otherwise still holds", ["gate", "{corpus}", "--backend",
                                                                    ok_plugin + ":bug=topleft-cp", "--no-explain"],
                    {1}, setup=corpus(["# catches: plugin:" + dotted + ":bug=topleft", IDX]),  # old spelling of the defect id
                    check=has("1 of 1 claims held")))

    # (23) corpus reading is bounded; FIFOs are case files; a save failure or a flaky backend is reported
    A.append(Attack(23, "gate /dev/zero (endless NULs)", ["gate", "/dev/zero", "--backend", "cpu-ref"], {2},
                    check=all_of(has("line longer than"), faster(20)), max_rss_mib=300))
    A.append(Attack(23, "20 MiB line under --max-mem 1", ["--max-mem", "1", "gate", "{corpus}", "--backend", "cpu-ref"],
                    {2}, setup=corpus(["op=sdpa docs=16 seed=" + "9" * (20 << 20)]),
                    check=all_of(has("c.case:1", "line longer than"), short_output(2000)), max_rss_mib=300))

    def fifo_setup(d, ctx):
        path = os.path.join(d, "f.case")
        os.mkfifo(path)
        subprocess.Popen(["sh", "-c", f"echo '{SMALL}' > {shlex.quote(path)}"], start_new_session=True)
        ctx["fifo"] = path
        return None
    A.append(Attack(23, "FIFO case file", ["gate", "{fifo}", "--backend", "cpu-ref", "--no-explain"], {0},
                    setup=fifo_setup, check=has("1 passed")))

    def blocked_out(d, ctx):
        probe = subprocess.run([bin_path, "fuzz", "--backend", "cpu-bug:topleft-cp", "--budget", "400",
                                "--max-failures", "1", "--shrink-runs", "40", "--no-save"], capture_output=True,
                               text=True, cwd=d, timeout=120)
        m = re.search(r"shrunk \([^)]*\): (.*)", probe.stdout)
        line = m.group(1).strip()
        h = 0xcbf29ce484222325
        for ch in line.encode():
            h = ((h ^ ch) * 0x100000001b3) & 0xffffffffffffffff
        os.makedirs(os.path.join(d, "found", f"{h:016x}.case", "x"))
        ctx["line"] = line
        return None
    A.append(Attack(23, "fuzz save failure keeps the line and the summary",
                    ["fuzz", "--backend", "cpu-bug:topleft-cp", "--budget", "400", "--max-failures", "1",
                     "--shrink-runs", "40", "--out", "found"], {1}, setup=blocked_out, limit=180,
                    check=lambda r, c: all_of(has("NOT SAVED", "fuzz-result", "unsaved=1"))(r, c) or
                    (None if c["line"] in r.out else "the shrunk line is printed nowhere")))
    flaky = ("n=$(cat @D@/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > @D@/n; "
             "if [ $((n % 2)) = 1 ]; then echo flaky >&2; exit 1; fi; echo decline >&2; exit 125")
    A.append(Attack(23, "flaky backend (fails every other run)",
                    ["fuzz", "--backend", "{be}", "--budget", "1", "--out", "found"], {1}, setup=with_exec(flaky),
                    check=has("NONDETERMINISTIC", "reproduced 2 of 4 runs", "nondeterministic=1"), limit=120))

    # (24) hostile text in reports: every report parses with a real parser (check_reports.py: json,
    # xml.etree for report.xml and report.html, a GFM table check for report.md) when a backend's stderr or
    # name holds what XML forbids (U+FFFE, U+FFFF, C0 controls), a line that would start a heading, `|`,
    # an HTML comment, `]]>` or backticks.
    checker = os.path.join(src, "report", "tests", "check_reports.py")

    def reports_ok(n=None, status="complete", where="rep", extra=()):
        def f(r, ctx):
            cases = ["--cases", str(n)] if n is not None else []  # None: as many as report.json lists
            p = subprocess.run([sys.executable, checker, os.path.join(ctx["dir"], where), *cases, "--status", status,
                                *extra], capture_output=True, text=True)
            return None if p.returncode == 0 else (p.stderr.strip() or f"check_reports exit {p.returncode}")[-300:]
        return f

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

    # (25) stops: SIGHUP is a stop like SIGINT/SIGTERM for every command that runs backends, and a
    # single-backend repro or an explain stopped mid-run removes its case dir (TMPDIR is the attack's
    # tmp/); `gate | head -1` stops with its reports (exit 141) instead of dying by SIGPIPE.
    # The harness keeps SIGHUP ignored when it started so (nohup): a battery run under nohup must not hand
    # the ignored signal on to the harness it attacks.
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)

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

    def head_gate(d, ctx):
        os.mkdir(os.path.join(d, "tmp"))
        corpus([SMALL + f" seed={i}" for i in range(10)])(d, ctx)
        be = exec_script(d, "be.sh", "sleep 0.3; exit 3")
        return [bin_path, "gate", ctx["corpus"], "--backend", be, "--report-dir", os.path.join(d, "rep")]
    A.append(Attack(25, "gate | head -1: stops with its reports (141)", [], {0}, setup=side_run(head_gate,
                    stdout_pipe_head=True), check=side_ok(141, "INTERRUPTED by SIGPIPE", then=all_of(
                        no_case_dir, reports_ok(None, "interrupted", extra=("--signal", "SIGPIPE")))), limit=70))

    # (26) report write failures: one report that cannot be written (a directory in its place, created
    # by the backend or there before; a file size limit) costs only itself, is named, and exits 2 with
    # the summary printed; never a death by SIGXFSZ.
    def isdir_backend(d, ctx):
        corpus([SMALL])(d, ctx)
        ctx["be"] = exec_script(d, "be.sh", f"mkdir -p {d}/rep/report.json/x; exit 3")
        return None
    A.append(Attack(26, "backend makes report.json a directory", ["gate", "{corpus}", "--backend", "{be}",
                    "--report-dir", "rep"], {2}, setup=isdir_backend,
                    check=all_of(has("report.json", "gate: 1 cases"),
                                 reports_ok(1, extra=("--missing", "report.json")))))

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
        return [bin_path, "gate", ctx["corpus"], "--backend", "cpu-bug:topleft-cp", "--no-explain", "--report-dir",
                os.path.join(d, "rep")]

    def fsize(n):
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    A.append(Attack(26, "RLIMIT_FSIZE below report.html's size", [], {0},
                    setup=side_run(fsize_gate, preexec=fsize(24 << 10)), alone=True,
                    check=side_ok(2, "report.html", "File too large", "gate: 1 cases x 1 backend(s)",
                                  then=reports_ok(1, extra=("--missing", "report.html")))))
    return A


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("build_dir")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--only", type=int, action="append")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if a.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {a.jobs}")
    binary = os.path.abspath(a.binary)
    random.seed(0)
    attacks = [x for x in build(binary, os.path.abspath(a.build_dir), a.full) if a.full or x.quick]
    if a.only:
        attacks = [x for x in attacks if x.cls in a.only]
    root = tempfile.mkdtemp(prefix="ao-attack-")
    tally, bad = {}, []
    t0 = time.monotonic()

    def attempt(atk):
        try:
            return run_one(binary, atk, root)
        except Exception as e:  # the attack itself could not start (e.g. E2BIG): counted, never hidden
            r = Result()
            r.reason, r.rc, r.signal, r.wall, r.rss_mib, r.cmd, r.out = (f"attack setup failed: {e!r}", None, None,
                                                                       0.0, 0.0, atk.name, "")
            return r

    done = 0

    def record(i, atk, r):
        nonlocal done
        done += 1
        ok = r.reason is None
        h, n = tally.get(atk.cls, (0, 0))
        tally[atk.cls] = (h + ok, n + 1)
        if a.v or not ok:
            print(f"[{done}/{len(attacks)}] #{i + 1} {'HANDLED' if ok else 'NOT HANDLED'} ({atk.cls}) {atk.name}: "
                  f"rc={r.rc} sig={r.signal} {r.wall:.1f}s {r.rss_mib:.0f}MiB" + ("" if ok else f" -- {r.reason}"),
                  flush=True)
        if not ok:
            bad.append((i, atk, r))

    pooled = [(i, x) for i, x in enumerate(attacks) if not x.alone]
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {pool.submit(attempt, x): (i, x) for i, x in pooled}
        for f in concurrent.futures.as_completed(futures):
            record(*futures[f], f.result())
    for i, x in enumerate(attacks):
        if x.alone:
            record(i, x, attempt(x))
    bad.sort(key=lambda b: b[0])
    subprocess.run(["rm", "-rf", root])
    print(f"\n{'class':<44} handled / tried")
    for c in sorted(tally):
        h, n = tally[c]
        print(f"{c:>2} {CLASSES[c]:<41} {h:>4} / {n}")
    th, tn = sum(v[0] for v in tally.values()), sum(v[1] for v in tally.values())
    print(f"   {'total':<41} {th:>4} / {tn}   ({time.monotonic() - t0:.0f}s, {'full' if a.full else 'quick'})")
    if bad:
        print("\nNOT HANDLED:")
        for _, atk, r in bad:
            print(f"- ({atk.cls}) {atk.name}: {r.reason}\n    $ {r.cmd}\n    output tail: {r.out[-300:]!r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
