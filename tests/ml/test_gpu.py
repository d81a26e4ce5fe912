"""The determinism checks on a CUDA device: the same seed gives the same weights, another seed others, a
resumed run the uninterrupted one's, and deterministic mode refuses an op that has no deterministic
kernel. Without CUDA (CI) they skip and say so; the same logic runs on the CPU in test_models.py, and the
production-size checks on the H200 are bench/train_gpu.py's (docs/benchmarks.md)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.models.configs import ARCHITECTURES
from foxhunt.models.determinism import make_deterministic

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here: GPU determinism is checked on the H200 (bench/train_gpu.py, docs/benchmarks.md)",
)


def cuda_train(arch, seed, **kwargs):
    from tests.ml.test_models import train  # the CPU suite's runs, on the GPU

    return train(arch, seed, device="cuda", **kwargs)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_on_cuda_the_same_seed_gives_the_same_weights_and_another_seed_others(arch):
    first = cuda_train(arch, 7)
    assert cuda_train(arch, 7) == first and cuda_train(arch, 8) != first


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_on_cuda_a_resumed_run_ends_with_the_uninterrupted_weights(arch, tmp_path):
    uninterrupted = cuda_train(arch, 5)
    with pytest.raises(KeyboardInterrupt):
        cuda_train(arch, 5, checkpoint=tmp_path / "run.pt", stop_at=6)
    assert cuda_train(arch, 5, checkpoint=tmp_path / "run.pt", resume=True) == uninterrupted


def test_deterministic_mode_refuses_an_op_without_a_deterministic_cuda_kernel():
    """Linear interpolation's backward adds through atomics on CUDA (what pytorch-forecasting's TFT uses,
    and why it cannot train in deterministic mode: docs/benchmarks.md)."""
    make_deterministic(1)
    x = torch.randn(1, 1, 8, device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
        torch.nn.functional.interpolate(x, scale_factor=2, mode="linear").sum().backward()


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_on_cuda_graph_replay_equals_eager_bitwise_and_rows_stay_independent(arch):
    from tests.ml.test_scorer import scorer, windows

    rows = windows(8)
    graphed = scorer(arch, batch=8, device="cuda", graph=True)
    eager = scorer(arch, batch=8, device="cuda", graph=False)
    assert np.array_equal(graphed.score(rows), eager.score(rows))
    assert np.array_equal(graphed.score(rows)[:1], graphed.score(rows[:1]))
