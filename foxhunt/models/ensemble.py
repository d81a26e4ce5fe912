"""An ensemble: members' quantile forecasts combined into one, with one convex weight per member and
horizon, fitted on the validation range only (`fit_weights`): the weights that minimise the combined
forecast's mean pinball loss over all quantiles, by exponentiated gradient descent on the simplex (Kivinen
and Warmuth 1997), in float64 numpy from uniform weights for a fixed number of steps, so the same forecasts
give the same weights, bit for bit."""

from __future__ import annotations

import msgspec
import numpy as np
import torch
from torch import nn

from foxhunt.models.forecaster import Forecaster

STEPS = 500
RATE = 0.5  # the step size, relative to the largest gradient of each step


def fit_weights(preds: np.ndarray, y: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    """preds [members, n, horizons, quantiles] and y [n, horizons], in the same units -> weights
    [members, horizons], each column on the simplex."""
    preds, y = preds.astype(np.float64), y.astype(np.float64)
    members, _, horizons, _ = preds.shape
    q = np.asarray(quantiles, dtype=np.float64)
    w = np.full((members, horizons), 1.0 / members)
    for _ in range(STEPS):
        combined = np.einsum("mh,mnhq->nhq", w, preds)
        # d pinball / d forecast: -q where the outcome is above the forecast, 1 - q where not
        slope = np.where(y[:, :, None] > combined, -q, 1.0 - q)
        grad = np.einsum("nhq,mnhq->mh", slope, preds) / (preds.shape[1] * q.size)
        scale = np.abs(grad).max(axis=0, keepdims=True)
        w = w * np.exp(-RATE * grad / np.where(scale > 0, scale, 1.0))
        w /= w.sum(axis=0, keepdims=True)
    return w


class Ensemble(nn.Module):
    """`predict(x)`: the weighted sum of the members' forecasts, in log returns; each member reads the
    last rows of the window that it was trained on. The weights are a buffer, so they count in the hash."""

    arch = "ensemble"

    def __init__(self, members: list[Forecaster], weights: np.ndarray) -> None:
        super().__init__()
        first = members[0].shape
        for m in members[1:]:
            if (m.shape.horizons, m.shape.quantiles, m.shape.features) != (first.horizons, first.quantiles,
                                                                            first.features):
                raise ValueError("an ensemble's members must forecast the same horizons and quantiles from the"
                                 " same features")
        self.members = nn.ModuleList(members)
        self.shape = msgspec.structs.replace(first, window=max(m.shape.window for m in members))
        self.register_buffer("weights", torch.from_numpy(np.ascontiguousarray(weights, dtype=np.float32)))

    def member_forecasts(self, x: torch.Tensor) -> torch.Tensor:
        """[members, B, horizons, quantiles]"""
        return torch.stack([m.predict(x[:, -m.shape.window :]) for m in self.members])

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("mh,mbhq->bhq", self.weights, self.member_forecasts(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.predict(x)
