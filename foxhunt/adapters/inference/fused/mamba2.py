"""The Mamba2 forecaster (models/mamba2.py) in Triton kernels: three a block and two more, 2 + 3 * layers.

- the input projection with the block's RMSNorm before it (linear.py);
- the rest of the mixer in one kernel, one block per head and window: the causal depthwise convolution
  over (x, B, C) and its SiLU, dt = softplus(dt + dt_bias), the SSD scan and the skip D, and the gate
  SiLU(z). The scan is the quadratic form of the whole window as one chunk (Dao and Gu 2024, section 6:
  y = (L o C B^T) (dt x), L[i, j] = exp(a[j+1] + ... + a[i]) for j <= i, else 0), the same function as
  the model's chunks of `chunk` rows with states passed between them; the sums in L are running sums down
  the columns of masked copies of a, as the model's segment sums are, never differences of large sums;
- the gated RMSNorm, the output projection and the residual (linear.py).
The embedding takes the forecaster's input standardisation, the head the last RMSNorm and the label scales.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.adapters.inference.fused.linear import PRECISION, RMS_NORM, WARPS, FusedForecaster, linear, unsuited
from foxhunt.models.forecaster import Forecaster


def unfusable(model: Forecaster) -> str | None:
    """Why these kernels cannot serve the Mamba2 forecaster `model`; None where they can."""
    block = model.net.blocks[0]
    return unsuited(model.shape.window, head_width=block.headdim, state_size=block.d_state)


@triton.jit
def _conv_silu(ptr, w_ptr, b_ptr, first, ts, t_ok, stride, column0, channels, WIDTH: tl.constexpr):
    """SiLU of the causal depthwise convolution of the conv channels `channels` (columns column0 + channel
    of ptr's rows first + ts) for rows ts: bias + the WIDTH rows up to each row, weighted (models/mamba2.py's
    causal_conv, the rows before the window's first taken as 0)."""
    acc = tl.zeros([ts.shape[0], channels.shape[0]], dtype=tl.float32) + tl.load(b_ptr + channels)[None, :]
    for k in tl.static_range(WIDTH):
        src = ts - (WIDTH - 1 - k)
        ok = t_ok & (src >= 0)
        u = tl.load(ptr + (first + src)[:, None] * stride + (column0 + channels)[None, :], mask=ok[:, None], other=0.0)
        acc = acc + u * tl.load(w_ptr + channels * WIDTH + k)[None, :]
    return acc * tl.sigmoid(acc)


@triton.jit
def mixer_kernel(zxbcdt_ptr, y_ptr, conv_w_ptr, conv_b_ptr, dt_bias_ptr, a_ptr, d_ptr, t,
                 E: tl.constexpr, N: tl.constexpr, P: tl.constexpr, H: tl.constexpr, WIDTH: tl.constexpr,
                 BLOCK_T: tl.constexpr, PRECISION: tl.constexpr):
    """One head (program id 0) of one window (program id 1) of t rows: from the input projection's
    [z | x | B | C | dt] columns (E, E, N, N and H wide) to y * SiLU(z), that head's P columns of y [rows, E]."""
    h = tl.program_id(0)
    first = tl.program_id(1) * t
    stride = 2 * E + 2 * N + H
    ts = tl.arange(0, BLOCK_T)
    t_ok = ts < t
    ps = h * P + tl.arange(0, P)  # the head's channels of x (and of z and y)
    ns = tl.arange(0, N)
    x = _conv_silu(zxbcdt_ptr, conv_w_ptr, conv_b_ptr, first, ts, t_ok, stride, E, ps, WIDTH)
    b = _conv_silu(zxbcdt_ptr, conv_w_ptr, conv_b_ptr, first, ts, t_ok, stride, E, E + ns, WIDTH)
    c = _conv_silu(zxbcdt_ptr, conv_w_ptr, conv_b_ptr, first, ts, t_ok, stride, E, E + N + ns, WIDTH)
    v = tl.load(zxbcdt_ptr + (first + ts) * stride + 2 * E + 2 * N + h, mask=t_ok, other=0.0) + tl.load(dt_bias_ptr + h)
    # dt = F.softplus(v): v itself above 20, else log1p(exp(v)), log1p(e) as log(u) * e / (u - 1) with
    # u = 1 + e (Goldberg 1991, "What every computer scientist should know about floating-point arithmetic",
    # theorem 4): exact to a few ulps where log(1 + e) would lose e's digits below 1's
    e = tl.exp(v)
    u = 1.0 + e
    dt = tl.where(v > 20.0, v, tl.where(u == 1.0, e, tl.log(u) * e / (u - 1.0)))
    a = dt * tl.load(a_ptr + h)
    # L[i, j] = exp(a[j+1] + ... + a[i]) for j <= i: running sums down each column j of a's rows after j
    after = ts[:, None] > ts[None, :]
    sums = tl.cumsum(tl.where(after, a[:, None], 0.0), axis=0)
    decay = tl.where(ts[None, :] <= ts[:, None], tl.exp(sums), 0.0)
    scores = tl.dot(c, tl.trans(b), input_precision=PRECISION) * decay
    y = tl.dot(scores, x * dt[:, None], input_precision=PRECISION) + tl.load(d_ptr + h) * x
    z = tl.load(zxbcdt_ptr + (first + ts)[:, None] * stride + ps[None, :], mask=t_ok[:, None], other=0.0)
    tl.store(y_ptr + (first + ts)[:, None] * E + ps[None, :], y * (z * tl.sigmoid(z)), mask=t_ok[:, None])


def _eps(norm: nn.RMSNorm) -> float:
    return norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps  # nn.RMSNorm's default


class FusedMamba2(FusedForecaster):
    """The Mamba2 forecaster (models/mamba2.py) behind its normalisation (models/forecaster.py)."""

    name = "Mamba2"
    unfusable = staticmethod(unfusable)

    def __init__(self, forecaster: Forecaster, batch: int) -> None:
        super().__init__(forecaster, batch)
        net = forecaster.net
        first = net.blocks[0]
        self.d, self.inner, self.d_state = net.embed.out_features, first.inner, first.d_state
        self.heads, self.headdim, self.width = first.heads, first.headdim, first.conv_weight.shape[1]
        self.shape_out = net.head.shape
        self.eps = [_eps(b.norm_in) for b in net.blocks], [_eps(b.norm_out) for b in net.blocks], _eps(net.norm)
        p = {"x_mean": forecaster.x_mean, "x_scale": forecaster.x_scale, "embed_w": net.embed.weight,
             "embed_b": net.embed.bias, "norm_g": net.norm.weight, "head_w": net.head.proj.weight,
             "head_b": net.head.proj.bias, "y_scale": forecaster.y_scale.repeat_interleave(self.shape_out[1])}
        for i, block in enumerate(net.blocks):
            p |= {f"{i}_in_g": block.norm_in.weight, f"{i}_in_w": block.in_proj.weight,
                  f"{i}_conv_w": block.conv_weight, f"{i}_conv_b": block.conv_bias, f"{i}_dt_bias": block.dt_bias,
                  f"{i}_a": -torch.exp(block.a_log), f"{i}_d": block.d, f"{i}_out_g": block.norm_out.weight,
                  f"{i}_out_w": block.out_proj.weight}
        self.blocks, rows = len(net.blocks), batch * self.window
        projected = 2 * self.inner + 2 * self.d_state + self.heads
        self.keep(p, {"h": (rows, self.d), "zxbcdt": (rows, projected), "y": (rows, self.inner),
                      "out": (batch, self.shape_out[0] * self.shape_out[1])})

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """x float32 [batch, window, features] -> forecasts [batch, horizons, quantiles] in log returns: a
        view of a buffer the next call overwrites."""
        self.check(x)
        h, t = self.h, self.window
        eps_in, eps_out, eps_last = self.eps
        linear(x.reshape(-1, self.features), self.embed_w, self.embed_b, h, standardize=(self.x_mean, self.x_scale),
               block_k=16)
        for i in range(self.blocks):
            p = functools.partial(self.param, i)
            linear(h, p("in_w"), None, self.zxbcdt, norm=(RMS_NORM, p("in_g"), None, eps_in[i]))
            mixer_kernel[(self.heads, self.batch)](
                self.zxbcdt, self.y, p("conv_w"), p("conv_b"), p("dt_bias"), p("a"), p("d"), t,
                E=self.inner, N=self.d_state, P=self.headdim, H=self.heads, WIDTH=self.width,
                BLOCK_T=max(16, triton.next_power_of_2(t)), PRECISION=PRECISION, num_warps=WARPS)
            linear(self.y, p("out_w"), None, h, norm=(RMS_NORM, p("out_g"), None, eps_out[i]), add=h, block_n=32,
                   block_k=64)
        last = h.view(self.batch, t, self.d)[:, -1]  # each window's last row: strided rows, contiguous values
        linear(last, self.head_w, self.head_b, self.out, norm=(RMS_NORM, self.norm_g, None, eps_last),
               out_scale=self.y_scale, block_n=16)
        return self.out.view(self.batch, *self.shape_out)
