"""`foxhunt train` and `foxhunt models eval`, from the data set to the stored model: load the journals'
market data, make torch deterministic, train (resuming from the run's checkpoint if asked), evaluate on
the validation and test ranges, and store the weights with their manifest."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import torch

import foxhunt
from foxhunt.core.features import FeatureSpec
from foxhunt.errors import ConfigError, ModelError
from foxhunt.models.artifact import FeatureSetRef, Manifest, model_id, pack, read_manifest, unpack
from foxhunt.models.configs import TrainConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.forecaster import parameter_hash
from foxhunt.ports import JournalStore, ModelStore
from foxhunt.training import dataset, metrics
from foxhunt.training.trainer import Trainer, predict

__all__ = ["TrainRequest", "Trained", "eval_config", "evaluate", "load", "open_model", "read_manifest", "train"]


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
    evaluation = {
        name: metrics.evaluate(predict(outcome.model, data, ends, torch.device("cpu")), data.labels[ends],
                               cfg.horizons, cfg.quantiles)
        for name, ends in (("validation", splits.validation), ("test", splits.test))
    }
    sha = parameter_hash(outcome.model)
    manifest = Manifest(
        model_id=model_id(request.arch, sha), arch=request.arch, size=request.size,
        config=msgspec.to_builtins(model_cfg), shape=outcome.model.shape, seed=request.seed,
        feature_set=FeatureSetRef(name=spec.name, version=spec.version, digest=spec.digest(),
                                  spec=msgspec.to_builtins(spec)),
        parameter_sha256=sha,
        training={
            "journals": msgspec.to_builtins(data.sources), "from_ns": request.start_ns, "to_ns": request.end_ns,
            "samples": data.describe(), "symbols": data.symbols, "config": msgspec.to_builtins(cfg),
            "steps": outcome.steps, "best_step": outcome.best_step, "best_validation_loss": outcome.best_loss,
            "stopped_early": outcome.stopped_early, "resumed_from": outcome.resumed_from,
            "history": outcome.history,
        },
        determinism=switches, environment=fingerprint(where) | {"foxhunt": foxhunt.__version__},
        metrics=evaluation, created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    stored = models.put(manifest.model_id, pack(outcome.model, manifest))
    return Trained(manifest, stored)


def open_model(models: ModelStore, mid: str, spec: FeatureSpec | None) -> tuple[Any, Manifest]:
    """A stored model, its hash checked, and its feature set checked against `spec` where given."""
    return unpack(models.get(mid), f"model {mid} in {models.location}", spec.digest() if spec else None)


def evaluate(models: ModelStore, mid: str, data_cfg: TrainConfig, data: dataset.Dataset, spec: FeatureSpec) -> dict:
    model, manifest = open_model(models, mid, spec)
    if data.window < manifest.shape.window:
        raise ModelError(f"model {mid} reads windows of {manifest.shape.window} rows")
    ends = data.samples
    return metrics.evaluate(predict(model, data, ends, torch.device("cpu")), data.labels[ends],
                            data_cfg.horizons, data_cfg.quantiles)


def eval_config(manifest: Manifest, base: TrainConfig) -> TrainConfig:
    """The training configuration a model was trained with, as far as it shapes the data set."""
    return msgspec.structs.replace(base, window=manifest.shape.window, horizons=manifest.shape.horizons,
                                   quantiles=manifest.shape.quantiles)
