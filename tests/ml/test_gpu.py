"""The determinism checks on a CUDA device: the same seed gives the same weights, another seed others, a
resumed run the uninterrupted one's, and deterministic mode refuses an op that has no deterministic
kernel; graph replay equals eager; the scoring source on CUDA graphs records a journal that verifies on the
GPU and is numerically equivalent on the CPU; two processes score the same bytes; a served agent's graph
acts as its eager forward, and its journal verifies as the scores' does; the fused attention kernels
forecast as eager within float32 rounding (attention, Mamba2, the TFT), and a journal they scored verifies
identical on the GPU. Without CUDA (CI) they
skip and say so; the same logic runs on the CPU in test_models.py and test_scoring.py, and the
production-size checks on the H200 are bench/train_gpu.py's (docs/benchmarks.md)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from foxhunt.models.configs import ARCHITECTURES
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.forecaster import parameter_hash
from tests.ml.test_policies import agent_store  # noqa: F401 - the fixture: a tiny PPO agent in a store
from tests.ml.test_scoring import model_store  # noqa: F401 - the fixture: a tiny forecaster in a store

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here: GPU determinism is checked on the H200 (bench/train_gpu.py, docs/benchmarks.md)",
)


def cuda_train(arch, seed, **kwargs):
    from tests.ml.test_models import train  # the CPU suite's runs, on the GPU

    return train(arch, seed, device="cuda", **kwargs)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_on_cuda_the_same_seed_gives_the_same_weights_and_another_seed_others(arch):
    first = cuda_train(arch, 7)
    assert cuda_train(arch, 7) == first and cuda_train(arch, 8) != first


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_on_cuda_a_resumed_run_ends_with_the_uninterrupted_weights(arch, tmp_path):
    uninterrupted = cuda_train(arch, 5)
    with pytest.raises(KeyboardInterrupt):
        cuda_train(arch, 5, checkpoint=tmp_path / "run.pt", stop_at=6)
    assert cuda_train(arch, 5, checkpoint=tmp_path / "run.pt", resume=True) == uninterrupted


def test_deterministic_mode_refuses_an_op_without_a_deterministic_cuda_kernel():
    """Linear interpolation's backward adds through atomics on CUDA (what pytorch-forecasting's TFT uses,
    and why it cannot train in deterministic mode: docs/benchmarks.md)."""
    make_deterministic(1)
    x = torch.randn(1, 1, 8, device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
        torch.nn.functional.interpolate(x, scale_factor=2, mode="linear").sum().backward()


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_on_cuda_graph_replay_equals_eager_bitwise_and_rows_stay_independent(arch):
    from tests.ml.test_scorer import scorer, windows

    rows = windows(8)
    graphed = scorer(arch, batch=8, device="cuda", graph=True)
    eager = scorer(arch, batch=8, device="cuda", graph=False)
    assert np.array_equal(graphed.score(rows), eager.score(rows))
    assert np.array_equal(graphed.score(rows)[:1], graphed.score(rows[:1]))


async def test_a_journal_recorded_on_the_gpu_verifies_there_and_is_numerically_equivalent_on_the_cpu(model_store):
    """The scoring source on CUDA graphs in a paper run; its journal verified with every score recomputed on
    the GPU (identical) and on the CPU (another machine class: numerically equivalent, every decision the
    same, or the verify fails naming the decision that is not)."""
    from foxhunt.messages.scores import ModelScored, ModelsLoaded
    from tests.ml.test_scoring import cfg_for, of, paper_run

    store, model_id = model_store
    journal, summary, recorded = await paper_run(cfg_for(store, [model_id], device="cuda"))
    loaded = of(ModelsLoaded, recorded)[0]
    assert loaded.device.startswith("cuda") and loaded.models[0].graph and "gpu" in loaded.fingerprint
    assert len(of(ModelScored, recorded)) > 300 and summary["orders"] > 0
    print("GPU journal on the CPU:", (await verified_here_and_on_the_cpu(journal, summary, store))["scores"])


async def verified_here_and_on_the_cpu(journal, summary: dict, store) -> dict:
    """A journal scored on the GPU, verified with every score recomputed there (identical) and on the CPU
    (numerically equivalent, every decision the same): the CPU's report."""
    from foxhunt.adapters.inference.runner import TorchRunner
    from tests.ml.test_scoring import verify

    on_gpu = await verify(journal, TorchRunner(store, "cuda", batch=4))
    assert on_gpu["scores"].startswith("identical") and on_gpu["state_digest"] == summary["state_digest"]
    on_cpu = await verify(journal, TorchRunner(store, "cpu", batch=4))
    assert on_cpu["scores"].startswith("numerically equivalent, not identical: recorded on NVIDIA")
    assert on_cpu["largest_abs_diff"] < 1e-5 and on_cpu["state_digest"] == summary["state_digest"]
    return on_cpu


