"""The hostile battery, classes 7, 14, 21, 23: fuzz and the corpus reader: the time budget holds, failures are
deduplicated, found files are clean and portable, corpus reading is bounded, save failures and flaky backends are
reported.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os
import re
import shlex
import subprocess
import tempfile

import pytest

from .battery import (params, SMALL, CLI, Attack, write, has, all_of, short_output, faster, corpus, with_exec)


def attacks():
    A = []
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
        g = subprocess.run([CLI, "gate", out, "--backend", "cpu-ref", "--no-explain"], capture_output=True,
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
        g = subprocess.run([CLI, "fuzz", "--backend", "exec:/bin/sh " + os.path.join(ctx["dir"], "t2", "be.sh"),
                            "--budget", "1", "--shrink-runs", "5", "--out", "found"], capture_output=True, text=True,
                           cwd=ctx["dir"], timeout=120)
        if "known:" not in g.stdout:
            return f"the same script from another temp dir is a new failure: {g.stdout[-400:]!r}"
        return found_clean(r, ctx)
    A.append(Attack(21, "fuzz dedup across temp dirs (warm-host sockets)",
                    ["fuzz", "--backend", "exec:/bin/sh {dir}/t1/be.sh", "--budget", "1", "--shrink-runs", "5",
                     "--out", "found"], {1}, setup=two_temp_dirs, check=second_run_known, limit=120))

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

    def lonely_fifo(d, ctx):
        ctx["fifo"] = os.path.join(d, "lonely.case")
        os.mkfifo(ctx["fifo"])
        return None
    # a FIFO nobody writes: refused naming the file after a bounded wait (10 s), not a hang
    A.append(Attack(23, "FIFO case file with no writer", ["gate", "{fifo}", "--backend", "cpu-ref"], {2},
                    setup=lonely_fifo, check=all_of(has("lonely.case", "no writer"), faster(20)), limit=40))
    A.append(Attack(23, "FIFO case file with no writer, bisect-run", ["bisect-run", "{fifo}", "--backend", "cpu-ref"],
                    {128}, setup=lonely_fifo, check=faster(20), limit=40, quick=False))

    def blocked_out(d, ctx):
        probe = subprocess.run([CLI, "fuzz", "--backend", "cpu-bug:topleft-cp", "--budget", "400",
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
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_fuzz(attack, hostile):
    hostile.check(attack)
