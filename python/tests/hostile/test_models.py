"""The hostile battery, classes 19, 20: bug models whose wrong addressing points outside a buffer, the conventions an
adapter honours, the OpenMP environment.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""

import pytest

from .battery import (params, IDX, SDPA, NUMPY_REF, Attack, has, all_of, report_json, corpus, with_exec)


def attacks():
    A = []
    # (19) bug models whose wrong addressing points outside a buffer: each re-creates the wrong answer, and
    # explain (which runs every model) never takes repro, explain or gate down with it
    stride_cases = ["op=sdpa docs=5,3 max_seqlen_kv=100000 hq=1 dim=8", "op=sdpa docs=5,3 max_seqlen_kv=9 hq=1 dim=8",
                    "op=sdpa docs=5,3 max_seqlen_kv=1099511627776 hq=1 dim=8"]
    stride0_case = ("op=sdpa docs=3,63,260,106,5 padded_offsets=0,32,96,448,576,608 cp=16 rank=2 window=1 "
                    "max_seqlen_kv=324 num_splits=8 hq=2 hkv=1 dtype=fp16 seed=792779 poison=large")
    for i, line in enumerate(stride_cases):
        A.append(Attack(19, f"repro batch-stride-max-seqlen #{i}", ["repro", line, "--backend",
                                                                    "cpu-bug:batch-stride-max-seqlen"], {1},
                        check=has("FAIL"), max_rss_mib=2048))
    A.append(Attack(19, "repro split-combine-stride0 under CP", ["repro", stride0_case, "--backend",
                                                                 "cpu-bug:split-combine-stride0"], {1}, check=has("FAIL")))
    A.append(Attack(19, "explain batch-stride-max-seqlen", ["explain", stride_cases[0], "--backend",
                                                            "cpu-bug:batch-stride-max-seqlen"], {0},
                    check=has("best explanation", "batch-stride-max-seqlen")))
    A.append(Attack(19, "explain split-combine-stride0", ["explain", stride0_case, "--backend",
                                                          "cpu-bug:split-combine-stride0"], {0},
                    check=has("best explanation", "split-combine-stride0")))
    for model in ("batch-stride-max-seqlen", "split-combine-stride0"):
        A.append(Attack(19, f"gate {model} with explain writes reports", ["gate", "{corpus}", "--backend",
                                                                          f"cpu-bug:{model}", "--report-dir", "rep"],
                        {1}, setup=corpus(stride_cases + [stride0_case]),
                        check=all_of(report_json("complete"), has("explain:", "gate: ")), limit=120))

    # (20) conventions an adapter must honour, and an OpenMP environment the harness bounds: a team too large
    # to create would make libgomp exit 1, the FAIL code
    for v in ("3000", "100000"):
        A.append(Attack(20, f"OMP_NUM_THREADS={v} repro passes", ["repro", SDPA], {0}, env={"OMP_NUM_THREADS": v},
                        check=has("PASS")))
        A.append(Attack(20, f"OMP_NUM_THREADS={v} indexer repro passes", ["repro", IDX], {0},
                        env={"OMP_NUM_THREADS": v}, check=has("PASS")))
    A.append(Attack(20, "crop=1 with window_right=-1 is bad input",
                    ["repro", "op=sdpa docs=16 cp=2 rank=0 crop=1 window_right=-1 hq=1 dim=8"], {2},
                    check=has("crop", "window_right")))
    A.append(Attack(20, "numpy_ref honours empty_rows=posinf", ["repro", "op=sdpa q_lens=1,2 kv_lens=0,1 "
                                                                "mask=bottomright empty_rows=posinf hq=1 dim=8",
                                                                "--backend", f"exec:{NUMPY_REF}"], {0}, check=has("PASS")))
    sem_check = ("import json, sys; s = json.load(open(sys.argv[1] + '/meta.json'))['semantics']; "
                 "sys.exit(0 if all(k in s for k in ('window_right', 'window_convention', 'empty_rows', "
                 "'num_splits', 'max_seqlen')) else 3)")
    A.append(Attack(20, "meta.json semantics name every convention key", ["repro", SDPA, "--backend", "{be}"], {125},
                    setup=with_exec(f'/usr/bin/python3 -c "{sem_check}" "$1" || exit 3\n'
                                    'echo "semantics OK" >&2; exit 125'), check=has("semantics OK")))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_models(attack, hostile):
    hostile.check(attack)
