"""Models in the live loop on the CPU, end to end on the in-memory journal: a tiny forecaster trained here and
kept in a model store, a paper run whose ensemble strategy trades on its scores, and the replays of that run
(journaled scores, scores computed again, verify with every score recomputed). Then what must go wrong
loudly: a weight one ulp off in the store, a model that raises, one missing, one too slow, a score recorded
on other hardware."""

from __future__ import annotations

import json
import time
from contextlib import aclosing

import msgspec
import numpy as np
import pytest
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from foxhunt import bootstrap, config
from foxhunt.core.kernel import BEHAVIOUR
from foxhunt.adapters.inference.runner import TorchRunner
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.adapters.systemd import Notifier
from foxhunt.errors import ModelError, VerificationFailed
from foxhunt.messages.market import MarketData
from foxhunt.messages.orders import SubmitOrder
from foxhunt.messages.scores import ModelFailed, ModelScored, ModelsLoaded, TargetChanged
from foxhunt.messages.system import TradingState, TradingStateChanged
from foxhunt.models.artifact import MANIFEST, WEIGHTS
from foxhunt.models.configs import TrainConfig
from foxhunt.models.forecaster import parameter_hash
from foxhunt.runtime import replay
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.daemon import Operations, RunRequest, run_daemon
from foxhunt.runtime.recovery import trading_config
from foxhunt.runtime.scoring import Rescore, ScoreCheck, ScoringService
from foxhunt.training import dataset
from foxhunt.training.dataset import Source
from foxhunt.training.train import TrainRequest, train
from tests.ml.market import columns_by_symbol, messages

TRAIN = TrainConfig(window=8, horizons=(1, 4), max_steps=60, eval_every=20, batch_size=32, patience=10)
FINGERPRINT = {"test": "1", "kernel": str(BEHAVIOUR)}  # as a run of this foxhunt records
FEED = 700  # market data inputs of a run, paced at RATE a second so that the scorer keeps up
RATE = 400.0


@pytest.fixture(scope="module")
def model_store(tmp_path_factory) -> tuple[LocalModelStore, str]:
    root = tmp_path_factory.mktemp("models")
    store = LocalModelStore(root / "store")
    source = Source(journal="synthetic", first_seq=1, last_seq=3000, events=3000)
    data = dataset.build(columns_by_symbol(messages(3000, seed=2)), [source], config.Config().features, TRAIN)
    request = TrainRequest("mlp", ["synthetic"], None, None, 1, "cpu", "tiny", False)
    trained = train(data, request, config.Config().features, TRAIN, store, root / "checkpoints")
    return store, trained.manifest.model_id


def cfg_for(store: LocalModelStore, models: list[str], **scoring) -> config.Config:
    env = {"FOXHUNT_STRATEGY__NAME": "ensemble", "FOXHUNT_STRATEGY__ENSEMBLE__MODELS": json.dumps(models),
           "FOXHUNT_STRATEGY__ENSEMBLE__ENTRY_BPS": "0.0", "FOXHUNT_STRATEGY__ENSEMBLE__FULL_BPS": "0.5",
           "FOXHUNT_MODELS__STORE": str(store.root), "FOXHUNT_SCORING__DEVICE": "cpu",
           **{f"FOXHUNT_SCORING__{k.upper()}": str(v) for k, v in scoring.items()}}
    return config.load(None, env=env)


def feed(n: int = FEED, seed: int = 7) -> list[MarketData]:
    return messages(n, seed=seed)


async def paper_run(cfg: config.Config, runner_for=None, n: int = FEED) -> tuple[MemoryJournalStore, dict, list]:
    """A paper run of `n` market data inputs on the memory journal, scored by `runner_for(cfg)` (the torch
    runner on the CPU unless a test brings one that misbehaves)."""
    runner_for = runner_for or (lambda c: bootstrap.model_runner(c))
    store = MemoryJournalStore()
    clock = EventClock()

    def scoring(trading, clock, kernel):
        return ScoringService(runner_for(cfg), trading.strategy.models, cfg.features, cfg.scoring, clock)

    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}), scoring=scoring)
    summary = await run_daemon(store, cfg, RunRequest("j", feed(n), clock, feed_rate=RATE), FINGERPRINT, ops)
    async with aclosing(store.read("j")) as pages:
        recorded = [r.message async for page in pages for r in page]
    return store, summary, recorded


