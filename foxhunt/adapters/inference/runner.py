"""The torch model runner (ports.ModelRunner): models from the store, each served by a Scorer (scorer.py)
at a fixed batch, as a CUDA graph on a GPU (of the eager, compiled or fused forward) and eagerly on the CPU."""

from __future__ import annotations

import threading

import numpy as np
import structlog
import torch

from foxhunt.adapters.inference.scorer import Scorer
from foxhunt.adapters.models.opening import open_model
from foxhunt.errors import ModelError
from foxhunt.messages.scores import LoadedModel
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.ports import ModelRunner, ModelStore

log = structlog.get_logger("foxhunt.inference")


def resolve_device(name: str) -> torch.device:
    """"auto": the first GPU when torch sees one, else the CPU; "cpu", "cuda" or "cuda:N" as named."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"scoring device {name!r}: torch sees no CUDA device here", what="load")
    return device


class TorchRunner(ModelRunner):
    def __init__(self, store: ModelStore, device: str = "auto", batch: int = 1, graph: bool = True,
                 threads: int = 1, compile: bool = False, fuse: bool = False) -> None:
        self.store = store
        self.device = device  # as configured until `prepare` resolves it
        self.torch_device = torch.device("cpu")
        self.batch, self.graph, self.threads, self.compile, self.fuse = batch, graph, threads, compile, fuse
        self.scorers: dict[str, Scorer] = {}
        self._lock = threading.Lock()  # load and score may come from different worker threads, one at a time

    def prepare(self) -> tuple[dict[str, str], dict[str, str]]:
        switches = make_deterministic(self.threads)  # before any CUDA work, resolve_device's included
        self.torch_device = resolve_device(self.device)
        self.device = str(self.torch_device)
        return fingerprint(self.torch_device), switches

    def load(self, model_id: str, feature_digest: str, like: LoadedModel | None = None) -> LoadedModel:
        with self._lock:
            self.scorers.pop(model_id, None)
            model, manifest = open_model(self.store, model_id, feature_digest)
            shape = manifest.shape
            compile, fuse = (self.compile, self.fuse) if like is None else (like.compiled, like.fused)
            try:
                scorer = Scorer(model, shape.window, shape.features, self.torch_device, self.batch, self.graph,
                                compile, fuse)
            except torch.OutOfMemoryError as e:
                raise ModelError(f"model {model_id}: out of memory on {self.device}: {e}", what="out_of_memory") from e
            except (RuntimeError, ValueError) as e:
                raise ModelError(f"model {model_id} cannot be built on {self.device}: {e}", what="load") from e
            if fuse and not scorer.fused:
                log.warning("model_not_fused", model_id=model_id, arch=manifest.arch, reason=scorer.unfused)
            self.scorers[model_id] = scorer
            return LoadedModel(
                model_id=model_id, parameter_sha256=manifest.parameter_sha256, arch=manifest.arch,
                window=shape.window, features=shape.features, horizons=list(shape.horizons),
                quantiles=list(shape.quantiles), feature_digest=manifest.feature_set.digest, batch=self.batch,
                graph=scorer.graph is not None, compiled=scorer.compiled, fused=scorer.fused,
            )

    def score(self, model_id: str, windows: np.ndarray) -> np.ndarray:
        with self._lock:
            scorer = self.scorers.get(model_id)
            if scorer is None:
                raise ModelError(f"model {model_id} is not loaded", what="load")
            try:
                return scorer.score(windows)
            except torch.OutOfMemoryError as e:
                raise ModelError(f"model {model_id}: out of memory on {self.device}: {e}", what="out_of_memory") from e
            except (RuntimeError, ValueError) as e:  # what torch raises (a CUDA error among them)
                raise ModelError(f"model {model_id} failed on {self.device}: {e}") from e
