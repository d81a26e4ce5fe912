"""The Temporal Fusion Transformer (models/tft.py) in Triton kernels, around cuDNN's LSTM for the encoder.

- Variable selection: the features' embeddings (torch, one kernel), the selection network and the eleven
  per-feature gated residual networks as three launches each (linear.py's kernel, the feature networks as
  one group; `gate_kernel` for each gated skip: GLU, residual and LayerNorm in one), the softmax and the
  weighted sum (torch).
- The encoder's LSTM layers stay cuDNN's (torch's nn.LSTM, as the model runs them): a recurrence of 64
  dependent steps over weights too large for one multiprocessor's memory, which cuDNN's persistent kernel
  runs faster than a kernel of ours would. The decoder's few steps from the encoder's state are
  `lstm_kernel`, one launch a layer, where cuDNN's kernel took as long as for the 64.
- The gated skips, the enrichment and position-wise networks, the interpretable attention of the
  horizons over the window and the horizons before them (`attention_kernel`, the heads' averaged
  weights over the shared values) and the head: linear.py's kernel and `gate_kernel`.
"""

from __future__ import annotations

import copy
import math

import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.adapters.inference.fused.linear import (
    BLOCK_M,
    ELU,
    PRECISION,
    WARPS,
    FusedForecaster,
    linear,
    unsuited,
)
from foxhunt.models.forecaster import Forecaster

EPS = 1e-5  # nn.LayerNorm's


