"""The adapters' registry. Each adapter is one module of this package that declares `ADAPTER = Adapter(...)`
and an `arguments()` parser (its knobs); the registry finds them (every module but the protocol, the warm host
and the registry itself), so adding an adapter is adding its module. What lists, runs, probes or packs an
adapter (`python -m attn_oracle.adapters`, the warm host, the device runner) reads it from here.

Only the standard library at import time: listing the adapters imports their modules, which import numpy
and nothing heavier at module level (torch, cuDNN, FA4 are imported where a case is served)."""
import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass

# The package's modules that are not adapters.
NOT_ADAPTERS = frozenset({"protocol", "serve", "client", "registry", "__main__"})


@dataclass(frozen=True)
class Adapter:
    """One adapter's declaration. name: its module (and registry) name; what: one line; ops, passes: what it
    serves ("sdpa"/"indexer", "fwd"/"bwd"; anything else it declines with a skip); requires: what must be there
    for it to run a case: importable modules, "cuda" for a CUDA device; wheels: the pinned PyPI wheels that
    provide those modules (what a device run carries); kernel: the module's in-process callable
    kernel(case, inputs, **knobs) ("" where it has none: exec: only)."""
    name: str
    what: str
    ops: tuple
    passes: tuple
    requires: tuple = ()
    wheels: tuple = ()
    kernel: str = "kernel"

    @property
    def module(self):
        return importlib.import_module(f"{__package__}.{self.name}")

    def knobs(self):
        """The adapter's knobs from its own parser: [{flag, choices, default, help}] (the case directory left out)."""
        out = []
        for act in self.module.arguments()._actions:
            if not act.option_strings or "-h" in act.option_strings:
                continue
            flag = max(act.option_strings, key=len)
            choices = list(act.choices) if act.choices else (None if act.nargs == 0 else act.type.__name__ if act.type else "str")
            out.append({"flag": flag, "choices": choices, "default": act.default, "help": act.help or ""})
        return out

    def command(self, python="python3", knobs=""):
        """The exec: backend spec that runs this adapter with `python` (knobs: its flags, as one string)."""
        return f"exec:{python} -m {__package__}.{self.name}" + (f" {knobs}" if knobs else "")

    def callable(self):
        """The in-process kernel, or None where the adapter has none."""
        return getattr(self.module, self.kernel) if self.kernel else None

    def missing(self):
        """What of `requires` is missing here (a list of reasons; empty: it can run a case). Imports are only
        looked up (find_spec) except torch, which is imported to ask for a CUDA device."""
        why = []
        for r in self.requires:
            if r == "cuda":
                try:
                    import torch
                    if not torch.cuda.is_available():
                        why.append("no CUDA device")
                except ImportError:
                    why.append("no CUDA device (torch does not import)")
            elif _find(r) is None:
                why.append(f"{r} does not import")
        return why

    def as_json(self):
        return {"name": self.name, "what": self.what, "ops": list(self.ops), "passes": list(self.passes),
                "requires": list(self.requires), "wheels": list(self.wheels), "kernel": self.kernel,
                "knobs": self.knobs(), "command": self.command()}


def _find(module):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def registry():
    """Every adapter of the package, by name (sorted)."""
    pkg = importlib.import_module(__package__)
    found = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name in NOT_ADAPTERS or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__package__}.{info.name}")
        entry = getattr(mod, "ADAPTER", None)
        if not isinstance(entry, Adapter):
            raise RuntimeError(f"{mod.__name__}: an adapter module declares ADAPTER = Adapter(...)")
        if entry.name != info.name:
            raise RuntimeError(f"{mod.__name__}: ADAPTER.name is {entry.name!r}, its module is {info.name!r}")
        found[entry.name] = entry
    return dict(sorted(found.items()))


def find(name):
    """The adapter called `name` (its module name; the old script name `<name>.py` is accepted too)."""
    name = name[:-3] if name.endswith(".py") else name
    adapters = registry()
    if name not in adapters:
        raise KeyError(f"no adapter {name!r} (known: {', '.join(adapters)})")
    return adapters[name]
