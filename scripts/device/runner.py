#!/usr/bin/env python3
"""The device runner: runs a campaign plan (scripts/device/plans/*.toml) on the lent GPU machine or here, and
is the one place that knows the lending machine's limits (LIMITS below: a call's seconds, what travels, what
comes back). Standard library only (Python 3.11+, for tomllib): the device has Python 3 with torch and numpy.

  runner.py run PLAN [--out DIR] [--budget S] [--steps NAME,...] [--set STEP.FIELD=VALUE ...] [--ao BIN] [--dry-run]
  runner.py limits [--sh]        the lending machine's limits (--sh: KEY=VALUE lines for a bash script's eval)
  runner.py versions             the version header every run writes first (env.txt)
  runner.py wheels PLAN          the pinned wheels the plan's adapters need (what a device call carries in .whl/)

A plan is TOML: `name`, `about`, optional `budget_s`, and `[[step]]` tables run in order. Each step has a
`kind`, a `name` (unique; its files and rows are named by it), `need_s` (the seconds it is expected to take:
a step that no longer fits in the call's time is not started and is listed as not run) and `timeout_s`.
  gate   cases = "FILE or DIR" (or a list), one backend: `backend = "cpu-ref"` (any built-in spec) or
         `adapter = "NAME"` with `knobs = "--flag value ..."` from the adapters' registry
         (`python -m attn_oracle.adapters list --json`: its knobs are checked against the adapter's, its import
         probe runs before the step, its wheels are installed from .whl/ when carried). `subst = {KEY = "text"}`
         replaces @KEY@ in the case lines (one case file at several head dims). `explain = true` keeps the
         gate's explanations (off by default: they run every bug model on each failing case). `warm = true`
         runs the adapter in the run's one warm host (attn_oracle.adapters.serve: torch and CUDA started
         once, each case then costs its kernel) through attn_oracle.adapters.client.
  lines  `lines = "FILE"`: plan lines as ao-gpu-campaign reads them (`expect=WORD backend=SPEC CASE`, e.g.
         what scripts/device/catalog-plan.py prints), one gate per backend; `backends = "REGEX"` keeps the
         lines whose backend matches (the cpu-bug:<id> half of a knob plan runs without a GPU).
  fuzz   backend/adapter as above, `budget` (fuzz's: "60s", "5m" or a number of cases), `seed`, `dims`, `op`,
         `pass`, `max_failures`, `shrink_runs`, `confirm_runs`; `shards = N` runs N shards side by side (0: one
         a core; their fuzz-result counts summed). expect = "pass": no failure found; "fail": one was.
  table  `of = [gate step names]`: one TSV row per case, a verdict column per step (and its failed metrics);
         `script = "python3 scripts/device/bwd-table.py {out} {reports}"` runs a table script instead, with
         {out} the TSV it writes and {reports} NAME=REPORT_DIR of each step of `of`.
  bench  `command = [...]` run `repeat` times; min/median/max seconds (expect = "pass": every run exits 0).

Expectations: one grammar, the plan lines' of ao-gpu-campaign (`expect=pass|fail|fail:<metric>`) plus
`skip` (an adapter that declines a case: a result the diagnosis records) and `weak` (no metric failed, but a gate
of the case cannot reject an all-zero or NaN answer: docs/tolerances.md, "WEAK"). A gate step's `expect` is the word
for every case, `expect_at = {"LINE" = "word"}` (or "FILE:LINE") sets it per case line. A case file's
`# catches: <backend>` claim is read as expect=fail for that backend (where the plan sets no word for the
case); the gate itself turns a claim that did not hold into a FAIL "claim not held", which the runner counts
as not held whatever the plan expected. pass holds on the verdict pass alone, fail on fail (an error is not
the failure a case expects), fail:<metric> on fail with that metric failed, skip on skipped, weak on weak.

Writes into OUT (default $OUT, at most LIMITS["files_back"] files come back): env.txt (versions), runner.log
(every step and case, timed), results.json (every case with verdict, failed metrics, expectation and whether
it held), one TSV per table step, logs.tgz (each step's output and gate reports). Exit 0 when every step ran
and every expectation held; 1 when one did not hold; 2 on a bad plan; 3 when all that ran held but a step
was not run (time, a missing requirement).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

try:
    import tomllib
except ImportError:  # Python < 3.11: the device has 3.12
    tomllib = None

# The lending machine's limits (the device notes of the workplace that lends it), in one place: campaigns
# read them here (`runner.py limits --sh` for a bash script), not from numbers of their own.
LIMITS = {
    "call_s": 600,         # one command's run
    "margin_s": 45,        # left at the end of a call for packing and the transfer back
    "carry_mib": 64,       # the working tree plus carried paths, per call
    "files_back": 8,       # files that come back from $OUT
    "file_back_mib": 16,   # each of them
    "back_mib": 64,        # all of them
    "back_depth": 2,       # folders below $OUT ($OUT/a/b/file comes back, $OUT/a/b/c/file does not)
    "device_budget_s": 1800,  # device time of a developer's session
}

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KINDS = ("gate", "lines", "fuzz", "table", "bench")
WORDS_RE = re.compile(r"^(pass|fail|skip|weak|fail:[a-z0-9_]+)$")
VERDICT_LINE = re.compile(r"^(PASS|FAIL|ERROR|SKIPPED|WEAK)\s+(\S+):(\d+)\s+\[")
COMMON = {"kind", "name", "need_s", "timeout_s", "optional"}
FIELDS = {
    "gate": COMMON | {"cases", "backend", "adapter", "knobs", "warm", "expect", "expect_at", "subst", "explain"},
    "fuzz": COMMON | {"backend", "adapter", "knobs", "warm", "expect", "budget", "seed", "dims", "op",
                      "pass", "max_failures", "shrink_runs", "confirm_runs", "shards"},
    "lines": COMMON | {"lines", "backends", "explain"},
    "table": COMMON | {"of", "script"},
    "bench": COMMON | {"command", "repeat", "expect"},
}


class PlanError(Exception):
    pass


# ---- time and log ----------------------------------------------------------------------------------------
class Clock:
    """Seconds since the run started, and what is left of the call's budget."""

    def __init__(self, budget_s, log_path=None):
        self.t0 = time.monotonic()
        self.budget_s = budget_s
        self.log_path = log_path

    def elapsed(self):
        return time.monotonic() - self.t0

    def left(self):
        return self.budget_s - self.elapsed()

    def fits(self, need_s):
        return self.left() >= need_s

    def stamp(self, msg):
        line = f"[{self.elapsed():5.0f}s] {msg}"
        print(line, flush=True)
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


