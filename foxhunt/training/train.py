"""`foxhunt train` and `foxhunt models eval`, from the data set to the stored model: load the journals'
market data, make torch deterministic, train (resuming from the run's checkpoint if asked), evaluate on
the validation and test ranges, and store the weights with their manifest."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import msgspec
import numpy as np
import torch

import foxhunt
from foxhunt.adapters.models.opening import open_model
from foxhunt.core.features import FeatureSpec
from foxhunt.errors import ConfigError, ModelError
from foxhunt.models.artifact import FeatureSetRef, Manifest, model_id, pack, read_manifest
from foxhunt.models.configs import TrainConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.ensemble import STEPS, Ensemble, fit_weights
from foxhunt.models.forecaster import Forecaster, parameter_hash
from foxhunt.ports import JournalStore, ModelStore
from foxhunt.training import dataset, metrics
from foxhunt.training.trainer import Trainer, predict


class TrainRequest(NamedTuple):
    arch: str
    journals: list[str]
    start_ns: int | None
    end_ns: int | None
    seed: int
    device: str  # cpu or cuda
    size: str  # tiny or production
    resume: bool


class Trained(NamedTuple):
    manifest: Manifest
    stored: bool  # False: the store had this model already (the same weights)


async def load(store: JournalStore, request: TrainRequest, spec: FeatureSpec, cfg: TrainConfig,
               *, splits: bool = True) -> dataset.Dataset:
    market, sources = await dataset.read_market_data(store, request.journals, request.start_ns, request.end_ns)
    return dataset.build(market, sources, spec, cfg, splits=splits)


def device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: this machine's torch sees no CUDA device (torch"
                          f" {torch.__version__}, CUDA {torch.version.cuda or 'not built in'})")
    return torch.device(name)


def run_key(request: TrainRequest, spec: FeatureSpec, cfg: TrainConfig, data: dataset.Dataset) -> str:
    """What names a training run's checkpoint: everything that decides its weights."""
    body = msgspec.json.encode({
        "arch": request.arch, "size": request.size, "seed": request.seed, "device": request.device,
        "features": spec.digest(), "train": cfg, "sources": data.sources,
        "range": [request.start_ns, request.end_ns],
    }, order="sorted")
    return hashlib.sha256(body).hexdigest()[:20]


def train(data: dataset.Dataset, request: TrainRequest, spec: FeatureSpec, cfg: TrainConfig, models: ModelStore,
          checkpoints: Path, progress: Callable[[int, dict[str, float]], None] | None = None) -> Trained:
    switches = make_deterministic(cfg.threads)  # before any CUDA work
    where = device(request.device)
    model_cfg = cfg.model(request.arch, request.size)  # type: ignore[arg-type]
    trainer = Trainer(data, request.arch, model_cfg, cfg, request.seed, where,
                      checkpoints / f"{request.arch}-{run_key(request, spec, cfg, data)}.pt")
    outcome = trainer.run(progress, resume=request.resume)
    splits = data.splits
    assert splits is not None
    evaluation = {"validation": scores(outcome.model, data, splits.validation),
                  "test": scores(outcome.model, data, splits.test)}
    training = {
        "steps": outcome.steps, "best_step": outcome.best_step, "best_validation_loss": outcome.best_loss,
        "stopped_early": outcome.stopped_early, "resumed_from": outcome.resumed_from, "history": outcome.history,
    }
    manifest = _manifest(outcome.model, request, spec, cfg, data, msgspec.to_builtins(model_cfg), training,
                         evaluation, switches, where)
    return Trained(manifest, models.put(manifest.model_id, pack(outcome.model, manifest)))


def _manifest(model: Forecaster | Ensemble, request: TrainRequest, spec: FeatureSpec, cfg: TrainConfig,
              data: dataset.Dataset, config: dict, training: dict, evaluation: dict, switches: dict[str, str],
              where: torch.device, members: list[dict] | None = None) -> Manifest:
    sha = parameter_hash(model)
    return Manifest(
        model_id=model_id(request.arch, sha), arch=request.arch, size=request.size, config=config,
        shape=model.shape, seed=request.seed,
        feature_set=FeatureSetRef(name=spec.name, version=spec.version, digest=spec.digest(),
                                  spec=msgspec.to_builtins(spec)),
        parameter_sha256=sha,
        training={
            "journals": msgspec.to_builtins(data.sources), "from_ns": request.start_ns, "to_ns": request.end_ns,
            "samples": data.describe(), "symbols": data.symbols, "config": msgspec.to_builtins(cfg),
        } | training,
        determinism=switches, environment=fingerprint(where) | {"foxhunt": foxhunt.__version__},
        metrics=evaluation, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), members=members or [],
    )


