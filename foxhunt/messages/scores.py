"""Model scores as events: what a model said about a symbol, from exactly which input, and what a failure
was. The scoring source (runtime/scoring.py) makes them; the journal keeps them like market data, so a
backtest, an audit and `replay --verify` see exactly what the strategy saw."""

from __future__ import annotations

import msgspec

from foxhunt.messages.base import Derived, Input


class LoadedModel(msgspec.Struct, frozen=True, kw_only=True):
    """A model as the scoring source serves it: what it reads (a window of `window` rows of the feature set
    `feature_digest`) and writes (`quantiles` at each of `horizons`), at a fixed `batch`, and how (`graph`:
    a CUDA graph replays it). A trading agent as the policy source serves it (`arch` rainbow, ppo or iql):
    one observation of `features` values at a time, on `symbol`."""

    model_id: str
    parameter_sha256: str
    arch: str
    window: int
    features: int
    horizons: list[int]
    quantiles: list[float]
    feature_digest: str
    batch: int
    graph: bool
    compiled: bool = False  # its forward fused by torch.compile (on CUDA): verify compiles it the same way
    fused: bool = False  # its forward in foxhunt's Triton kernels (on CUDA): verify serves it the same way
    symbol: str = ""  # a trading agent's (runtime/policies.py): the symbol it decides on; "" for a forecaster

    @property
    def form(self) -> str:
        """How its forward runs: in foxhunt's kernels ("fused"), fused by torch.compile ("compiled"), as
        the model's own modules ("eager"); on CUDA inside a graph where `graph` says so."""
        return "fused" if self.fused else "compiled" if self.compiled else "eager"


class ModelsLoaded(Input, frozen=True, kw_only=True):
    """The scoring source is serving `models` on `device`: once per run and after each reload, with the
    environment (`fingerprint`: torch, CUDA, driver, GPU or CPU) and the determinism switches. A verify
    that recomputes the scores compares its own fingerprint with this one to know whether it may claim an
    identity or only a numerical equivalence."""

    device: str
    fingerprint: dict[str, str]
    determinism: dict[str, str]
    feature_spec: bytes  # the feature set the windows are made of, as JSON (core/features/spec.py)
    models: list[LoadedModel]
    failed: list[str] = []  # the models asked for that could not be loaded (each has its ModelFailed)
    source: str = "scoring"  # the source that serves them: "scoring" (forecasters) or "policy" (a trading agent)


class ModelScored(Input, frozen=True, kw_only=True):
    """One model's forecast for one symbol. Its input is the window of feature rows of `symbol` that ends
    at the market data input `as_of` (a sequence number of this journal; rows reset with each run), of
    which `input_digest` is the SHA-256 of the exact float32 bytes. `outputs`: len(horizons) rows of
    len(quantiles) forecast log returns, row by row. `latency_ns`: the model call, copies included.
    `ts_event` is the ts_event of the market data input `as_of`."""

    model_id: str
    parameter_sha256: str
    symbol: str
    as_of: int
    input_digest: str
    horizons: list[int]
    quantiles: list[float]
    outputs: list[float]
    latency_ns: int


class ModelFailed(Input, frozen=True, kw_only=True):
    """A model that could not answer: it is missing or corrupted in the store (`load`), it raised
    (`error`), the device ran out of memory (`out_of_memory`), or it took longer than its deadline
    (`deadline`). Trading goes to REDUCING; the scoring source stops calling the model until an operator's
    `resume` loads it again."""

    model_id: str
    symbol: str = ""  # the symbol it was scoring, "" for a load
    what: str  # load, error, out_of_memory, deadline
    reason: str


class PolicyActed(Input, frozen=True, kw_only=True):
    """A trading agent's decision for one symbol (training/rl): the position its policy `policy_id` (weights
    `parameter_sha256`; "" for a baseline without weights) wants, as a `fraction` of the agent strategy's
    trade size in [-1, 1] (negative: short), decided on the market data input `as_of` (a sequence number of
    this journal). `action` is what the policy output, as it output it: the index of a discrete action, or
    the continuous value before clipping. The agent strategy (core/strategies/agent.py) moves the position
    towards it through the pre-trade gate, like any strategy's target.

    From the policy source (runtime/policies.py), which journals every decision a served agent makes, also
    what it was made of: `input_digest`, the SHA-256 of the observation's exact float32 bytes, and `outputs`,
    the values the policy chose from (action values, logits, or a continuous policy's mean), so that
    `replay --verify` can recompute the decision and compare bytes, and `latency_ns`, the policy's call.
    The training environment leaves them empty."""

    policy_id: str
    parameter_sha256: str = ""
    symbol: str
    as_of: int
    action: float
    fraction: float
    input_digest: str = ""
    outputs: list[float] = []
    latency_ns: int = 0


class ScoreRefused(Derived, frozen=True, kw_only=True):
    """A ModelScored (or a PolicyActed: `model_id` is then the policy's id) the kernel could not use as it
    stands (outputs of the wrong shape or not finite, an unknown symbol): nothing trades on it, and trading
    tightens as for a model's failure."""

    model_id: str
    symbol: str
    reason: str


class TargetChanged(Derived, frozen=True, kw_only=True):
    """A strategy's new target position for a symbol, and why: the combined forecast it read (expected log
    return at its horizon, the probability of a gain and the payoff ratio behind the Kelly fraction), and
    the caps that bound it. The orders that move the position there follow as requests through the gate."""

    strategy_id: str
    symbol: str
    target: int  # nanos, signed
    previous: int
    expected_return: float
    win_prob: float
    payoff: float
    kelly_fraction: float
    reason: str
