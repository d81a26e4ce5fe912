"""The torch policy runner (ports.PolicyRunner): a trading agent from the store, acting greedily as
evaluation plays it (models/greedy.py), one observation at a time. On the CPU it runs eagerly. On CUDA,
with `graph` (the default), after `make_deterministic`, its forward is captured once as a CUDA graph with
its copies in and out (graphs.py), PPO's recurrent state in its own static buffer, updated in place inside
the graph; a call writes the pinned observation and replays it, one launch. The same kernels as the eager
forward, so the same bits (tests/ml/test_gpu.py); the action is chosen from the outputs on the host in
both. With `fuse` (`[scoring] fuse`), an agent foxhunt has Triton kernels for (Rainbow-IQN: fused/
rainbow.py) acts in them instead, inside the graph; the others as without it, the reason logged.
"""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import numpy as np
import structlog
import torch

from foxhunt.adapters.inference.graphs import Captured
from foxhunt.adapters.inference.runner import resolve_device
from foxhunt.adapters.inference.scorer import fused_kernels
from foxhunt.adapters.models.opening import open_agent
from foxhunt.errors import ModelError
from foxhunt.messages.scores import LoadedModel
from foxhunt.models.agent_configs import EnvConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.greedy import Acting, Greedy, choose, greedy
from foxhunt.ports import ModelStore, PolicyRunner

log = structlog.get_logger("foxhunt.inference")


class GraphedPolicy:
    """A greedy policy (models/greedy.py, Acting) replayed as a CUDA graph (module docstring)."""

    def __init__(self, policy: Acting, width: int, device: torch.device) -> None:
        self.policy = policy
        # the warm-up's steps are no part of the policy's history: its state afresh before the capture
        self.captured = Captured(policy.forward, (1, width), device, after_warm_up=policy.begin)
        self.outputs = np.zeros(0, np.float32)

    def begin(self) -> None:
        with torch.cuda.stream(self.captured.stream):  # in the order of the replays
            self.policy.begin()

    def act(self, obs: np.ndarray) -> Any:
        self.captured.inputs[0] = obs
        self.outputs = self.captured.replay().reshape(-1).copy()
        return choose(self.outputs, self.policy.continuous)


class TorchPolicyRunner(PolicyRunner):
    def __init__(self, store: ModelStore, device: str = "auto", threads: int = 1, graph: bool = True,
                 fuse: bool = False) -> None:
        self.store, self.device, self.threads, self.graph, self.fuse = store, device, threads, graph, fuse
        self.torch_device = torch.device("cpu")
        self.served: tuple[str, Greedy] | None = None
        self._lock = threading.Lock()  # a load and an act may come from different worker threads, one at a time

    def prepare(self) -> tuple[dict[str, str], dict[str, str]]:
        switches = make_deterministic(self.threads)  # before any CUDA work
        self.torch_device = resolve_device(self.device)
        self.device = str(self.torch_device)
        return fingerprint(self.torch_device), switches

    def load(self, policy_id: str, feature_digest: str,
             like: LoadedModel | None = None) -> tuple[LoadedModel, EnvConfig]:
        with self._lock:
            self.served = None
            try:
                net, manifest = open_agent(self.store, policy_id, feature_digest)
            except ModelError as e:  # missing, corrupted, another feature set: it cannot be loaded
                raise ModelError(str(e), what="load") from e
            shape = manifest.agent
            assert shape is not None
            fuse = self.fuse if like is None else like.fused  # a journal's policy as it was served
            fused, unfused = fused_kernels(self.torch_device) if fuse else (None, "")
            if fused is not None:
                unfused = fused.unfusable_policy(net) or ""
            if unfused:
                log.warning("policy_not_fused", policy_id=policy_id, arch=manifest.arch, reason=unfused)
            try:
                trained: Greedy = greedy(net, self.torch_device)
                if fused is not None and not unfused:
                    trained = fused.fused_policy(trained.net, self.torch_device)
                if self.graph and self.torch_device.type == "cuda":
                    trained = GraphedPolicy(trained, shape.observations, self.torch_device)
            except torch.OutOfMemoryError as e:
                raise ModelError(f"policy {policy_id}: out of memory on {self.device}: {e}", what="out_of_memory") from e
            except (RuntimeError, ValueError) as e:
                raise ModelError(f"policy {policy_id} cannot be built on {self.device}: {e}", what="load") from e
            self.served = (policy_id, trained)
            return LoadedModel(
                model_id=policy_id, parameter_sha256=manifest.parameter_sha256, arch=manifest.arch, window=1,
                features=shape.observations, horizons=[], quantiles=[], feature_digest=manifest.feature_set.digest,
                batch=1, graph=isinstance(trained, GraphedPolicy), fused=fused is not None and not unfused,
                symbol=shape.symbol,
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
            return value, np.asarray(trained.outputs, dtype=np.float32)  # each act's own array