# ---- the version header ------------------------------------------------------------------------------------
def _sh(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=timeout)
        return r.stdout.strip() if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def versions(py="python3", ao_bin=""):
    """date, commit, GPU, CUDA, cuDNN, torch, numpy, Python, OS, CPU, binaries; never fails."""
    out = [f"date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"]
    changed = _sh(["git", "-C", ROOT, "status", "--porcelain"])
    out.append(f"git: {_sh(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD'])} "
               f"({len(changed.splitlines()) if changed else 0} changed paths)")
    gpu = _sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"])
    out += [f"gpu: {g}" for g in gpu.splitlines()] or ["gpu: none (no nvidia-smi answer)"]
    m = re.search(r"CUDA Version: ([0-9.]+)", _sh(["nvidia-smi"]))
    out.append(f"cuda (driver): {m.group(1) if m else ''}")
    m = re.search(r"release [0-9.]+", _sh(["nvcc", "--version"]))
    out.append(f"cuda (nvcc): {m.group(0) if m else ''}")
    m = re.search(r"libcudnn\.so\.9 .*=> (\S+)", _sh(["ldconfig", "-p"]))
    out.append(f"cudnn (system): {m.group(1) + ' -> ' + os.path.realpath(m.group(1)) if m else 'none'}")
    t = _sh([py, "-c", "import torch, numpy; print('torch:', torch.__version__, 'cuda:', torch.version.cuda, "
                       "'cudnn (torch):', torch.backends.cudnn.version(), 'numpy:', numpy.__version__)"], timeout=120)
    out.append(t or f"torch: not importable by {py}")
    out.append(f"python: {_sh([py, '--version'])}")
    osr = open("/etc/os-release").read() if os.path.exists("/etc/os-release") else ""
    m = re.search(r'PRETTY_NAME="?([^"\n]*)', osr)
    out.append(f"os: {m.group(1) if m else ''}")
    m = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()) if os.path.exists("/proc/cpuinfo") else None
    out.append(f"cpu: {os.cpu_count()} cores, {m.group(1) if m else ''}")
    out.append(f"binaries: {ao_bin.replace(ROOT, '<checkout>', 1) if ao_bin else ''}")  # no machine path in a report
    return "\n".join(out)


