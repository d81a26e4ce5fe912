"""A stored model opened for use: its files read from the store, its parameters checked against its
manifest's hash and its feature set against the configured one (models/artifact.py)."""

from __future__ import annotations

from typing import cast

from torch import nn

from foxhunt.errors import ModelError
from foxhunt.models.artifact import Manifest, check_features, read_manifest, unpack, unpack_agent, unpack_ensemble
from foxhunt.models.ensemble import Ensemble
from foxhunt.models.forecaster import Forecaster
from foxhunt.ports import ModelStore


def open_model(models: ModelStore, mid: str, feature_digest: str | None) -> tuple[Forecaster | Ensemble, Manifest]:
    """A stored model, its hash checked, and its feature set checked against `feature_digest` where given;
    an ensemble with its members, each checked too."""
    files = models.get(mid)
    where = f"model {mid} in {models.location}"
    manifest = read_manifest(files, where)
    if manifest.agent is not None:
        raise ModelError(f"{where} is a trading agent ({manifest.arch}), not a forecaster: it acts"
                         " (`foxhunt models eval`), it does not score")
    if manifest.arch != "ensemble":
        return unpack(files, where, feature_digest)
    check_features(manifest, where, feature_digest)
    forecasters = []
    for ref in manifest.members:
        member, member_manifest = open_model(models, ref["model_id"], feature_digest)
        if member_manifest.parameter_sha256 != ref["parameter_sha256"]:
            raise ModelError(f"{where}: member {ref['model_id']} has other weights than the ensemble was fitted to")
        forecasters.append(cast(Forecaster, member))
    return unpack_ensemble(files, where, forecasters), manifest


def open_agent(models: ModelStore, mid: str, feature_digest: str | None) -> tuple[nn.Module, Manifest]:
    """A stored trading agent, its hash checked, and its feature set checked against `feature_digest`
    where given."""
    files = models.get(mid)
    where = f"model {mid} in {models.location}"
    manifest = read_manifest(files, where)
    if manifest.agent is None:
        raise ModelError(f"{where} is a forecaster ({manifest.arch}), not a trading agent")
    check_features(manifest, where, feature_digest)
    return unpack_agent(files, where)
