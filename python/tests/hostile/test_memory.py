"""The hostile battery, classes 6: the memory cap (--max-mem): bad values refused, oversized cases refused naming the
key, show bounded.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""

import pytest

from .battery import (params, SMALL, Attack, has, all_of, faster)


def attacks():
    A = []
    # (6) memory cap
    for v in ["nan", "inf", "-1", "", "0", "abc", "1e10", "-inf", "0.0001"]:
        A.append(Attack(6, f"--max-mem {v!r}", ["--max-mem", v, "repro", SMALL], {2}, check=has("max-mem"),
                        limit=20))
    A.append(Attack(6, "--max-mem 1 docs=64*500000", ["--max-mem", "1", "repro",
                                                      "op=indexer docs=64*500000 heads=1 dim=1 topk=1"], {2},
                    check=all_of(faster(5), has("docs")), max_rss_mib=600))
    # show is held to the cap too (a refusal is an answer); under a cap that admits it, it must not build rows
    A.append(Attack(6, "show docs=300000000", ["show", "op=indexer docs=300000000 heads=1 dim=1 topk=1"], {0, 2},
                    check=faster(5), max_rss_mib=600))
    A.append(Attack(6, "--max-mem 100 show docs=300000000", ["--max-mem", "100", "show",
                                                             "op=indexer docs=300000000 heads=1 dim=1 topk=1"], {0},
                    check=faster(5), max_rss_mib=600))
    A.append(Attack(6, "--max-mem 100 show rows=3999999 on 4M", ["--max-mem", "100", "show",
                    "op=indexer docs=4000000 heads=1 dim=1 topk=1 rows=3999999"], {0}, check=faster(20),
                    max_rss_mib=1500, quick=False))
    A.append(Attack(6, "cap names tail", ["--max-mem", "1", "repro", "op=sdpa docs=64 tail=4000000000"], {2},
                    check=all_of(faster(5), has("tail")), max_rss_mib=600))
    A.append(Attack(6, "cap names capacity/offsets", ["--max-mem", "1", "repro",
                                                      "op=sdpa lens=3 padded_offsets=0,4000000000"], {2},
                    check=all_of(faster(5), lambda r, c: None if ("capacity" in r.out or "offsets" in r.out)
                                 else "refusal names neither capacity nor offsets"), max_rss_mib=600))
    A.append(Attack(6, "cap names heads", ["--max-mem", "0.01", "repro", "op=indexer docs=4096 heads=100000 dim=64"],
                    {2}, check=all_of(faster(5), has("heads")), max_rss_mib=600))
    A.append(Attack(6, "docs=1e12 show", ["show", "op=indexer docs=1000000000000"], {0, 2}, check=faster(5),
                    max_rss_mib=600))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_memory(attack, hostile):
    hostile.check(attack)
