"""The adapters' registry against what the adapters do: every module of the package is listed with its ops,
passes, knobs and requirements; a declared knob is one the adapter's own command line takes; an adapter declines
(a named SKIP, never an answer) the ops it does not declare; the numpy adapters pass the ops and passes they
declare; a module that declares nothing is refused."""
import json
import os
import pkgutil
import subprocess
import sys

import pytest

import attn_oracle.adapters as adapters
from attn_oracle.adapters.registry import NOT_ADAPTERS, registry
from casedirs import AO, adapter_backend, repro

LINES = {("sdpa", "fwd"): "op=sdpa docs=37,20 pad=3 hq=4 hkv=2 dim=16 seed=21",
         ("sdpa", "bwd"): "op=sdpa pass=bwd docs=40,9 hq=2 dim=16 seed=22",
         ("indexer", "fwd"): "op=indexer docs=64,32 cp=2 rank=1 topk=8 seed=23",
         ("indexer", "bwd"): "op=indexer pass=bwd docs=64 topk=8 seed=24"}


def listing():
    r = subprocess.run([sys.executable, "-m", "attn_oracle.adapters", "list", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return {a["name"]: a for a in json.loads(r.stdout)}


def test_every_module_is_listed_with_its_declaration():
    modules = {m.name for m in pkgutil.iter_modules(adapters.__path__)} - NOT_ADAPTERS
    listed = listing()
    assert set(listed) == modules and len(modules) >= 7
    for a in listed.values():
        assert a["what"] and set(a["ops"]) <= {"sdpa", "indexer"} and a["ops"]
        assert set(a["passes"]) <= {"fwd", "bwd"} and a["passes"]
        assert a["command"] == f"exec:python3 -m attn_oracle.adapters.{a['name']}"
        flags = [k["flag"] for k in a["knobs"]]
        assert len(flags) == len(set(flags)) and all(f.startswith("--") for f in flags)
    text = subprocess.run([sys.executable, "-m", "attn_oracle.adapters", "list"], capture_output=True, text=True).stdout
    for name, a in listed.items():  # the human listing names each adapter and each of its knobs
        assert f"{name}: {a['what']}" in text
        assert all(k["flag"] in text for k in a["knobs"])


def test_knobs_are_the_adapters_own_arguments():
    # Each declared choice is accepted by the adapter's parser; a made-up one is refused (exit 2, argparse).
    for a in registry().values():
        ap = a.module.arguments()
        for k in a.knobs():
            for c in (k["choices"] if isinstance(k["choices"], list) else []):
                ap.parse_args([k["flag"], str(c), "case_dir"])
        with pytest.raises(SystemExit):
            ap.parse_args(["--no-such-knob", "case_dir"])


def test_undeclared_ops_are_declined_by_name():
    if not os.access(AO, os.X_OK):
        pytest.skip(f"no attn-oracle CLI at {AO} (set AO_CLI)")
    for a in registry().values():
        for op in {"sdpa", "indexer"} - set(a.ops):
            r = repro(LINES[(op, "fwd")], adapter_backend(f"attn_oracle.adapters.{a.name}"))
            # repro's exit for a skip is 125 (git bisect's "skip"); the reason is the adapter's own.
            assert r.returncode == 125 and "verdict: SKIPPED" in r.stdout and f"{a.name}:" in r.stdout, \
                f"{a.name} {op}\n{r.stdout}{r.stderr}"


def test_numpy_adapters_pass_what_they_declare():
    if not os.access(AO, os.X_OK):
        pytest.skip(f"no attn-oracle CLI at {AO} (set AO_CLI)")
    runnable = [a for a in registry().values() if not a.missing() and set(a.requires) <= {"numpy"}]
    assert {a.name for a in runnable} >= {"numpy_ref", "numpy_sdpa_fp32"}
    for a in runnable:
        for op in a.ops:
            for p in a.passes:
                r = repro(LINES[(op, p)], adapter_backend(f"attn_oracle.adapters.{a.name}"))
                assert r.returncode == 0 and "verdict: PASS" in r.stdout, f"{a.name} {op} {p}\n{r.stdout}{r.stderr}"


def test_probe_says_what_is_missing():
    r = subprocess.run([sys.executable, "-m", "attn_oracle.adapters", "probe", "numpy_ref"], capture_output=True, text=True)
    assert r.returncode == 0 and "numpy_ref: runs here" in r.stdout
    r = subprocess.run([sys.executable, "-m", "attn_oracle.adapters", "probe", "no_such"], capture_output=True, text=True)
    assert r.returncode == 2 and "no adapter 'no_such'" in r.stderr


def test_a_module_without_a_declaration_is_refused(tmp_path, monkeypatch):
    (tmp_path / "undeclared.py").write_text("def run(argv):\n    return 0\n")
    monkeypatch.setattr(adapters, "__path__", list(adapters.__path__) + [str(tmp_path)])
    with pytest.raises(RuntimeError, match="declares ADAPTER"):
        registry()


def test_the_protocol_and_the_registry_import_without_the_extension():
    # sys.modules[name] = None makes any import of the compiled extension fail: the exec: side of an adapter,
    # the registry and the verdict classes must not need it (a kernel machine may have only numpy).
    code = ("import sys; sys.modules['attn_oracle._core'] = None\n"
            "import attn_oracle.adapters.protocol, attn_oracle.verdict\n"
            "from attn_oracle.adapters import registry\n"
            "assert len(registry()) >= 7\n"
            "try:\n    import attn_oracle.case\nexcept ImportError:\n    print('extension needed only by the check')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "extension needed only by the check" in r.stdout, r.stdout + r.stderr
