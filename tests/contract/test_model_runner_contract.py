"""One suite over every ports.ModelRunner: the torch runner on the CPU, and on CUDA where there is a GPU (it
skips here without one, and says so; on the H200 the CUDA runner replays CUDA graphs). The contract is the
port's docstring: loads check hash and features, a row's forecast is its own, failures are ModelErrors
that say what kind they are."""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import pytest
import torch

from foxhunt.adapters.inference.runner import TorchRunner
from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.core.features import FeatureSpec
from foxhunt.errors import ModelError
from foxhunt.models.artifact import WEIGHTS, FeatureSetRef, Manifest, model_id, pack
from foxhunt.models.configs import ARCHITECTURES, Shape, TrainConfig
from foxhunt.models.forecaster import build, parameter_hash
from tests.stored import FUSABLE, files

SPEC = FeatureSpec()
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA runner runs on a GPU machine")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=CUDA)])
def device(request) -> str:
    return request.param


def runner_with(tmp_path, device: str, batch: int = 4, seed: int = 1, **model) -> tuple[TorchRunner, str]:
    store = LocalModelStore(tmp_path / "models")
    mid, stored = files(seed, **model)
    store.put(mid, stored)
    runner = TorchRunner(store, device, batch=batch)
    runner.prepare()
    return runner, mid


def windows(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 4, SPEC.width)).astype(np.float32)


def test_prepare_names_the_device_and_the_switches_before_any_load(tmp_path, device):
    store = LocalModelStore(tmp_path / "models")
    runner = TorchRunner(store, device)
    fingerprint, switches = runner.prepare()
    assert runner.device.startswith(device) and fingerprint["device"] == device
    assert switches["deterministic_algorithms"] == "on" and switches["tf32"] == "off"


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch.compile's,
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")  # on CUDA (TF32 is off on purpose)
def test_a_loaded_model_describes_what_it_reads_and_writes(tmp_path, device):
    runner, mid = runner_with(tmp_path, device)
    info = runner.load(mid, SPEC.digest())
    assert info.model_id == mid and len(info.parameter_sha256) == 64 and info.arch == "mlp"
    assert (info.window, info.features, info.horizons, info.quantiles) == (4, SPEC.width, [1, 4], [0.5])
    assert info.feature_digest == SPEC.digest() and info.batch == 4 and info.graph == (device == "cuda")
    assert not info.compiled
    fused = TorchRunner(runner.store, device, batch=4, compile=True)
    fused.prepare()
    assert fused.load(mid, SPEC.digest()).compiled == (device == "cuda")  # the CPU always runs eagerly
    assert not fused.load(mid, SPEC.digest(), like=info).compiled  # as a journal says it was served


def test_fuse_serves_attention_in_foxhunt_s_kernels_on_cuda_the_others_as_they_were_and_says_which(tmp_path, device):
    """[scoring] fuse: an attention model served by its Triton kernels on CUDA (eagerly on the CPU), a model
    without kernels of its own as without fuse; a journal's LoadedModel says how to serve it again."""
    store = LocalModelStore(tmp_path / "models")
    (attention, stored), (mlp, more) = files(arch="attention", values=FUSABLE["attention"], window=12), files()
    store.put(attention, stored)
    store.put(mlp, more)
    runner = TorchRunner(store, device, batch=4, fuse=True)
    runner.prepare()
    info = runner.load(attention, SPEC.digest())
    assert info.fused == (device == "cuda") and not info.compiled and info.graph == (device == "cuda")
    assert not runner.load(mlp, SPEC.digest()).fused
    assert not runner.load(attention, SPEC.digest(), like=msgspec.structs.replace(info, fused=False)).fused
    plain = TorchRunner(store, device, batch=4)
    plain.prepare()
    assert plain.load(attention, SPEC.digest(), like=info).fused == (device == "cuda")


@pytest.mark.parametrize(("arch", "fuse"), [(arch, False) for arch in ARCHITECTURES] + [
    ("attention", True), ("mamba2", True), ("tft", True)])
def test_a_row_s_forecast_is_its_own_and_the_same_every_call(tmp_path, device, arch, fuse):
    """Every architecture, and the models served by foxhunt's fused kernels (on CUDA; eagerly on the CPU):
    a row's forecast is the same alone, among others and in any place among them."""
    runner, mid = runner_with(tmp_path, device, arch=arch, values=FUSABLE[arch] if fuse else None)
    runner.fuse = fuse
    assert runner.load(mid, SPEC.digest()).fused == (fuse and device == "cuda")
    rows = windows(4)
    together = runner.score(mid, rows)
    assert together.shape == (4, 2, 1) and together.dtype == np.float32
    alone = np.stack([runner.score(mid, rows[i : i + 1])[0] for i in range(4)])
    mixed = runner.score(mid, np.concatenate([rows[:1], windows(3, seed=9)]))[0]
    assert np.array_equal(together, alone) and np.array_equal(together[0], mixed)
    assert np.array_equal(runner.score(mid, rows), together)


