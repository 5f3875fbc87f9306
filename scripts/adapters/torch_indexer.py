#!/usr/bin/env python3
"""A shim: runs attn_oracle.adapters.torch_indexer (python/attn_oracle/adapters/torch_indexer.py) from the repository's package,
so that `exec:` specs and found files' `# backend:` lines that name this path keep working; imported (this
folder on sys.path, as older tests did), it is that module."""
import importlib
import os
import runpy
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python"))
if __name__ == "__main__":
    runpy.run_module("attn_oracle.adapters.torch_indexer", run_name="__main__", alter_sys=True)
else:
    sys.modules[__name__] = importlib.import_module("attn_oracle.adapters.torch_indexer")
