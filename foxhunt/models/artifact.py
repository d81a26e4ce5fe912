"""A trained model as files: its weights (safetensors: tensors only, nothing executable, unlike a
pickle) and its manifest (JSON). Packing names the model by its parameters' SHA-256; unpacking checks
that hash and the feature set before anything can use the weights."""

from __future__ import annotations

from typing import Any

import msgspec
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import nn

from foxhunt.errors import ModelError
from foxhunt.models.agent_configs import AGENT_CONFIGS
from foxhunt.models.configs import MODEL_CONFIGS, Shape
from foxhunt.models.ensemble import Ensemble
from foxhunt.models.forecaster import Forecaster, parameter_hash
from foxhunt.models.iql import ImplicitQ
from foxhunt.models.iqn import QuantileNetwork
from foxhunt.models.recurrent import RecurrentActorCritic

WEIGHTS, MANIFEST = "weights.safetensors", "manifest.json"


class FeatureSetRef(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    version: int
    digest: str
    spec: dict[str, Any]


class AgentShape(msgspec.Struct, frozen=True, kw_only=True):
    """What a trading agent reads and does (training/rl/environment.py): observations of `observations`
    values, `actions` discrete target steps (or one continuous fraction), in the environment `env`
    (models/agent_configs.py, EnvConfig) on `symbol`, trading through the configuration `trading` (the
    journaled TradingConfig, as JSON)."""

    observations: int
    actions: int
    continuous: bool
    symbol: str
    env: dict[str, Any]
    trading: dict[str, Any]


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """What a model is and how it came to be: a forecaster (`shape`) or a trading agent (`agent`).
    `parameter_sha256` is models.forecaster.parameter_hash of the weights; `model_id` is the architecture
    and the hash's first 12 digits."""

    model_id: str
    arch: str
    size: str
    config: dict[str, Any]
    shape: Shape | None = None  # a forecaster's (an ensemble's: its members')
    seed: int
    feature_set: FeatureSetRef
    parameter_sha256: str
    training: dict[str, Any] = {}  # journals and their seq ranges, time range, samples, train config, steps
    determinism: dict[str, str] = {}
    environment: dict[str, str] = {}
    metrics: dict[str, Any] = {}
    created_at: str = ""
    members: list[dict[str, Any]] = []  # an ensemble's members: model_id and parameter_sha256, in order
    agent: AgentShape | None = None  # a trading agent's


def model_id(arch: str, sha256: str) -> str:
    return f"{arch}-{sha256[:12]}"


def pack(model: nn.Module, manifest: Manifest) -> dict[str, bytes]:
    """A forecaster's or an agent's weights, or an ensemble's own (its members are models of their own, by id)."""
    state = {"weights": model.weights} if isinstance(model, Ensemble) else model.state_dict()
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    return {WEIGHTS: save_tensors(tensors), MANIFEST: encode_manifest(manifest)}


def encode_manifest(manifest: Manifest) -> bytes:
    """The manifest file: indented JSON, for people to read."""
    return msgspec.json.format(msgspec.json.encode(manifest))


def read_manifest(files: dict[str, bytes], where: str) -> Manifest:
    try:
        return msgspec.json.decode(files[MANIFEST], type=Manifest)
    except KeyError:
        raise ModelError(f"{where}: no {MANIFEST}") from None
    except msgspec.DecodeError as e:
        raise ModelError(f"{where}: {MANIFEST} is not a foxhunt model manifest: {e}") from e


def check_features(manifest: Manifest, where: str, feature_digest: str | None) -> None:
    ref = manifest.feature_set
    if feature_digest is not None and ref.digest != feature_digest:
        raise ModelError(
            f"{where}: trained on feature set {ref.name} v{ref.version} ({ref.digest[:12]}), but the configured"
            f" feature set is {feature_digest[:12]}: train it again on the configured features, or configure"
            f" [features] as the model's manifest records them"
        )


def unpack(files: dict[str, bytes], where: str, feature_digest: str | None = None) -> tuple[Forecaster, Manifest]:
    """The model and its manifest; ModelError if the weights are missing or do not hash to the manifest's
    hash, or (given `feature_digest`, the configured feature set's) were trained on another feature set."""
    manifest = read_manifest(files, where)
    check_features(manifest, where, feature_digest)
    if manifest.arch not in MODEL_CONFIGS or manifest.shape is None:
        raise ModelError(f"{where}: unknown forecaster architecture {manifest.arch!r}")
    try:
        tensors = load_tensors(files[WEIGHTS])
        model = Forecaster(manifest.arch, msgspec.convert(manifest.config, MODEL_CONFIGS[manifest.arch]),
                           manifest.shape)
        model.load_state_dict(tensors)
    except KeyError:
        raise ModelError(f"{where}: no {WEIGHTS}") from None
    except (SafetensorError, RuntimeError, ValueError, msgspec.ValidationError) as e:  # safetensors', torch's
        raise ModelError(f"{where}: its weights cannot be loaded: {e}") from e
    verify(model, manifest, where)
    return model.eval(), manifest


def unpack_agent(files: dict[str, bytes], where: str) -> tuple[nn.Module, Manifest]:
    """A trading agent's network and its manifest, its hash checked (ModelError as for a forecaster)."""
    manifest = read_manifest(files, where)
    shape = manifest.agent
    if manifest.arch not in AGENT_CONFIGS or shape is None:
        raise ModelError(f"{where}: unknown agent architecture {manifest.arch!r}")
    try:
        cfg = msgspec.convert(manifest.config, AGENT_CONFIGS[manifest.arch])
        net: nn.Module
        if manifest.arch == "rainbow":
            net = QuantileNetwork(cfg, shape.observations, shape.actions)
        elif manifest.arch == "ppo":
            net = RecurrentActorCritic(cfg, shape.observations, shape.actions, shape.continuous)
        else:
            net = ImplicitQ(cfg, shape.observations, shape.actions)
        net.load_state_dict(load_tensors(files[WEIGHTS]))
    except KeyError:
        raise ModelError(f"{where}: no {WEIGHTS}") from None
    except (SafetensorError, RuntimeError, ValueError, msgspec.ValidationError) as e:
        raise ModelError(f"{where}: its weights cannot be loaded: {e}") from e
    verify(net, manifest, where)
    return net.eval(), manifest


def unpack_ensemble(files: dict[str, bytes], where: str, members: list[Forecaster]) -> Ensemble:
    """An ensemble from its files and its members (loaded and verified by the caller, in its manifest's order)."""
    manifest = read_manifest(files, where)
    try:
        weights = load_tensors(files[WEIGHTS])["weights"]
        ensemble = Ensemble(members, weights.numpy())
    except KeyError:
        raise ModelError(f"{where}: no ensemble weights") from None
    except (SafetensorError, RuntimeError, ValueError) as e:
        raise ModelError(f"{where}: its weights cannot be loaded: {e}") from e
    verify(ensemble, manifest, where)
    return ensemble.eval()


def verify(model: nn.Module, manifest: Manifest, where: str) -> None:
    actual = parameter_hash(model)
    if actual != manifest.parameter_sha256:
        raise ModelError(f"{where}: its weights hash to {actual}, but its manifest says {manifest.parameter_sha256}:"
                         " a file is corrupted or was changed")
