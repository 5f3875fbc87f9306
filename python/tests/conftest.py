"""The adapters' exec: runs (`python -m attn_oracle.adapters.<name>` started by the CLI) import the repository's
package: its python/ folder leads their PYTHONPATH (this process imports the installed package as it is).

The hostile battery's mode (hostile/): its option and marker are declared here, where every run over python/tests
or a folder below it reads them; hostile/conftest.py deselects the hostile_full attacks without --hostile-full."""
import os

_PYTHON = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_PYTHON, os.environ.get("PYTHONPATH")) if p)


def pytest_addoption(parser):
    parser.addoption("--hostile-full", action="store_true",
                     help="the hostile battery's full mode: every attack (the default run is its quick subset)")


def pytest_configure(config):
    config.addinivalue_line("markers", "hostile_full: a hostile-battery attack only the full mode runs "
                                       "(--hostile-full, or -m hostile_full for these alone)")
