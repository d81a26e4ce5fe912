"""The fused models' Triton kernels (adapters/inference/fused/), compiled on a GPU, and on the CPU (CI) run
by Triton's interpreter (TRITON_INTERPRET=1, numpy doing each block's arithmetic): for attention, Mamba2 and
the TFT the kernels compute the model's forecast (within float32 rounding: they sum in other orders), for one
window and several, whole tiles of rows or not, with the input standardisation and the output scales
applied; the models they cannot serve are named with the reason. On the H200, tests/ml/test_gpu.py also
checks them at the production presets, inside the scorer's graph, and their bytes across calls and
processes."""

from __future__ import annotations

import os

import pytest
import torch

from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.forecaster import build
from tests.stored import FUSABLE

FUSED = ["attention", "mamba2", "tft"]

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="module")
def fused():
    """The package: its kernels compiled on a GPU, interpreted on the CPU (tests/conftest.py sets
    TRITON_INTERPRET where there is no GPU, before anything imports Triton)."""
    assert DEVICE.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1", "Triton's interpreter is off"
    from foxhunt.adapters.inference import fused

    make_deterministic(1)  # as the scorer serves: TF32 off (cuDNN's LSTM would use it by default)

    return fused


def forecaster(arch: str, window: int, features: int = 12, seed: int = 1, **values) -> torch.nn.Module:
    """A forecaster the kernels serve, with scales other than the identity, so the kernels must apply them."""
    shape = Shape(window=window, features=features, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    model = build(arch, TrainConfig(models={arch: FUSABLE[arch] | values}).model(arch, "tiny"), shape, seed).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.x_mean.uniform_(-0.5, 0.5, generator=g)
        model.x_scale.uniform_(0.5, 2.0, generator=g)
        model.y_scale.uniform_(0.5, 2.0, generator=g)
    return model.to(DEVICE)


@pytest.mark.parametrize("arch", FUSED)
@pytest.mark.parametrize(("window", "batch"), [(16, 1), (12, 3), (40, 2)])
def test_the_fused_kernels_compute_the_model_s_forecast(fused, arch, window, batch):
    """Windows of whole 16-row tiles and not, one window a call and several, a window past one tile of
    the sequence kernel's rows (40 of 64), and for Mamba2 longer than its chunks (8 rows). The TFT's
    encoder and decoder are foxhunt's LSTM kernels, its decoder over its 3 horizons."""
    model = forecaster(arch, window)
    x = torch.randn(batch, window, 12, generator=torch.Generator().manual_seed(window)).to(DEVICE)
    served = fused.fused(model, batch)
    with torch.no_grad():
        got, want = served.predict(x).clone(), model.predict(x)
    assert got.shape == want.shape == (batch, 3, 3)
    # float32 rounding only: sums in another order (measured here: about 2e-7 where forecasts reach 0.9)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # each window's forecast is its own: the first alone gives what it gave among the others
    alone = fused.fused(model, 1)
    with torch.no_grad():
        torch.testing.assert_close(alone.predict(x[:1]), got[:1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_the_tft_s_encoder_runs_its_layers_in_pipelined_pairs_whatever_their_number(fused, layers):
    """encoder_kernel takes two layers a launch, the second a step behind the first; an odd last layer
    runs alone. (Under the interpreter one program owns all the cells; on the H200, tests/ml/test_gpu.py
    checks the production preset, 16 programs a window waiting for each other between steps.)"""
    model = forecaster("tft", 12, lstm_layers=layers)
    x = torch.randn(2, 12, 12, generator=torch.Generator().manual_seed(layers)).to(DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(fused.fused(model, 2).predict(x), model.predict(x), rtol=1e-5, atol=1e-5)


def test_the_tft_s_lstm_programs_split_the_cells_so_that_a_call_s_programs_fit_half_the_multiprocessors(fused):
    """A window's programs wait for each other's h: all must be resident at once, so a call holds at most
    half the GPU's multiprocessors (the H200's 132) in programs, a layer's cells split among fewer programs
    as the batch grows; past one program a layer and window the kernel refuses, and the scorer serves the
    model unfused."""
    from foxhunt.adapters.inference.fused.tft import cells_per_program

    assert [cells_per_program(128, batch, 132) for batch in (1, 2, 4, 5, 8, 16, 33)] == [4, 8, 16, 32, 32, 64, 128]
    assert cells_per_program(32, 3, 132) == 4 and cells_per_program(128, 4, None) == 128  # the interpreter: one
    with pytest.raises(ValueError, match="at most 33 windows a call on this GPU, not 34"):
        cells_per_program(128, 34, 132)


@pytest.mark.parametrize("arch", FUSED)
def test_the_fused_model_keeps_its_own_copy_of_the_weights_and_refuses_another_shape(fused, arch):
    model = forecaster(arch, 16)
    served = fused.fused(model, 2)
    x = torch.randn(2, 16, 12, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    with torch.no_grad():
        before = served.predict(x).clone()
        for weight in model.parameters():  # the store's weights are what it serves, whatever the module does after
            weight.add_(1.0)
        assert torch.equal(served.predict(x), before)
    with pytest.raises(ValueError, match=r"windows of shape \(2, 16, 12\), got \(1, 16, 12\)"):
        served.predict(x[:1])


def test_a_model_the_kernels_cannot_serve_is_named_with_the_reason(fused):
    shape = Shape(window=8, features=12, horizons=(1,), quantiles=(0.5,))
    mlp = build("mlp", TrainConfig().model("mlp", "tiny"), shape, 1)
    assert fused.unfusable(mlp) == "no fused kernels for mlp (only for attention, mamba2, tft)"
    assert fused.unfusable(torch.nn.Linear(2, 2)) == (
        "no fused kernels for Linear (only for attention, mamba2, tft)")
    assert fused.unfusable(forecaster("tft", 16, hidden=48, heads=3)) == (
        "hidden size 48 is not a power of two of at least 16 (a tensor-core dot's)")
    assert fused.unfusable(forecaster("attention", 16, heads=4)) == (
        "head width 8 is not a power of two of at least 16 (a tensor-core dot's)")
    assert fused.unfusable(forecaster("mamba2", 16, d_state=24)) == (
        "state size 24 is not a power of two of at least 16 (a tensor-core dot's)")
    assert fused.unfusable(forecaster("mamba2", 129)) == "window 129 is longer than the fused kernels' 128 rows"
    assert fused.unfusable(forecaster("attention", 128)) is None
    with pytest.raises(ValueError, match="head width 8"):
        fused.fused(forecaster("attention", 16, heads=4), 1)


@pytest.mark.parametrize(("layers", "actions", "fractions"), [(2, 5, 16), (3, 3, 20)])
def test_the_fused_rainbow_policy_acts_on_the_networks_mean_returns(fused, layers, actions, fractions):
    """Rainbow-IQN's acting policy in the kernels (fused/rainbow.py): the eager policy's mean returns
    (GreedyQuantiles) within float32 rounding, the observation standardised, over fractions that fill
    their tile and that do not, and again after the network's embedding moves and `begin` runs."""
    from foxhunt.models.agent_configs import RainbowConfig
    from foxhunt.models.greedy import GreedyQuantiles
    from foxhunt.models.iqn import QuantileNetwork

    torch.manual_seed(layers)
    cfg = RainbowConfig(hidden=32, layers=layers, embedding=16, act_quantiles=fractions)
    net = QuantileNetwork(cfg, 7, actions).to(DEVICE).eval()
    with torch.no_grad():
        net.obs_mean.uniform_(-0.5, 0.5)
        net.obs_scale.uniform_(0.5, 2.0)
    served, eager = fused.fused_policy(net, DEVICE), GreedyQuantiles(net, DEVICE)
    obs = torch.randn(4, 1, 7, generator=torch.Generator().manual_seed(actions)).to(DEVICE)
    with torch.no_grad():
        for x in obs:
            got = served.forward(x).clone()
            assert got.shape == (1, actions)
            torch.testing.assert_close(got, eager.forward(x), rtol=1e-5, atol=1e-5)
        torch.nn.init.normal_(net.embed.weight)
        served.begin()
        eager.begin()
        torch.testing.assert_close(served.forward(obs[0]), eager.forward(obs[0]), rtol=1e-5, atol=1e-5)


def test_agents_without_kernels_are_named_with_the_reason(fused):
    from foxhunt.models.agent_configs import PpoConfig, RainbowConfig
    from foxhunt.models.iqn import QuantileNetwork
    from foxhunt.models.recurrent import RecurrentActorCritic

    assert fused.unfusable_policy(RecurrentActorCritic(PpoConfig(), 7, 3, False)) == (
        "no fused kernels for the agent RecurrentActorCritic (only for Rainbow-IQN's QuantileNetwork)")
    assert fused.unfusable_policy(QuantileNetwork(RainbowConfig(act_quantiles=200), 7, 3)) == (
        "200 fractions to act are more than the fused kernels' 128")
    with pytest.raises(ValueError, match="more than the fused kernels' 128"):
        fused.fused_policy(QuantileNetwork(RainbowConfig(act_quantiles=200), 7, 3), DEVICE)
