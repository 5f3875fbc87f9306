#!/usr/bin/env python3
"""The bench's kernel (bench/python_overhead.py): zero outputs of the right shapes, so what
is timed is the harness around a kernel (inputs handed over, outputs taken back, the reference on the
checked rows, the comparators), not a kernel. The verdict is FAIL either way; both paths judge it.
As exec: `zero_kernel.py CASE_DIR`; $AO_BENCH_RSS (a file): the process's peak RSS in KiB written there."""
import os
import resource
import sys

import numpy as np

from attn_oracle.adapters.protocol import main  # python_overhead.py puts the repository's python/ on PYTHONPATH


def kernel(case, inputs):
    return {name: np.zeros_like(a) for name, a in case.outputs().items()}


if __name__ == "__main__":
    rc = main(kernel, sys.argv[1:])
    if os.environ.get("AO_BENCH_RSS"):
        with open(os.environ["AO_BENCH_RSS"], "w") as f:
            f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    sys.exit(rc)
