"""Every case key a kernel is given reaches Python: the key table (`attn-oracle keys --json`: each key's
meta.json path, the ops and pass whose meta.json carries it) against a meta.json the CLI writes for exec:,
`attn_oracle.Case.key` (in process) and the adapters' `CaseMeta.key` (attn_oracle.adapters.protocol).
A key declared at a path that Python cannot find it at (a nested path missing from META_PATHS) fails here.

  scripts/tools/py-test.sh -k case_meta
"""
import json
import os
import subprocess

import pytest

import attn_oracle
from attn_oracle.adapters.protocol import META_PATHS, CaseDir, CaseMeta

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Both ops and passes, CP, and the kernel-visible keys away from their defaults.
LINES = [
    "op=indexer docs=64,32 heads=2 dim=8 topk=4 ratio=2 mask=topleft ties=strict dtype=fp16 poison=large "
    "pad_writes=allow max_seqlen_q=80 seed=3",
    "op=indexer pass=bwd docs=32 heads=2 dim=8 topk=4 loss_mean=valid grad_pad=zero seed=4",
    "op=sdpa docs=16,8 hq=4 hkv=2 dim=8 dim_v=16 window=3 window_right=2 window_convention=fa num_splits=2 "
    "empty_rows=posinf max_seqlen_kv=24 scale=0.5 poison=inf seed=5",
    "op=sdpa pass=bwd docs=16 hq=2 dim=8 cp=2 rank=1 cp_scheme=contiguous crop=1 mask=topleft grad_pad=zero seed=6",
]


def cli():
    for c in (os.environ.get("AO_CLI"), os.path.join(ROOT, "build", "attn-oracle")):
        if c and os.access(c, os.X_OK):
            return c
    pytest.skip("no build/attn-oracle (set AO_CLI): the key table comes from `attn-oracle keys --json`")


@pytest.fixture(scope="module")
def table():
    r = subprocess.run([cli(), "keys", "--json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def carried(key, case):
    """Whether the case's meta.json carries the key (the table's meta_ops and meta_pass)."""
    return (key["meta"] is not None and key["meta_ops"] in ("both", case.op)
            and key["meta_pass"] in (None, case.meta["pass"]))


def at_path(meta, path):
    v = meta
    for part in path.split("."):
        v = v[part]
    return v


def exec_meta(case, tmp_path):
    """The meta.json exec: writes for the case (the CLI's own case directory, copied by the command)."""
    keep = tmp_path / "dir"
    r = subprocess.run([cli(), "repro", *case.line.split(), "--backend", f"exec:cp -r \"$AO_CASE_DIR\" {keep}; false",
                        "--no-explain"], capture_output=True, text=True)
    assert (keep / "meta.json").exists(), r.stdout + r.stderr
    return CaseDir(str(keep))


def test_meta_paths_are_the_tables(table):
    declared = {k["name"]: tuple(k["meta"].split(".")) for k in table["keys"] if k["meta"]}
    for name, path in declared.items():
        assert META_PATHS.get(name, (name,)) == path, (
            f"case key {name} is at meta.json {'.'.join(path)}: META_PATHS (attn_oracle/adapters/protocol.py) "
            f"says {'.'.join(META_PATHS.get(name, (name,)))}")
    for name in META_PATHS:
        assert name in declared, f"META_PATHS names {name}, which no case key of the table writes into meta.json"


@pytest.mark.parametrize("line", LINES, ids=LINES)
def test_case_and_case_meta_read_every_kernel_key(line, table, tmp_path):
    case = attn_oracle.Case(line)
    d = exec_meta(case, tmp_path)
    for field in ("inputs", "outputs", "sentinel"):  # the case directory's own
        d.meta.pop(field)
    assert d.meta == case.meta  # in process and exec: alike
    adapter = CaseMeta.of(d)
    seen = 0
    for k in table["keys"]:
        name = k["name"]
        if not carried(k, case):
            if k["meta"] is not None:
                with pytest.raises(KeyError, match=name):
                    case.key(name)
            continue
        value = at_path(d.meta, k["meta"])  # the CLI's meta.json has it where the table says
        assert case.key(name) == value, f"Case.key({name!r})"
        assert adapter.key(name) == value, f"CaseMeta.key({name!r})"
        seen += 1
    assert seen >= 15


def test_meta_json_has_a_table_entry_for_every_field(table, tmp_path):
    """Every top-level field of meta.json is a case key's (its path's first part) or a layout field, both
    listed in docs/reference/meta-json.md."""
    names = {k["meta"].split(".")[0] for k in table["keys"] if k["meta"]}
    names |= {f["name"] for f in table["meta_layout_fields"]}
    for i, line in enumerate(LINES):
        (tmp_path / str(i)).mkdir()
        d = exec_meta(attn_oracle.Case(line), tmp_path / str(i))
        missing = set(d.meta) - names
        assert not missing, f"meta.json fields no table lists: {sorted(missing)}"


def test_an_unknown_key_is_a_key_error_naming_it():
    case = attn_oracle.Case(LINES[0])
    with pytest.raises(KeyError, match="seed"):
        case.key("seed")  # the inputs' generator: no kernel is given it
