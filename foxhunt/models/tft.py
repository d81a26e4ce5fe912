"""The Temporal Fusion Transformer (Lim, Arik, Loeff and Pfister 2021, "Temporal Fusion Transformers for
interpretable multi-horizon time series forecasting", Int. J. Forecasting 37(4), section 4), for inputs
that are all observed in the past: no static covariates and no known future inputs, so the decoder's
inputs are one learned embedding per forecast horizon.

The path of a window: variable selection (per row, which features matter) -> LSTM encoder over the
window, LSTM decoder over the horizons from the encoder's state -> gated skip -> static enrichment (a
GRN; no context) -> interpretable multi-head attention, each horizon attending to the window and to the
horizons up to its own -> gated skip -> position-wise GRN -> gated skip over the LSTM's output -> the
quantiles of each horizon.
"""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.models.configs import Shape, TftConfig
from foxhunt.models.layers import Attention, GateAddNorm, GatedResidualNetwork


class VariableSelection(nn.Module):
    """Each feature embedded on its own (a linear map of the scalar) and through its own GRN, then weighted
    by a softmax over features that a GRN computes from all of them (Lim et al. 2021, section 4.2)."""

    def __init__(self, variables: int, d: int, dropout: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(variables, d) * 0.1)
        self.bias = nn.Parameter(torch.zeros(variables, d))
        self.grns = nn.ModuleList(GatedResidualNetwork(d, d, d, dropout) for _ in range(variables))
        self.select = GatedResidualNetwork(variables * d, d, variables, dropout)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [B, T, variables] -> (selected [B, T, d], weights [B, T, variables])."""
        embedded = x.unsqueeze(-1) * self.weight + self.bias  # [B, T, variables, d]
        weights = torch.softmax(self.select(embedded.flatten(-2)), dim=-1)
        processed = torch.stack([grn(embedded[..., i, :]) for i, grn in enumerate(self.grns)], dim=-2)
        return (weights.unsqueeze(-1) * processed).sum(dim=-2), weights


class StackedLstm(nn.Module):
    """LSTM layers stacked by hand, with torch's dropout between them. nn.LSTM's own inter-layer dropout
    runs inside cuDNN, from a generator cuDNN keeps to itself: no checkpoint can hold its state, so a run
    resumed on a GPU would draw other masks than the uninterrupted run (seen on the H200); torch's dropout
    draws from the CUDA generator, whose state a checkpoint keeps."""

    def __init__(self, d: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.LSTM(d, d, batch_first=True) for _ in range(layers))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, state: list[tuple[torch.Tensor, torch.Tensor]] | None = None):
        """(output of the last layer, each layer's final (h, c)); `state`: each layer's initial (h, c)."""
        finals = []
        for i, lstm in enumerate(self.layers):
            if i:
                x = self.drop(x)
            x, final = lstm(x, None if state is None else state[i])
            finals.append(final)
        return x, finals


class TemporalFusionTransformer(nn.Module):
    def __init__(self, cfg: TftConfig, shape: Shape) -> None:
        super().__init__()
        d, drop, horizons = cfg.hidden, cfg.dropout, len(shape.horizons)
        self.selection = VariableSelection(shape.features, d, drop)
        self.horizon_embedding = nn.Parameter(torch.randn(horizons, d) * 0.1)
        self.encoder = StackedLstm(d, cfg.lstm_layers, drop)
        self.decoder = StackedLstm(d, cfg.lstm_layers, drop)
        self.lstm_gate = GateAddNorm(d, drop)
        self.enrichment = GatedResidualNetwork(d, d, d, drop)
        self.attention = Attention(d, cfg.heads, drop, shared_values=True)
        self.attention_gate = GateAddNorm(d, drop)
        self.feed_forward = GatedResidualNetwork(d, d, d, drop)
        self.output_gate = GateAddNorm(d, 0.0)
        self.head = nn.Linear(d, len(shape.quantiles))
        window = shape.window
        # horizon j sees the whole window and horizons 0..j (the decoder's causal mask)
        mask = torch.ones(horizons, window + horizons, dtype=torch.bool)
        mask[:, window:] = torch.tril(torch.ones(horizons, horizons, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.explain(x)[0]

    def explain(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(forecast [B, horizons, quantiles], feature weights [B, window, features], attention weights
        [B, heads, horizons, window + horizons]): the interpretable parts the TFT is chosen for."""
        b = x.size(0)
        selected, feature_weights = self.selection(x)
        future = self.horizon_embedding.expand(b, -1, -1)
        encoded, state = self.encoder(selected)
        decoded, _ = self.decoder(future, state)
        temporal = self.lstm_gate(torch.cat([encoded, decoded], dim=1), torch.cat([selected, future], dim=1))
        enriched = self.enrichment(temporal)
        horizons = future.size(1)
        attended, attention_weights = self.attention(enriched[:, -horizons:], enriched, self.mask)
        fused = self.attention_gate(attended, enriched[:, -horizons:])
        out = self.output_gate(self.feed_forward(fused), temporal[:, -horizons:])
        return self.head(out), feature_weights, attention_weights
