"""A tiny stored model's files, as a model store keeps them, for the contract suites of the store and the
runner (no boto3 here: the GPU machine runs the runner's suite without it)."""

from __future__ import annotations

from foxhunt.core.features import FeatureSpec
from foxhunt.models.artifact import FeatureSetRef, Manifest, model_id, pack
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.forecaster import build, parameter_hash

SPEC = FeatureSpec()


def files(seed: int = 1, spec: FeatureSpec = SPEC) -> tuple[str, dict[str, bytes]]:
    shape = Shape(window=4, features=spec.width, horizons=(1, 4), quantiles=(0.5,))
    model = build("mlp", TrainConfig().model("mlp", "tiny"), shape, seed)
    sha = parameter_hash(model)
    manifest = Manifest(
        model_id=model_id("mlp", sha), arch="mlp", size="tiny", config={"hidden": 16, "layers": 2, "dropout": 0.0},
        shape=shape, seed=seed, parameter_sha256=sha,
        feature_set=FeatureSetRef(name=spec.name, version=spec.version, digest=spec.digest(), spec={}),
    )
    return manifest.model_id, pack(model, manifest)