@pytest.mark.parametrize("fused", [None, "attention", "mamba2", "tft"])
def test_two_processes_give_identical_scores_on_the_gpu(request, tmp_path, fused):
    """The same stored model, the same windows, two processes, CUDA graphs: the same bytes (also from the
    fused kernels, compiled by Triton in each process)."""
    import subprocess
    import sys

    store, model_id = fusable_store(tmp_path, fused) if fused else request.getfixturevalue("model_store")
    fuse = fused is not None
    code = (
        "import sys, hashlib, numpy as np\n"
        "from foxhunt.adapters.inference.runner import TorchRunner\n"
        "from foxhunt.adapters.models.store import LocalModelStore\n"
        "from foxhunt.config import Config\n"
        "r = TorchRunner(LocalModelStore(__import__('pathlib').Path(sys.argv[1])), 'cuda', batch=4,"
        " fuse=sys.argv[3] == '1')\n"
        "r.prepare(); info = r.load(sys.argv[2], Config().features.digest())\n"
        "assert info.fused == (sys.argv[3] == '1')\n"
        "w = np.random.default_rng(3).normal(size=(64, 4, info.window, info.features)).astype(np.float32)\n"
        "print(hashlib.sha256(b''.join(r.score(sys.argv[2], x).tobytes() for x in w)).hexdigest())\n"
    )
    runs = [subprocess.run([sys.executable, "-c", code, str(store.root), model_id, str(int(fuse))],
                           capture_output=True, text=True, check=True).stdout.strip() for _ in range(2)]
    assert len(runs[0]) == 64 and runs[0] == runs[1]


# what torch.compile warns of on its way (torch 2.11): deprecations inside torch, and TF32 left off on
# purpose (models/determinism.py)
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")
async def test_a_journal_scored_by_compiled_models_verifies_identical_by_models_compiled_the_same_way(model_store):
    """[scoring] compile: the models' forwards fused by torch.compile inside the scorer's graph. The journal
    says so (LoadedModel.compiled), and verify compiles them the same way whatever its own configuration."""
    from foxhunt.adapters.inference.runner import TorchRunner
    from foxhunt.messages.scores import ModelScored, ModelsLoaded
    from tests.ml.test_scoring import cfg_for, of, paper_run, verify

    store, model_id = model_store
    journal, summary, recorded = await paper_run(cfg_for(store, [model_id], device="cuda", compile="true"), n=300)
    loaded = of(ModelsLoaded, recorded)[0]
    assert loaded.models[0].compiled and loaded.models[0].graph and of(ModelScored, recorded)
    again = await verify(journal, TorchRunner(store, "cuda", batch=4, compile=False))
    assert again["scores"].startswith("identical") and again["state_digest"] == summary["state_digest"]