def test_a_missing_a_corrupted_and_another_feature_set_s_model_are_load_failures(tmp_path, device):
    runner, mid = runner_with(tmp_path, device)
    with pytest.raises(ModelError, match="no model mlp-000000000000") as missing:
        runner.load("mlp-000000000000", SPEC.digest())
    with pytest.raises(ModelError, match="trained on feature set core v1"):
        runner.load(mid, "0" * 64)
    weights = runner.store.root / mid / WEIGHTS
    weights.write_bytes(weights.read_bytes()[:-8] + bytes(8))
    with pytest.raises(ModelError, match="a file is corrupted or was changed"):
        runner.load(mid, SPEC.digest())
    assert missing.value.what == "error"  # the store's word; the scoring service records it as a load failure
    with pytest.raises(ModelError, match="is not loaded") as unloaded:
        runner.score(mid, windows(1))
    assert unloaded.value.what == "load"


def test_loading_again_loads_afresh(tmp_path, device):
    runner, mid = runner_with(tmp_path, device)
    runner.load(mid, SPEC.digest())
    first = runner.score(mid, windows(2))
    runner.load(mid, SPEC.digest())
    assert np.array_equal(runner.score(mid, windows(2)), first)


def test_windows_of_the_wrong_shape_or_too_many_are_errors_not_crashes(tmp_path, device):
    runner, mid = runner_with(tmp_path, device, batch=2)
    runner.load(mid, SPEC.digest())
    for bad in (windows(3), np.zeros((1, 5, SPEC.width), dtype=np.float32)):
        with pytest.raises(ModelError, match="expected 1 to 2 windows of shape") as error:
            runner.score(mid, bad)
        assert error.value.what == "error"


def test_the_input_digest_is_the_sha256_of_the_float32_bytes():
    w = windows(1)[0]
    assert TorchRunner.input_digest(w) == hashlib.sha256(w.tobytes()).hexdigest()
    assert TorchRunner.input_digest(w.astype(np.float64)) == TorchRunner.input_digest(w)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_architecture_serves(tmp_path, arch):
    """Each architecture through the runner on the CPU (on CUDA: tests/ml/test_gpu.py)."""
    shape = Shape(window=8, features=SPEC.width, horizons=(1, 4), quantiles=(0.1, 0.5, 0.9))
    model = build(arch, TrainConfig().model(arch, "tiny"), shape, 3)
    sha = parameter_hash(model)
    manifest = Manifest(model_id=model_id(arch, sha), arch=arch, size="tiny",
                        config=msgspec.to_builtins(TrainConfig().model(arch, "tiny")), shape=shape,
                        seed=3, parameter_sha256=sha,
                        feature_set=FeatureSetRef(name=SPEC.name, version=SPEC.version, digest=SPEC.digest(), spec={}))
    store = LocalModelStore(tmp_path / "models")
    store.put(manifest.model_id, pack(model, manifest))
    runner = TorchRunner(store, "cpu", batch=2)
    runner.prepare()
    runner.load(manifest.model_id, SPEC.digest())
    out = runner.score(manifest.model_id, np.random.default_rng(1).normal(size=(2, 8, SPEC.width)).astype(np.float32))
    assert out.shape == (2, 2, 3) and np.isfinite(out).all()


def test_out_of_memory_is_a_model_error_that_says_so(tmp_path, device, monkeypatch):
    """What torch raises when the device's memory is gone, from a call and from a load, is a ModelError
    whose `what` is out_of_memory (the scoring service journals it as such)."""
    from foxhunt.adapters.inference import runner as runner_module

    runner, mid = runner_with(tmp_path, device)
    runner.load(mid, SPEC.digest())

    def exhausted(*_args, **_kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(runner.scorers[mid], "score", exhausted)
    with pytest.raises(ModelError, match="out of memory") as called:
        runner.score(mid, windows(1))
    assert called.value.what == "out_of_memory"
    monkeypatch.setattr(runner_module, "Scorer", exhausted)
    with pytest.raises(ModelError, match="out of memory") as loading:
        runner.load(mid, SPEC.digest())
    assert loading.value.what == "out_of_memory" and mid not in runner.scorers
