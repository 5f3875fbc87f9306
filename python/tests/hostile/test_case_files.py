"""The hostile battery, classes 9, 13, 15: case lines and corpus files: bad .case files, BOMs, symlink loops, huge
values, --shard, random malformed lines.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import os
import random

import pytest

from .battery import (params, IDX, SMALL, SDPA, Attack, write, has, all_of, short_output, corpus)


def attacks():
    A = []
    # (9) bad .case files in gate
    for name, content in [("empty", ""), ("comments only", "# nothing\n\n"), ("truncated", "op=indexer docs="),
                          ("truncated key", "op=indexer docs=64 hea"), ("binary", bytes(random.Random(9).randrange(256)
                                                                                       for _ in range(300))),
                          ("NUL inside", b"op=indexer docs=64\x00 heads=2\n"), ("only BOM", b"\xef\xbb\xbf"),
                          ("claim without case", "# catches: cpu-bug:topleft-cp\n")]:
        def s(d, ctx, content=content):
            os.mkdir(os.path.join(d, "corp"))
            write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
            write(os.path.join(d, "corp", "bad.case"), content)
            return None
        A.append(Attack(9, f"gate .case {name}", ["gate", "corp", "--backend", "cpu-ref"], {2}, setup=s,
                        check=has("bad.case")))

    def tmp_left(d, ctx):
        os.mkdir(os.path.join(d, "corp"))
        write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
        write(os.path.join(d, "corp", ".abc.case.tmp.12345"), "op=indexer docs=")
    A.append(Attack(9, "gate ignores crash-left temp file", ["gate", "corp", "--backend", "cpu-ref"], {0}, setup=tmp_left))

    def fuzz_known_empty(d, ctx):
        os.mkdir(os.path.join(d, "found"))
        write(os.path.join(d, "found", "deadbeef.case"), "")
    A.append(Attack(9, "fuzz --out with an empty .case: no empty file left", ["fuzz", "--backend",
                    "cpu-bug:topleft-cp", "--budget", "20", "--seed", "1", "--out", "found"], {1}, setup=fuzz_known_empty,
                    check=lambda r, c: None if any(os.path.getsize(os.path.join(c["dir"], "found", f)) > 0
                                                   for f in os.listdir(os.path.join(c["dir"], "found")))
                    else "no case saved"))

    # (13) BOM, symlink loops, long values, --shard
    A.append(Attack(13, "BOM on a command-line case", ["repro", "\ufeff" + SMALL], {0}))
    A.append(Attack(13, "BOM + bad key names key", ["repro", "\ufeffop=indexer docs=64 bogus=1"], {2},
                    check=all_of(has("bogus"), lambda r, c: None if "'\ufeffop'" not in r.out else "BOM in key")))
    A.append(Attack(13, "BOM at start of corpus file", ["gate", "{corpus}", "--backend", "cpu-ref"], {0},
                    setup=lambda d, c: (write(os.path.join(d, "c.case"), b"\xef\xbb\xbf" + SMALL.encode() + b"\n"),
                                        c.update(corpus=os.path.join(d, "c.case")), None)[-1]))

    def loop_setup(d, ctx):
        os.makedirs(os.path.join(d, "corp", "sub"))
        write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
        os.symlink("a", os.path.join(d, "corp", "sub", "b"))
        os.symlink("b", os.path.join(d, "corp", "sub", "a"))
        os.symlink("..", os.path.join(d, "corp", "sub", "up"))
    A.append(Attack(13, "symlink loop in corpus dir", ["gate", "corp", "--backend", "cpu-ref"], {2}, setup=loop_setup,
                    check=has("cannot resolve")))

    def dangling(d, ctx):
        os.makedirs(os.path.join(d, "corp"))
        write(os.path.join(d, "corp", "good.case"), SMALL + "\n")
        os.symlink("/nonexistent/x.case", os.path.join(d, "corp", "gone.case"))
    A.append(Attack(13, "dangling symlink in corpus dir ignored", ["gate", "corp", "--backend", "cpu-ref"], {0}, setup=dangling))
    big = "9" * 1000000
    for key in ["docs", "seed", "dtype", "bogus"]:
        A.append(Attack(13, f"120 kB value (argv limit) for {key}", ["repro", f"op=indexer docs=64 {key}={big[:120000]}" if key != "docs"
                                                      else f"op=indexer docs={big[:120000]}"], {2},
                        check=all_of(short_output(2000), has(key))))
    for key in ["docs", "seed", "dtype", "bogus"]:
        A.append(Attack(13, f"1 MB value for {key} in a corpus file", ["gate", "{corpus}", "--backend", "cpu-ref"],
                        {2}, setup=corpus([f"op=indexer docs=64 {key}={big}" if key != "docs"
                                           else f"op=indexer docs={big}"]), check=all_of(short_output(2000), has(key))))
    for v in ["5/4", "4/4", "a/b", "1/0", "-1/3", "1/", "/3", "1", "1/4/2", "99999999999999999999/3"]:
        A.append(Attack(13, f"--shard {v!r}", ["fuzz", "--backend", "cpu-ref", "--shard", v, "--budget", "1"], {2},
                        check=has("shard")))
    for v in ["0/4", "3/4"]:  # shards are 0-based (docs/subcommands.md: case numbers i, i+n, ...)
        A.append(Attack(13, f"--shard {v} (control)", ["fuzz", "--backend", "cpu-ref", "--shard", v, "--budget", "3",
                                                       "--no-save"], {0}))

    # (15) random malformed case lines (mutations of valid lines)
    rng = random.Random(20261203)
    valid = [IDX, SMALL, SDPA, "op=sdpa docs=100,37 q_pad=3,0 kv_pad=0,5 tail=64 hq=8 hkv=2 mask=bottomright poison=nan",
             "op=indexer docs=8192,4096 cp=32 rank=15 heads=8 dim=64 topk=256", "op=sdpa lens=5,7 dtype=bf16 window=3"]
    bad_values = ["abc", "", "-7", "18446744073709551616", "1e999", "nan", "1,,2", "0x10", " ", "1.5.5", "+-1",
                  "\u00e9\u00e9", "9" * 40, "1/0", "*", "64*"]
    for i in range(60):
        toks = rng.choice(valid).split()
        kind = rng.randrange(4)
        if kind == 0:  # bad value for an existing key (never op, so the key stays known)
            j = rng.randrange(1, len(toks))
            key = toks[j].split("=")[0]
            # a value the key accepts is no mutation (poison=nan is valid)
            toks[j] = key + "=" + rng.choice([v for v in bad_values if key + "=" + v != toks[j]
                                              and not (key == "poison" and v == "nan")])
        elif kind == 1:  # unknown key
            key = rng.choice(["bogus", "doc", "head", "topK", "cp_sheme", "lens_q", "x"])
            toks.insert(rng.randrange(len(toks) + 1), key + "=1")
        elif kind == 2:  # duplicated key
            j = rng.randrange(len(toks))
            key = toks[j].split("=")[0]
            toks.append(toks[j])
        else:  # key without '='
            j = rng.randrange(1, len(toks))
            key = toks[j].split("=")[0]
            toks[j] = key
        line = " ".join(toks)
        A.append(Attack(15, f"malformed #{i} [{line[:70]}]", ["repro", line], {2}, check=has(key), limit=30,
                        quick=(i % 4 == 0)))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_case_files(attack, hostile):
    hostile.check(attack)