@pytest.mark.parametrize("arch", ["attention", "mamba2", "tft"])
@pytest.mark.parametrize(("size", "batch"), [("tiny", 4), ("production", 1), ("production", 4)])
def test_on_cuda_the_fused_kernels_forecast_as_eager_within_float32_rounding_the_same_bytes_every_call(
        arch, size, batch):
    """[scoring] fuse (adapters/inference/fused/): the graph of the fused kernels against the graph of the
    eager model; its replay equals the fused kernels run without a graph, bitwise; a row's forecast does
    not depend on what the other rows held."""
    from foxhunt.adapters.inference.scorer import Scorer
    from foxhunt.models.configs import Shape, TrainConfig
    from foxhunt.models.forecaster import build
    from tests.stored import FUSABLE

    make_deterministic(1)
    shape = Shape(window=64, features=24, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    cfg = TrainConfig(models={arch: FUSABLE[arch] if size == "tiny" else {}}).model(arch, size)
    model = build(arch, cfg, shape, seed=3).eval()
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():  # scales other than the identity, which the kernels must apply
        model.x_mean.uniform_(-0.5, 0.5, generator=g)
        model.x_scale.uniform_(0.5, 2.0, generator=g)
        model.y_scale.uniform_(0.5, 2.0, generator=g)
    cuda = torch.device("cuda")
    eager = Scorer(model, 64, 24, cuda, batch=batch)
    fused = Scorer(model, 64, 24, cuda, batch=batch, fuse=True)
    unrolled = Scorer(model, 64, 24, cuda, batch=batch, graph=False, fuse=True)
    assert fused.fused and fused.graph is not None and unrolled.fused and not eager.fused
    rows = np.random.default_rng(5).normal(size=(32, batch, 64, 24)).astype(np.float32)
    got = np.stack([fused.score(w) for w in rows])
    want = np.stack([eager.score(w) for w in rows])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    again, unrolled_out = np.stack([fused.score(w) for w in rows]), np.stack([unrolled.score(w) for w in rows])
    assert np.array_equal(again, got), f"another call gave other bytes (up to {np.abs(again - got).max():.3g} off)"
    assert np.array_equal(unrolled_out, got), (
        f"the graph's replay is not the kernels run without it (up to {np.abs(unrolled_out - got).max():.3g} off)")
    if batch > 1:
        among = fused.score(np.concatenate([rows[0, :1], rows[1, 1:]]))[:1]
        assert np.array_equal(among, got[0, :1]), (
            f"a row's forecast follows the other rows' ({np.abs(among - got[0, :1]).max():.3g} off)")
    print(f"fused {arch} {size} batch {batch}: largest difference from eager {float(np.abs(got - want).max()):.3g}")


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("batch", [1, 4, 16])
def test_the_tft_s_lstm_kernel_gives_the_same_bytes_over_many_calls(layers, batch):
    """The fused TFT's LSTM programs share each step's h through global memory and wait for each other:
    2,000 calls, none may differ from the first (a race shows as an odd call). Batch 16 splits the cells
    among fewer programs (cells_per_program); an odd layer runs alone."""
    from foxhunt.adapters.inference import fused
    from foxhunt.models.configs import Shape, TrainConfig
    from foxhunt.models.forecaster import build

    make_deterministic(1)
    shape = Shape(window=64, features=24, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    cfg = TrainConfig(models={"tft": {"lstm_layers": layers}}).model("tft", "production")
    model = build("tft", cfg, shape, seed=3).eval().cuda()
    served = fused.fused(model, batch)
    x = torch.randn(batch, 64, 24, generator=torch.Generator().manual_seed(1)).cuda()
    with torch.no_grad():
        first = served.predict(x).clone()
        differing = sum(not torch.equal(served.predict(x), first) for _ in range(2000))
        torch.testing.assert_close(first, model.predict(x), rtol=1e-5, atol=1e-5)
    assert differing == 0, f"{differing} of 2,000 calls gave other bytes than the first"


def test_a_batch_the_tft_s_lstm_kernel_cannot_hold_resident_is_served_as_without_fuse_saying_why():
    """The TFT's LSTM kernel keeps a window's programs resident at once (they wait for each other): past
    a quarter of the multiprocessors' worth of windows (each window's two layers in programs of their own)
    the scorer serves the model as without fuse, naming why."""
    from foxhunt.adapters.inference.scorer import Scorer
    from foxhunt.models.configs import Shape, TrainConfig
    from foxhunt.models.forecaster import build

    make_deterministic(1)
    shape = Shape(window=16, features=24, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    model = build("tft", TrainConfig(models={"tft": {"hidden": 32}}).model("tft", "tiny"), shape, seed=3).eval()
    most = torch.cuda.get_device_properties(0).multi_processor_count // 2 // 2
    served = Scorer(model, 16, 24, torch.device("cuda"), batch=most + 1, fuse=True)
    assert not served.fused
    assert served.unfused == (
        f"the fused TFT's LSTM kernel runs at most {most} windows a call on this GPU, not {most + 1}")
    assert Scorer(model, 16, 24, torch.device("cuda"), batch=most, fuse=True).fused


def fusable_store(tmp_path, arch: str):
    """An (untrained, seeded) model of `arch` that the fused kernels serve, in a store."""
    from foxhunt.adapters.models.store import LocalModelStore
    from tests.stored import FUSABLE, files

    store = LocalModelStore(tmp_path / "models")
    model_id, stored = files(arch=arch, values=FUSABLE[arch], window=16)
    store.put(model_id, stored)
    return store, model_id


@pytest.mark.parametrize("arch", ["attention", "mamba2", "tft"])
async def test_a_journal_scored_by_fused_kernels_verifies_identical_by_kernels_fused_the_same_way(tmp_path, arch):
    """[scoring] fuse: the journal says which models its kernels served (LoadedModel.fused), and verify
    serves them the same way whatever its own configuration; on the CPU it is numerically equivalent."""
    from foxhunt.messages.scores import ModelScored, ModelsLoaded
    from tests.ml.test_scoring import cfg_for, of, paper_run

    store, model_id = fusable_store(tmp_path, arch)
    journal, summary, recorded = await paper_run(cfg_for(store, [model_id], device="cuda", fuse="true"), n=400)
    loaded = of(ModelsLoaded, recorded)[0]
    assert loaded.models[0].fused and loaded.models[0].graph and "triton" in loaded.fingerprint
    assert of(ModelScored, recorded)  # verified by a runner configured without fuse: it fuses as the journal says
    print("fused GPU journal on the CPU:", (await verified_here_and_on_the_cpu(journal, summary, store))["scores"])


@pytest.mark.parametrize("kind", ["rainbow", "ppo"])
def test_on_cuda_an_agent_trained_with_graphed_updates_has_the_eager_weights_and_resumes_exactly(kind, tmp_path):
    from tests.ml.test_agents import EDGE, market, trained

    small = market(12_000, **EDGE)
    over = {"learn_start": 256} if kind == "rainbow" else {}
    runs = {}
    for label, graph in (("graph", True), ("again", True), ("eager", False)):
        trainer, _ = trained(kind, small, steps=2048, device="cuda", graph=graph, **over)
        trainer.run()
        runs[label] = parameter_hash(trainer.model)
    assert runs["graph"] == runs["again"] == runs["eager"]

    stopped, _ = trained(kind, small, steps=2048, device="cuda", checkpoint=tmp_path / "a.pt", **over)

    def stop(step, record):  # inside the second segment
        if step > 1024:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped.run(stop)
    resumed, _ = trained(kind, small, steps=2048, device="cuda", checkpoint=tmp_path / "a.pt", **over)
    assert resumed.run(resume=True).resumed_from == 1024
    assert parameter_hash(resumed.model) == runs["graph"]


def test_on_cuda_iql_trained_with_graphed_updates_has_the_eager_weights():
    import anyio
    import msgspec

    from foxhunt import bootstrap, config
    from foxhunt.adapters.journal.memory import MemoryJournalStore
    from foxhunt.models.agent_configs import IqlConfig
    from foxhunt.training.rl import history
    from foxhunt.training.rl.environment import TradingEnv, observation_scale
    from foxhunt.training.rl.episode import write
    from foxhunt.training.rl.iql import IqlTrainer
    from tests.ml.test_agents import EDGE, ENV, behaviour_episode, market, trading_config

    small, trading = market(12_000, **EDGE), trading_config()
    episode, *_ = behaviour_episode(small, trading)

    async def transitions():
        store = MemoryJournalStore()  # the journal's contract is PostgreSQL's suite's; here, the GPU's bits
        await write(store, "behaviour", episode, trading)
        return await history.read(store, ["behaviour"], "EURUSD", config.Config().features, ENV, 10**14, 1)

    data = anyio.run(transitions)
    train, held = small.split(0.25)
    hashes = []
    for graph in (True, True, False):
        make_deterministic(1)
        judge = TradingEnv(held, trading, bootstrap.agent_engine(), ENV)
        cfg = msgspec.structs.replace(IqlConfig(steps=400, eval_every=200), graph=graph)
        trainer = IqlTrainer(data, cfg, 3, torch.device("cuda"), observation_scale(train), evaluation=judge,
                             eval_episodes=1, checkpoint=None)
        trainer.run()
        hashes.append(parameter_hash(trainer.model))
    assert hashes[0] == hashes[1] == hashes[2]


@pytest.mark.parametrize("kind", [("rainbow", False), ("ppo", False), ("ppo", True), ("iql", False)],
                         ids=["rainbow", "ppo", "ppo-continuous", "iql"])
def test_on_cuda_a_graphed_policy_acts_as_the_eager_one_bitwise_its_state_carried(kind, tmp_path):
    """The policy runner's CUDA graph against its eager forward on the GPU: the same actions and outputs over
    a sequence of observations (PPO's recurrent state carried through both), and again after `begin`."""
    from foxhunt.adapters.inference.policy import TorchPolicyRunner
    from foxhunt.adapters.models.store import LocalModelStore
    from foxhunt.models.agent_configs import EXTRA
    from tests.stored import SPEC, agent_files

    store = LocalModelStore(tmp_path / "models")
    mid, stored = agent_files(kind[0], continuous=kind[1])
    store.put(mid, stored)
    obs = np.random.default_rng(2).normal(size=(64, SPEC.width + EXTRA)).astype(np.float32)

    def play(graph: bool) -> list[bytes]:
        runner = TorchPolicyRunner(store, "cuda", graph=graph)
        runner.prepare()
        info, _ = runner.load(mid, SPEC.digest())
        assert info.graph == graph
        return [np.float64(a).tobytes() + o.tobytes() for a, o in (runner.act(x) for x in obs)]

    assert play(True) == play(False)


def test_on_cuda_the_fused_rainbow_policy_acts_within_rounding_of_eager_and_the_same_bytes_every_time(tmp_path):
    """`fuse` on the production preset of Rainbow-IQN (fused/rainbow.py): served fused inside the graph, its
    outputs within float32 rounding of the eager policy's over a sequence of observations, the same bytes
    from two runners; a PPO agent under `fuse` is served as without it (no kernels for it)."""
    from foxhunt.adapters.inference.policy import TorchPolicyRunner
    from foxhunt.adapters.models.store import LocalModelStore
    from foxhunt.models.agent_configs import EXTRA
    from tests.stored import SPEC, agent_files

    store = LocalModelStore(tmp_path / "models")
    mid, stored = agent_files("rainbow", size="production")
    store.put(mid, stored)
    ppo, ppo_files = agent_files("ppo", size="production")
    store.put(ppo, ppo_files)
    obs = np.random.default_rng(3).normal(size=(64, SPEC.width + EXTRA)).astype(np.float32)

    def play(fuse: bool) -> np.ndarray:
        runner = TorchPolicyRunner(store, "cuda", fuse=fuse)
        runner.prepare()
        info, _ = runner.load(mid, SPEC.digest())
        assert info.graph and info.fused == fuse
        return np.stack([runner.act(x)[1] for x in obs])

    fused, again, eager = play(True), play(True), play(False)
    assert fused.tobytes() == again.tobytes()
    np.testing.assert_allclose(fused, eager, rtol=1e-4, atol=1e-5)
    runner = TorchPolicyRunner(store, "cuda", fuse=True)
    runner.prepare()
    assert not runner.load(ppo, SPEC.digest())[0].fused


async def test_a_fused_rainbow_journal_verifies_fused_on_the_gpu_and_equivalent_on_the_cpu(tmp_path):
    """A paper run of a Rainbow agent served fused (`[scoring] fuse`); its journal verified by a runner
    configured without `fuse`: on the GPU served fused as recorded (LoadedModel.fused), identical; on the CPU
    numerically equivalent, every action the same."""
    from foxhunt.adapters.inference.policy import TorchPolicyRunner
    from foxhunt.adapters.models.store import LocalModelStore
    from foxhunt.messages.scores import ModelsLoaded
    from foxhunt.runtime import replay
    from foxhunt.runtime.policies import PolicyCheck
    from foxhunt.runtime.recovery import trading_config
    from foxhunt.runtime.scoring import ScoreCheck
    from tests.ml.test_policies import cfg_for, of, paper_run
    from tests.stored import agent_files

    store = LocalModelStore(tmp_path / "models")
    mid, stored = agent_files("rainbow")
    store.put(mid, stored)
    journal, summary, recorded = await paper_run(cfg_for(store, mid, device="cuda", fuse="true"))
    assert of(ModelsLoaded, recorded)[0].models[0].fused
    trading = await trading_config(journal, "j", None, None)
    for device, expected in (("cuda", "identical"), ("cpu", "numerically equivalent, not identical")):
        check = PolicyCheck(lambda d=device: TorchPolicyRunner(store, d), 4096)
        verified = await replay.verify(journal, "j", trading, ScoreCheck(lambda: None, 4096, check))
        assert verified["decisions"].startswith(expected), verified["decisions"]
        assert verified["state_digest"] == summary["state_digest"]


async def test_a_served_agent_s_journal_recorded_on_the_gpu_verifies_there_and_is_equivalent_on_the_cpu(agent_store):
    """The policy source on a CUDA graph in a paper run; its journal verified with every decision recomputed
    on the GPU (identical) and on the CPU (numerically equivalent, every action the same)."""
    from foxhunt.adapters.inference.policy import TorchPolicyRunner
    from foxhunt.messages.scores import ModelsLoaded, PolicyActed
    from foxhunt.runtime import replay
    from foxhunt.runtime.policies import PolicyCheck
    from foxhunt.runtime.recovery import trading_config
    from foxhunt.runtime.scoring import ScoreCheck
    from tests.ml.test_policies import cfg_for, of, paper_run

    store, policy_id = agent_store
    journal, summary, recorded = await paper_run(cfg_for(store, policy_id, device="cuda"))
    loaded = of(ModelsLoaded, recorded)[0]
    assert loaded.device.startswith("cuda") and loaded.models[0].graph and "gpu" in loaded.fingerprint
    assert len(of(PolicyActed, recorded)) > 200
    trading = await trading_config(journal, "j", None, None)
    for device, expected in (("cuda", "identical"), ("cpu", "numerically equivalent, not identical: recorded on NVIDIA")):
        check = PolicyCheck(lambda d=device: TorchPolicyRunner(store, d), 4096)
        verified = await replay.verify(journal, "j", trading, ScoreCheck(lambda: None, 4096, check))
        assert verified["decisions"].startswith(expected), verified["decisions"]
        assert verified["state_digest"] == summary["state_digest"]
        print(f"GPU journal of a served agent, verified on {device}:", verified["decisions"])