def of(kind, recorded):
    return [m for m in recorded if type(m) is kind]


async def verify(journal: MemoryJournalStore, runner) -> dict:
    trading = await trading_config(journal, "j", None, None)
    return await replay.verify(journal, "j", trading, ScoreCheck(lambda: runner, 4096))


async def test_a_paper_run_trades_on_scores_and_its_replays_verify_them_identical(model_store):
    store, model_id = model_store
    cfg = cfg_for(store, [model_id])
    journal, summary, recorded = await paper_run(cfg)
    loaded = of(ModelsLoaded, recorded)
    scores = of(ModelScored, recorded)
    assert len(loaded) == 1 and loaded[0].models[0].model_id == model_id and loaded[0].device == "cpu"
    assert loaded[0].fingerprint["device"] == "cpu" and loaded[0].determinism["deterministic_algorithms"] == "on"
    assert len(scores) > FEED // 2, "the scorer kept up with a paced feed"
    assert all(s.parameter_sha256 == loaded[0].models[0].parameter_sha256 and len(s.outputs) == 2 * 3 for s in scores)
    assert of(TargetChanged, recorded) and summary["orders"] > 0 and summary["trading_state"] == "ACTIVE"
    edged = [o for o in of(SubmitOrder, recorded) if o.edge_win_prob is not None]  # the orders that add exposure
    assert edged and all(0.0 < o.edge_win_prob <= 1.0 and o.edge_payoff > 0.0 for o in edged)

    verified = await verify(journal, TorchRunner(store, "cpu", batch=4))
    assert verified["scores"].startswith("identical") and verified["scores_recomputed"] == len(scores)
    assert verified["state_digest"] == summary["state_digest"]

    trading = await trading_config(journal, "j", None, None)
    recorded_scores = await bootstrap.backtest(journal, "j", trading)
    rescored = await replay.backtest(journal, "j", trading, bootstrap.simulated_venue,
                                     bootstrap.DiscardingJournal(),
                                     Rescore(TorchRunner(store, "cpu"), [model_id], 4096, cfg.features))
    assert recorded_scores["orders"] == rescored["orders"] == summary["orders"]
    assert recorded_scores["state_digest"] == rescored["state_digest"]


async def test_a_journal_without_scores_is_backtested_on_a_model_scored_at_every_tick(model_store):
    """A run of ema_cross (no scoring source), backtested with --rescore as the ensemble strategy on the
    model: every market data input with a whole window is scored in line, right behind it, the same way
    every time."""
    store, model_id = model_store
    plain = config.load(None, env={})
    journal = MemoryJournalStore()
    clock = EventClock()
    ops = Operations(venue=bootstrap.simulated_venue, notifier=Notifier({}))
    await run_daemon(journal, plain, RunRequest("j", feed(400), clock), FINGERPRINT, ops)
    cfg = cfg_for(store, [model_id])
    trading = await trading_config(journal, "j", ["strategy.name=ensemble",
                                                  f'strategy.ensemble.models=["{model_id}"]',
                                                  "strategy.ensemble.entry_bps=0.0",
                                                  "strategy.ensemble.full_bps=0.5"], None)

    async def backtest() -> dict:
        return await bootstrap.backtest(journal, "j", trading, cfg)

    first, second = await backtest(), await backtest()
    assert first["orders"] > 0 and first["state_digest"] == second["state_digest"]
    assert (await bootstrap.backtest(journal, "j", trading))["orders"] == 0  # the journal's own scores: none

    rescore = Rescore(TorchRunner(store, "cpu", batch=4), [model_id], 4096, cfg.features)
    async with aclosing(journal.read("j")) as pages:
        fed = [(r.seq, m) async for page in pages for r in page if r.causation is None
               for m in rescore.on_input(r.seq, r.message)]
    scores = [(i, m) for i, (_, m) in enumerate(fed) if type(m) is ModelScored]
    per_symbol = {s: sum(1 for m in feed(400) if m.symbol == s) for s in ("EURUSD", "GBPUSD")}
    assert len(scores) == sum(n - TRAIN.window + 1 for n in per_symbol.values())
    assert all(fed[i - 1][0] == m.as_of and fed[i - 1][1].symbol == m.symbol for i, m in scores)  # right behind
    assert [type(m) for _, m in fed].count(ModelsLoaded) == 1


