"""The `exec:` protocol for adapters (protocol 1; see oracle/include/attn_oracle/backends/external.h).

An adapter's kernel call is a plain function `kernel(case, inputs) -> outputs` (inputs and outputs:
dicts of arrays by name); one code path serves both ways of running it:
  * in process: `attn_oracle.Case(...).run(kernel)`, `attn_oracle.gate(kernel, ...)`, the pytest plugin
    (python/attn_oracle/), where `case` is an attn_oracle.Case;
  * exec:, unchanged: `main(kernel, argv)` reads the case directory into a CaseDir, calls the kernel on its
    inputs and saves what it returns.
Both cases offer `.meta` (meta.json's fields) and `output(name)` (a fresh sentinel buffer); a kernel reads
the layout through `CaseMeta.of(case)` and declines a case with `skip(reason)`.

    case = CaseDir(sys.argv[1])      # meta.json, inputs decoded to float32 (bf16 bits -> float32)
    o = case.output("o")             # the pre-poisoned buffer (write valid rows only)
    ...
    case.save("o", o)                # checks dtype and shape against meta.json

Only numpy is needed. Segments give each run of query rows with its causal offset (pos0); rows
i >= valid of a segment are pad rows.
"""
import json
import os
import sys

import numpy as np


# The meta.json paths of the case keys written inside an object (dims, cp, max_seqlen); every other key a
# kernel is given sits at the top level under its own name. The key table declares the paths (`attn-oracle
# keys --json`, docs/reference/meta-json.md); python/tests/test_case_meta.py holds this map to it.
META_PATHS = {
    "cp": ("cp", "size"), "rank": ("cp", "rank"), "cp_scheme": ("cp", "scheme"), "crop": ("cp", "crop"),
    "max_seqlen_q": ("max_seqlen", "q"), "max_seqlen_kv": ("max_seqlen", "kv"),
    "heads": ("dims", "heads"), "hq": ("dims", "hq"), "hkv": ("dims", "hkv"), "dim": ("dims", "dim"),
    "dim_v": ("dims", "dim_v"), "topk": ("dims", "topk"), "ratio": ("dims", "ratio"),
}


def meta_key(meta, name):
    """The value of case key `name` as a kernel is given it (scale and max_seqlen resolved, enums by name),
    read from meta.json at the key's path. KeyError naming the key where this case's meta.json does not
    carry it (a key of the other op, loss_mean outside pass=bwd, a key no kernel is given)."""
    path = META_PATHS.get(name, (name,))
    v = meta
    for part in path:
        if not isinstance(v, dict) or part not in v:
            raise KeyError(f"case key {name!r}: this case's meta.json has no {'.'.join(path)} (the keys a kernel "
                           "is given, and for which cases: docs/reference/meta-json.md)")
        v = v[part]
    return v


