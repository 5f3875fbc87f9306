"""The hostile battery, classes 12, 22: ignored keys, bad option values, and # catches: claims (matched by backend
identity, not spelling).

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os

import pytest

from .battery import (params, IDX, SMALL, OK_PLUGIN, Attack, has, corpus)


def attacks():
    A = []
    # (12) ignored keys, bad option values, claims
    for line, key in [("op=indexer docs=64 o_offsets=0", "o_offsets"), ("op=indexer docs=64 stats_offsets=0",
                                                                         "stats_offsets"),
                      ("op=indexer docs=64 crop=1", "crop"), ("op=indexer docs=64 cp_scheme=contiguous", "cp_scheme"),
                      ("op=indexer docs=64 cp=1 crop=1", "crop"), ("op=indexer docs=64 mask=none ratio=4", "ratio"),
                      ("op=indexer docs=64 cp=2 rank=0 mask=none crop=1", "crop"),
                      ("op=sdpa docs=64 cp_scheme=zigzag", "cp_scheme")]:
        A.append(Attack(12, f"ignored key {line}", ["repro", line], {2}, check=has(key)))
    # grad_pad=zero means the same under both ops: zeros in the gradients' pad slots pass, and fail without it
    gp = "op=indexer pass=bwd docs=30,20 pad=3 heads=2 dim=16 topk=4"
    A.append(Attack(12, "indexer grad_pad=zero accepts zeroed pad gradients",
                    ["repro", gp + " grad_pad=zero", "--backend", "cpu-bug:bwd-grad-pad-zeroed", "--no-explain"], {0}))
    A.append(Attack(12, "indexer zeroed pad gradients fail without grad_pad=zero",
                    ["repro", gp, "--backend", "cpu-bug:bwd-grad-pad-zeroed", "--no-explain"], {1},
                    check=has("clobbered_pad_slots")))
    for name, args, opt in [("--seed -1", ["fuzz", "--backend", "cpu-ref", "--seed", "-1", "--budget", "1"], "seed"),
                            ("--seed 2^64", ["fuzz", "--backend", "cpu-ref", "--seed", "18446744073709551616", "--budget", "1"], "seed"),
                            ("--seed abc", ["fuzz", "--backend", "cpu-ref", "--seed", "abc", "--budget", "1"], "seed"),
                            ("--max-failures -1", ["fuzz", "--backend", "cpu-ref", "--max-failures", "-1", "--budget", "1"], "max-failures"),
                            ("--shrink-runs -5", ["fuzz", "--backend", "cpu-ref", "--shrink-runs", "-5", "--budget", "1"], "shrink-runs"),
                            ("--budget -1", ["fuzz", "--backend", "cpu-ref", "--budget", "-1"], "budget"),
                            ("--budget 0s", ["fuzz", "--backend", "cpu-ref", "--budget", "0s"], "budget"),
                            ("--budget 1x", ["fuzz", "--backend", "cpu-ref", "--budget", "1x"], "budget"),
                            ("--dims huge", ["fuzz", "--backend", "cpu-ref", "--dims", "huge", "--budget", "1"], "dims"),
                            ("--op bogus", ["fuzz", "--backend", "cpu-ref", "--op", "bogus", "--budget", "1"], "op"),
                            ("shrink --runs -1", ["shrink", SMALL, "--backend", "cpu-bug:topleft-cp", "--runs", "-1"],
                             "runs"),
                            ("unknown subcommand option", ["repro", SMALL, "--frobnicate"], "frobnicate"),
                            ("unknown backend", ["repro", SMALL, "--backend", "nope"], "nope")]:
        A.append(Attack(12, f"bad option {name}", args, {2}, check=has(opt), limit=30))
    A.append(Attack(12, "false # catches: claim", ["gate", "{corpus}", "--backend", "cpu-ref"], {1},
                    setup=corpus(["# catches: cpu-ref", SMALL]), check=has("claim not held")))
    A.append(Attack(12, "unknown # catches: backend", ["gate", "{corpus}", "--backend", "cpu-ref"], {2},
                    setup=corpus(["# catches: cpu-bug:no-such-model", SMALL]), check=has("c.case:1")))
    A.append(Attack(12, "double # catches: claim", ["gate", "{corpus}", "--backend", "cpu-ref"], {2},
                    setup=corpus(["# catches: cpu-bug:topleft-cp", "# catches: cpu-bug:topleft-cp", SMALL])))
    A.append(Attack(12, "true # catches: claim holds", ["gate", "{corpus}", "--backend", "cpu-bug:topleft-cp"], {1},
                    setup=corpus(["# catches: cpu-bug:topleft-cp", IDX]), check=has("1 of 1 claims held")))

    # (22) # catches: claims are matched by backend identity, not spelling
    lib = OK_PLUGIN[len("plugin:"):]
    dotted = os.path.join(os.path.dirname(lib), ".", os.path.basename(lib))
    for name, claim in [("./ in the path", "plugin:" + dotted), (":bug=none on one side", OK_PLUGIN + ":bug=none"),
                        ("blanks around", "  " + OK_PLUGIN + "  "),
                        ("../ in the path", "plugin:" + os.path.join(os.path.dirname(lib), "..",
                                                                     os.path.basename(os.path.dirname(lib)),
                                                                     os.path.basename(lib)))]:
        A.append(Attack(22, f"false claim spelled with {name}", ["gate", "{corpus}", "--backend", OK_PLUGIN,
                                                                 "--no-explain"], {1},
                        setup=corpus(["# catches: " + claim, SMALL]), check=has("claim not held")))
    A.append(Attack(22, "true claim spelled otherwise still holds", ["gate", "{corpus}", "--backend",
                                                                    OK_PLUGIN + ":bug=topleft-cp", "--no-explain"],
                    {1}, setup=corpus(["# catches: plugin:" + dotted + ":bug=topleft", IDX]),  # old spelling of the defect id
                    check=has("1 of 1 claims held")))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_options(attack, hostile):
    hostile.check(attack)
