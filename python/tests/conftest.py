"""The adapters' exec: runs (`python -m attn_oracle.adapters.<name>` started by the CLI) import the repository's
package: its python/ folder leads their PYTHONPATH (this process imports the installed package as it is)."""
import os

_PYTHON = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_PYTHON, os.environ.get("PYTHONPATH")) if p)
