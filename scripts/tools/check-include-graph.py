#!/usr/bin/env python3
"""The include graph follows the pipeline (docs/architecture.md): a module includes only modules of a lower
rank, across modules only through module-scoped paths ("attn_oracle/<module>/x.h"), and nothing in the core
(oracle/) reaches app/, fuzz/, report/ or gpu_backends/. Exit 1 with every offending line, 0 when clean.

  usage: check-include-graph.py [REPO_ROOT]     (CTest: include_graph)
"""
import os
import re
import sys

from repo_check import finish, repo_files, repo_root  # this folder: sys.path[0] of a script it holds

# Rank order of the pipeline; an edge must go to a strictly lower rank. Equal ranks may not include each
# other (fuzz, report and gpu_backends are siblings above the core; only app/ sees them all).
RANK = {
    "oracle/internal": 0,
    "oracle/case": 1,
    "oracle/layout": 2,
    "oracle/inputs": 3,
    "oracle/reference": 4,
    "oracle/verdict": 5,  # Metric and Verdict types: the comparators return them
    "oracle/compare": 6,
    "oracle/backends": 7,
    "oracle/pipeline": 8,
    "fuzz": 9,
    "report": 9,
    "gpu_backends": 9,
    "app": 10,
}
# A scoped include "attn_oracle/<scope>/..." names its module.
SCOPE = {"fuzz": "fuzz", "report": "report", "gpu": "gpu_backends"}


def module_of(path):
    p = path.split("/")
    if p[0] == "oracle":
        if p[1] == "include":
            return "oracle/" + p[3] if len(p) > 4 else None
        if p[1] == "tests":
            return None  # test support may include anything below app/
        return "oracle/" + p[1]
    if p[0] in ("fuzz", "report", "gpu_backends", "app"):
        return p[0]
    return None  # bench/: benchmarks may include anything below app/


def target_of(inc):
    m = re.match(r"attn_oracle/([a-z_]+)/", inc)
    if not m:
        return None
    s = m.group(1)
    return SCOPE.get(s, "oracle/" + s)


def main():
    root = repo_root(sys.argv)
    files = repo_files(root, ("oracle", "app", "fuzz", "report", "gpu_backends", "bench"))
    bad = []
    edges = 0
    for f in files:
        if not f.endswith((".cpp", ".h", ".cu", ".cuh")):
            continue
        src = module_of(f)
        # Tests, fuzz targets and benchmarks are white-box: they may use test support and private headers.
        is_test = "/tests/" in f or "/targets/" in f or src is None
        for n, line in enumerate(open(os.path.join(root, f), encoding="utf-8", errors="replace"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            dst = target_of(inc)
            if dst is None:
                # Unscoped: must be a file beside the includer (a module's private header) or a test helper.
                here = os.path.normpath(os.path.join(os.path.dirname(f), inc))
                if not os.path.exists(os.path.join(root, here)) and src in ("gpu_backends", "fuzz", "app"):
                    here = os.path.join(src, inc)  # the module's own folder is on its include path
                if os.path.exists(os.path.join(root, here)):
                    if not inc.startswith(".."):
                        continue
                    dst = module_of(here)
                    if dst is None or dst == src or is_test:
                        continue
                    bad.append(f"{f}:{n}: reaches into {dst} by a relative path: {inc} (include it scoped)")
                    continue
                if is_test:
                    continue
                bad.append(f"{f}:{n}: unscoped include not beside the file: {inc}")
                continue
            if dst not in RANK:
                bad.append(f"{f}:{n}: unknown module {dst} in {inc}")
                continue
            if src is None or dst == src:
                continue
            edges += 1
            if is_test:
                if src != "app" and RANK[dst] >= RANK["app"]:
                    bad.append(f"{f}:{n}: a {src} test includes app/: {inc}")
                continue
            if RANK[dst] >= RANK[src]:
                bad.append(f"{f}:{n}: {src} (rank {RANK[src]}) includes {dst} (rank {RANK[dst]}): {inc}")
    return finish(bad, f"include graph: {edges} cross-module includes, {len(bad)} violations")


if __name__ == "__main__":
    sys.exit(main())
