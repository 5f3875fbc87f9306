"""Fuzz campaigns as Ray tasks (attn_oracle.ray_campaign) on a local Ray cluster this module starts: the merged
campaign is the single process's campaign of the same seed, and a worker killed mid-campaign loses no found
case (Ray re-runs its shard) or, with no retry left, is reported, never dropped."""
import os
import signal

import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra, not installed (pip install '.[ray]')")

import attn_oracle  # noqa: E402
from attn_oracle import ray_campaign  # noqa: E402
from attn_oracle.adapters import numpy_ref  # noqa: E402

CAMPAIGN = dict(op="sdpa", dims="tiny", seed=5, shrink_runs=60, confirm_runs=1)
BUDGET = 24


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def found_key(r):
    """Each signature's kept case and merge count (one process lists them by first sight, a merge by case number)."""
    return sorted((f["signature"], f["shrunk"], f["merged"]) for f in r["found"])


def test_merged_campaign_is_the_single_process_campaign(cluster, tmp_path):
    single = attn_oracle.fuzz("cpu-bug:gqa-modulo", budget=BUDGET, out=tmp_path / "one", **CAMPAIGN)
    merged = ray_campaign.fuzz("cpu-bug:gqa-modulo", shards=3, budget=BUDGET, out=tmp_path / "ray",
                               progress=None, **CAMPAIGN)
    assert merged["lost_shards"] == {}
    for k in ("cases", "passed", "failed", "skipped", "weak", "invalid"):
        assert merged[k] == single[k], k
    assert single["found"] and found_key(merged) == found_key(single)
    # Saved by the driver, once per signature, the same files the single process wrote.
    assert sorted(p.name for p in (tmp_path / "ray").glob("*.case")) == \
           sorted(p.name for p in (tmp_path / "one").glob("*.case"))
    again = ray_campaign.fuzz("cpu-bug:gqa-modulo", shards=2, budget=BUDGET, out=tmp_path / "ray", progress=None,
                              **CAMPAIGN)
    assert all(f["already_known"] for f in again["found"]) and found_key(again) == found_key(single)
    assert len(list((tmp_path / "ray").glob("*.case"))) == len(single["found"])


def dying_kernel(marker, after):
    """numpy_ref's planted bug, which kills its own process (SIGKILL: a worker lost mid-campaign) at its
    `after`-th call, once across the campaign (the first process to get there leaves `marker`)."""
    calls = [0]

    def kernel(case, inputs):
        calls[0] += 1
        if calls[0] == after and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return numpy_ref.planted_bug(case, inputs)

    kernel.ao_name = "numpy_ref:bug=topleft-cp"  # one name in every process: the failure signatures match
    return kernel


KILL_CAMPAIGN = dict(CAMPAIGN, shrink_runs=10)  # numpy_ref runs in Python: fewer shrink runs keep it seconds


def test_a_killed_worker_loses_no_found_case(cluster, tmp_path):
    marker = str(tmp_path / "killed")
    open(marker, "w").close()  # the single-process run is not killed
    single = attn_oracle.fuzz(dying_kernel(marker, 5), budget=BUDGET, **KILL_CAMPAIGN)
    assert single["found"], "the planted bug is found in this campaign"
    os.remove(marker)
    merged = ray_campaign.fuzz(dying_kernel(marker, 5), shards=3, budget=BUDGET, progress=None, **KILL_CAMPAIGN)
    assert os.path.exists(marker), "a worker was killed"
    assert merged["lost_shards"] == {} and merged["cases"] == single["cases"]
    assert found_key(merged) == found_key(single)


def test_a_shard_lost_for_good_is_reported(cluster, tmp_path):
    marker = str(tmp_path / "killed")
    merged = ray_campaign.fuzz(dying_kernel(marker, 2), shards=3, budget=BUDGET, max_retries=0, progress=None,
                               **KILL_CAMPAIGN)
    assert len(merged["lost_shards"]) == 1 and merged["exit_code"] == 1
    (lost,) = merged["lost_shards"]
    assert f"LOST shard {lost}/3" in merged["summary"]
    assert merged["cases"] == BUDGET - len(range(lost, BUDGET, 3))