# ---- the binary and the adapters ---------------------------------------------------------------------------
def runnable(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return False
    return "not found" not in _sh(["ldd", path])


def find_ao(given=None):
    """--ao, else AO_CLI, else attn-oracle of the binary folder (AO_BIN_DIR, default .deps/device-bin: what
    scripts/device/lib.sh's ao_pack fills and a device call carries), else build/attn-oracle."""
    bin_dir = os.environ.get("AO_BIN_DIR", ".deps/device-bin")
    bin_dir = bin_dir if os.path.isabs(bin_dir) else os.path.join(ROOT, bin_dir)
    for c in (given, os.environ.get("AO_CLI"), os.path.join(bin_dir, "attn-oracle"),
              os.path.join(ROOT, "build", "attn-oracle")):
        if c:
            use_libs(os.path.dirname(os.path.abspath(c)))
            if runnable(c):
                return os.path.abspath(c)
    return None


def use_libs(bin_dir):
    """Appends the binary folder's lib/ and PyTorch's wheel folders for NCCL and nvrtc to LD_LIBRARY_PATH
    (appended: the image's own CUDA, cuDNN and libstdc++ win where it has them), as lib.sh's ao_use_bin."""
    import glob
    dirs = [os.path.join(bin_dir, "lib")] + sorted(
        glob.glob("/opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib"))
    have = os.environ.get("LD_LIBRARY_PATH", "").split(":")
    add = [d for d in dirs if os.path.isdir(d) and d not in have]
    if add:
        os.environ["LD_LIBRARY_PATH"] = ":".join([p for p in have if p] + add)


class Adapters:
    """The adapters' registry as `PY -m attn_oracle.adapters` gives it (the interpreter the exec: backend runs,
    so that its imports are probed where they will run); read once, on the first adapter step."""

    def __init__(self, py):
        self.py = py
        self._list, self._probed = None, {}
        self.env = dict(os.environ)
        pp = [os.path.join(ROOT, "python")] + [p for p in self.env.get("PYTHONPATH", "").split(":") if p]
        self.env["PYTHONPATH"] = ":".join(pp)

    def add_site(self, site):
        self.env["PYTHONPATH"] = site + ":" + self.env["PYTHONPATH"]
        self._list, self._probed = None, {}

    def all(self):
        if self._list is None:
            r = subprocess.run([self.py, "-m", "attn_oracle.adapters", "list", "--json"], capture_output=True,
                               text=True, env=self.env, cwd=ROOT)
            if r.returncode != 0:
                raise PlanError(f"the adapters' registry does not list with {self.py}: {r.stderr.strip()[-500:]}")
            self._list = {a["name"]: a for a in json.loads(r.stdout)}
        return self._list

    def get(self, name, where):
        a = self.all().get(name)
        if a is None:
            raise PlanError(f"{where}: adapter = {name!r}: no such adapter (known: {', '.join(self.all())})")
        return a

    def check_knobs(self, a, knobs, where):
        """Each --flag of `knobs` must be one of the adapter's, and a value one of its choices."""
        known = {k["flag"]: k for k in a["knobs"]}
        toks = shlex.split(knobs)
        i = 0
        while i < len(toks):
            flag = toks[i].split("=", 1)[0]
            if flag not in known:
                raise PlanError(f"{where}: knobs = {knobs!r}: {flag!r} is not a knob of {a['name']} "
                                f"(its knobs: {' '.join(known) or 'none'})")
            k = known[flag]
            takes_value = k["choices"] is not None
            if takes_value:
                value = toks[i].split("=", 1)[1] if "=" in toks[i] else (toks[i + 1] if i + 1 < len(toks) else None)
                if value is None:
                    raise PlanError(f"{where}: knobs = {knobs!r}: {flag} needs a value")
                if isinstance(k["choices"], list) and value not in [str(c) for c in k["choices"]]:
                    raise PlanError(f"{where}: knobs = {knobs!r}: {flag} {value!r} is not one of "
                                    f"{'|'.join(map(str, k['choices']))}")
                i += 1 if "=" in toks[i] else 2
            else:
                i += 1

    def spec(self, a, knobs, socket=None):
        """The exec: spec; with `socket`, through the client of the warm host listening there."""
        run = (f"attn_oracle.adapters.client --socket {socket} {a['name']}" if socket
               else f"attn_oracle.adapters.{a['name']}")
        return f"exec:{self.py} -m {run}" + (f" {knobs}" if knobs else "")

    def missing(self, name):
        """'' when the adapter can run a case here, else why not (its probe's words); asked once an adapter
        (the probe imports torch and asks for the GPU: seconds) until wheels are installed."""
        if name not in self._probed:
            r = subprocess.run([self.py, "-m", "attn_oracle.adapters", "probe", name], capture_output=True,
                               text=True, env=self.env, cwd=ROOT, timeout=300)
            self._probed[name] = "" if r.returncode == 0 else (r.stdout + r.stderr).strip()
        return self._probed[name]


def install_wheels(py, site, log):
    """Installs the carried wheels (.whl/*.whl) into `site`; True when something was installed."""
    import glob
    wheels = sorted(glob.glob(os.path.join(ROOT, ".whl", "*.whl")))
    if not wheels:
        return False
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
                        "--upgrade", "--target", site, *wheels], capture_output=True, text=True)
    log(f"wheels: {len(wheels)} from .whl/ into {site}: exit {r.returncode} {r.stderr.strip()[-300:]}")
    return r.returncode == 0


