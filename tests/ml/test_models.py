"""The forecasters and their training: shapes, the SSD scan against its recurrence, the TFT's causal
mask, and determinism: the same seed gives the same parameter hash (in one process and in two), another
seed another hash, and a run resumed from a checkpoint ends where an uninterrupted one does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest
import torch

from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.core.features import FeatureSpec
from foxhunt.errors import ConfigError, ModelError
from foxhunt.models.configs import ARCHITECTURES, Shape, TrainConfig
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.ensemble import fit_weights
from foxhunt.models.forecaster import build, parameter_hash
from foxhunt.models.mamba2 import ssd
from foxhunt.models.tft import TemporalFusionTransformer
from foxhunt.training import dataset
from foxhunt.training.dataset import Source
from foxhunt.training.train import TrainRequest, train_ensemble
from foxhunt.training.trainer import Trainer
from tests.ml.market import by_symbol, columns_by_symbol, messages

SPEC = FeatureSpec()
CFG = TrainConfig(window=8, horizons=(1, 4), max_steps=12, eval_every=4, batch_size=32, patience=10)
ROOT = Path(__file__).resolve().parents[2]


def data(n: int = 3_000, cfg: TrainConfig = CFG) -> dataset.Dataset:
    source = Source(journal="synthetic", first_seq=1, last_seq=n, events=n)
    return dataset.build(columns_by_symbol(messages(n)), [source], SPEC, cfg)


def train(arch: str, seed: int, checkpoint: Path | None = None, resume: bool = False, stop_at: int = 0,
          cfg: TrainConfig = CFG, device: str = "cpu") -> str:
    make_deterministic(cfg.threads)
    trainer = Trainer(data(cfg=cfg), arch, cfg.model(arch, "tiny"), cfg, seed, torch.device(device), checkpoint)

    def interrupt(step, _last):
        if step == stop_at:
            raise KeyboardInterrupt

    return parameter_hash(trainer.run(interrupt if stop_at else None, resume=resume).model)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_architecture_maps_windows_to_quantiles_of_each_horizon(arch):
    shape = Shape(window=8, features=SPEC.width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    model = build(arch, TrainConfig().model(arch, "tiny"), shape, seed=3)
    out = model(torch.randn(5, 8, SPEC.width))
    assert out.shape == (5, 3, 3) and torch.isfinite(out).all()


def test_the_chunked_ssd_scan_equals_its_recurrence_at_every_chunk_length():
    g = torch.Generator().manual_seed(0)
    b, length, heads, p, n = 2, 13, 3, 4, 5
    x = torch.randn(b, length, heads, p, generator=g, dtype=torch.float64)
    a = -torch.rand(b, length, heads, generator=g, dtype=torch.float64)
    bb = torch.randn(b, length, heads, n, generator=g, dtype=torch.float64)
    cc = torch.randn(b, length, heads, n, generator=g, dtype=torch.float64)
    h = torch.zeros(b, heads, p, n, dtype=torch.float64)
    expected = []
    for t in range(length):
        h = torch.exp(a[:, t])[..., None, None] * h + x[:, t][..., None] * bb[:, t][:, :, None, :]
        expected.append(torch.einsum("bhpn,bhn->bhp", h, cc[:, t]))
    for chunk in (1, 4, 5, 13, 16):
        torch.testing.assert_close(ssd(x, a, bb, cc, chunk), torch.stack(expected, 1), rtol=1e-12, atol=1e-12)


def test_mamba2_s_kept_triangles_give_the_bits_of_triangles_made_anew_and_serve_autograd():
    from foxhunt.models import mamba2

    t = 37  # a length no other test uses: its triangles are made here, first in inference mode
    x = torch.randn(3, 5, t, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        first = mamba2.segment_sums(x)
    ones = torch.ones(t, t, dtype=torch.bool)  # what each call made anew before they were kept
    copies = x.unsqueeze(-1).expand(*x.shape, t).masked_fill(~torch.tril(ones, -1), 0.0)
    anew = (torch.tril(ones).to(x.dtype) @ copies).masked_fill(~torch.tril(ones), float("-inf"))
    assert torch.equal(first, anew) and torch.equal(mamba2.segment_sums(x), anew)
    assert torch.equal(mamba2.prefix_sums(x), x @ torch.triu(torch.ones(t, t)))
    w = x.clone().requires_grad_()
    mamba2.prefix_sums(w).sum().backward()  # the kept triangles, made in inference mode, saved for backward
    assert torch.equal(w.grad, torch.ones_like(x) @ torch.triu(torch.ones(t, t)).T)


def test_a_tft_horizon_attends_to_the_window_and_to_no_later_horizon():
    shape = Shape(window=6, features=SPEC.width, horizons=(1, 4, 16), quantiles=(0.5,))
    tft = build("tft", TrainConfig().model("tft", "tiny"), shape, seed=1).net
    assert isinstance(tft, TemporalFusionTransformer)
    _, features, attention = tft.explain(torch.randn(2, 6, SPEC.width))
    torch.testing.assert_close(features.sum(-1), torch.ones(2, 6))
    assert attention.shape == (2, 2, 3, 9)
    for j in range(3):
        assert (attention[:, :, j, 6 + j + 1 :] == 0).all() and (attention[:, :, j, : 6 + j + 1] > 0).all()


def test_no_forecast_before_a_cut_changes_when_the_data_after_it_is_cut_away():
    whole_msgs = messages(3_000)
    model = build("mlp", CFG.model("mlp", "tiny"), Shape(window=8, features=SPEC.width, horizons=CFG.horizons,
                                                        quantiles=CFG.quantiles), seed=2).eval()
    source = [Source(journal="j", first_seq=1, last_seq=1, events=1)]
    whole = dataset.build(columns_by_symbol(whole_msgs), source, SPEC, CFG, splits=False)
    for cut in (500, 1500, 2900):
        part = dataset.build(columns_by_symbol(whole_msgs[:cut]), source, SPEC, CFG, splits=False)
        # a sample of the part is the same symbol's same row in the whole: its forecast must be the same
        common = part.samples
        with torch.no_grad():
            a = model(torch.from_numpy(part.windows(common)))
            b = model(torch.from_numpy(whole.windows(relocate(common, part, whole))))
        assert common.size and torch.equal(a, b), cut


def relocate(rows: np.ndarray, part: dataset.Dataset, whole: dataset.Dataset) -> np.ndarray:
    """Row indices of `part` as indices of `whole` (each lays out its symbols one after another)."""
    starts_part = np.cumsum([0] + [part.symbols[s] for s in sorted(part.symbols)])
    starts_whole = np.cumsum([0] + [whole.symbols[s] for s in sorted(whole.symbols)])
    which = np.searchsorted(starts_part, rows, side="right") - 1
    return rows - starts_part[which] + starts_whole[which]


def test_the_splits_are_in_time_order_and_no_label_reaches_into_the_next_range():
    d = data(4_000)
    s = d.splits
    assert s.train.size and s.validation.size and s.test.size and s.purged > 0
    ts = {}
    msgs = by_symbol(messages(4_000))
    offset = 0
    for symbol in sorted(msgs):  # the rows' event times, as the data set lays the symbols out
        for i, m in enumerate(msgs[symbol]):
            ts[offset + i] = m.ts_event
        offset += len(msgs[symbol])
    end = lambda rows: max(ts[r + CFG.horizons[-1]] for r in rows)
    start = lambda rows: min(ts[r] for r in rows)
    assert end(s.train) < start(s.validation) and end(s.validation) < start(s.test)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_same_seed_gives_the_same_weights_and_another_seed_others(arch):
    first = train(arch, seed=7)
    assert train(arch, seed=7) == first
    assert train(arch, seed=8) != first


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_a_run_resumed_from_its_checkpoint_ends_with_the_weights_of_an_uninterrupted_one(arch, tmp_path):
    uninterrupted = train(arch, seed=5)
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(KeyboardInterrupt):
        train(arch, seed=5, checkpoint=checkpoint, stop_at=6)  # killed after the checkpoint at step 4
    assert torch.load(checkpoint, weights_only=True)["step"] == 4
    assert train(arch, seed=5, checkpoint=checkpoint, resume=True) == uninterrupted


SCRIPT = """
import sys, json
sys.path.insert(0, {root!r})
from tests.ml.test_models import train
print(json.dumps({{arch: train(arch, seed=7) for arch in {archs!r}}}))
"""


def test_another_process_trains_the_same_weights():
    archs = list(ARCHITECTURES)
    here = {arch: train(arch, seed=7) for arch in archs}
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), archs=archs)], capture_output=True,
                          check=False, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == here


def test_training_stops_early_and_keeps_the_best_weights():
    cfg = msgspec.structs.replace(CFG, max_steps=400, eval_every=2, patience=2, learning_rate=0.05)
    make_deterministic(1)
    trainer = Trainer(data(cfg=cfg), "mlp", cfg.model("mlp", "tiny"), cfg, 1, torch.device("cpu"))
    outcome = trainer.run()
    assert outcome.stopped_early and outcome.steps < 400
    losses = [h["validation_loss"] for h in outcome.history]
    assert outcome.best_loss == min(losses) and losses[-1] > outcome.best_loss
    # the weights it returns are the best evaluation's, not the last one's
    assert trainer.validation_loss() == outcome.best_loss


def test_a_run_that_stopped_early_resumes_to_the_same_end(tmp_path):
    cfg = msgspec.structs.replace(CFG, max_steps=400, eval_every=2, patience=2, learning_rate=0.05)
    runs = []
    for _ in range(2):  # the second resumes from the first's last checkpoint, taken when it stopped
        make_deterministic(1)
        trainer = Trainer(data(cfg=cfg), "mlp", cfg.model("mlp", "tiny"), cfg, 1, torch.device("cpu"),
                          tmp_path / "run.pt")
        runs.append(trainer.run(resume=True))
    assert runs[0].stopped_early and runs[1].resumed_from == runs[0].steps and runs[1].steps == runs[0].steps
    assert parameter_hash(runs[1].model) == parameter_hash(runs[0].model)


def test_a_training_that_diverges_stores_nothing_and_says_why():
    cfg = msgspec.structs.replace(CFG, learning_rate=1e30, grad_clip=1e30)
    make_deterministic(1)
    with pytest.raises(ModelError, match=r"training diverged: the validation loss was never finite .*'validation_loss': nan"):
        Trainer(data(cfg=cfg), "mlp", cfg.model("mlp", "tiny"), cfg, 1, torch.device("cpu")).run()


def test_a_configured_value_replaces_the_presets_and_a_wrong_one_is_named():
    cfg = TrainConfig(models={"tft": {"hidden": 24}})
    assert cfg.model("tft", "tiny").hidden == 24 and cfg.model("tft", "production").hidden == 24
    assert cfg.model("tft", "production").lstm_layers == 2
    with pytest.raises(ValueError, match=r"models.tft: unknown setting\(s\) \['hiden'\]"):
        TrainConfig(models={"tft": {"hiden": 24}})
    with pytest.raises(ValueError, match="models.lstm"):
        TrainConfig(models={"lstm": {}})
    for arch, bad, message in (("tft", {"hidden": 30, "heads": 4}, "multiple of heads"),
                               ("attention", {"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
                               ("mamba2", {"headdim": 7}, "multiple of headdim"), ("mlp", {"layers": 0}, "positive")):
        with pytest.raises(ConfigError, match=rf"train.models.{arch}, over the tiny preset: .*{message}"):
            TrainConfig(models={arch: bad}).model(arch, "tiny")


def test_ensemble_weights_go_to_the_member_that_forecasts_and_stay_on_the_simplex():
    rng = np.random.default_rng(0)
    y = rng.normal(0.0, 1.0, (3000, 2))
    informed = (0.8 * y + rng.normal(0.0, 0.3, y.shape))[..., None] + np.array([-0.5, 0.0, 0.5])
    noise = rng.normal(0.0, 1.0, (3000, 2, 3))
    weights = fit_weights(np.stack([noise, informed, noise[::-1]]), y, (0.1, 0.5, 0.9))
    np.testing.assert_allclose(weights.sum(axis=0), 1.0)
    assert (weights >= 0).all() and (weights[1] > 0.95).all()
    assert np.array_equal(weights, fit_weights(np.stack([noise, informed, noise[::-1]]), y, (0.1, 0.5, 0.9)))


def test_an_ensemble_is_fitted_on_the_validation_range_only(tmp_path):
    """The test range's data can be anything: the weights do not move."""
    store = LocalModelStore(tmp_path)
    full = data(4_000)
    ids, forecasters = [], []
    for arch in ("mlp", "mamba2"):
        make_deterministic(1)
        model = Trainer(full, arch, CFG.model(arch, "tiny"), CFG, 1, torch.device("cpu")).run().model
        forecasters.append(model)
        ids.append(f"{arch}-{parameter_hash(model)[:12]}")
    request = TrainRequest("ensemble", ["synthetic"], None, None, 1, "cpu", "tiny", False)
    weights = []
    for scramble in (False, True):
        d = data(4_000)
        if scramble:  # other outcomes in the test range
            d.labels[d.splits.test] = np.random.default_rng(3).normal(size=(d.splits.test.size, len(CFG.horizons)))
        trained = train_ensemble(d, request, ids, forecasters, SPEC, CFG, store)
        weights.append(trained.manifest.training["weights"])
    assert weights[0] == weights[1]
    assert trained.manifest.members[0]["model_id"] == ids[0] and trained.manifest.model_id.startswith("ensemble-")


