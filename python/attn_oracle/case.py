"""The in-process check: a `Case` (a case line, its layout and inputs over the harness's memory) judged or run
through a Python kernel, a corpus gated and a fuzz campaign, all through the C++ core (`_core`)."""
import hashlib
import json
import os
import re

import numpy as np

from . import _core
from .adapters.protocol import meta_key
from .verdict import FuzzResult, GateResult, Verdict


class Skip(Exception):
    """Raised by a kernel for a case it does not serve: the verdict is SKIPPED with this reason."""

    def __init__(self, reason):
        super().__init__(reason)
        self.skip_reason = reason


def kernel_name(kernel):
    """How a kernel is named in verdicts, found files and failure signatures: a registry spec (a str) is
    its own name."""
    if isinstance(kernel, str):
        return kernel
    name = getattr(kernel, "ao_name", None)
    if name:
        return _utf8(str(name))
    func = getattr(kernel, "func", kernel)  # functools.partial: the function it wraps
    mod = getattr(func, "__module__", None) or "?"
    qual = getattr(func, "__qualname__", None) or type(func).__name__
    extra = ""
    if func is not kernel and getattr(kernel, "keywords", None):
        extra = ":" + ",".join(f"{k}={v}" for k, v in sorted(kernel.keywords.items()))
    return _utf8(f"python:{mod}.{qual}{extra}")


def _utf8(text):
    """text as it can be written (UTF-8): a lone surrogate in a kernel's name is escaped, not an error."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _text(field, value, path=False):
    """A text argument (a path too, where path) as the core takes it: BadInput naming the field and the value
    for anything else, or for text that is not valid Unicode (a lone surrogate)."""
    if path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise _core.BadInput(f"'{field}' = {value!r}: must be a str" + (" or a path" if path else ""))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _core.BadInput(f"'{field}' = {ascii(value)}: is not valid Unicode text (a lone surrogate)") from None
    return value


def _dir(field, value):
    return _text(field, value, path=True) if value else ""


def _host(x):
    """An output as a host array: torch tensors (any device) are moved to the CPU; others pass as they are."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        return x.detach().cpu().contiguous()
    return x

def _ints(v):
    return np.asarray(v, dtype=np.int64)


class Case:
    """A case line, its validated layout and its deterministic inputs (generated once, bit-identical to
    every other path: CLI, exec:, plugins). The layout is also given as arrays a varlen kernel takes.

    ``meta`` is exactly the exec: protocol's meta.json (less its file names): the adapters in
    attn_oracle.adapters read a Case and an exec: case directory through it alike."""

    def __init__(self, line, max_mem_gib=8.0):
        self._core = _core.CoreCase(_text("line", line), max_mem_gib)
        self._init()

    @classmethod
    def _from_core(cls, core):
        self = cls.__new__(cls)
        self._core = core
        self._init()
        return self

    def _init(self):
        self.meta = json.loads(self._core.meta_json)
        m = self.meta
        self.op, self.dtype, self.dims, self.scale = m["op"], m["dtype"], m["dims"], float(m["scale"])
        self.mask, self.window, self.window_right = m["mask"], int(m["window"]), int(m["window_right"])
        self.window_convention = m["window_convention"]
        self.docs, self.segments = m["docs"], m["segments"]
        self.q_lens, self.kv_lens = _ints(m["q_lens"]), _ints(m["kv_lens"])
        # Ragged offsets in rows with the capacity last (cu_seqlens_padded); cu_seqlens of the valid tokens.
        self.q_offsets, self.kv_offsets = _ints(m["q_offsets"]), _ints(m["kv_offsets"])
        self.o_offsets, self.stats_offsets = _ints(m["o_offsets"]), _ints(m["stats_offsets"])
        self.cu_seqlens_q, self.cu_seqlens_kv = _ints(m["cu_seqlens_q"]), _ints(m["cu_seqlens_kv"])
        self.cu_seqlens_q_padded, self.cu_seqlens_kv_padded = self.q_offsets, self.kv_offsets
        self.max_seqlen_q, self.max_seqlen_kv = int(m["max_seqlen"]["q"]), int(m["max_seqlen"]["kv"])
        self.pos0 = _ints([s["pos0"] for s in self.segments])  # q_causal_offsets, one per segment

    def key(self, name):
        """Case key `name` as a kernel is given it (meta.json's value at the key's path; scale and
        max_seqlen resolved): every key of docs/reference/meta-json.md that this case's meta.json carries."""
        return meta_key(self.meta, name)

    @property
    def line(self):
        """The canonical case line (what every report names the case by)."""
        return self._core.line

    def inputs(self):
        """The inputs as float32 arrays over one copy of the case's inputs (the same arrays on every call;
        they own that copy for as long as any of them lives). The verdict is computed against the case's
        own inputs, which no array reaches; writing these is caught: the next judge() is an ERROR naming
        the element, and the next call hands out a fresh copy (docs/threat-model.md)."""
        return self._core.inputs()

    def outputs(self):
        """Fresh output buffers filled with the sentinel (unwritten rows and pad-slot writes show)."""
        return self._core.outputs()

    # The exec: adapters' CaseDir interface (attn_oracle.adapters.protocol): input(name), output(name).
    def input(self, name):
        return self.inputs()[name]

    def output(self, name):
        return self.outputs()[name]

    def judge(self, outputs, explain=True, report_dir=None, vs="cpu-ref", name="python"):
        """The verdict of `outputs` (a mapping name -> array) on this case, judged in process on the same
        trial as the CLI: the inputs are checked unwritten, the reference runs, the comparators judge.
        explain: on a FAIL, run every bug model and say which reproduces it. report_dir: write
        report.json/.md/.xml/.html there."""
        if isinstance(outputs, dict):
            outputs = {k: _host(v) for k, v in outputs.items()}
        return Verdict(self._core.judge(outputs, explain, _dir("report_dir", report_dir), _text("vs", vs),
                                        _utf8(_text("name", name))))

    def run(self, kernel, explain=True, report_dir=None, vs="cpu-ref"):
        """kernel(case, inputs) on this case, as a backend: an exception is an ERROR, never a pass; the kernel
        gets its own copy of the inputs (a write to it is an ERROR naming the element), its outputs are
        copied once when it returns; a KeyboardInterrupt in it is raised here, with no verdict."""
        return Verdict(self._core.run(_wrap(kernel), kernel_name(kernel), explain, _dir("report_dir", report_dir),
                                      _text("vs", vs)))

    def check(self, outputs_or_kernel, **kw):
        """judge (outputs) or run (a callable) and raise AssertionError with message() unless it passed; a
        SKIPPED verdict skips the running pytest test (with its reason) instead, and a WEAK one marks it an
        expected failure (xfail, counted apart; a failure under --ao-strict)."""
        is_kernel = callable(outputs_or_kernel) or isinstance(outputs_or_kernel, str)
        v = self.run(outputs_or_kernel, **kw) if is_kernel else self.judge(outputs_or_kernel, **kw)
        _raise_unless_passed(v)
        return v

    def __repr__(self):
        return f"Case({self.line!r})"