# ---- the plan -------------------------------------------------------------------------------------------
def load_plan(path, sets=()):
    """The plan, checked; `sets`: STEP.FIELD=VALUE overrides (VALUE read as a TOML value, else as text)."""
    if tomllib is None:
        raise PlanError("reading a plan needs Python 3.11+ (tomllib)")
    try:
        with open(path, "rb") as f:
            plan = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PlanError(f"{path}: {e}") from e
    for item in sets:
        key, eq, value = item.partition("=")
        step, dot, field = key.partition(".")
        target = [x for x in plan.get("step", []) if x.get("name") == step]
        if not eq or not dot or not field or not target:
            raise PlanError(f"--set {item!r}: STEP.FIELD=VALUE with STEP a step of the plan "
                            f"({', '.join(str(x.get('name')) for x in plan.get('step', []))})")
        try:
            target[0][field] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            target[0][field] = value
    for k in plan:
        if k not in ("name", "about", "budget_s", "step"):
            raise PlanError(f"{path}: unknown plan field {k!r} (name, about, budget_s, step)")
    if not isinstance(plan.get("name"), str) or not plan["name"]:
        raise PlanError(f"{path}: name: a plan needs a name")
    steps = plan.get("step", [])
    if not steps:
        raise PlanError(f"{path}: a plan needs at least one [[step]]")
    names = set()
    for i, s in enumerate(steps, 1):
        where = f"{path}: step {i} ({s.get('name', '?')})"
        kind = s.get("kind")
        if kind not in KINDS:
            raise PlanError(f"{where}: kind = {kind!r}: one of {', '.join(KINDS)}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(s.get("name", ""))):
            raise PlanError(f"{where}: name = {s.get('name')!r}: letters, digits, '.', '_', '-' (it names files)")
        if s["name"] in names:
            raise PlanError(f"{where}: name = {s['name']!r} is used twice")
        names.add(s["name"])
        for k in s:
            if k not in FIELDS[kind]:
                raise PlanError(f"{where}: unknown field {k!r} for a {kind} step ({', '.join(sorted(FIELDS[kind]))})")
        if kind in ("gate", "fuzz") and ("backend" in s) == ("adapter" in s):
            raise PlanError(f"{where}: a {kind} step names one backend: backend = \"SPEC\" or adapter = \"NAME\"")
        if s.get("warm") and "adapter" not in s:
            raise PlanError(f"{where}: warm = true without an adapter (the warm host runs adapters of the registry)")
        if "knobs" in s and "adapter" not in s:
            raise PlanError(f"{where}: knobs = {s['knobs']!r} without an adapter (a built-in spec carries its knobs)")
        for w in [s.get("expect")] + list((s.get("expect_at") or {}).values()):
            if w is not None and not WORDS_RE.match(str(w)):
                raise PlanError(f"{where}: expect {w!r}: one of pass, fail, fail:<metric>, skip, weak")
        if kind == "gate":
            cases = s.get("cases")
            cases = [cases] if isinstance(cases, str) else cases
            if not cases:
                raise PlanError(f"{where}: cases: a gate step needs a case file or folder")
            for c in cases:
                if not os.path.exists(os.path.join(ROOT, c)):
                    raise PlanError(f"{where}: cases = {c!r}: no such file or folder under the checkout")
            s["cases"] = cases
        if kind == "lines":
            if not s.get("lines") or not os.path.isfile(os.path.join(ROOT, str(s["lines"]))):
                raise PlanError(f"{where}: lines = {s.get('lines')!r}: a file of plan lines under the checkout")
            read_plan_lines(s["lines"])  # a bad line is a bad plan, found before anything runs
        if kind == "table":
            for o in s.get("of", []):
                if o not in names or o == s["name"]:
                    raise PlanError(f"{where}: of = {o!r}: not an earlier step of the plan")
        if kind == "bench" and not s.get("command"):
            raise PlanError(f"{where}: command: a bench step needs a command")
    return plan


def read_plan_lines(path):
    """ao-gpu-campaign's plan lines: [(line number, expect word, backend, case)]; `#` starts a comment."""
    out = []
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            toks = line.split("#", 1)[0].split()
            if not toks:
                continue
            word = next((t[7:] for t in toks if t.startswith("expect=")), None)
            spec = next((t[8:] for t in toks if t.startswith("backend=")), None)
            case = " ".join(t for t in toks if not t.startswith(("expect=", "backend=")))
            if word is None or not WORDS_RE.match(word):
                raise PlanError(f"{path}:{no}: expect={word}: needs expect=pass|fail|fail:<metric>|skip|weak")
            if not spec or not case:
                raise PlanError(f"{path}:{no}: needs backend=<spec> and a case line")
            out.append((no, word, spec, case))
    return out


def case_files(paths):
    """The case files a gate reads for `paths` (folders: their *.case files, recursively, sorted)."""
    out = []
    for p in paths:
        full = os.path.join(ROOT, p)
        if os.path.isdir(full):
            for d, _, files in sorted(os.walk(full)):
                out += sorted(os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith(".case"))
        else:
            out.append(p)
    return out


def claims(files):
    """{(file, line): backend} for every `# catches: <backend>` claim, at the line of its case."""
    out = {}
    for f in files:
        pending = None
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                t = line.strip()
                m = re.match(r"#\s*catches:\s*(.+)", t)
                if m:
                    pending = m.group(1).strip()
                elif t and not t.startswith("#"):
                    if pending:
                        out[(f, no)] = pending
                    pending = None
    return out


def same_backend(a, b):
    return " ".join(a.split()) == " ".join(b.split())


def holds(word, verdict, failed):
    if word == "pass":
        return verdict == "pass"
    if word == "skip":
        return verdict == "skipped"
    if word == "weak":
        return verdict == "weak"
    if word == "fail":
        return verdict == "fail"
    return verdict == "fail" and word[5:] in failed


# ---- the steps -------------------------------------------------------------------------------------------
class Proc:
    """A command writing into `log`, in a process group of its own; finish() waits for it until the timeout,
    then sends SIGTERM (the gate and fuzz report what finished) and, 20 s later, SIGKILL."""

    def __init__(self, cmd, log, env):
        self.t0 = time.monotonic()
        self.f = open(log, "w", encoding="utf-8")
        self.p = subprocess.Popen(cmd, stdout=self.f, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                  start_new_session=True)

    def finish(self, timeout_s):
        try:
            rc = self.p.wait(timeout=max(1.0, timeout_s - (time.monotonic() - self.t0)))
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                rc = self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                rc = self.p.wait()
            self.f.write(f"\nrunner: stopped at its timeout_s {timeout_s}\n")
        self.f.close()
        return rc


class Run:
    def __init__(self, plan, out, ao, py, clock, dry_run=False):
        self.plan, self.out, self.ao, self.py, self.clock, self.dry = plan, out, ao, py, clock, dry_run
        self.work = tempfile.mkdtemp(prefix="ao-runner-")  # packed into logs.tgz: a call brings back few files
        self.adapters = Adapters(py)
        self.site = None
        self.results = []   # one dict per step
        self.by_name = {}
        self.host = None    # the warm host (Popen) and its socket, started by the first warm step
        self.socket = os.path.join(self.work, "ao.sock")

    def backend(self, s, where):
        """The step's backend spec, and '' or why it cannot run here."""
        if "backend" in s:
            return s["backend"], ""
        a = self.adapters.get(s["adapter"], where)
        knobs = s.get("knobs", "")
        self.adapters.check_knobs(a, knobs, where)
        sock = self.socket if s.get("warm") else None
        if self.dry:
            return self.adapters.spec(a, knobs, sock), ""
        why = self.adapters.missing(a["name"])
        if why and a["wheels"] and self.site is None:
            self.site = os.path.join(self.work, "site")
            if install_wheels(self.py, self.site, self.clock.stamp):
                self.adapters.add_site(self.site)
                why = self.adapters.missing(a["name"])
        if sock and not why:
            why = self.start_host("torch" in a["requires"])
        return self.adapters.spec(a, knobs, sock), why

    def start_host(self, torch):
        """Starts the warm host once (pre-importing torch where an adapter needs it); '' or why it did not."""
        if self.host is None:
            cmd = [self.py, "-m", "attn_oracle.adapters.serve", "--socket", self.socket]
            self.host = subprocess.Popen(cmd + ([] if torch else ["--no-torch"]), cwd=ROOT, env=self.adapters.env,
                                         stdout=subprocess.DEVNULL,
                                         stderr=open(os.path.join(self.work, "serve.log"), "w"))
            t = time.monotonic()
            while not os.path.exists(self.socket) and self.host.poll() is None and time.monotonic() - t < 120:
                time.sleep(0.1)
            self.clock.stamp(f"warm host: {'listening' if os.path.exists(self.socket) else 'did not start'}")
        if not os.path.exists(self.socket):
            return "the warm host did not start (serve.log in logs.tgz)"
        return ""

    def stop_host(self):
        if self.host is not None and self.host.poll() is None:
            self.host.terminate()
            try:
                self.host.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.host.kill()

    def call(self, cmd, log, timeout_s, env=None):
        return Proc(cmd, log, env or self.adapters.env).finish(timeout_s)

    def run_gate(self, name, paths, spec, timeout_s, explain=False):
        """`attn-oracle gate PATHS --backend SPEC`: (exit, report dir, [(file, line, verdict, report case)])
        from the printed verdict lines and report.json, in the order the gate ran them."""
        rdir = os.path.join(self.work, "reports", name)
        log = os.path.join(self.work, name + ".txt")
        cmd = [self.ao, "gate", *paths, "--backend", spec, "--report-dir", rdir] + ([] if explain else ["--no-explain"])
        rc = self.call(cmd, log, timeout_s)
        lines = [m for m in (VERDICT_LINE.match(x) for x in open(log, encoding="utf-8", errors="replace")) if m]
        try:
            report = json.load(open(os.path.join(rdir, "report.json"), encoding="utf-8"))["cases"]
        except (OSError, ValueError, KeyError):
            report = []
        if len(report) != len(lines):
            report = [{}] * len(lines)  # verdicts from the printed lines alone
        return rc, rdir, [(m.group(2), int(m.group(3)), m.group(1).lower(), c) for m, c in zip(lines, report)]

    def record(self, at, c, verdict, word, source, spec=None):
        """One case's result: its expectation held or not; printed."""
        failed = sorted(k for k, v in c.get("metrics", {}).items() if v.get("failed"))
        reason = c.get("reason", "")
        ok = holds(word, verdict, failed) and not reason.startswith("claim not held")
        self.clock.stamp(f"  {'ok ' if ok else 'NOT'} {verdict:<7} expect {word:<8} {at}"
                         + (f" [{spec}]" if spec else "") + (f"  ({', '.join(failed)})" if failed else ""))
        out = {"at": at, "case": c.get("case", ""), "verdict": verdict, "failed": failed, "reason": reason[-400:],
               "expect": word, "expect_from": source, "held": ok,
               "seconds": round(c.get("seconds", {}).get("backend", 0.0), 3)}
        return dict(out, backend=spec) if spec else out

    def step_gate(self, s, r):
        where = f"step {s['name']}"
        spec, why = self.backend(s, where)
        r["backend"] = spec
        files = case_files(s["cases"])
        if s.get("subst"):  # @KEY@ placeholders: a substituted copy of each file (lines keep their numbers)
            copies = []
            for f in files:
                text = open(os.path.join(ROOT, f), encoding="utf-8").read()
                for k, v in s["subst"].items():
                    text = text.replace(f"@{k}@", v)
                if re.search(r"@[A-Z_]+@", text):
                    raise PlanError(f"{where}: {f} keeps a placeholder {re.search(r'@[A-Z_]+@', text).group(0)} "
                                    f"that subst = {s['subst']} does not set")
                dst = os.path.join(self.work, s["name"] + "-" + os.path.basename(f))
                open(dst, "w", encoding="utf-8").write(text)
                copies.append(dst)
            gate_paths = copies
            shown = {c: f for c, f in zip(copies, files)}
        else:
            gate_paths, shown = files, {}
        if why:
            return self.not_run(r, f"cannot run here: {why}")
        if self.dry:
            r["command"] = [self.ao or "attn-oracle", "gate", *gate_paths, "--backend", spec]
            return
        rc, r["report_dir"], got = self.run_gate(s["name"], gate_paths, spec, s.get("timeout_s", 300), s.get("explain"))
        r["exit"] = rc
        claimed = claims(files)
        at = {str(k): v for k, v in (s.get("expect_at") or {}).items()}
        cases = []
        for path, line, verdict, c in got:
            path = shown.get(path, path)
            path = os.path.relpath(os.path.join(ROOT, path), ROOT) if not os.path.isabs(path) else path
            word, source = at.get(f"{path}:{line}") or at.get(str(line)), "plan"
            if word is None and (path, line) in claimed and same_backend(claimed[(path, line)], spec):
                word, source = "fail", "claim"
            cases.append(self.record(f"{path}:{line}", c, verdict, word or s.get("expect", "pass"), source))
        want = sum(1 for f in files for x in open(os.path.join(ROOT, f), encoding="utf-8")
                   if x.strip() and not x.strip().startswith("#"))
        r["cases"] = cases
        if len(cases) < want:
            r["status"] = "incomplete"
            r["why"] = f"{len(cases)} of {want} cases reported (exit {rc}; see {s['name']}.txt in logs.tgz)"

    def step_lines(self, s, r):
        """Plan lines (`expect=WORD backend=SPEC CASE`, ao-gpu-campaign's), one gate per backend."""
        src = s["lines"]
        keep = re.compile(s.get("backends", ".*"))
        plan = [p for p in read_plan_lines(src) if keep.fullmatch(p[2])]
        groups = {}
        for p in plan:
            groups.setdefault(p[2], []).append(p)
        r["backends"] = list(groups)
        if self.dry:
            r["command"] = [f"{len(plan)} lines of {src}: a gate on each of {len(groups)} backends"]
            return
        t_end = time.monotonic() + s.get("timeout_s", 300)
        cases, short = [], []
        for gi, (spec, group) in enumerate(groups.items()):
            name = f"{s['name']}-{gi}"
            path = os.path.join(self.work, name + ".case")
            with open(path, "w", encoding="utf-8") as f:
                f.write("".join(p[3] + "\n" for p in group))
            left = min(t_end - time.monotonic(), self.clock.left())
            if left < 10:
                short.append(f"{spec}: not run (time)")
                continue
            rc, _, got = self.run_gate(name, [path], spec, left, s.get("explain"))
            for _, line, verdict, c in got:
                no, word, _, _ = group[line - 1]
                cases.append(self.record(f"{src}:{no}", c, verdict, word, "plan", spec))
            if len(got) < len(group):
                short.append(f"{spec}: {len(got)} of {len(group)} lines reported (exit {rc}; {name}.txt in logs.tgz)")
        r["cases"] = cases
        if short:
            r["status"], r["why"] = "incomplete", "; ".join(short)

    def step_fuzz(self, s, r):
        spec, why = self.backend(s, f"step {s['name']}")
        r["backend"] = spec
        if why:
            return self.not_run(r, f"cannot run here: {why}")
        budget = str(s.get("budget", "60s"))
        m = re.fullmatch(r"(\d+)([smh]?)", budget)
        if not m:
            raise PlanError(f"step {s['name']}: budget = {budget!r}: seconds (60s), minutes (5m), hours (1h) "
                            f"or a number of cases")
        secs = int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)] if m.group(2) else 0  # cases: time unknown
        shards = int(s.get("shards", 1)) or os.cpu_count()
        base = [self.ao or "attn-oracle", "fuzz", "--backend", spec, "--budget", budget,
                "--seed", str(s.get("seed", 1)), "--out", os.path.join(self.work, "found", s["name"])]
        for k in ("dims", "op", "pass", "max_failures", "shrink_runs", "confirm_runs"):
            if k in s:
                base += [f"--{k.replace('_', '-')}", str(s[k])]
        cmds = [base + (["--shard", f"{i}/{shards}"] if shards > 1 else []) for i in range(shards)]
        if self.dry:
            r["command"] = cmds[0]
            return
        logs = [os.path.join(self.work, f"{s['name']}" + (f"-shard{i}" if shards > 1 else "") + ".txt")
                for i in range(shards)]
        env = dict(self.adapters.env, OMP_NUM_THREADS="1") if shards > 1 else None
        procs = [Proc(c, log, self.adapters.env if env is None else env) for c, log in zip(cmds, logs)]
        timeout = s.get("timeout_s", secs + 120 if secs else LIMITS["call_s"])
        rcs = [p.finish(timeout) for p in procs]  # side by side: each waits what is left of the one timeout
        results, lines = {}, []
        for log in logs:
            m = re.search(r"^fuzz-result (.*)$", open(log, encoding="utf-8", errors="replace").read(), re.M)
            lines.append(m.group(0) if m else "")
            for kv in (m.group(1).split() if m else []):
                k, _, v = kv.partition("=")
                if re.fullmatch(r"-?\d+", v) and k in ("cases", "failed", "unique", "skipped", "invalid",
                                                        "nondeterministic", "unsaved", "backend_lost", "interrupted"):
                    results[k] = results.get(k, 0) + int(v)
        r["exit"], r["fuzz_result"] = rcs, results
        # fuzz: exit 1 when something failed, 0 when nothing did (125: nothing ran)
        verdict = "fail" if 1 in rcs else "pass" if all(rc == 0 for rc in rcs) and all(lines) else "error"
        word = s.get("expect", "pass")
        ok = holds(word, verdict, [])
        summary = " ".join(f"{k}={v}" for k, v in results.items()) or f"exits {rcs}, no fuzz-result line"
        r["cases"] = [{"at": f"fuzz seed {s.get('seed', 1)}" + (f" x{shards} shards" if shards > 1 else ""),
                       "case": "", "verdict": verdict, "failed": [], "reason": summary, "expect": word,
                       "expect_from": "plan", "held": ok, "seconds": secs}]
        self.clock.stamp(f"  {'ok ' if ok else 'NOT'} {verdict:<7} expect {word:<8} {summary}")

    def step_table(self, s, r):
        of = s.get("of") or [x["name"] for x in self.results if x["kind"] in ("gate", "lines")]
        tsv = os.path.join(self.out, s["name"] + ".tsv")
        r["file"] = os.path.basename(tsv)
        if self.dry:
            return
        if s.get("script"):
            reports = " ".join(f"{o}={shlex.quote(self.by_name[o].get('report_dir', ''))}" for o in of)
            cmd = s["script"].format(out=shlex.quote(tsv), reports=reports)
            r["exit"] = self.call(["bash", "-c", cmd], os.path.join(self.work, s["name"] + ".txt"),
                                  s.get("timeout_s", 120))
            if r["exit"] != 0:
                r["status"], r["why"] = "failed", f"the table script exited {r['exit']}"
            return
        rows, keys = {}, []
        for o in of:
            for c in self.by_name[o].get("cases", []):
                if c["at"] not in rows:
                    keys.append(c["at"])
                    rows[c["at"]] = {"case": c["case"]}
                cell = c["verdict"] + (f" ({', '.join(c['failed'])})" if c["failed"] else "")
                rows[c["at"]][o] = cell + ("" if c["held"] else " [expected " + c["expect"] + "]")
        with open(tsv, "w", encoding="utf-8") as f:
            f.write("\t".join(["at", "case", *of]) + "\n")
            for k in keys:
                f.write("\t".join([k, rows[k]["case"], *(rows[k].get(o, "") for o in of)]) + "\n")

    def step_bench(self, s, r):
        cmd = s["command"] if isinstance(s["command"], list) else shlex.split(s["command"])
        cmd = [self.ao if c == "{ao}" else c for c in cmd]
        if self.dry:
            r["command"] = cmd
            return
        times, rcs = [], []
        for i in range(int(s.get("repeat", 3))):
            t = time.monotonic()
            rcs.append(self.call(cmd, os.path.join(self.work, f"{s['name']}-{i}.txt"), s.get("timeout_s", 120)))
            times.append(time.monotonic() - t)
        r["seconds"] = {"min": min(times), "median": statistics.median(times), "max": max(times), "runs": len(times)}
        verdict = "pass" if all(rc == 0 for rc in rcs) else "fail"
        word = s.get("expect", "pass")
        r["cases"] = [{"at": "bench", "case": " ".join(cmd), "verdict": verdict, "failed": [],
                       "reason": f"exits {rcs}", "expect": word, "expect_from": "plan",
                       "held": holds(word, verdict, []), "seconds": round(r["seconds"]["median"], 3)}]
        self.clock.stamp(f"  bench {s['name']}: median {r['seconds']['median']:.2f}s over {len(times)} runs, "
                         f"exits {rcs}")

    def not_run(self, r, why):
        r["status"], r["why"] = "not run", why
        self.clock.stamp(f"  not run: {why}")

    def run(self, only=None):
        for s in self.plan["step"]:
            r = {"name": s["name"], "kind": s["kind"], "status": "ran",
                 "settings": {k: v for k, v in s.items() if k not in ("kind", "name")}}
            self.results.append(r)
            self.by_name[s["name"]] = r
            if only and s["name"] not in only:
                r["status"], r["why"] = "not selected", "--steps"
                continue
            need = s.get("need_s", 30)
            if not self.dry and not self.clock.fits(need):
                self.not_run(r, f"needs ~{need} s, {self.clock.left():.0f} s left of the call")
                continue
            if not self.dry:
                self.clock.stamp(f"step {s['name']} ({s['kind']})")
            t = time.monotonic()
            getattr(self, "step_" + s["kind"])(s, r)
            r["step_s"] = round(time.monotonic() - t, 1)
        return self.results

    def summary(self):
        held = sum(c["held"] for r in self.results for c in r.get("cases", []))
        total = sum(len(r.get("cases", [])) for r in self.results)
        unrun = [r for r in self.results if r["status"] not in ("ran", "not selected")
                 and not any(s.get("optional") for s in self.plan["step"] if s["name"] == r["name"])]
        code = 1 if held < total else 3 if unrun else 0
        return {"expectations": total, "held": held, "steps_not_run": [f"{r['name']}: {r.get('why')}" for r in unrun],
                "exit": code}


