"""Campaigns split into shards (attn_oracle.shards) and processes sharing a found folder: each failure
signature saved once, whoever saves it first; a found file made elsewhere saved the same way."""
import os

import pytest

import attn_oracle
from attn_oracle import _core, shards
from attn_oracle.adapters import numpy_ref

CAMPAIGN = dict(op="sdpa", dims="tiny", seed=5, shrink_runs=10, confirm_runs=1)


def signatures(folder):
    return [line for p in sorted(os.listdir(folder)) for line in open(os.path.join(folder, p))
            if line.startswith("# signature:")]


def test_a_signature_another_campaign_saved_meanwhile_is_known(tmp_path):
    """Shard 1 runs (as another process would) while shard 0 is under way, after shard 0 read the folder:
    shard 0 finds a signature of shard 1's with another shrunk line, and names shard 1's file."""
    other = {}

    def kernel(case, inputs):
        if not other:
            other.update(attn_oracle.fuzz(numpy_ref.planted_bug, budget=12, out=tmp_path, shard=1, shards=2,
                                          **CAMPAIGN))
        return numpy_ref.planted_bug(case, inputs)

    kernel.ao_name = attn_oracle.kernel_name(numpy_ref.planted_bug)  # the same signatures as shard 1's
    mine = attn_oracle.fuzz(kernel, budget=12, out=tmp_path, shard=0, shards=2, **CAMPAIGN)
    theirs = {f["signature"]: f for f in other["found"]}
    shared = [f for f in mine["found"] if f["signature"] in theirs]
    assert any(f["shrunk"] != theirs[f["signature"]]["shrunk"] for f in shared), "the case this test needs"
    for f in shared:
        assert f["already_known"] and f["file"] == theirs[f["signature"]]["file"]
    sigs = signatures(tmp_path)
    assert len(sigs) == len(set(sigs)) == len({f["signature"] for f in mine["found"] + other["found"]})


def test_a_found_file_made_elsewhere_is_saved_once(tmp_path):
    r = attn_oracle.fuzz("cpu-bug:gqa-modulo", budget=12, **CAMPAIGN)
    assert r["found"] and all(f["file"] is None for f in r["found"])  # no folder: only the text
    saved = shards.save_found(tmp_path, [dict(f) for f in r["found"]])
    assert not any(f["already_known"] for f in saved) and all(os.path.exists(f["file"]) for f in saved)
    again = shards.save_found(tmp_path, [dict(f) for f in r["found"]])
    assert all(f["already_known"] for f in again) and [f["file"] for f in again] == [f["file"] for f in saved]
    assert len(signatures(tmp_path)) == len(r["found"])
    with pytest.raises(ValueError, match="found file"):
        _core.save_found_text(str(tmp_path), "op=sdpa docs=4\n")  # no signature: not a found file


def test_shard_budgets_cover_the_budget_whatever_the_split():
    for n in (1, 2, 3, 7, 25, 40):
        shares = [int(shards.shard_budget(25, i, n)) for i in range(n)]
        assert sum(shares) == 25 and shares == [len(range(i, 25, n)) for i in range(n)]
    assert shards.shard_budget("30s", 1, 4) == "30s"
    with pytest.raises(ValueError, match="shard"):
        shards.shard_budget(10, 2, 2)