# Weak verdicts met by check() in this process, [(case, reason)], and whether one fails (the pytest
# plugin's --ao-strict, as `attn-oracle gate --strict`): the plugin counts them apart in its summary.
weak_seen = []
strict_weak = False


def _raise_unless_passed(v):
    if v.verdict == "weak":  # never a pass: an expected failure in pytest (a failure under --ao-strict)
        weak_seen.append((v.case, v.reason))
        try:
            import pytest
        except ImportError:
            pytest = None
        if pytest is not None and not strict_weak:
            pytest.xfail(f"WEAK {v.case}: {v.reason}")
        raise AssertionError(v.message())
    if v.verdict == "skipped":
        try:
            import pytest
        except ImportError:
            pytest = None
        if pytest is not None:
            pytest.skip(f"{v.case}: {v.reason}")
    if not v.passed:
        raise AssertionError(v.message())


def _wrap(kernel):
    """The callable the core calls: outputs (torch tensors too) brought to host arrays. A registry spec (a
    str: "cpu-ref", "cpu-bug:<model>", "exec:...") goes to the core as it is, which runs it as the CLI does."""
    if isinstance(kernel, str):
        return kernel
    def call(case, inputs):
        out = kernel(case, inputs)
        return {k: _host(v) for k, v in out.items()} if isinstance(out, dict) else out
    return call


def _paths(corpus):
    return [_text("corpus", p, path=True) for p in ([corpus] if isinstance(corpus, (str, os.PathLike)) else corpus)]


def corpus_lines(corpus, max_mem_gib=8.0):
    """The case lines of corpus files or directories (*.case, recursively), validated, with their place:
    [(file, line_number, case_line, catches_claim)]."""
    return _core.corpus_cases(_paths(corpus), max_mem_gib)

def gate(kernel, corpus, explain=True, report_dir=None, vs="cpu-ref", max_mem_gib=8.0):
    """Every case of the corpus through kernel vs the reference, as `attn-oracle gate` runs them."""
    return GateResult(_core.gate(_wrap(kernel), kernel_name(kernel), _paths(corpus), explain,
                                 _dir("report_dir", report_dir), _text("vs", vs), max_mem_gib))

def fuzz(kernel, op=None, budget="20", seed=1, out=None, vs="cpu-ref", max_failures=0, dims="small",
         max_mem_gib=8.0, shrink_runs=300, confirm_runs=3, shard=0, shards=1):
    """A fuzz campaign through kernel (a callable, or a registry spec such as "cpu-bug:gqa-modulo"):
    generated cases (op: "sdpa", "indexer" or None for both), each failure confirmed (confirm_runs re-runs),
    shrunk (at most shrink_runs runs) and (with out=DIR) saved as a found file, as `attn-oracle fuzz` does
    (the same defaults). budget: "N" cases or a time ("30s"). shard/shards: this process runs case numbers
    shard, shard+shards, ... (`fuzz --shard i/n`); budget counts this shard's cases (attn_oracle.shards
    splits a whole campaign's budget)."""
    return FuzzResult(_core.fuzz(_wrap(kernel), kernel_name(kernel), _text("op", op or ""),
                                 _text("budget", budget if isinstance(budget, str) else str(budget)), seed,
                                 _dir("out", out), _text("vs", vs), max_failures, max_mem_gib, _text("dims", dims),
                                 shrink_runs, confirm_runs, int(shard), int(shards)))


def cases(*corpus, **kw):
    """pytest: parametrize a test over the corpus's case lines (the case line is the test id); the test
    takes the fixture `case` (an attn_oracle.Case). --ao-corpus replaces the paths given here."""
    import pytest
    return pytest.mark.ao_cases(*corpus, **kw)


def _slug(text):
    """A folder name for text: readable (its first 100 safe characters) and unique (a digest of the whole
    text), so two case lines that share their first characters never share a report folder."""
    digest = hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:12]
    return re.sub(r"[^A-Za-z0-9_.,=-]+", "_", text)[:100] + "-" + digest
