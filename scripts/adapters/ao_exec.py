"""A shim: the exec: protocol helpers are attn_oracle.adapters.protocol (python/attn_oracle/adapters/protocol.py);
an adapter written against this module's old name (`from ao_exec import CaseDir, skip`) keeps working."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python"))
from attn_oracle.adapters.protocol import *  # noqa: E402,F401,F403