def perturbed(store: LocalModelStore, model_id: str, keep_manifest: bool) -> None:
    """One weight of the stored model one ulp up, in place: with its manifest as it was (a corrupted file)
    or rewritten to the new parameters' hash (someone replaced the model under its old id)."""
    folder = store.root / model_id
    tensors = load_tensors((folder / WEIGHTS).read_bytes())
    name = max(n for n in tensors if n.endswith("bias"))  # the last in name order: the head's
    tensors[name][0] = torch.nextafter(tensors[name][0], torch.tensor(np.inf, dtype=tensors[name].dtype))
    (folder / WEIGHTS).write_bytes(save_tensors(tensors))
    if not keep_manifest:
        manifest = json.loads((folder / MANIFEST).read_bytes())
        holder = torch.nn.Module()  # parameter_hash reads a state dict: these tensors, by their names
        holder.state_dict = lambda: tensors  # type: ignore[method-assign]
        manifest["parameter_sha256"] = parameter_hash(holder)
        (folder / MANIFEST).write_bytes(json.dumps(manifest).encode())


@pytest.mark.parametrize("keep_manifest", [True, False], ids=["corrupted", "replaced"])
async def test_a_weight_one_ulp_off_in_the_store_fails_verify_at_the_first_affected_score(model_store, tmp_path,
                                                                                          keep_manifest):
    store, model_id = model_store
    copy = LocalModelStore(tmp_path / "store")
    copy.put(model_id, store.get(model_id))
    journal, _, recorded = await paper_run(cfg_for(copy, [model_id]), n=200)
    first = next(i for i, m in enumerate(recorded) if type(m) is ModelScored) + 1
    perturbed(copy, model_id, keep_manifest)
    with pytest.raises(VerificationFailed) as failed:
        await verify(journal, TorchRunner(copy, "cpu", batch=4))
    text = str(failed.value)
    if keep_manifest:  # the store refuses the weights: the first score cannot be recomputed
        assert f"score seq {first} ({model_id}" in text and "a file is corrupted or was changed" in text
    else:  # a one-ulp change reaches some outputs and not others: verify names the first it reaches
        affected = first_affected(recorded, copy, model_id)
        assert affected >= first
        assert f"score seq {affected} ({model_id}" in text and "the score was made with" in text
        assert "is not reproduced on the machine class that recorded it: its outputs differ" in text


def first_affected(recorded: list, store: LocalModelStore, model_id: str) -> int:
    """The seq of the first recorded score that the store's model forecasts otherwise, found the way
    training builds its samples (the batch form of the features), not the way replay does."""
    from foxhunt.adapters.inference.scorer import Scorer
    from foxhunt.adapters.models.opening import open_model
    from foxhunt.core.features import Columns, batch

    model, manifest = open_model(store, model_id, None)
    scorer = Scorer(model, manifest.shape.window, manifest.shape.features, torch.device("cpu"), batch=4)
    seen: dict[str, list[tuple[int, MarketData]]] = {}
    for seq, msg in enumerate(recorded, start=1):
        if isinstance(msg, MarketData):
            seen.setdefault(msg.symbol, []).append((seq, msg))
        elif type(msg) is ModelScored:
            history = [m for s, m in seen[msg.symbol] if s <= msg.as_of]
            rows = batch(config.Config().features, Columns.of(history))[0].astype(np.float32)
            forecast = scorer.score(rows[None, -manifest.shape.window :])[0].reshape(-1)
            if forecast.tobytes() != np.array(msg.outputs, dtype=np.float32).tobytes():
                return seq
    raise AssertionError("no score is affected")


