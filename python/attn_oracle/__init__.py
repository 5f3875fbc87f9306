"""attn-oracle in process: the C++ core (case lines, layouts, inputs, exact references, comparators,
bug-model explanations, fuzz campaigns) bound for Python, and a pytest plugin.

    import attn_oracle as ao
    case = ao.Case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=8 dim=128")
    q, k, v = (case.inputs()[n] for n in "qkv")      # float32 arrays over the case's copy of its inputs
    verdict = case.judge(my_kernel(case, case.inputs()))
    assert verdict, verdict.message()

A kernel is a callable ``kernel(case, inputs) -> outputs``: ``inputs`` maps "q", "k", "v" (indexer: "q",
"w", "k") to float32 arrays, ``outputs`` maps "o", "lse" (indexer: "topk", optional "scores") to arrays
shaped as ``case.outputs()`` gives them (float32 / int32; numpy, or anything with DLPack or the buffer
protocol, torch tensors on any device). Raise ``Skip(reason)`` for a case the kernel does not serve.
"""
# This module is only the package's face: the names below load the C++ extension on first use, so that the
# pure-Python parts (attn_oracle.verdict, attn_oracle.adapters and its exec: protocol) import without it.
import importlib

__all__ = ["Case", "Verdict", "Skip", "BadInput", "CaseFileError", "ReportDirError", "gate", "fuzz", "cases",
           "corpus_lines", "kernel_name"]

# Where each public name lives.
_HOME = {
    "Case": "case", "Skip": "case", "gate": "case", "fuzz": "case", "cases": "case", "corpus_lines": "case",
    "kernel_name": "case", "weak_seen": "case",
    "Verdict": "verdict", "Metric": "verdict", "GateResult": "verdict", "FuzzResult": "verdict",
    "BadInput": "_core", "CaseFileError": "_core", "ReportDirError": "_core",
}


def __getattr__(name):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'attn_oracle' has no attribute {name!r}")
    return getattr(importlib.import_module("." + home, __name__), name)


def __dir__():
    return sorted(set(globals()) | set(_HOME))
