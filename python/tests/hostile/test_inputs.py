"""The hostile battery, classes 1: mutated inputs: a backend that zeroes or rewrites its inputs must fail, an honest
one pass.

Each attack is a test (battery.py: what an attack checks; conftest.py: how they run)."""
import re

import pytest

from .battery import (params, IDX, NUMPY_REF, EDGE, Attack, plug, with_exec)


def attacks():
    A = []
    # (1) mutated inputs
    A.append(Attack(1, "plugin zero_inputs repro", ["repro", IDX, "--backend", plug("zero_inputs")], {1}))
    A.append(Attack(1, "plugin zero_inputs repro rank 3", ["repro", "op=indexer docs=512,256 cp=4 rank=3",
                                                           "--backend", plug("zero_inputs")], {1}))
    A.append(Attack(1, "plugin zero_inputs gate corpus/edge", ["gate", EDGE, "--backend", plug("zero_inputs")],
                    {1}, limit=120, quick=False,
                    check=lambda r, c: None if not re.search(r"(?<!\d)0 failed", r.out) else "no failures reported"))
    zq = ("python3 -c \"import sys;p=sys.argv[1]+'/q.npy';b=bytearray(open(p,'rb').read());"
          "n=128;b[n:]=bytes(len(b)-n);open(p,'wb').write(b)\" \"$1\"\n")
    A.append(Attack(1, "exec zeroes q.npy then numpy_ref", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec(zq + f"exec {NUMPY_REF} \"$1\"")))
    A.append(Attack(1, "exec zeroes q.npy then numpy_ref rank 0", ["repro", "op=indexer docs=512,256 cp=4 rank=0",
                                                                     "--backend", "{be}"], {1},
                    setup=with_exec(zq + f"exec {NUMPY_REF} \"$1\"")))
    A.append(Attack(1, "exec rewrites q.npy only (outputs unwritten)", ["repro", IDX, "--backend", "{be}"], {1},
                    setup=with_exec(zq)))
    A.append(Attack(1, "exec honest numpy_ref passes (control)", ["repro", IDX, "--backend", f"exec:{NUMPY_REF}"],
                    {0}))
    return A


@pytest.mark.parametrize("attack", params(attacks()))
def test_inputs(attack, hostile):
    hostile.check(attack)
