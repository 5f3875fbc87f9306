# PyTorch's varlen attention (torch.nn.attention.varlen) on the edge corpus, in process: one test per case.
import pytest
import attn_oracle

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: torch's varlen attention runs on the GPU", allow_module_level=True)
from attn_oracle.adapters import torch_varlen_sdpa  # noqa: E402


@attn_oracle.cases("corpus/edge")
def test_torch_varlen_attention(case):
    case.check(torch_varlen_sdpa.kernel)  # indexer cases and undeclared shapes are skipped, with the reason
