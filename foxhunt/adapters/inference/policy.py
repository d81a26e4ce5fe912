"""The torch policy runner (ports.PolicyRunner): a trading agent from the store, acting greedily as
evaluation plays it (models/greedy.py), one observation at a time, eagerly on the configured
device. An agent's network is a few small layers at batch 1 (and PPO's recurrent cell steps once a
decision): no CUDA graph, whose gain the scoring source's forecasters need (docs/benchmarks.md)."""

from __future__ import annotations

import threading

import msgspec
import numpy as np
import torch

from foxhunt.adapters.inference.runner import resolve_device
from foxhunt.adapters.models.opening import open_agent
from foxhunt.errors import ModelError
from foxhunt.messages.scores import LoadedModel
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.greedy import Greedy, greedy
from foxhunt.ports import ModelStore, PolicyRunner


class TorchPolicyRunner(PolicyRunner):
    def __init__(self, store: ModelStore, device: str = "auto", threads: int = 1) -> None:
        self.store, self.device, self.threads = store, device, threads
        self.torch_device = torch.device("cpu")
        self.served: tuple[str, Greedy] | None = None
        self._lock = threading.Lock()  # a load and an act may come from different worker threads, one at a time

    def prepare(self) -> tuple[dict[str, str], dict[str, str]]:
        switches = make_deterministic(self.threads)  # before any CUDA work
        self.torch_device = resolve_device(self.device)
        self.device = str(self.torch_device)
        return fingerprint(self.torch_device), switches

    def load(self, policy_id: str, feature_digest: str) -> tuple[LoadedModel, EnvConfig]:
        with self._lock:
            self.served = None
            try:
                net, manifest = open_agent(self.store, policy_id, feature_digest)
            except ModelError as e:  # missing, corrupted, another feature set: it cannot be loaded
                raise ModelError(str(e), what="load") from e
            shape = manifest.agent
            assert shape is not None
            try:
                trained = greedy(net, self.torch_device)
            except torch.OutOfMemoryError as e:
                raise ModelError(f"policy {policy_id}: out of memory on {self.device}: {e}", what="out_of_memory") from e
            except (RuntimeError, ValueError) as e:
                raise ModelError(f"policy {policy_id} cannot be built on {self.device}: {e}", what="load") from e
            self.served = (policy_id, trained)
            return LoadedModel(
                model_id=policy_id, parameter_sha256=manifest.parameter_sha256, arch=manifest.arch, window=1,
                features=shape.observations, horizons=[], quantiles=[], feature_digest=manifest.feature_set.digest,
                batch=1, graph=False, symbol=shape.symbol,
            ), msgspec.convert(shape.env, EnvConfig)

    def act(self, observation: np.ndarray) -> tuple[float, np.ndarray]:
        with self._lock:
            if self.served is None:
                raise ModelError("no policy is loaded", what="load")
            policy_id, trained = self.served
            try:
                action = trained.act(np.ascontiguousarray(observation, dtype=np.float32))
            except torch.OutOfMemoryError as e:
                raise ModelError(f"policy {policy_id}: out of memory on {self.device}: {e}", what="out_of_memory") from e
            except (RuntimeError, ValueError) as e:  # what torch raises (a CUDA error among them)
                raise ModelError(f"policy {policy_id} failed on {self.device}: {e}") from e
            value = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
            return value, np.asarray(trained.outputs, dtype=np.float32).copy()
