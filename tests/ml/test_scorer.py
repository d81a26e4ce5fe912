"""The scorer (adapters/inference/scorer.py) on the CPU: what the model computes, at a fixed batch shape
where a row's forecast depends on nothing but its own window. tests/ml/test_gpu.py repeats it on CUDA,
graph replay against eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.adapters.inference.scorer import Scorer, input_digest
from foxhunt.core.features import FeatureSpec
from foxhunt.models.configs import ARCHITECTURES, Shape, TrainConfig
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.forecaster import build

SHAPE = Shape(window=16, features=FeatureSpec().width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))


def windows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, SHAPE.window, SHAPE.features)).astype(np.float32)


def scorer(arch: str, batch: int, device: str = "cpu", graph: bool = True) -> Scorer:
    make_deterministic(1)
    model = build(arch, TrainConfig().model(arch, "tiny"), SHAPE, seed=4)
    return Scorer(model, SHAPE.window, SHAPE.features, torch.device(device), batch=batch, graph=graph)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_a_row_s_forecast_depends_on_its_window_alone(arch):
    s = scorer(arch, batch=8)
    rows = windows(8)
    together = s.score(rows)
    alone = np.stack([s.score(rows[i : i + 1])[0] for i in range(8)])
    others = s.score(np.concatenate([rows[:1], windows(7, seed=1)]))[0]
    assert together.shape == (8, 3, 3)
    assert np.array_equal(together, alone) and np.array_equal(together[0], others)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_scorer_gives_what_the_model_computes_at_its_batch(arch):
    """Bit for bit what the model computes for each window at the served batch shape (in the batch's first
    row, the others zeros: Scorer._one_by_one), and within float32 rounding what it computes for all of them
    in one batch. Bit for bit with the batch too would depend on the processor: MKL rounds a row of a GEMM
    by its place among the others on some (it did for the TFT on an AMD EPYC, by one ulp)."""
    s = scorer(arch, batch=4)
    rows = windows(4, seed=3)
    with torch.no_grad():
        alone = []
        for window in rows:
            batch = np.zeros((4, *rows.shape[1:]), dtype=np.float32)
            batch[0] = window
            alone.append(s.model.predict(torch.from_numpy(batch))[0].numpy())
        together = s.model.predict(torch.from_numpy(rows)).numpy()
    scored = s.score(rows)
    assert np.array_equal(scored, np.stack(alone))
    np.testing.assert_allclose(scored, together, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_scorer_serves_its_own_copy_of_the_weights(arch):
    """What the caller does to its module after (another scorer's `.to()`, which re-flattens an LSTM's weights
    into a new buffer on CUDA, or a change of weights) is not what a scorer serves: on CUDA its graph reads
    its weights where they were at the capture (tests/ml/test_gpu.py makes three scorers of one model)."""
    make_deterministic(1)
    model = build(arch, TrainConfig().model(arch, "tiny"), SHAPE, seed=4)
    s = Scorer(model, SHAPE.window, SHAPE.features, torch.device("cpu"), batch=2)
    rows = windows(2, seed=6)
    before = s.score(rows)
    with torch.no_grad():
        for weight in model.parameters():
            weight.mul_(2.0)
    Scorer(model, SHAPE.window, SHAPE.features, torch.device("cpu"), batch=2)
    assert s.model is not model and np.array_equal(s.score(rows), before)


def test_a_window_of_another_shape_or_too_many_windows_is_refused():
    s = scorer("mlp", batch=2)
    with pytest.raises(ValueError, match=r"expected 1 to 2 windows of shape \(16, 11\)"):
        s.score(windows(3))
    with pytest.raises(ValueError, match="expected 1 to 2 windows"):
        s.score(np.zeros((1, 15, SHAPE.features), dtype=np.float32))


def test_the_input_digest_names_the_exact_bytes():
    rows = windows(1)
    assert input_digest(rows) == input_digest(rows.copy())
    bumped = rows.copy()
    bumped.view(np.uint32)[0, 0, 0] += 1  # one ulp
    assert input_digest(bumped) != input_digest(rows)


def test_a_graph_is_captured_without_torch_s_fills_of_new_tensors_which_come_back_after():
    """graphs.unfilled, around a graph's warm-up and capture (the fills would be replayed with every call;
    that the forecasts stay eager's bit for bit is tests/ml/test_gpu.py's, on a GPU)."""
    from torch.utils import deterministic

    from foxhunt.adapters.inference.graphs import unfilled

    make_deterministic(1)
    assert deterministic.fill_uninitialized_memory  # deterministic mode fills new tensors by default
    assert torch.isnan(torch.empty(4)).all()
    with unfilled():
        assert not deterministic.fill_uninitialized_memory
    assert deterministic.fill_uninitialized_memory
    with pytest.raises(RuntimeError), unfilled():
        raise RuntimeError("a capture that fails")
    assert deterministic.fill_uninitialized_memory
