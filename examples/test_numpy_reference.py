# The numpy reference adapter (attn_oracle.adapters.numpy_ref) in process on the edge corpus: every case passes.
import attn_oracle
from attn_oracle.adapters import numpy_ref


@attn_oracle.cases("corpus/edge")
def test_numpy_reference(case):
    verdict = case.check(numpy_ref.kernel)
    assert verdict.passed and all(not m.failed for m in verdict.metrics)


def test_judge_outputs_computed_outside():
    case = attn_oracle.Case("op=sdpa lens=3,2,4 padded_offsets=0,4,8,13 hq=8 dim=128")
    outputs = numpy_ref.kernel(case, case.inputs())  # any kernel: here the numpy one
    assert case.judge(outputs).passed


def test_fuzz_numpy_reference(ao_fuzz):
    # A short campaign (--ao-fuzz-budget cases, default 20) of generated SDPA layouts; tiny: short documents.
    ao_fuzz(numpy_ref.kernel, op="sdpa", dims="tiny")
