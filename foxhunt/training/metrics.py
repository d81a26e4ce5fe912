"""How good a forecast is, per horizon, in float64 numpy: the pinball loss of each quantile against the
zero-return forecast's, the information coefficient (Spearman's rank correlation of the median forecast
with the realised return, ties given their mean rank) and the hit rate (the share of samples with a
non-zero realised return and a non-zero median forecast whose signs agree)."""

from __future__ import annotations

import numpy as np


def pinball(pred: np.ndarray, y: np.ndarray, q: float) -> float:
    """Mean pinball (quantile) loss of forecasts `pred` of the q-quantile of `y` (Koenker and Bassett 1978)."""
    diff = y - pred
    return float(np.mean(np.maximum(q * diff, (q - 1.0) * diff)))


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks, equal values given the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], x.size]
    mean_rank = (starts + ends + 1) / 2.0
    out = np.empty(x.size)
    out[order] = np.repeat(mean_rank, ends - starts)
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = ranks(a), ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denominator = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denominator) if denominator > 0 else 0.0


def evaluate(pred: np.ndarray, y: np.ndarray, horizons: tuple[int, ...], quantiles: tuple[float, ...]) -> dict:
    """pred [n, horizons, quantiles] and y [n, horizons], both in log returns."""
    pred, y = pred.astype(np.float64), y.astype(np.float64)
    median = pred[:, :, int(np.argmin([abs(q - 0.5) for q in quantiles]))]
    out = {}
    for j, h in enumerate(horizons):
        losses = {f"{q:g}": pinball(pred[:, j, i], y[:, j], q) for i, q in enumerate(quantiles)}
        zero = {f"{q:g}": pinball(np.zeros_like(y[:, j]), y[:, j], q) for q in quantiles}
        signed = (y[:, j] != 0) & (median[:, j] != 0)
        hits = np.sign(y[signed, j]) == np.sign(median[signed, j])
        out[f"h{h}"] = {
            "pinball": losses, "pinball_zero": zero,
            "skill_vs_zero": 1.0 - sum(losses.values()) / sum(zero.values()) if sum(zero.values()) > 0 else 0.0,
            "ic": spearman(median[:, j], y[:, j]),
            "hit_rate": float(hits.mean()) if hits.size else 0.0,
            "samples": int(y.shape[0]),
        }
    return out