def pack(run, out):
    """logs.tgz: every step's output and gate report (one file: a call brings back few)."""
    with tarfile.open(os.path.join(out, "logs.tgz"), "w:gz") as t:
        t.add(run.work, arcname="logs")
    shutil.rmtree(run.work, ignore_errors=True)
    files = [f for f in os.listdir(out) if os.path.isfile(os.path.join(out, f))]
    if len(files) > LIMITS["files_back"]:
        print(f"runner: {len(files)} files in {out}, only {LIMITS['files_back']} come back from a device call",
              file=sys.stderr)


def cmd_run(a):
    plan = load_plan(a.plan, a.set or ())
    out = a.out or os.environ.get("OUT") or f"runner-out-{plan['name']}"
    os.makedirs(out, exist_ok=True)
    budget = a.budget or plan.get("budget_s") or LIMITS["call_s"] - LIMITS["margin_s"]
    clock = Clock(budget, None if a.dry_run else os.path.join(out, "runner.log"))
    ao = find_ao(a.ao)
    if not ao and not a.dry_run and any(s["kind"] in ("gate", "fuzz") for s in plan["step"]):
        print("runner: no runnable attn-oracle (--ao, AO_CLI, AO_BIN_DIR or build/attn-oracle)", file=sys.stderr)
        return 2
    py = os.environ.get("PY", "python3")
    if not a.dry_run:
        open(os.path.join(out, "env.txt"), "w", encoding="utf-8").write(versions(py, os.path.dirname(ao or "")) + "\n")
        clock.stamp(f"plan {plan['name']}: {len(plan['step'])} steps, budget {budget:.0f} s; {ao}")
    run = Run(plan, out, ao, py, clock, a.dry_run)
    try:
        run.run(set(a.steps.split(",")) if a.steps else None)
    except PlanError as e:
        print(f"runner: {e}", file=sys.stderr)
        return 2
    finally:
        run.stop_host()
    summ = run.summary()
    if a.dry_run:
        for r in run.results:
            print(f"{r['name']} ({r['kind']}): {' '.join(map(shlex.quote, r.get('command', []))) or r.get('file', '')}")
        shutil.rmtree(run.work, ignore_errors=True)
        return 0
    doc = {"schema": "attn-oracle.device-run", "plan": plan["name"], "about": plan.get("about", ""),
           "plan_file": os.path.relpath(os.path.abspath(a.plan), ROOT), "limits": LIMITS, "budget_s": budget,
           "elapsed_s": round(clock.elapsed(), 1), "steps": run.results, "summary": summ}
    for r in run.results:  # report dirs live in the scratch folder: logs.tgz holds them as logs/reports/<step>
        if "report_dir" in r:
            r["report_dir"] = "logs.tgz:logs/reports/" + r["name"]
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    clock.stamp(f"{summ['held']} of {summ['expectations']} expectations held"
                + (f"; not run: {'; '.join(summ['steps_not_run'])}" if summ["steps_not_run"] else "")
                + f" -> exit {summ['exit']}")
    pack(run, out)
    return summ["exit"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a plan")
    r.add_argument("plan")
    r.add_argument("--out", help="output folder (default $OUT)")
    r.add_argument("--budget", type=float, help="seconds for the whole run (default: the plan's, else a call's)")
    r.add_argument("--steps", help="only these steps (comma-separated names)")
    r.add_argument("--set", action="append", metavar="STEP.FIELD=VALUE", help="override a step's field (repeatable)")
    r.add_argument("--ao", help="the attn-oracle binary")
    r.add_argument("--dry-run", action="store_true", help="check the plan and print each step's command")
    li = sub.add_parser("limits", help="the lending machine's limits")
    li.add_argument("--sh", action="store_true")
    v = sub.add_parser("versions", help="the version header")
    v.add_argument("--bin", help="the binary folder to name (default: the folder of the attn-oracle found)")
    w = sub.add_parser("wheels", help="the pinned wheels a plan's adapters need")
    w.add_argument("plan")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "run":
            return cmd_run(a)
        if a.cmd == "limits":
            print("\n".join(f"AO_LIMIT_{k.upper()}={v}" for k, v in LIMITS.items()) if a.sh else json.dumps(LIMITS))
            return 0
        if a.cmd == "versions":
            print(versions(os.environ.get("PY", "python3"), a.bin or os.path.dirname(find_ao() or "")))
            return 0
        plan = load_plan(a.plan)
        ad = Adapters(os.environ.get("PY", "python3"))
        wheels = sorted({w for s in plan["step"] if "adapter" in s for w in ad.get(s["adapter"], s["name"])["wheels"]})
        print("\n".join(wheels))
        return 0
    except PlanError as e:
        print(f"runner: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