class Misbehaving(TorchRunner):
    """The torch runner, misbehaving after a few calls as real devices do: raising what CUDA raises, or
    stalling."""

    def __init__(self, *args, raise_after: int | None = None, stall_after: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.raise_after, self.stall_after = raise_after, stall_after

    def score(self, model_id, windows):
        self.calls += 1
        if self.raise_after is not None and self.calls > self.raise_after:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if self.stall_after is not None and self.calls > self.stall_after:
            time.sleep(0.5)
        return super().score(model_id, windows)


@pytest.mark.parametrize("trouble", ["raises", "missing", "too slow"])
async def test_a_model_that_cannot_answer_takes_trading_to_reducing_and_loses_nothing(model_store, trouble):
    store, model_id = model_store
    models = ["mlp-000000000000"] if trouble == "missing" else [model_id]
    cfg = cfg_for(store, models, deadline_ms=100)

    def runner_for(c):
        s = c.scoring
        return Misbehaving(store, s.device, s.batch, raise_after=20 if trouble == "raises" else None,
                           stall_after=20 if trouble == "too slow" else None)

    journal, summary, recorded = await paper_run(cfg, runner_for, n=300)
    failed = of(ModelFailed, recorded)
    assert len(failed) == 1, "a failed model is not called again until an operator resumes"
    what = {"raises": "error", "missing": "load", "too slow": "deadline"}[trouble]
    assert failed[0].what == what and failed[0].model_id == models[0]
    if trouble == "raises":
        assert "illegal memory access" in failed[0].reason
    changed = of(TradingStateChanged, recorded)
    assert [c.state for c in changed] == [TradingState.REDUCING] and models[0] in changed[0].cause
    assert summary["trading_state"] == "REDUCING" and summary["stopped"] == "feed ended"
    assert sum(1 for m in recorded if isinstance(m, MarketData)) == 300, "every market data input is journaled"
    verified = await verify(journal, TorchRunner(store, "cpu", batch=4))
    assert verified["trading_state"] == "REDUCING"
    assert verified.get("scores_recomputed", 0) == len(of(ModelScored, recorded))


async def test_an_operator_s_resume_loads_a_failed_model_again(model_store, tmp_path):
    """The scoring source on its own: a model missing at start is a ModelFailed; put in the store and asked
    for again (what `resume` does), it is a ModelsLoaded and serves."""
    import anyio

    store, model_id = model_store
    empty = LocalModelStore(tmp_path / "store")
    cfg = cfg_for(empty, [model_id])
    service = ScoringService(TorchRunner(empty, "cpu"), [model_id], cfg.features, cfg.scoring, EventClock())
    started = await service.start()
    assert [type(e) for e in started] == [ModelsLoaded, ModelFailed] and started[1].what == "load"
    assert service.status()["models"][model_id]["state"] == "failed"
    empty.put(model_id, store.get(model_id))
    send, receive = anyio.create_memory_object_stream(100)
    async with anyio.create_task_group() as tg, receive:
        tg.start_soon(service.run, send)
        service.request_reload()
        with anyio.fail_after(10):
            reloaded = await receive.receive()
        assert type(reloaded) is ModelsLoaded and reloaded.models[0].model_id == model_id
        for seq, msg in enumerate(feed(40), start=1):
            service.observe(seq, msg)
        with anyio.fail_after(10):
            scored = await receive.receive()
        assert type(scored) is ModelScored and scored.as_of <= 40
        tg.cancel_scope.cancel()
    assert service.status()["models"][model_id]["state"] == "serving"
    assert service.status()["models"][model_id]["calls"] >= 1
    assert service.status()["models"][model_id]["form"] == "eager"  # on the CPU, whatever compile or fuse say


class OtherHardware(TorchRunner):
    """The same model on a machine of another class: its own fingerprint, and outputs off by `noise`."""

    def __init__(self, *args, noise: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.noise = noise

    def prepare(self):
        fingerprint, switches = super().prepare()
        return fingerprint | {"cpu": "another processor"}, switches

    def score(self, model_id, windows):
        out = super().score(model_id, windows)
        return (out + np.float32(self.noise) * np.sign(out)).astype(np.float32)


async def test_a_journal_replayed_on_other_hardware_is_numerically_equivalent_until_a_decision_differs(model_store):
    store, model_id = model_store
    journal, summary, _ = await paper_run(cfg_for(store, [model_id]), n=300)
    close = await verify(journal, OtherHardware(store, "cpu", batch=4, noise=1e-12))
    assert close["scores"].startswith("numerically equivalent, not identical")
    assert 0 < close["largest_abs_diff"] < 1e-9 and "replayed on another processor" in close["scores"]
    assert "% of" in close["scores"] and "decision events identical, every decision the same" in close["scores"]
    assert close["state_digest"] == summary["state_digest"] and close["scores_identical"] < close["scores_recomputed"]
    # off by enough to change the forecasts a reason shows ("... 3.217 bp of full_bps 0.5"), not a decision
    shown = await verify(journal, OtherHardware(store, "cpu", batch=4, noise=3e-8))
    assert shown["scores"].endswith("every decision the same") and shown["state_digest"] == summary["state_digest"]
    with pytest.raises(VerificationFailed, match="a decision on a recomputed score is not the recorded one"):
        await verify(journal, OtherHardware(store, "cpu", batch=4, noise=1e-3))


async def test_a_model_store_without_the_model_fails_verify_naming_the_score(model_store, tmp_path):
    store, model_id = model_store
    journal, _, recorded = await paper_run(cfg_for(store, [model_id]), n=120)
    first = next(i for i, m in enumerate(recorded) if type(m) is ModelScored) + 1
    with pytest.raises(VerificationFailed, match=rf"score seq {first} \({model_id} .* cannot be recomputed: no model"):
        await verify(journal, TorchRunner(LocalModelStore(tmp_path / "empty"), "cpu"))


def test_the_runner_refuses_a_model_trained_on_other_features(model_store):
    store, model_id = model_store
    runner = TorchRunner(store, "cpu")
    runner.prepare()
    with pytest.raises(ModelError, match="trained on feature set core v1"):
        runner.load(model_id, "0" * 64)


def test_the_time_it_takes_is_in_the_event_and_the_status(model_store):
    """`models` on the admin socket: the serving model's hash and its latency percentiles."""
    store, model_id = model_store
    cfg = cfg_for(store, [model_id])
    service = ScoringService(TorchRunner(store, "cpu"), [model_id], cfg.features, cfg.scoring, EventClock())
    stats = service.stats[model_id]
    stats.latencies.extend([1000, 2000, 3000])
    stats.calls = 3
    assert service.status()["models"][model_id]["latency_us"] == {"p50": 2.0, "p99": 3.0, "p99.9": 3.0}


class Slow(TorchRunner):
    """The torch runner, taking 10 ms more for one model's calls."""

    def __init__(self, *args, slow: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.slow = slow

    def score(self, model_id, windows):
        if model_id == self.slow:
            time.sleep(0.01)
        return super().score(model_id, windows)


@pytest.fixture(scope="module")
def second_model(model_store, tmp_path_factory) -> str:
    """Another forecaster in the same store: an attention model on the same data."""
    store, _ = model_store
    source = Source(journal="synthetic", first_seq=1, last_seq=3000, events=3000)
    data = dataset.build(columns_by_symbol(messages(3000, seed=2)), [source], config.Config().features, TRAIN)
    request = TrainRequest("attention", ["synthetic"], None, None, 3, "cpu", "tiny", False)
    return train(data, request, config.Config().features, TRAIN, store, tmp_path_factory.mktemp("ckpt")).manifest.model_id


async def test_two_models_score_the_same_windows_and_their_weighted_ensemble_verifies(model_store, second_model):
    """Each model of a window is scored on the rows of that window, whatever came while the first was
    answering: verify rebuilds every one of them at its as_of."""
    store, model_id = model_store
    cfg = cfg_for(store, [model_id, second_model])
    cfg = msgspec.structs.replace(cfg, strategy=msgspec.structs.replace(
        cfg.strategy, ensemble=msgspec.structs.replace(cfg.strategy.ensemble, weights=[0.25, 0.75])))
    slow_first = lambda c: Slow(store, "cpu", c.scoring.batch, slow=model_id)  # noqa: E731 - ticks come meanwhile
    journal, summary, recorded = await paper_run(cfg, slow_first, n=400)
    scores = of(ModelScored, recorded)
    firsts = {(s.symbol, s.as_of) for s in scores if s.model_id == model_id}
    seconds = {(s.symbol, s.as_of) for s in scores if s.model_id == second_model}
    assert firsts == seconds and len(firsts) > 50, "both models scored every window taken"
    assert of(TargetChanged, recorded) and summary["orders"] > 0
    verified = await verify(journal, TorchRunner(store, "cpu", batch=4))
    assert verified["scores"].startswith("identical") and verified["scores_recomputed"] == len(scores)


async def test_a_model_whose_window_is_longer_than_the_rows_kept_is_refused_at_load(model_store):
    store, model_id = model_store
    cfg = cfg_for(store, [model_id], keep=TRAIN.window - 1)
    service = ScoringService(TorchRunner(store, "cpu"), [model_id], cfg.features, cfg.scoring, EventClock())
    started = await service.start()
    assert [type(e) for e in started] == [ModelsLoaded, ModelFailed] and not started[0].models
    assert f"window of {TRAIN.window} rows is more than [scoring] keep ({TRAIN.window - 1})" in started[1].reason
