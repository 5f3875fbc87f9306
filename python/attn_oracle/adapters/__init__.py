"""Adapters: how a kernel of a framework or library is run on an attn-oracle case, in process (a
`kernel(case, inputs)` callable) or through `exec:` (`python3 -m attn_oracle.adapters.<name> CASE_DIR`).

    python -m attn_oracle.adapters list            # every adapter: ops, passes, knobs, requirements
    attn-oracle repro op=sdpa lens=3,2,4 --backend "exec:python3 -m attn_oracle.adapters.numpy_ref"

`protocol` is the exec: protocol (a case directory's meta.json, inputs and outputs; skips), `serve`/`client`
the warm host, `registry` the declarations. Nothing here needs the compiled extension.
"""
from .registry import Adapter, find, registry

__all__ = ["Adapter", "find", "registry"]
