"""One suite over every ports.ModelStore: the local directory, and S3 through boto3 against a real
S3-compatible HTTP server (moto's standalone server, in a subprocess: tests/s3_server.py), reached through
a TCP proxy that can break an upload half way."""

from __future__ import annotations

import boto3
import pytest
import torch

from foxhunt.adapters.models.store import LocalModelStore, S3ModelStore
from foxhunt.core.features import FeatureSpec
from foxhunt.errors import ModelError
from foxhunt.models.artifact import WEIGHTS, unpack
from foxhunt.models.forecaster import parameter_hash
from tests.s3_server import CREDENTIALS, free_port
from tests.stored import files

SPEC = FeatureSpec()


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path, monkeypatch):
    if request.param == "local":
        yield LocalModelStore(tmp_path / "models")
        return
    proxy = request.getfixturevalue("s3_server")
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    bucket = f"models-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    endpoint = f"http://127.0.0.1:{proxy.port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    store = S3ModelStore(f"s3://{bucket}/team/models", endpoint_url=endpoint)
    store.proxy = proxy
    yield store
    proxy.breaking = False


def test_a_stored_model_reads_back_whole_and_verified(store):
    mid, stored = files()
    assert store.ids() == [] and store.put(mid, stored) is True
    assert store.ids() == [mid]
    back = store.get(mid)
    assert back == stored
    model, manifest = unpack(back, mid, SPEC.digest())
    assert parameter_hash(model) == manifest.parameter_sha256 and manifest.model_id == mid


def test_putting_a_stored_id_again_changes_nothing(store):
    mid, stored = files()
    store.put(mid, stored)
    assert store.put(mid, stored) is False and store.get(mid) == stored


def test_several_models_list_sorted_and_remove_one_at_a_time(store):
    ids = []
    for seed in (1, 2, 3):
        mid, stored = files(seed)
        store.put(mid, stored)
        ids.append(mid)
    assert store.ids() == sorted(ids)
    store.remove(ids[1])
    assert store.ids() == sorted([ids[0], ids[2]])
    with pytest.raises(ModelError, match=f"no model {ids[1]} in {store.location}"):
        store.get(ids[1])
    with pytest.raises(ModelError, match="no model"):
        store.remove(ids[1])


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", ".hidden", "x" * 200])
def test_an_id_that_is_not_one_is_refused(store, bad):
    with pytest.raises(ModelError, match="not a model id"):
        store.get(bad)


def test_a_model_without_a_manifest_is_refused(store):
    with pytest.raises(ModelError, match="manifest.json"):
        store.put("mlp-000000000000", {WEIGHTS: b"x"})


def test_an_upload_broken_half_way_leaves_no_model_and_can_be_repeated(store):
    mid, stored = files()
    if isinstance(store, S3ModelStore):
        store.proxy.breaking = True
        with pytest.raises(ModelError, match=f"storing {WEIGHTS} of model {mid}"):
            store.put(mid, stored)
        assert store.proxy.cuts >= 1
        store.proxy.breaking = False
    else:  # a process killed while writing leaves its hidden folder half written; one killed while
        # removing, the model's folder without its manifest
        half = store.root / f".incoming-{mid}-12345"
        half.mkdir(parents=True)
        (half / WEIGHTS).write_bytes(stored[WEIGHTS][:100])
        (store.root / mid).mkdir()
        (store.root / mid / WEIGHTS).write_bytes(b"left behind")
    assert store.ids() == []
    with pytest.raises(ModelError, match="no model"):
        store.get(mid)
    assert store.put(mid, stored) is True and store.get(mid) == stored


def test_weights_changed_after_storing_are_refused_by_their_hash(store):
    mid, stored = files()
    weights = bytearray(stored[WEIGHTS])
    weights[-1] ^= 0x01  # the last byte of the last tensor's data
    with pytest.raises(ModelError, match="hash to .* but its manifest says"):
        unpack({**stored, WEIGHTS: bytes(weights)}, mid)
    with pytest.raises(ModelError, match="cannot be loaded"):
        unpack({**stored, WEIGHTS: stored[WEIGHTS][:50]}, mid)


def test_a_model_of_another_feature_set_is_refused_naming_both():
    other = FeatureSpec(name="wide", version=3, return_horizons=(1, 2))
    mid, stored = files(spec=other)
    with pytest.raises(ModelError, match=rf"feature set wide v3 \({other.digest()[:12]}\).*configured feature set is"
                                         rf" {SPEC.digest()[:12]}"):
        unpack(stored, mid, SPEC.digest())


def test_an_unreachable_bucket_is_an_error_naming_the_store(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    store = S3ModelStore("s3://nowhere/m", endpoint_url=f"http://127.0.0.1:{free_port()}", region="us-east-1")
    with pytest.raises(ModelError, match="s3://nowhere/m"):
        store.ids()


def test_a_location_that_is_not_s3_is_refused():
    with pytest.raises(ModelError, match="not an S3 location"):
        S3ModelStore("s3:///prefix")


def test_torch_loads_nothing_executable_from_a_store():
    """The weights are safetensors: a pickle in their place is refused, not run."""
    mid, stored = files()
    evil = {**stored, WEIGHTS: b"\x80\x04\x95" + bytes(100)}
    with pytest.raises(ModelError, match="cannot be loaded"):
        unpack(evil, mid)
    assert torch.tensor(1).item() == 1