# Ops with no deterministic CUDA kernel (torch.use_deterministic_algorithms' list) or that add through
# atomics: CI has no GPU to raise on them, so the models' and the training's sources are read for them.
NONDETERMINISTIC = ("cumsum(", "cumprod(", "scatter_add", "index_add", "index_put(", ".put_(", "bincount(", "histc(",
                    "scatter_reduce", "embedding_bag", "ctc_loss", "nll_loss2d", "interpolate(", "kthvalue(", ".median(")


def test_no_model_or_training_source_calls_an_op_without_a_deterministic_cuda_kernel():
    sources = [*(ROOT / "foxhunt" / "models").glob("*.py"), *(ROOT / "foxhunt" / "training").glob("*.py")]
    found = [(path.name, op) for path in sources for op in NONDETERMINISTIC
             if op in path.read_text()]
    assert found == []


def test_prefix_sums_and_segment_sums_equal_their_definitions():
    from foxhunt.models.mamba2 import prefix_sums, segment_sums

    x = torch.randn(3, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(prefix_sums(x), torch.cumsum(x, -1))
    seg = segment_sums(x)
    for i in range(7):
        for j in range(7):
            want = x[:, j + 1 : i + 1].sum(-1) if i >= j else torch.full((3,), float("-inf"), dtype=torch.float64)
            torch.testing.assert_close(seg[:, i, j], want)
