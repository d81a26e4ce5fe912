"""An experiment for issue 22's 64-step latency: the attention forecaster's forward pass at batch 1 in 22
Triton kernels (24 with the copies), captured by the scorer's CUDA graph, against the scorer's graph of the eager model.

bench/kernel_census.py found that inside the graph the GPU is busy most of the call, mostly in cuBLAS's
FP32 GEMMs at 64 rows (64x64 SIMT tiles and a split-K reduction, 6 µs and 2 µs each) and in small
kernels around them. Here each linear layer is one kernel with what surrounds it fused in: the input's
standardisation or the LayerNorm before it, the bias, GELU, the residual (or the learned positions) and
the output scale after it, over tiles of 16 rows, so more blocks share the work and no reduction pass
follows. Attention is one kernel a layer, one block per head (scores, softmax and the weighted values
of 64 rows in registers). FP32 data; the dots in FP32 on the CUDA cores or in 3xTF32 on tensor cores
(`--precision`); fixed tile sizes (no autotuning), no atomics: the same bytes every call and in every
process, but other bytes than eager's (other summation orders), as `[scoring] compile = true`'s are.

    python bench/fused_attention.py [--calls 5000] [--precision tf32x3] [--profile]   (on the H200)
    TRITON_INTERPRET=1 python bench/fused_attention.py --check                  (here: arithmetic only)

Prints p50/p99/p99.9 of `Scorer.score` (copies and the wait included) for both, the largest difference
between their forecasts over `--inputs` windows, and a digest of the fused forecasts (run it twice: two
processes must print the same); `--profile` adds each kernel's time.

Measured on the H200 (docs/benchmarks.md, issue 22, session 28): 24 kernels and copies a call against the
eager graph's 96, the same bytes in every process. With FP32 dots (`--precision ieee`) no faster than the
eager graph (each linear kernel 15 µs, where cuBLAS's SIMT GEMMs take 4 to 6); with 3xTF32 dots on tensor
cores (`--precision tf32x3`, about FP32's accuracy: within 1.7e-6 of eager) 182 / 201 µs at p50 / p99
against the eager graph's 357 / 372, under issue 22's 250 µs.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import time

import numpy as np
import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.core.features import FeatureSpec
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.forecaster import Forecaster, build


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, add_ptr, g_ptr, beta_ptr, mean_ptr, scale_ptr, out_scale_ptr,
            row0, rows_end, n, k, x_stride, y_stride, add_stride, eps,
            NORM: tl.constexpr, STANDARDIZE: tl.constexpr, GELU: tl.constexpr, ADD: tl.constexpr,
            OUT_SCALE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
            PRECISION: tl.constexpr):
    """y[r - row0, :] = f(x[r, :]) @ w.T + b, for rows r in [row0, rows_end): f is LayerNorm (g, beta) with
    NORM, the standardisation (x - mean) / scale with STANDARDIZE; then GELU (erf) with GELU, + add[r, :]
    with ADD, * out_scale with OUT_SCALE. w is [n, k] (nn.Linear's weight)."""
    rows = row0 + tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < rows_end
    col_ok = cols < n
    if NORM:  # each row's mean and biased variance over k, as nn.LayerNorm
        total = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, k, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(x_ptr + rows[:, None] * x_stride + ks[None, :], mask=row_ok[:, None] & (ks[None, :] < k),
                        other=0.0)
            total += tl.sum(a, axis=1)
        mean = total / k
        squares = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, k, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            inside = row_ok[:, None] & (ks[None, :] < k)
            a = tl.load(x_ptr + rows[:, None] * x_stride + ks[None, :], mask=inside, other=0.0)
            d = tl.where(inside, a - mean[:, None], 0.0)
            squares += tl.sum(d * d, axis=1)
        rstd = 1.0 / tl.sqrt(squares / k + eps)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < k
        inside = row_ok[:, None] & k_ok[None, :]
        a = tl.load(x_ptr + rows[:, None] * x_stride + ks[None, :], mask=inside, other=0.0)
        if NORM:
            g = tl.load(g_ptr + ks, mask=k_ok, other=0.0)
            beta = tl.load(beta_ptr + ks, mask=k_ok, other=0.0)
            a = (a - mean[:, None]) * rstd[:, None] * g[None, :] + beta[None, :]
        if STANDARDIZE:
            mu = tl.load(mean_ptr + ks, mask=k_ok, other=0.0)
            sd = tl.load(scale_ptr + ks, mask=k_ok, other=1.0)
            a = (a - mu[None, :]) / sd[None, :]
        a = tl.where(inside, a, 0.0)
        # [BLOCK_N, BLOCK_K] along w's rows, where k is contiguous (coalesced), then transposed for the dot
        w = tl.load(w_ptr + cols[:, None] * k + ks[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(w), input_precision=PRECISION)
    acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0)[None, :]
    if GELU:
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    out_ok = row_ok[:, None] & col_ok[None, :]
    if ADD:
        acc += tl.load(add_ptr + rows[:, None] * add_stride + cols[None, :], mask=out_ok, other=0.0)
    if OUT_SCALE:
        acc *= tl.load(out_scale_ptr + cols, mask=col_ok, other=1.0)[None, :]
    tl.store(y_ptr + (rows - row0)[:, None] * y_stride + cols[None, :], acc, mask=out_ok)


@triton.jit
def attention_kernel(qkv_ptr, o_ptr, t, sqrt_dh, D: tl.constexpr, DH: tl.constexpr, BLOCK_T: tl.constexpr,
                     PRECISION: tl.constexpr):
    """One head (the program's id) over t rows: softmax(q k^T / sqrt(DH)) v, q, k and v that head's columns
    of qkv [t, 3 D], into its columns of o [t, D]."""
    h = tl.program_id(0)
    ts = tl.arange(0, BLOCK_T)
    t_ok = ts < t
    ds = tl.arange(0, DH)
    at = qkv_ptr + ts[:, None] * (3 * D) + h * DH + ds[None, :]
    q = tl.load(at, mask=t_ok[:, None], other=0.0)
    k = tl.load(at + D, mask=t_ok[:, None], other=0.0)
    v = tl.load(at + 2 * D, mask=t_ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) / sqrt_dh
    s = tl.where(t_ok[None, :], s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    o = tl.dot(p, v, input_precision=PRECISION)
    tl.store(o_ptr + ts[:, None] * D + h * DH + ds[None, :], o, mask=t_ok[:, None])


class FusedAttention(nn.Module):
    """The attention forecaster (models/attention.py) behind its normalisation (models/forecaster.py),
    `predict` at batch 1 in Triton kernels, into buffers of fixed shape (a CUDA graph captures it)."""

    def __init__(self, forecaster: Forecaster, block_m: int = 16, warps: int = 4, stages: int = 3,
                 precision: str = "ieee") -> None:
        super().__init__()
        self.block_m, self.warps, self.stages, self.precision = block_m, warps, stages, precision
        net = forecaster.net
        self.window, self.features = net.position.shape[0], forecaster.shape.features
        self.d = net.position.shape[1]
        self.heads = net.blocks[0].attn.heads
        self.d_ff = net.blocks[0].ff[0].out_features
        self.shape_out = net.head.shape
        p = {}
        p["x_mean"], p["x_scale"] = forecaster.x_mean, forecaster.x_scale
        p["embed_w"], p["embed_b"], p["position"] = net.embed.weight, net.embed.bias, net.position
        for i, blk in enumerate(net.blocks):
            a = blk.attn
            p[f"{i}.n1_g"], p[f"{i}.n1_b"] = blk.norm1.weight, blk.norm1.bias
            p[f"{i}.qkv_w"] = torch.cat([a.q.weight, a.k.weight, a.v.weight])
            p[f"{i}.qkv_b"] = torch.cat([a.q.bias, a.k.bias, a.v.bias])
            p[f"{i}.out_w"], p[f"{i}.out_b"] = a.out.weight, a.out.bias
            p[f"{i}.n2_g"], p[f"{i}.n2_b"] = blk.norm2.weight, blk.norm2.bias
            p[f"{i}.ff1_w"], p[f"{i}.ff1_b"] = blk.ff[0].weight, blk.ff[0].bias
            p[f"{i}.ff2_w"], p[f"{i}.ff2_b"] = blk.ff[3].weight, blk.ff[3].bias
        p["norm_g"], p["norm_b"] = net.norm.weight, net.norm.bias
        p["head_w"], p["head_b"] = net.head.proj.weight, net.head.proj.bias
        p["y_scale"] = forecaster.y_scale.repeat_interleave(self.shape_out[1])  # one per output column
        for name, value in p.items():
            self.register_buffer(name.replace(".", "_"), value.detach().clone().contiguous(), persistent=False)
        self.blocks = len(net.blocks)
        t, d = self.window, self.d
        for name, width in (("h", d), ("h2", d), ("qkv", 3 * d), ("o", d), ("f", self.d_ff)):
            self.register_buffer(name, torch.zeros(t, width), persistent=False)
        self.register_buffer("out", torch.zeros(1, int(np.prod(self.shape_out))), persistent=False)

    def _p(self, block: int, name: str) -> torch.Tensor:
        return getattr(self, f"{block}_{name}")

    def _linear(self, x, w, b, y, *, n, k, row0=0, rows=None, add=None, norm=None, standardize=False,
                gelu=False, out_scale=None, block_n=64, block_k=32):
        rows = self.window if rows is None else rows
        dummy = b
        g, beta = norm if norm is not None else (dummy, dummy)
        grid = (triton.cdiv(rows - row0, self.block_m), triton.cdiv(n, block_n))
        linear_kernel[grid](x, w, b, y, add if add is not None else dummy, g, beta,
                      self.x_mean if standardize else dummy, self.x_scale if standardize else dummy,
                      out_scale if out_scale is not None else dummy,
                      row0, rows, n, k, x.stride(0), y.stride(0), add.stride(0) if add is not None else 0, 1e-5,
                      NORM=norm is not None, STANDARDIZE=standardize, GELU=gelu, ADD=add is not None,
                      OUT_SCALE=out_scale is not None, BLOCK_M=self.block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                      PRECISION=self.precision, num_warps=self.warps, num_stages=self.stages)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape != (1, self.window, self.features):
            raise ValueError(f"FusedAttention serves batch 1: [1, {self.window}, {self.features}], got"
                             f" {tuple(x.shape)}")
        d, t = self.d, self.window
        x2 = x[0]
        self._linear(x2, self.embed_w, self.embed_b, self.h, n=d, k=self.features, standardize=True,
                     add=self.position, block_k=16)
        h, h2 = self.h, self.h2
        for i in range(self.blocks):
            b = functools.partial(self._p, i)  # block i's buffer by name
            self._linear(h, b("qkv_w"), b("qkv_b"), self.qkv, n=3 * d, k=d, norm=(b("n1_g"), b("n1_b")))
            attention_kernel[(self.heads,)](self.qkv, self.o, t, math.sqrt(d // self.heads), D=d, DH=d // self.heads,
                                      BLOCK_T=triton.next_power_of_2(t), PRECISION=self.precision)
            self._linear(self.o, b("out_w"), b("out_b"), h2, n=d, k=d, add=h, block_n=32)
            self._linear(h2, b("ff1_w"), b("ff1_b"), self.f, n=self.d_ff, k=d, norm=(b("n2_g"), b("n2_b")), gelu=True)
            self._linear(self.f, b("ff2_w"), b("ff2_b"), h, n=d, k=self.d_ff, add=h2, block_n=32, block_k=64)
        self._linear(h, self.head_w, self.head_b, self.out, n=self.out.shape[1], k=d, row0=t - 1,
                     norm=(self.norm_g, self.norm_b), out_scale=self.y_scale, block_n=16)
        return self.out.view(1, *self.shape_out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--block", type=int, default=500)
    p.add_argument("--inputs", type=int, default=200)
    p.add_argument("--check", action="store_true", help="the arithmetic only (on a CPU with TRITON_INTERPRET=1)")
    p.add_argument("--size", default="production")
    p.add_argument("--profile", action="store_true", help="also each kernel's time (bench/kernel_census.py)")
    p.add_argument("--block-m", type=int, default=16, help="rows of a tile (16: 64 rows make four)")
    p.add_argument("--warps", type=int, default=4)
    p.add_argument("--stages", type=int, default=3)
    p.add_argument("--precision", default="ieee", choices=["ieee", "tf32x3"],
                   help="the dots' input precision: FP32 on the CUDA cores, or three TF32 products on tensor cores")
    args = p.parse_args()
    make_deterministic(4)
    spec = FeatureSpec()
    shape = Shape(window=64, features=spec.width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    model = build("attention", TrainConfig().model("attention", args.size), shape, seed=1).eval()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():  # other scales than the identity, so that the fused kernels must apply them
        model.x_mean.uniform_(-0.5, 0.5, generator=g)
        model.x_scale.uniform_(0.5, 2.0, generator=g)
        model.y_scale.uniform_(0.5, 2.0, generator=g)
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(args.inputs, 1, 64, spec.width)).astype(np.float32)
    if args.check:
        fused = FusedAttention(model, args.block_m, args.warps, args.stages, args.precision)
        with torch.no_grad():
            diff = max(float((fused.predict(torch.from_numpy(w)) - model.predict(torch.from_numpy(w))).abs().max())
                       for w in inputs[:4])
        print(json.dumps({"largest_abs_diff": diff, "interpreted": os.environ.get("TRITON_INTERPRET") == "1"}))
        return
    from latency import percentiles  # bench/latency.py

    from foxhunt.adapters.inference.scorer import Scorer

    device = torch.device("cuda")
    ways = {"graph of the eager model": Scorer(model, 64, spec.width, device),
            "graph of the fused kernels": Scorer(FusedAttention(model.to(device), args.block_m, args.warps, args.stages,
                                                                        args.precision),
                                                 64, spec.width, device)}
    outs = {name: np.stack([way.score(w) for w in inputs]) for name, way in ways.items()}
    eager, fused = outs.values()
    again = np.stack([ways["graph of the fused kernels"].score(w) for w in inputs])
    took: dict[str, list[int]] = {name: [] for name in ways}
    clock = time.perf_counter_ns
    while len(took["graph of the fused kernels"]) < args.calls:
        for name, way in ways.items():
            for i in range(args.block):
                t0 = clock()
                way.score(inputs[i % len(inputs)])
                took[name].append(clock() - t0)
    if args.profile:
        from kernel_census import census  # bench/kernel_census.py

        for name, way in ways.items():
            print(name, json.dumps(census(way, 20, 30)))
    print(json.dumps({name: percentiles(ns) for name, ns in took.items()} | {
        "largest_abs_diff": float(np.abs(fused - eager).max()),
        "largest_forecast": float(np.abs(eager).max()),
        "same_bytes_every_call": bool(np.array_equal(fused, again)),
        "fused_digest": hashlib.sha256(fused.tobytes()).hexdigest()[:16],
    }, indent=1))


if __name__ == "__main__":
    main()