class CaseMeta:
    """The case as an adapter reads it: meta.json's fields (an exec: case directory's, or an
    attn_oracle.Case's `.meta` in process)."""

    @staticmethod
    def of(case):
        return case if isinstance(case, CaseMeta) else CaseMeta(case.meta)

    def __init__(self, meta):
        self.meta = meta
        if self.meta.get("protocol") != 1:
            raise SystemExit(f"ao_exec: unsupported protocol {self.meta.get('protocol')}")
        self.op = self.meta["op"]
        self.dims = self.meta["dims"]
        self.docs = self.meta["docs"]
        self.segments = self.meta["segments"]
        self.scale = float(self.meta["scale"])
        self.mask = self.meta["mask"]
        self.window = int(self.meta["window"])
        self.window_right = int(self.meta.get("window_right", 0))
        self.window_convention = self.meta.get("window_convention", "cudnn")

    def key(self, name):
        """Case key `name` as the kernel is given it (meta_key)."""
        return meta_key(self.meta, name)

    def valid_q_rows(self):
        """Q buffer rows holding a valid token, in segment order."""
        return [int(s["row0"]) + i for s in self.segments for i in range(int(s["valid"]))]

    def valid_kv_rows(self):
        """K/V buffer rows holding a document's key, in document order."""
        return [int(d["kv_off"]) + j for d in self.docs for j in range(int(d["kv_len"]))]

    def allowed_hi_lo(self, doc, p):
        """Allowed keys [lo, hi) in document coordinates for a row at position p (Layout::allowed_range in oracle/layout/layout.cpp)."""
        kv = self.docs[doc]["kv_len"]
        if self.mask == "none":
            return 0, kv
        if self.op == "indexer":
            r = int(self.dims["ratio"])
            return 0, int(min(max((p + 1) // r, 0), kv))
        return window_band(self.window_convention, kv, p, self.window, self.window_right)


class CaseDir(CaseMeta):
    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "meta.json")) as f:
            super().__init__(json.load(f))

    def inputs(self):
        """Every input tensor as float32, by name."""
        return {name: self.input(name) for name in self.meta["inputs"]}

    def input(self, name):
        """Input tensor as float32 (exactly the values the oracle's reference sees); an index tensor as int32."""
        t = self.meta["inputs"][name]
        a = np.load(os.path.join(self.path, t["file"]))
        if t["stored_as"] == "<i4":  # indices (the backward's top-k) stay int32
            return a
        if t["stored_as"] == "<u2":  # bf16 bit patterns
            a = (a.astype(np.uint32) << 16).view(np.float32)
        return a.astype(np.float32, copy=False)

    def raw_input(self, name):
        """Input tensor as stored (uint16 bf16 bits, float16 or float32)."""
        return np.load(os.path.join(self.path, self.meta["inputs"][name]["file"]))

    def outputs(self):
        """Every pre-poisoned output buffer, by name."""
        return {name: self.output(name) for name in self.meta["outputs"]}

    def output(self, name):
        """The pre-poisoned output buffer (sentinel everywhere)."""
        return np.load(os.path.join(self.path, self.meta["outputs"][name]["file"]))

    def save(self, name, a):
        o = self.meta["outputs"][name]
        want = np.dtype(o["dtype"])
        if a.dtype != want or list(a.shape) != list(o["shape"]):
            raise SystemExit(f"ao_exec: {name} must be {want} {o['shape']}, got {a.dtype} {list(a.shape)}")
        np.save(os.path.join(self.path, o["file"]), np.ascontiguousarray(a))


def as_stored(a, dtype):
    """A float32 input holding `dtype`'s values exactly, as that dtype stores it (bf16: its bit patterns as
    uint16; fp16: float16; fp32: as is): what CaseDir.raw_input reads from an exec: case directory."""
    if dtype == "bf16":
        return (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dtype == "fp16":
        return np.asarray(a).astype(np.float16)
    return np.asarray(a, dtype=np.float32)


def stored_input(case, inputs, name):
    """Input `name` in the case's dtype as stored, for a kernel that takes the dtype's own elements: the
    case directory's file under exec:, the float32 array converted back (exactly) in process."""
    if hasattr(case, "raw_input"):
        return case.raw_input(name)
    return as_stored(inputs[name], case.meta["dtype"])


def main(kernel, argv, **kw):
    """The exec: wrapper of a kernel function: the case directory (argv[0]) in, its outputs saved.
    A skip() exits 125 with the reason on stderr (the protocol's skip)."""
    case = CaseDir(argv[0])
    for name, a in kernel(case, case.inputs(), **kw).items():
        case.save(name, np.asarray(a))
    return 0


def window_band(convention, kv, p, left, right):
    """The SDPA window band (lo, hi) of a row at position p among kv keys for the bounds (left, right),
    -1 = unbounded: a port of sdpa_window_band in oracle/layout/layout.cpp (same semantics)."""
    fa = convention == "fa"
    hi = kv if right < 0 else int(min(max(p + 1 + right, 0), kv))
    lo = 0
    if left > 0 or (left == 0 and fa):
        lo = int(min(max(p - left if fa else p - left + 1, 0), hi))
    return lo, hi


def log_timing(adapter, seconds, **extra):
    """Appends one JSON line to $AO_TIMING_LOG (if set): the adapter's own kernel time."""
    path = os.environ.get("AO_TIMING_LOG")
    if not path:
        return
    rec = {"adapter": adapter, "seconds": seconds}
    rec.update(extra)
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def unmapped_window_reason(meta, name):
    """Why an adapter that maps only causal / cuDNN-length windows cannot serve this case's band, or None."""
    if int(meta.get("window_right", 0)) != 0:
        return f"{name}: window_right={meta['window_right']} (a two-sided band) is not mapped by this adapter"
    if meta.get("window_convention", "cudnn") != "cudnn":
        return f"{name}: window_convention={meta['window_convention']} is not mapped by this adapter"
    return None


class Skip(SystemExit):
    """A declined case: under exec: the process exits 125 (the protocol's skip); in process the verdict is
    SKIPPED with skip_reason (attn_oracle reads that attribute)."""

    def __init__(self, reason):
        super().__init__(125)
        self.skip_reason = reason


def skip(reason):
    """Protocol: exit 125 = skipped, the last stderr line is the reason (in process: SKIPPED, the reason)."""
    print(reason, file=sys.stderr)
    raise Skip(reason)


def import_torch(adapter, device=None):
    """torch, else a skip naming the adapter: without torch the kernel did not run (never an error); with
    device "cuda", a skip too when no CUDA device is there."""
    try:
        import torch
    except ImportError as e:
        skip(f"{adapter}: torch does not import ({e})")
    if device == "cuda" and not torch.cuda.is_available():
        skip(f"{adapter}: no CUDA device")
    return torch


def cuda_torch(adapter, decline=None, meta=None):
    """torch, with a CUDA device, else a skip naming the adapter (torch not importable is a skip too: the
    kernel did not run). decline(meta, arch_major): the adapter's declines that depend on the device's
    architecture (a kernel built for some majors only), a skip too."""
    torch = import_torch(adapter, "cuda")
    if decline is not None:
        reason = decline(meta, torch.cuda.get_device_capability()[0])
        if reason:
            skip(reason)
    return torch


def add_site_dir(adapter):
    """AO_SITE_DIR (the device campaigns' unpacked wheels) first on sys.path, its .pth files run (the CuTe
    DSL's puts dsl_packages on the path), so that an image's own copy cannot shadow it."""
    site_dir = os.environ.get("AO_SITE_DIR")
    if site_dir:
        if not os.path.isdir(site_dir):
            raise SystemExit(f"{adapter}: AO_SITE_DIR={site_dir} is not a directory")
        import site
        if site_dir not in sys.path:
            sys.path.insert(0, site_dir)
        site.addsitedir(site_dir)