def unfusable(model: Forecaster) -> str | None:
    """Why these kernels cannot serve the TFT `model`; None where they can."""
    net = model.net
    d, heads = net.horizon_embedding.shape[1], net.attention.heads
    return unsuited(model.shape.window + len(model.shape.horizons), hidden_size=d, head_width=d // heads)


@triton.jit
def gate_kernel(x_ptr, w_ptr, b_ptr, skip_ptr, g_ptr, beta_ptr, y_ptr, rows, x_stride, skip_stride, y_stride,
                eps, x_group, skip_group, y_group, N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """The TFT's gated skip (layers.py's GateAddNorm): y = LayerNorm(skip + GLU(x @ w.T + b)) for the rows r
    < rows, w [2N, K] (GLU: the first N columns times the sigmoid of the last N), all N columns of a row in
    one block. Group program_id(1) reads x, skip and writes y from x_group, skip_group and y_group values
    on, with its own w, b and the LayerNorm's g and beta."""
    group = tl.program_id(1)
    x_ptr += group * x_group
    skip_ptr += group * skip_group
    y_ptr += group * y_group
    w_ptr += group * 2 * N * K
    b_ptr += group * 2 * N
    g_ptr += group * N
    beta_ptr += group * N
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = r < rows
    col_ok = cols < N
    value = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    gate = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(x_ptr + r[:, None] * x_stride + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        w_ok = col_ok[:, None] & k_ok[None, :]
        wv = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=w_ok, other=0.0)
        wg = tl.load(w_ptr + (N + cols)[:, None] * K + ks[None, :], mask=w_ok, other=0.0)
        value += tl.dot(a, tl.trans(wv), input_precision=PRECISION)
        gate += tl.dot(a, tl.trans(wg), input_precision=PRECISION)
    value += tl.load(b_ptr + cols, mask=col_ok, other=0.0)[None, :]
    gate += tl.load(b_ptr + N + cols, mask=col_ok, other=0.0)[None, :]
    inside = row_ok[:, None] & col_ok[None, :]
    skip = tl.load(skip_ptr + r[:, None] * skip_stride + cols[None, :], mask=inside, other=0.0)
    z = tl.where(inside, skip + value * tl.sigmoid(gate), 0.0)
    mean = tl.sum(z, axis=1) / N
    centred = tl.where(inside, z - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / N + eps)
    g = tl.load(g_ptr + cols, mask=col_ok, other=0.0)
    beta = tl.load(beta_ptr + cols, mask=col_ok, other=0.0)
    tl.store(y_ptr + r[:, None] * y_stride + cols[None, :], centred * rstd[:, None] * g[None, :] + beta[None, :],
             mask=inside)


@triton.jit
def _tanh(x):
    """tanh through exp, as 1 - 2 / (exp(2x) + 1): exact at the ends, within a few 1e-8 near 0."""
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def lstm_kernel(x_ptr, x_window, h0_ptr, c0_ptr, w_ih_ptr, w_hh_ptr, b_ih_ptr, b_hh_ptr, out_ptr, out_window,
                STEPS: tl.constexpr, D: tl.constexpr, BLOCK_K: tl.constexpr):
    """One LSTM layer (nn.LSTM's gates i, f, g, o) over STEPS steps of one window (program id 0): inputs
    x[t] at x_ptr + window * x_window + t * D (x_window 0: the same inputs for every window), the initial
    state h0, c0 [windows, D], outputs h[t] at out_ptr + window * out_window + t * D. The step's h is read
    back from the output, a block's threads in step."""
    window = tl.program_id(0)
    x_ptr += window * x_window
    out_ptr += window * out_window
    js = tl.arange(0, D)
    c = tl.load(c0_ptr + window * D + js)
    bias_i = tl.load(b_ih_ptr + js) + tl.load(b_hh_ptr + js)
    bias_f = tl.load(b_ih_ptr + D + js) + tl.load(b_hh_ptr + D + js)
    bias_g = tl.load(b_ih_ptr + 2 * D + js) + tl.load(b_hh_ptr + 2 * D + js)
    bias_o = tl.load(b_ih_ptr + 3 * D + js) + tl.load(b_hh_ptr + 3 * D + js)
    for t in tl.static_range(STEPS):
        if t == 0:
            h_ptr = h0_ptr + window * D
        else:
            h_ptr = out_ptr + (t - 1) * D
        gi = tl.zeros([D], dtype=tl.float32) + bias_i
        gf = tl.zeros([D], dtype=tl.float32) + bias_f
        gg = tl.zeros([D], dtype=tl.float32) + bias_g
        go = tl.zeros([D], dtype=tl.float32) + bias_o
        for k0 in tl.static_range(0, D, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + t * D + ks)[None, :]
            h = tl.load(h_ptr + ks)[None, :]
            at = js[:, None] * D + ks[None, :]
            gi += tl.sum(tl.load(w_ih_ptr + at) * x + tl.load(w_hh_ptr + at) * h, axis=1)
            gf += tl.sum(tl.load(w_ih_ptr + D * D + at) * x + tl.load(w_hh_ptr + D * D + at) * h, axis=1)
            gg += tl.sum(tl.load(w_ih_ptr + 2 * D * D + at) * x + tl.load(w_hh_ptr + 2 * D * D + at) * h, axis=1)
            go += tl.sum(tl.load(w_ih_ptr + 3 * D * D + at) * x + tl.load(w_hh_ptr + 3 * D * D + at) * h, axis=1)
        c = tl.sigmoid(gf) * c + tl.sigmoid(gi) * _tanh(gg)
        tl.store(out_ptr + t * D + js, tl.sigmoid(go) * _tanh(c))
        tl.debug_barrier()  # the step's h, written by all the block's threads, before any reads it back


@triton.jit
def attention_kernel(q_ptr, kv_ptr, o_ptr, window, horizons, sqrt_dh, HEADS: tl.constexpr, D: tl.constexpr,
                     DH: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_T: tl.constexpr, PRECISION: tl.constexpr):
    """The TFT's interpretable attention for one window (program id 0): its horizons' queries q [horizons,
    D] over its window + horizons keys and shared values kv [window + horizons, D + DH] (keys, then values),
    horizon j seeing the window and horizons 0..j; the heads' weights averaged over the shared values, into
    o [horizons, DH] (layers.py's Attention with shared_values)."""
    w = tl.program_id(0)
    keys = window + horizons
    qs = tl.arange(0, BLOCK_Q)
    ts = tl.arange(0, BLOCK_T)
    ds = tl.arange(0, DH)
    q_ok = qs < horizons
    t_ok = ts < keys
    seen = t_ok[None, :] & ((ts[None, :] < window) | (ts[None, :] - window <= qs[:, None]))
    kv_row = (w * keys + ts)[:, None] * (D + DH)
    v = tl.load(kv_ptr + kv_row + D + ds[None, :], mask=t_ok[:, None], other=0.0)
    out = tl.zeros([BLOCK_Q, DH], dtype=tl.float32)
    for h in tl.static_range(HEADS):
        q = tl.load(q_ptr + (w * horizons + qs)[:, None] * D + h * DH + ds[None, :], mask=q_ok[:, None], other=0.0)
        k = tl.load(kv_ptr + kv_row + h * DH + ds[None, :], mask=t_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) / sqrt_dh
        s = tl.where(seen, s, float("-inf"))
        p = tl.exp(s - tl.max(s, axis=1)[:, None])
        p = p / tl.sum(p, axis=1)[:, None]
        out += tl.dot(p, v, input_precision=PRECISION)
    tl.store(o_ptr + (w * horizons + qs)[:, None] * DH + ds[None, :], out / HEADS, mask=q_ok[:, None])


def _grn(grn: nn.Module) -> dict[str, torch.Tensor]:
    """A gated residual network's parameters (layers.py), by name."""
    p = {"fc2_w": grn.fc2.weight, "fc2_b": grn.fc2.bias, "fc1_w": grn.fc1.weight, "fc1_b": grn.fc1.bias,
         "glu_w": grn.gate.glu.proj.weight, "glu_b": grn.gate.glu.proj.bias, "norm_g": grn.gate.norm.weight,
         "norm_b": grn.gate.norm.bias}
    if isinstance(grn.skip, nn.Linear):
        p |= {"skip_w": grn.skip.weight, "skip_b": grn.skip.bias}
    return p


def _gate(gate: nn.Module) -> dict[str, torch.Tensor]:
    """A gated skip's parameters (layers.py's GateAddNorm), by name."""
    return {"glu_w": gate.glu.proj.weight, "glu_b": gate.glu.proj.bias, "norm_g": gate.norm.weight,
            "norm_b": gate.norm.bias}


class FusedTft(FusedForecaster):
    """The TFT (models/tft.py) behind its normalisation (models/forecaster.py); its encoder's LSTM modules
    are deep copies."""

    name = "TFT"

    def __init__(self, forecaster: Forecaster, batch: int) -> None:
        super().__init__(forecaster, batch)
        if (why := unfusable(forecaster)) is not None:
            raise ValueError(why)
        net = forecaster.net
        self.horizons, self.quantiles = len(forecaster.shape.horizons), len(forecaster.shape.quantiles)
        self.d = d = net.horizon_embedding.shape[1]
        self.heads, self.dh = net.attention.heads, net.attention.d_head
        self.encoder = copy.deepcopy(net.encoder).eval()
        for lstm in self.encoder.layers:  # a copy's weights in one block again, as cuDNN takes them
            lstm.flatten_parameters()
        self.lstm_layers = len(net.decoder.layers)
        vs = net.selection
        p: dict[str, torch.Tensor] = {"x_mean": forecaster.x_mean, "x_scale": forecaster.x_scale,
                                      "y_scale": forecaster.y_scale.view(1, -1, 1), "embed_w": vs.weight,
                                      "embed_b": vs.bias, "future": net.horizon_embedding,
                                      "head_w": net.head.weight, "head_b": net.head.bias}
        p |= {f"select_{k}": v for k, v in _grn(vs.select).items()}
        p |= {f"feature_{k}": torch.stack([_grn(g)[k] for g in vs.grns]) for k in _grn(vs.grns[0])}
        for i, lstm in enumerate(net.decoder.layers):
            p |= {f"dec{i}_w_ih": lstm.weight_ih_l0, f"dec{i}_w_hh": lstm.weight_hh_l0,
                  f"dec{i}_b_ih": lstm.bias_ih_l0, f"dec{i}_b_hh": lstm.bias_hh_l0}
        for name, gate in (("lstm_gate", net.lstm_gate), ("attention_gate", net.attention_gate),
                           ("output_gate", net.output_gate)):
            p |= {f"{name}_{k}": v for k, v in _gate(gate).items()}
        for name, grn in (("enrich", net.enrichment), ("ff", net.feed_forward)):
            p |= {f"{name}_{k}": v for k, v in _grn(grn).items()}
        a = net.attention
        p |= {"q_w": a.q.weight, "q_b": a.q.bias, "kv_w": torch.cat([a.k.weight, a.v.weight]),
              "kv_b": torch.cat([a.k.bias, a.v.bias]), "out_w": a.out.weight, "out_b": a.out.bias}
        rows, long, short, f = batch * self.window, batch * (self.window + self.horizons), batch * self.horizons, \
            self.features
        self.keep(p, {"xs": (batch, self.window, f), "embedded": (rows, f * d), "s1": (rows, d), "s2": (rows, f),
                      "s_skip": (rows, f), "weights": (rows, f), "f1": (f, rows, d), "f2": (f, rows, d),
                      "processed": (f, rows, d), "skip": (long, d), "lstm": (long, d), "decoded": (2, short, d),
                      "temporal": (long, d), "e1": (long, d), "e2": (long, d), "enriched": (long, d),
                      "kv": (long, d + self.dh), "enriched_last": (short, d), "temporal_last": (short, d),
                      "q": (short, d), "attended_dh": (short, self.dh), "attended": (short, d), "gated": (short, d),
                      "g1": (short, d), "g2": (short, d), "ff": (short, d), "last": (short, d),
                      "head_out": (short, self.quantiles), "out": (batch, self.horizons, self.quantiles)})
        with torch.no_grad():  # the decoder's inputs, one learned row a horizon, after each window's rows
            self.skip.view(batch, -1, d)[:, self.window:] = self.future

    def _gate(self, x: torch.Tensor, name: str, skip: torch.Tensor, y: torch.Tensor, *, groups: int = 1,
              x_group: int = 0, skip_group: int = 0, y_group: int = 0) -> None:
        """y = LayerNorm(skip + GLU(x)) with the gated skip `name`'s parameters (gate_kernel)."""
        w = getattr(self, f"{name}_glu_w")
        n, k = w.shape[-2] // 2, w.shape[-1]
        gate_kernel[(triton.cdiv(x.shape[0], BLOCK_M), groups)](
            x, w, getattr(self, f"{name}_glu_b"), skip, getattr(self, f"{name}_norm_g"),
            getattr(self, f"{name}_norm_b"), y, x.shape[0], x.stride(0), skip.stride(0), y.stride(0), EPS,
            x_group, skip_group, y_group, N=n, K=k, BLOCK_M=BLOCK_M, BLOCK_N=max(16, triton.next_power_of_2(n)),
            BLOCK_K=32, PRECISION=PRECISION, num_warps=WARPS)

    def _grn(self, a: torch.Tensor, name: str, h1: torch.Tensor, h2: torch.Tensor, y: torch.Tensor,
             skip: torch.Tensor | None = None) -> None:
        """y = the gated residual network `name` of a (skip: its own projection of a, else a itself)."""
        p = {k: getattr(self, f"{name}_{k}") for k in ("fc2_w", "fc2_b", "fc1_w", "fc1_b")}
        linear(a, p["fc2_w"], p["fc2_b"], h1, act=ELU)
        linear(h1, p["fc1_w"], p["fc1_b"], h2, block_n=max(16, min(64, triton.next_power_of_2(h2.shape[1]))))
        self._gate(h2, name, a if skip is None else skip, y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """x float32 [batch, window, features] -> forecasts [batch, horizons, quantiles] in log returns: a
        view of a buffer the next call overwrites."""
        self.check(x)
        b, t, f, d, hz = self.batch, self.window, self.features, self.d, self.horizons
        rows = b * t
        # variable selection: each feature embedded, the selection's softmax weights, the features' networks
        torch.sub(x, self.x_mean, out=self.xs)
        self.xs.div_(self.x_scale)
        torch.addcmul(self.embed_b, self.xs.unsqueeze(-1), self.embed_w, out=self.embedded.view(b, t, f, d))
        linear(self.embedded, self.select_skip_w, self.select_skip_b, self.s_skip, block_n=16)
        self._grn(self.embedded, "select", self.s1, self.s2, self.weights, skip=self.s_skip)
        weights = torch.softmax(self.weights, dim=-1)
        # the features' networks, a group each: feature i's embedding is columns i * d on of `embedded`
        linear(self.embedded, self.feature_fc2_w, self.feature_fc2_b, self.f1[0], act=ELU, groups=(f, d, rows * d))
        linear(self.f1[0], self.feature_fc1_w, self.feature_fc1_b, self.f2[0], groups=(f, rows * d, rows * d))
        self._gate(self.f2[0], "feature", self.embedded, self.processed[0], groups=f, x_group=rows * d, skip_group=d,
                   y_group=rows * d)
        skip = self.skip.view(b, t + hz, d)
        skip[:, :t].copy_((self.processed * weights.t().unsqueeze(-1)).sum(0).view(b, t, d))
        # the encoder (cuDNN) and the decoder from its final state
        encoded, finals = self.encoder(skip[:, :t])
        lstm = self.lstm.view(b, t + hz, d)
        lstm[:, :t].copy_(encoded)
        for i, (h0, c0) in enumerate(finals):  # layer i's outputs in decoded[i % 2], the last layer's in lstm
            inputs, window = (self.future, 0) if i == 0 else (self.decoded[(i - 1) % 2], hz * d)
            last = i == self.lstm_layers - 1
            out, out_window = (lstm[:, t:], (t + hz) * d) if last else (self.decoded[i % 2], hz * d)
            lstm_kernel[(b,)](inputs, window, h0, c0, getattr(self, f"dec{i}_w_ih"), getattr(self, f"dec{i}_w_hh"),
                              getattr(self, f"dec{i}_b_ih"), getattr(self, f"dec{i}_b_hh"), out, out_window,
                              STEPS=hz, D=d, BLOCK_K=16, num_warps=WARPS)
        # the gated skip over the LSTMs, enrichment, attention of the horizons, and the gates after it
        self._gate(self.lstm, "lstm_gate", self.skip, self.temporal)
        self._grn(self.temporal, "enrich", self.e1, self.e2, self.enriched)
        linear(self.enriched, self.kv_w, self.kv_b, self.kv)
        self.enriched_last.view(b, hz, d).copy_(self.enriched.view(b, t + hz, d)[:, t:])
        self.temporal_last.view(b, hz, d).copy_(self.temporal.view(b, t + hz, d)[:, t:])
        linear(self.enriched_last, self.q_w, self.q_b, self.q)
        attention_kernel[(b,)](self.q, self.kv, self.attended_dh, t, hz, math.sqrt(self.dh), HEADS=self.heads, D=d,
                               DH=self.dh, BLOCK_Q=16, BLOCK_T=max(16, triton.next_power_of_2(t + hz)),
                               PRECISION=PRECISION, num_warps=WARPS)
        linear(self.attended_dh, self.out_w, self.out_b, self.attended)
        self._gate(self.attended, "attention_gate", self.enriched_last, self.gated)
        self._grn(self.gated, "ff", self.g1, self.g2, self.ff)
        self._gate(self.ff, "output_gate", self.temporal_last, self.last)
        linear(self.last, self.head_w, self.head_b, self.head_out, block_n=16)
        torch.mul(self.head_out.view(b, hz, self.quantiles), self.y_scale, out=self.out)
        return self.out
