"""A tiny stored model's files, as a model store keeps them, for the contract suites of the store and the
runner (no boto3 here: the GPU machine runs the runner's suite without it)."""

from __future__ import annotations

from typing import Any

import msgspec

from foxhunt.core.features import FeatureSpec
from foxhunt.models.artifact import FeatureSetRef, Manifest, model_id, pack
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.forecaster import build, parameter_hash

SPEC = FeatureSpec()
# models that foxhunt's fused kernels serve (adapters/inference/fused/: heads, state, hidden 16 wide or more)
FUSABLE = {"attention": {"d_model": 32, "heads": 2, "layers": 2, "d_ff": 64},
           "mamba2": {"d_model": 32, "d_state": 16, "headdim": 16, "expand": 2, "layers": 2, "chunk": 8},
           "tft": {"hidden": 32, "heads": 2, "lstm_layers": 2}}


def files(seed: int = 1, spec: FeatureSpec = SPEC, arch: str = "mlp", values: dict[str, Any] | None = None,
          window: int = 4) -> tuple[str, dict[str, bytes]]:
    """An untrained model of `arch`'s tiny preset (with `values` over it), its weights seeded."""
    shape = Shape(window=window, features=spec.width, horizons=(1, 4), quantiles=(0.5,))
    cfg = TrainConfig(models={arch: values or {}}).model(arch, "tiny")
    model = build(arch, cfg, shape, seed)
    sha = parameter_hash(model)
    manifest = Manifest(
        model_id=model_id(arch, sha), arch=arch, size="tiny", config=msgspec.structs.asdict(cfg),
        shape=shape, seed=seed, parameter_sha256=sha,
        feature_set=FeatureSetRef(name=spec.name, version=spec.version, digest=spec.digest(), spec={}),
    )
    return manifest.model_id, pack(model, manifest)


def agent_files(arch: str, seed: int = 1, continuous: bool = False, spec: FeatureSpec = SPEC,
                symbol: str = "EURUSD", size: str = "tiny") -> tuple[str, dict[str, bytes]]:
    """A trading agent's files (untrained, its weights seeded) at the preset `size`: rainbow, ppo
    (`continuous` or not) or iql, observing `spec`'s rows and the environment's EXTRA values."""
    import msgspec
    import torch

    from foxhunt.models.agent_configs import EXTRA, AgentsConfig, EnvConfig
    from foxhunt.models.artifact import AgentShape
    from foxhunt.models.iql import ImplicitQ
    from foxhunt.models.iqn import QuantileNetwork
    from foxhunt.models.recurrent import RecurrentActorCritic

    env = EnvConfig(continuous=continuous, decision_every=2, warmup=8)
    cfg, width = AgentsConfig().agent(arch, size), spec.width + EXTRA
    torch.manual_seed(seed)
    net = (QuantileNetwork(cfg, width, env.actions) if arch == "rainbow" else ImplicitQ(cfg, width, env.actions)
           if arch == "iql" else RecurrentActorCritic(cfg, width, env.actions, continuous))
    sha = parameter_hash(net)
    manifest = Manifest(
        model_id=model_id(arch, sha), arch=arch, size=size, config=msgspec.to_builtins(cfg), seed=seed,
        parameter_sha256=sha, feature_set=FeatureSetRef(name=spec.name, version=spec.version, digest=spec.digest(),
                                                        spec={}),
        agent=AgentShape(observations=width, actions=env.actions, continuous=continuous, symbol=symbol,
                         env=msgspec.to_builtins(env), trading={}),
    )
    return manifest.model_id, pack(net, manifest)
