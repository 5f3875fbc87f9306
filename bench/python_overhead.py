#!/usr/bin/env python3
"""In process (the attn_oracle package) vs exec: in one run, on this machine:
  * per-case host time and peak RSS at 8k and 131k tokens: one SDPA case, the zero kernel (zero_kernel.py:
    no kernel work, so the harness is what is timed), a fresh process per measurement (the import, the
    inputs, the hand-over, the reference on the checked rows and the comparators included);
  * fuzz throughput on small generated cases (--dims tiny): numpy_ref.kernel through attn_oracle.fuzz vs
    `attn-oracle fuzz --backend exec:numpy_ref.py`, the same seed and case count.
Prints a Markdown report (medians of REPS runs, ratios exec / in process).

  usage: python_overhead.py --cli build/attn-oracle [--python build-py/venv/bin/python] [--reps 3] [--fuzz-cases 30]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, ".."))
# Children import the repository's package and the bench's kernel from these folders (their PYTHONPATH).
CHILD_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.join(ROOT, "python")]))
ZERO = os.path.join(HERE, "zero_kernel.py")
CASES = {"8k": "op=sdpa docs=8192 hq=4 dim=64 rows=64 seed=3",
         "131k": "op=sdpa docs=131072 hq=4 dim=64 rows=64 seed=3"}

INPROC = r"""
import json, resource, sys, time
import attn_oracle, zero_kernel
t0 = time.perf_counter()
v = attn_oracle.Case(sys.argv[1]).run(zero_kernel.kernel, explain=False)
print(json.dumps({"seconds": time.perf_counter() - t0, "verdict": v.verdict,
                  "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def spawn(cmd, env=None):
    """Runs cmd: (wall seconds, stdout, stderr, exit status, peak RSS KiB of its process tree: wait4's
    ru_maxrss is the largest of the process and the children it waited for)."""
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return secs, out, err.read(), p.returncode, ru.ru_maxrss


def run_inproc(py, line):
    """Wall seconds of the whole process (interpreter start and import included), peak RSS KiB, verdict,
    and the seconds of the case itself (Case + run, timed inside)."""
    secs, out, err, rc, _ = spawn([py, "-c", INPROC, line], CHILD_ENV)
    if rc != 0:
        raise SystemExit(f"in-process run failed: {err[-2000:]}")
    d = json.loads(out.strip().splitlines()[-1])
    return secs, d["rss_kib"], d["verdict"], d["seconds"]


def run_exec(cli, py, line):
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = os.path.join(tmp, "rss")
        env = dict(CHILD_ENV, AO_BENCH_RSS=rss_file)
        cmd = [cli, "repro", *line.split(), "--backend", f"exec:{py} {ZERO}", "--no-explain"]
        secs, out, _, _, cli_rss = spawn(cmd, env)
        verdict = "fail" if "verdict: FAIL" in out else "?"
        adapter = int(open(rss_file).read()) if os.path.exists(rss_file) else -1
        # The CLI's tree's peak is the larger of the CLI and the adapter; the adapter reports its own.
        return secs, cli_rss, adapter, verdict


def fuzz_inproc(py, cases):
    code = (
        "import sys, time, json; import attn_oracle; from attn_oracle.adapters import numpy_ref; t=time.perf_counter();"
        f" r = attn_oracle.fuzz(numpy_ref.kernel, op='sdpa', budget='{cases}', seed=11, dims='tiny');"
        " print(json.dumps({'seconds': time.perf_counter()-t, 'cases': r['cases'], 'failed': r['failed']}))")
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, env=CHILD_ENV)
    if r.returncode != 0:
        raise SystemExit(f"in-process fuzz failed: {r.stderr[-2000:]}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return d["seconds"], d["cases"], d["failed"]


def fuzz_exec(cli, py, cases):
    t0 = time.perf_counter()
    r = subprocess.run([cli, "fuzz", "--backend", f"exec:{py} -m attn_oracle.adapters.numpy_ref", "--op", "sdpa",
                        "--budget", str(cases), "--seed", "11", "--dims", "tiny", "--no-save"], capture_output=True, text=True)
    secs = time.perf_counter() - t0
    line = [l for l in r.stdout.splitlines() if l.startswith("fuzz-result")]
    kv = dict(x.split("=", 1) for x in line[0].split()[1:]) if line else {}
    return secs, int(kv.get("cases", -1)), int(kv.get("failed", -1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--fuzz-cases", type=int, default=30)
    a = ap.parse_args()
    cli, py = os.path.abspath(a.cli), a.python
    rows = []
    for name, line in CASES.items():
        ip, ex = [], []
        for _ in range(a.reps):  # interleaved, so load drifts hit both
            ip.append(run_inproc(py, line))
            ex.append(run_exec(cli, py, line))
        t_ip = statistics.median(x[0] for x in ip)
        rss_ip = max(x[1] for x in ip)
        t_ex = statistics.median(x[0] for x in ex)
        rss_cli = max(x[1] for x in ex)
        rss_ad = max(x[2] for x in ex)
        rows.append((name, line, t_ip, rss_ip, t_ex, rss_cli, rss_ad, ip[0][2], ex[0][3]))
    fz_ip, fz_ex = [], []
    for _ in range(a.reps):
        fz_ip.append(fuzz_inproc(py, a.fuzz_cases))
        fz_ex.append(fuzz_exec(cli, py, a.fuzz_cases))
    print("# In process (attn_oracle) vs exec: — per-case overhead and fuzz throughput\n")
    print(f"Measured in one run by `bench/python_overhead.py` on this machine: "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, {a.reps} interleaved repetitions "
          "(medians; peak RSS: the largest). The machine was shared with other jobs; the ratios compare runs "
          "interleaved in the same minutes.\n")
    print("## Per case: the zero kernel (the harness alone), one process per run\n")
    print("| tokens | case | in process: wall s | exec: wall s | exec / in process | in process: peak RSS MiB "
          "| exec: CLI peak RSS MiB | exec: adapter peak RSS MiB | exec: both MiB / in process |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, line, t_ip, rss_ip, t_ex, rss_cli, rss_ad, v_ip, v_ex in rows:
        both = rss_cli + max(rss_ad, 0)
        print(f"| {name} | `{line}` | {t_ip:.2f} | {t_ex:.2f} | {t_ex / t_ip:.2f} | {rss_ip / 1024:.0f} | "
              f"{rss_cli / 1024:.0f} | {rss_ad / 1024:.0f} | {both / rss_ip:.2f} |")
    print("\nBoth paths judge the same verdict (FAIL: zero outputs); in process: "
          f"{', '.join(r[7] for r in rows)}; exec: {', '.join(r[8] for r in rows)}. The exec: CLI and its "
          "adapter hold their copies of the tensors at the same time, so their sum is the footprint.\n")
    print("## Fuzz throughput: numpy_ref's kernel on small generated SDPA cases (`--dims tiny`, seed 11)\n")
    print("| path | cases | failed | wall s (median) | cases/s |")
    print("| --- | --- | --- | --- | --- |")
    t1 = statistics.median(x[0] for x in fz_ip)
    t2 = statistics.median(x[0] for x in fz_ex)
    print(f"| in process: attn_oracle.fuzz(numpy_ref.kernel) | {fz_ip[0][1]} | {fz_ip[0][2]} | {t1:.2f} | "
          f"{fz_ip[0][1] / t1:.1f} |")
    print(f"| exec: attn-oracle fuzz --backend exec:numpy_ref.py | {fz_ex[0][1]} | {fz_ex[0][2]} | {t2:.2f} | "
          f"{fz_ex[0][1] / t2:.1f} |")
    print(f"\nThroughput ratio in process / exec: {(fz_ip[0][1] / t1) / (fz_ex[0][1] / t2):.2f}x.")


if __name__ == "__main__":
    main()
