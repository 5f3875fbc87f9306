"""One fuzz campaign split into shards and merged back, for the engines that run the shards (pytest-xdist
through the pytest plugin, Ray through attn_oracle.ray_campaign); which worker runs which shard is the
engine's decision, never this module's.

The split is the core's own (`attn-oracle fuzz --shard i/n`): shard i of n runs the case numbers i, i+n,
i+2n, ... of the campaign's seed, so the shards of a budget of N cases run exactly the case numbers 0..N-1
that one process runs, whatever n (shard_budget gives each its share). The merge keeps, per failure
signature, the case one process would keep: a deterministic failure before a nondeterministic one, then
the smaller case (the core's smaller_case), then the earlier case number. So a merged campaign of N cases
has the single process's verdict counts and found signatures and lines. Not so for a time budget (each
shard runs for that time) nor for max_failures (each shard stops at its own count).
"""
from . import _core
from .verdict import FuzzResult

# The counts of a campaign's summary that the shards' summaries add up to.
COUNTS = ("cases", "passed", "failed", "skipped", "weak", "weak_redrawn", "invalid")


def shard_budget(budget, shard, shards):
    """Shard `shard`'s share of a campaign's budget: of N cases, the number of case numbers below N that are
    shard modulo shards (0: the shard has nothing to run); a time ("30s") is each shard's own wall time."""
    if not 0 <= int(shard) < int(shards):
        raise ValueError(f"shard: {shard}/{shards}: expected 0 <= shard < shards")
    text = str(budget).strip()
    if text.isdigit():
        return str(max(0, (int(text) - int(shard) + int(shards) - 1) // int(shards)))
    return text


def _better(a, b):
    """Whether found case a is kept over b (b found first), as one campaign decides (fuzz/src/campaign.cpp)."""
    if a["nondeterministic"] != b["nondeterministic"]:
        return b["nondeterministic"]
    return _core.smaller_case(a["shrunk"], b["shrunk"])


def merge(results):
    """One FuzzResult of the shards' FuzzResults (each a dict as attn_oracle.fuzz returns it): counts added,
    found cases merged by signature (one per signature, as one process keeps it; `merged` counts the
    others), ordered by the kept case's number (one process lists them in the order it first saw each); seconds is the longest shard's, shard_seconds each shard's."""
    results = list(results)
    out = FuzzResult({k: sum(int(r.get(k, 0)) for r in results) for k in COUNTS})
    out["seconds"] = max((float(r.get("seconds", 0)) for r in results), default=0.0)
    out["shard_seconds"] = [float(r.get("seconds", 0)) for r in results]
    kept = {}
    for f in sorted((f for r in results for f in r["found"]), key=lambda f: f["index"]):
        k = kept.get(f["signature"])
        if k is None:
            kept[f["signature"]] = dict(f)
        else:
            merged = k.get("merged", 0) + f.get("merged", 0) + 1
            if _better(f, k):
                kept[f["signature"]] = k = dict(f)
            k["merged"] = merged
    out["found"] = sorted(kept.values(), key=lambda f: f["index"])
    out["exit_code"] = max((int(r.get("exit_code", 0)) for r in results), default=0)
    out["errors"] = "".join(r.get("errors", "") for r in results)
    out["summary"] = summary_text(out, len(results))
    return out


def summary_text(merged, shards):
    """The merged campaign in a few lines: counts, then each found case's shrunk line and signature."""
    lines = [f"fuzz (merged from {shards} shard(s)): {merged['cases']} cases: {merged['passed']} passed, "
             f"{merged['failed']} failed ({len(merged['found'])} unique), {merged['weak']} weak, "
             f"{merged['skipped']} skipped, {merged['invalid']} invalid"]
    for f in merged["found"]:
        lines += [f"  FAIL case #{f['index']}: {f['shrunk']}", f"    failing: {f['failing']}",
                  f"    signature: {f['signature']}"]
        if f.get("file"):
            lines.append(f"    {'known' if f.get('already_known') else 'saved'}: {f['file']}")
    return "\n".join(lines)


def save_found(out, found, max_mem_gib=8.0):
    """Saves found cases (their file text, made where the shard ran) into the folder `out` as a campaign
    saves its own: under the folder's lock, once per signature (a file of the signature already there is
    named instead). Sets each one's file and already_known."""
    for f in found:
        f["file"], f["already_known"] = _core.save_found_text(str(out), f["text"], max_mem_gib)
    return found
