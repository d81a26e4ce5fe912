"""The attention forecaster (models/attention.py) in Triton kernels: each linear layer one kernel with its
LayerNorm, bias, GELU and residual (linear.py), the embedding with the input's standardisation and the
learned positions, the head with the last LayerNorm and the label scales, and attention one kernel a layer,
one block per head and window (scores, softmax and the weighted values in registers). A call is
2 + 5 * layers kernels; eager's graph replays about 100.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from foxhunt.adapters.inference.fused.linear import (
    GELU,
    PRECISION,
    WARPS,
    FusedForecaster,
    layer_norm,
    linear,
    unsuited,
)
from foxhunt.models.forecaster import Forecaster


def unfusable(model: Forecaster) -> str | None:
    """Why these kernels cannot serve the attention forecaster `model`; None where they can."""
    net = model.net
    window, d = net.position.shape
    return unsuited(window, head_width=d // net.blocks[0].attn.heads if len(net.blocks) else d)


@triton.jit
def attention_kernel(qkv_ptr, o_ptr, t, sqrt_dh, D: tl.constexpr, DH: tl.constexpr, BLOCK_T: tl.constexpr,
                     PRECISION: tl.constexpr):
    """One head (program id 0) of one window (program id 1) over its t rows: softmax(q k^T / sqrt(DH)) v,
    q, k and v that head's columns of qkv [windows * t, 3 D], into its columns of o [windows * t, D]."""
    h = tl.program_id(0)
    first = tl.program_id(1) * t
    ts = tl.arange(0, BLOCK_T)
    t_ok = ts < t
    ds = tl.arange(0, DH)
    at = qkv_ptr + (first + ts)[:, None] * (3 * D) + h * DH + ds[None, :]
    q = tl.load(at, mask=t_ok[:, None], other=0.0)
    k = tl.load(at + D, mask=t_ok[:, None], other=0.0)
    v = tl.load(at + 2 * D, mask=t_ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) / sqrt_dh
    s = tl.where(t_ok[None, :], s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    o = tl.dot(p, v, input_precision=PRECISION)
    tl.store(o_ptr + (first + ts)[:, None] * D + h * DH + ds[None, :], o, mask=t_ok[:, None])


class FusedAttention(FusedForecaster):
    """The attention forecaster (models/attention.py) behind its normalisation (models/forecaster.py)."""

    name = "attention"
    unfusable = staticmethod(unfusable)

    def __init__(self, forecaster: Forecaster, batch: int) -> None:
        super().__init__(forecaster, batch)
        net = forecaster.net
        self.d = net.position.shape[1]
        self.heads = net.blocks[0].attn.heads if len(net.blocks) else 1
        self.d_ff = net.blocks[0].ff[0].out_features if len(net.blocks) else 0
        self.shape_out = net.head.shape
        p = {"x_mean": forecaster.x_mean, "x_scale": forecaster.x_scale, "embed_w": net.embed.weight,
             "embed_b": net.embed.bias, "position": net.position, "norm_g": net.norm.weight,
             "norm_b": net.norm.bias, "head_w": net.head.proj.weight, "head_b": net.head.proj.bias,
             "y_scale": forecaster.y_scale.repeat_interleave(self.shape_out[1])}  # one per output column
        for i, block in enumerate(net.blocks):
            a = block.attn
            p |= {f"{i}_n1_g": block.norm1.weight, f"{i}_n1_b": block.norm1.bias,
                  f"{i}_qkv_w": torch.cat([a.q.weight, a.k.weight, a.v.weight]),
                  f"{i}_qkv_b": torch.cat([a.q.bias, a.k.bias, a.v.bias]),
                  f"{i}_out_w": a.out.weight, f"{i}_out_b": a.out.bias,
                  f"{i}_n2_g": block.norm2.weight, f"{i}_n2_b": block.norm2.bias,
                  f"{i}_ff1_w": block.ff[0].weight, f"{i}_ff1_b": block.ff[0].bias,
                  f"{i}_ff2_w": block.ff[3].weight, f"{i}_ff2_b": block.ff[3].bias}
        self.blocks, rows = len(net.blocks), batch * self.window
        self.keep(p, {"h": (rows, self.d), "h2": (rows, self.d), "qkv": (rows, 3 * self.d), "o": (rows, self.d),
                      "f": (rows, self.d_ff), "out": (batch, self.shape_out[0] * self.shape_out[1])})

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """x float32 [batch, window, features] -> forecasts [batch, horizons, quantiles] in log returns: a
        view of a buffer the next call overwrites."""
        self.check(x)
        d, t, h, h2 = self.d, self.window, self.h, self.h2
        linear(x.reshape(-1, self.features), self.embed_w, self.embed_b, h, standardize=(self.x_mean, self.x_scale),
               add=self.position, add_period=t, block_k=16)
        for i in range(self.blocks):
            p = functools.partial(self.param, i)
            linear(h, p("qkv_w"), p("qkv_b"), self.qkv, norm=layer_norm(p("n1_g"), p("n1_b")))
            attention_kernel[(self.heads, self.batch)](
                self.qkv, self.o, t, math.sqrt(d // self.heads), D=d, DH=d // self.heads,
                BLOCK_T=max(16, triton.next_power_of_2(t)), PRECISION=PRECISION, num_warps=WARPS)
            linear(self.o, p("out_w"), p("out_b"), h2, add=h, block_n=32)
            linear(h2, p("ff1_w"), p("ff1_b"), self.f, norm=layer_norm(p("n2_g"), p("n2_b")), act=GELU)
            linear(self.f, p("ff2_w"), p("ff2_b"), h, add=h2, block_n=32, block_k=64)
        last = h.view(self.batch, t, d)[:, -1]  # each window's last row: strided rows, contiguous values
        linear(last, self.head_w, self.head_b, self.out, norm=layer_norm(self.norm_g, self.norm_b),
               out_scale=self.y_scale, block_n=16)
        return self.out.view(self.batch, *self.shape_out)
