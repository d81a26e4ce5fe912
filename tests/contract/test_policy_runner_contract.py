"""One suite over every ports.PolicyRunner: the torch policy runner on the CPU, and on CUDA where there is a
GPU (it skips here without one, and says so), for each kind of stored agent (Rainbow, PPO with discrete and
continuous actions, IQL). The contract is the port's docstring: a load checks hash and features and says
what it serves, an action comes with the values it was chosen from, the same observations in the same
order give the same bytes (a recurrent policy's state afresh at each load), failures are ModelErrors that
say what kind they are."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.adapters.inference.policy import TorchPolicyRunner
from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.core.features import FeatureSpec
from foxhunt.errors import ModelError
from foxhunt.models.agent_configs import EXTRA, EnvConfig
from foxhunt.models.artifact import WEIGHTS
from tests.stored import SPEC, agent_files, files

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA runner runs on a GPU machine")
KINDS = {"rainbow": ("rainbow", False), "ppo": ("ppo", False), "ppo-continuous": ("ppo", True), "iql": ("iql", False)}


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=CUDA)])
def device(request) -> str:
    return request.param


@pytest.fixture(params=list(KINDS))
def kind(request) -> tuple[str, bool]:
    return KINDS[request.param]


def runner_with(tmp_path, device: str, kind: tuple[str, bool]) -> tuple[TorchPolicyRunner, str]:
    store = LocalModelStore(tmp_path / "models")
    mid, stored = agent_files(kind[0], continuous=kind[1])
    store.put(mid, stored)
    runner = TorchPolicyRunner(store, device)
    runner.prepare()
    return runner, mid


def observations(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, SPEC.width + EXTRA)).astype(np.float32)


def test_prepare_names_the_device_and_the_switches(tmp_path, device):
    runner = TorchPolicyRunner(LocalModelStore(tmp_path / "models"), device)
    fingerprint, switches = runner.prepare()
    assert runner.device.startswith(device) and fingerprint["device"] == device
    assert switches["deterministic_algorithms"] == "on"


def test_a_loaded_policy_says_what_it_reads_trades_and_was_trained_in(tmp_path, device, kind):
    runner, mid = runner_with(tmp_path, device, kind)
    info, env = runner.load(mid, SPEC.digest())
    assert info.model_id == mid and info.arch == kind[0] and len(info.parameter_sha256) == 64
    assert (info.window, info.features, info.horizons, info.quantiles, info.symbol) == (1, SPEC.width + EXTRA, [], [],
                                                                                        "EURUSD")
    assert env == EnvConfig(continuous=kind[1], decision_every=2, warmup=8)


def test_an_action_comes_with_the_values_it_was_chosen_from(tmp_path, device, kind):
    runner, mid = runner_with(tmp_path, device, kind)
    _, env = runner.load(mid, SPEC.digest())
    for obs in observations(20):
        action, outputs = runner.act(obs)
        assert isinstance(action, float) and np.isfinite(action) and outputs.dtype == np.float32
        if env.continuous:
            assert outputs.shape == (1,) and action == float(outputs[0])  # the mean, before clipping
        else:
            assert outputs.shape == (env.actions,) and action == float(np.argmax(outputs))


def test_the_same_observations_in_the_same_order_give_the_same_bytes_from_each_load(tmp_path, device, kind):
    runner, mid = runner_with(tmp_path, device, kind)
    obs = observations(30, seed=4)

    def play() -> bytes:
        runner.load(mid, SPEC.digest())  # afresh: a recurrent policy's state too
        return b"".join(np.float64(a).tobytes() + o.tobytes() for a, o in (runner.act(x) for x in obs))

    assert play() == play()
    runner.load(mid, SPEC.digest())
    runner.act(obs[0])
    _, second_after_first = runner.act(obs[1])
    runner.load(mid, SPEC.digest())
    _, second_alone = runner.act(obs[1])
    recurrent = kind[0] == "ppo"  # its state carries what it saw before; the others' outputs are the observation's
    assert (second_after_first.tobytes() != second_alone.tobytes()) == recurrent


def test_fuse_serves_rainbow_in_foxhunt_s_kernels_on_cuda_the_others_as_they_were_and_says_which(tmp_path, device,
                                                                                               kind):
    """[scoring] fuse: a Rainbow agent acts in its Triton kernels on CUDA (eagerly on the CPU), the other
    agents as without fuse; a journal's LoadedModel (`like`) says how to serve it again, whatever the
    runner's own setting."""
    runner, mid = runner_with(tmp_path, device, kind)
    fusing = TorchPolicyRunner(runner.store, device, fuse=True)
    fusing.prepare()
    info, _ = fusing.load(mid, SPEC.digest())
    assert info.fused == (device == "cuda" and kind[0] == "rainbow")
    plain, _ = runner.load(mid, SPEC.digest())
    assert not plain.fused
    assert runner.load(mid, SPEC.digest(), like=info)[0].fused == info.fused
    assert not fusing.load(mid, SPEC.digest(), like=plain)[0].fused
    bytes_of_loads = []
    for _ in range(2):
        assert fusing.load(mid, SPEC.digest())[0].fused == info.fused
        bytes_of_loads.append([fusing.act(x)[1].tobytes() for x in observations(8)])
    assert bytes_of_loads[0] == bytes_of_loads[1]


def test_what_cannot_be_served_is_a_model_error_that_says_why(tmp_path, device):
    store = LocalModelStore(tmp_path / "models")
    runner = TorchPolicyRunner(store, device)
    runner.prepare()
    with pytest.raises(ModelError) as missing:
        runner.load("ppo-000000000000", SPEC.digest())
    assert missing.value.what == "load" and "ppo-000000000000" in str(missing.value)
    with pytest.raises(ModelError, match="no policy is loaded"):
        runner.act(observations(1)[0])

    forecaster, stored = files()
    store.put(forecaster, stored)
    with pytest.raises(ModelError, match="is a forecaster"):
        runner.load(forecaster, SPEC.digest())

    mid, stored = agent_files("ppo")
    store.put(mid, stored)
    other = FeatureSpec(name="other")
    with pytest.raises(ModelError) as features:
        runner.load(mid, other.digest())
    assert features.value.what == "load" and "feature" in str(features.value)

    weights = bytearray(stored[WEIGHTS])
    weights[-1] ^= 1  # one bit of the last weight flipped in the store: its hash is not the manifest's
    (store.root / mid / WEIGHTS).write_bytes(bytes(weights))
    with pytest.raises(ModelError) as corrupted:
        runner.load(mid, SPEC.digest())
    assert corrupted.value.what == "load" and mid in str(corrupted.value)
