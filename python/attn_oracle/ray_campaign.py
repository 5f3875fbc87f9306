"""A fuzz campaign over a Ray cluster (the optional extra: `pip install .[ray]`): its shards are Ray tasks, one
GPU each where the cluster has GPUs (num_gpus=1; CPU tasks where it has none), and Ray decides where and
when each runs. Each task runs attn_oracle.fuzz on its shard (attn_oracle.shards: the core's own split,
so the merged campaign is the single process's campaign of the same seed and case budget) with no output
folder, and returns its found cases with their files' text; the driver merges them by signature and saves
them into `out` (no folder shared with the workers). A task whose worker dies is re-run by Ray (max_retries);
one still lost after that is reported in the result (lost_shards, with the case numbers it did not run)
and fails it: a shard is never dropped silently. Progress: a line per finished shard (on stderr).

    import ray, attn_oracle.ray_campaign as rc
    ray.init()                                    # or ray.init(address="auto") on a cluster
    r = rc.fuzz("cpu-bug:gqa-modulo", shards=64, budget=6400, seed=7, out="found-gqa")
    print(r["summary"])
"""
import sys
import time

from . import shards as _shards


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError("attn_oracle.ray_campaign needs Ray: pip install 'attn-oracle[ray]'") from e
    return ray


def run_shard(kernel, shard, shards, budget, seed, fuzz_kw):
    """One shard's campaign (what a Ray task runs): its FuzzResult as a plain dict, found files as text."""
    import attn_oracle
    share = _shards.shard_budget(budget, shard, shards)
    if share == "0":
        return {**{k: 0 for k in _shards.COUNTS}, "found": [], "seconds": 0.0, "exit_code": 0, "errors": ""}
    r = attn_oracle.fuzz(kernel, budget=share, seed=seed, shard=shard, shards=shards, out=None, **fuzz_kw)
    return dict(r)


def fuzz(kernel, shards, budget, seed=1, out=None, num_gpus=None, max_retries=3, progress=sys.stderr,
         **fuzz_kw):
    """A campaign of `budget` (N cases, or a time each shard runs) split into `shards` Ray tasks through
    kernel (a registry spec such as "cpu-bug:gqa-modulo", or a picklable callable importable on the
    workers); fuzz_kw are attn_oracle.fuzz's (op, dims, vs, shrink_runs, confirm_runs, ...). num_gpus: per
    task (default 1 where the cluster has GPUs, else 0). Returns the merged FuzzResult (attn_oracle.shards.merge)
    with lost_shards {shard: why} and, with out=DIR, each found case's file there."""
    ray = _ray()
    if "shard" in fuzz_kw or "shards" in fuzz_kw:
        raise ValueError("shard/shards: ray_campaign.fuzz splits the campaign itself (shards=N)")
    if int(shards) < 1:
        raise ValueError(f"shards: {shards}: expected >= 1")
    if not ray.is_initialized():
        ray.init()
    if num_gpus is None:
        num_gpus = 1 if ray.cluster_resources().get("GPU", 0) > 0 else 0
    task = ray.remote(run_shard).options(num_gpus=num_gpus, max_retries=max_retries)
    refs = {task.remote(kernel, i, shards, budget, seed, fuzz_kw): i for i in range(shards)}
    done, lost, pending, t0 = {}, {}, list(refs), time.monotonic()
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            i = refs[ref]
            try:
                done[i] = ray.get(ref)
            except (ray.exceptions.RayError,) as e:  # its worker died more than max_retries times, or it raised
                lost[i] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if progress is not None:
            rs = list(done.values())
            print(f"[ray fuzz] {len(done)}/{shards} shards done, {len(lost)} lost: "
                  f"{sum(r['cases'] for r in rs)} cases, {sum(r['failed'] for r in rs)} failed, "
                  f"{len({f['signature'] for r in rs for f in r['found']})} unique  "
                  f"{time.monotonic() - t0:.0f}s", file=progress, flush=True)
    merged = _shards.merge(done[i] for i in sorted(done))
    merged["lost_shards"] = dict(sorted(lost.items()))
    if out is not None:
        _shards.save_found(out, merged["found"])
    if lost:
        merged["exit_code"] = max(merged["exit_code"], 1)
    merged["summary"] = _shards.summary_text(merged, len(done)) + "".join(
        f"\n  LOST shard {i}/{shards} (its case numbers {i}, {i + shards}, ... did not run): {why}"
        for i, why in merged["lost_shards"].items())
    return merged