def members(models: ModelStore, ids: list[str], spec: FeatureSpec) -> list[Forecaster]:
    """An ensemble's members from the store, each verified, none an ensemble itself."""
    out = []
    for mid in ids:
        model, _ = open_model(models, mid, spec.digest())
        if not isinstance(model, Forecaster):
            raise ModelError(f"model {mid} is an ensemble; an ensemble's members are forecasters")
        out.append(model)
    if len(out) < 2 or len(set(ids)) != len(ids):
        raise ModelError(f"an ensemble needs two or more different members, got {', '.join(ids) or 'none'}")
    first = out[0].shape
    for mid, m in zip(ids, out, strict=True):
        if (m.shape.horizons, m.shape.quantiles) != (first.horizons, first.quantiles):
            raise ModelError(f"model {mid} forecasts horizons {list(m.shape.horizons)} and quantiles"
                             f" {list(m.shape.quantiles)}, model {ids[0]} {list(first.horizons)} and"
                             f" {list(first.quantiles)}: an ensemble's members must agree")
    return out


def ensemble_config(forecasters: list[Forecaster], base: TrainConfig) -> TrainConfig:
    """The data set an ensemble reads: windows as long as its longest member's, the members' horizons."""
    first = forecasters[0].shape
    return msgspec.structs.replace(base, window=max(m.shape.window for m in forecasters), horizons=first.horizons,
                                   quantiles=first.quantiles)


def train_ensemble(data: dataset.Dataset, request: TrainRequest, ids: list[str], forecasters: list[Forecaster],
                   spec: FeatureSpec, cfg: TrainConfig, models: ModelStore) -> Trained:
    """Fit the members' weights on the validation range only, evaluate on validation and test, store."""
    switches = make_deterministic(cfg.threads)
    cpu = torch.device("cpu")
    splits = data.splits
    assert splits is not None
    probe = Ensemble(forecasters, np.full((len(forecasters), len(cfg.horizons)), 1.0 / len(forecasters))).eval()
    ends = splits.validation
    with torch.no_grad():
        preds = np.concatenate([probe.member_forecasts(torch.from_numpy(data.windows(ends[i : i + 1024]))).numpy()
                                for i in range(0, ends.size, 1024)], axis=1)
    weights = fit_weights(preds, data.labels[ends], cfg.quantiles)
    ensemble = Ensemble(forecasters, weights)
    evaluation = {"validation": scores(ensemble, data, splits.validation), "test": scores(ensemble, data, splits.test)}
    member_refs = [{"model_id": mid, "parameter_sha256": parameter_hash(m)} for mid, m in zip(ids, forecasters,
                                                                                              strict=True)]
    training = {"fit_steps": STEPS, "weights": ensemble.weights.tolist(), "fitted_on": "validation"}
    manifest = _manifest(ensemble, request, spec, cfg, data, {"members": ids}, training, evaluation, switches, cpu,
                         member_refs)
    return Trained(manifest, models.put(manifest.model_id, pack(ensemble, manifest)))


def remove(models: ModelStore, mid: str) -> None:
    """Delete a model, unless an ensemble in the store has it as a member (ModelError naming them)."""
    users = [other for other in models.ids()
             if other != mid and any(ref["model_id"] == mid for ref in manifest(models, other).members)]
    if users:
        raise ModelError(f"model {mid} is a member of {', '.join(users)}: remove {'them' if len(users) > 1 else 'it'}"
                         " first")
    models.remove(mid)


def manifest(models: ModelStore, mid: str) -> Manifest:
    """A stored model's manifest alone, its weights neither read nor checked (for listing)."""
    return read_manifest(models.get(mid), f"model {mid} in {models.location}")


def evaluate(model: Forecaster | Ensemble, data: dataset.Dataset) -> dict:
    """The metrics of `model` on every sample of `data` (built with eval_config of its manifest)."""
    return scores(model, data, data.samples)


def scores(model: Forecaster | Ensemble, data: dataset.Dataset, ends: np.ndarray) -> dict:
    """The metrics of `model`'s forecasts, on the CPU, for the samples ending at rows `ends`."""
    return metrics.evaluate(predict(model, data, ends, torch.device("cpu")), data.labels[ends],
                            model.shape.horizons, model.shape.quantiles)


def eval_config(trained: Manifest, base: TrainConfig) -> TrainConfig:
    """The training configuration a model was trained with, as far as it shapes the data set."""
    return msgspec.structs.replace(base, window=trained.shape.window, horizons=trained.shape.horizons,
                                   quantiles=trained.shape.quantiles)
