"""A linear layer with what surrounds it, in one Triton kernel: the fused models' building block.

y[r, :] = post(pre(x[r, :]) @ w.T + b), pre the input's standardisation (the forecaster's), a LayerNorm or
an RMSNorm; post GELU or ELU, a residual (or a periodic addend: the attention model's learned positions)
and a scale per output column (the forecaster's label scales). Rows in tiles of BLOCK_M, columns in tiles
of block_n, the inner dimension in steps of block_k, accumulated in one order, in registers: no split, no
atomics, so the same bytes in every call. A group of layers of one shape (the TFT's per-feature networks)
runs as one launch, a group a grid row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.models.forecaster import Forecaster

PRECISION = "tf32x3"  # the dots: three TF32 products (about FP32's accuracy) on tensor cores
BLOCK_M, WARPS, STAGES = 16, 4, 3  # fixed: other tile settings give other bytes
NO_NORM, LAYER_NORM, RMS_NORM = 0, 1, 2
LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, which the models keep
NO_ACT, GELU, ELU = 0, 1, 2
MAX_WINDOW = 128  # a window's rows are one tile of the sequence kernels, window x window values in registers


def unsuited(window: int, **widths: int) -> str | None:
    """Why a sequence kernel cannot take a window of `window` rows and dots over these widths (a
    tensor-core dot's operands: powers of two of at least 16); None where it can."""
    if window > MAX_WINDOW:
        return f"window {window} is longer than the fused kernels' {MAX_WINDOW} rows"
    for what, n in widths.items():
        if n < 16 or n & (n - 1):
            return f"{what.replace('_', ' ')} {n} is not a power of two of at least 16 (a tensor-core dot's)"
    return None


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, add_ptr, g_ptr, beta_ptr, mean_ptr, scale_ptr, out_scale_ptr,
                  rows, x_stride, y_stride, add_stride, add_period, eps, x_group, y_group,
                  N: tl.constexpr, K: tl.constexpr, NORM: tl.constexpr, STANDARDIZE: tl.constexpr,
                  BIAS: tl.constexpr, ACT: tl.constexpr, ADD: tl.constexpr, OUT_SCALE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """y[r, :] = f(x[r, :]) @ w.T (+ b with BIAS) for the rows r < rows: f is LayerNorm (g, beta) with NORM 1
    (nn.LayerNorm: mean and biased variance), RMSNorm (g) with NORM 2 (nn.RMSNorm), the standardisation
    (x - mean) / scale with STANDARDIZE; then GELU (erf) with ACT 1, ELU with ACT 2, + add[r % add_period, :]
    with ADD, * out_scale with OUT_SCALE. w is [N, K] (nn.Linear's weight); a row's K values are contiguous.
    Group program_id(2) reads x from x_group values on, its own w [N, K] and b [N], writes y from y_group on."""
    group = tl.program_id(2)
    x_ptr += group * x_group
    y_ptr += group * y_group
    w_ptr += group * N * K
    b_ptr += group * N
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = r < rows
    col_ok = cols < N
    if NORM == 1:  # each row's mean over K, subtracted before its variance is summed
        total = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(x_ptr + r[:, None] * x_stride + ks[None, :], mask=row_ok[:, None] & (ks[None, :] < K),
                        other=0.0)
            total += tl.sum(a, axis=1)
        mean = total / K
    else:
        mean = tl.zeros([BLOCK_M], dtype=tl.float32)
    if NORM != 0:  # each row's (centred, for LayerNorm) mean square over K
        squares = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            inside = row_ok[:, None] & (ks[None, :] < K)
            a = tl.load(x_ptr + r[:, None] * x_stride + ks[None, :], mask=inside, other=0.0)
            centred = tl.where(inside, a - mean[:, None], 0.0)
            squares += tl.sum(centred * centred, axis=1)
        rstd = 1.0 / tl.sqrt(squares / K + eps)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        inside = row_ok[:, None] & k_ok[None, :]
        a = tl.load(x_ptr + r[:, None] * x_stride + ks[None, :], mask=inside, other=0.0)
        if NORM == 1:
            g = tl.load(g_ptr + ks, mask=k_ok, other=0.0)
            beta = tl.load(beta_ptr + ks, mask=k_ok, other=0.0)
            a = (a - mean[:, None]) * rstd[:, None] * g[None, :] + beta[None, :]
        if NORM == 2:
            g = tl.load(g_ptr + ks, mask=k_ok, other=0.0)
            a = a * rstd[:, None] * g[None, :]
        if STANDARDIZE:
            mu = tl.load(mean_ptr + ks, mask=k_ok, other=0.0)
            sd = tl.load(scale_ptr + ks, mask=k_ok, other=1.0)
            a = (a - mu[None, :]) / sd[None, :]
        a = tl.where(inside, a, 0.0)
        # [BLOCK_N, BLOCK_K] along w's rows, where k is contiguous (coalesced), transposed for the dot
        w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(w), input_precision=PRECISION)
    if BIAS:
        acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0)[None, :]
    if ACT == 1:  # GELU, nn.GELU's exact (erf) form
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    if ACT == 2:  # ELU, F.elu's (alpha 1)
        acc = tl.where(acc > 0.0, acc, tl.exp(acc) - 1.0)
    out_ok = row_ok[:, None] & col_ok[None, :]
    if ADD:
        acc += tl.load(add_ptr + (r % add_period)[:, None] * add_stride + cols[None, :], mask=out_ok, other=0.0)
    if OUT_SCALE:
        acc *= tl.load(out_scale_ptr + cols, mask=col_ok, other=1.0)[None, :]
    tl.store(y_ptr + r[:, None] * y_stride + cols[None, :], acc, mask=out_ok)


def layer_norm(g: torch.Tensor, beta: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor, float]:
    """`linear`'s `norm` for an nn.LayerNorm of weight g and bias beta."""
    return LAYER_NORM, g, beta, LAYER_NORM_EPS


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, y: torch.Tensor, *,
           norm: tuple[int, torch.Tensor, torch.Tensor | None, float] | None = None,
           standardize: tuple[torch.Tensor, torch.Tensor] | None = None, act: int = NO_ACT,
           add: torch.Tensor | None = None, add_period: int | None = None, out_scale: torch.Tensor | None = None,
           groups: tuple[int, int, int] | None = None, block_n: int = 64, block_k: int = 32) -> None:
    """y = post(pre(x) @ w.T + b) over x's rows (linear_kernel); x's rows may be strided, their values not.
    `norm`: (LAYER_NORM or RMS_NORM, weight, bias or None, eps); `standardize`: (mean, scale); `act`: GELU
    or ELU. `groups`: (count, x_group, y_group), w [count, N, K] and b [count, N], group g's input from
    x_group * g values past x's first, its output from y_group * g past y's."""
    rows, (n, k) = x.shape[0], w.shape[-2:]
    count, x_group, y_group = groups if groups is not None else (1, 0, 0)
    unused = w  # a pointer for the kernel's arguments its flags leave unread
    kind, g, beta, eps = norm if norm is not None else (NO_NORM, unused, None, 0.0)
    mean, scale = standardize if standardize is not None else (unused, unused)
    grid = (triton.cdiv(rows, BLOCK_M), triton.cdiv(n, block_n), count)
    linear_kernel[grid](
        x, w, b if b is not None else unused, y, add if add is not None else unused, g,
        beta if beta is not None else unused, mean, scale, out_scale if out_scale is not None else unused,
        rows, x.stride(0), y.stride(0), add.stride(0) if add is not None else 0, add_period or rows, eps,
        x_group, y_group,
        N=n, K=k, NORM=kind, STANDARDIZE=standardize is not None, BIAS=b is not None, ACT=act,
        ADD=add is not None, OUT_SCALE=out_scale is not None, BLOCK_M=BLOCK_M, BLOCK_N=block_n, BLOCK_K=block_k,
        PRECISION=PRECISION, num_warps=WARPS, num_stages=STAGES,
    )


class FusedForecaster(nn.Module):
    """What a forecaster in these kernels keeps (attention.py, mamba2.py, tft.py): copies of its parameters,
    taken when it is made, and working buffers of fixed shape on the parameters' device (a CUDA graph
    captures the kernels that use them); `predict` takes `batch` windows of its shape."""

    name = ""  # the model, as errors name it

    @staticmethod
    def unfusable(forecaster: Forecaster) -> str | None:
        """Why the form's kernels cannot serve `forecaster`; None where they can (each form's module's)."""
        raise NotImplementedError

    def __init__(self, forecaster: Forecaster, batch: int) -> None:
        super().__init__()
        if (why := self.unfusable(forecaster)) is not None:
            raise ValueError(why)
        self.batch, self.window, self.features = batch, forecaster.shape.window, forecaster.shape.features
        self.device = forecaster.x_mean.device

    def keep(self, parameters: dict[str, torch.Tensor], buffers: dict[str, tuple[int, ...]]) -> None:
        """Copies of `parameters` and zeroed `buffers` of the given shapes, as attributes of their names."""
        for name, value in parameters.items():
            self.register_buffer(name, value.detach().clone().contiguous(), persistent=False)
        for name, shape in buffers.items():
            self.register_buffer(name, torch.zeros(shape, device=self.device), persistent=False)

    def param(self, block: int, name: str) -> torch.Tensor:
        """Block `block`'s copy of the parameter `name`."""
        return getattr(self, f"{block}_{name}")

    def check(self, x: torch.Tensor) -> None:
        expected = (self.batch, self.window, self.features)
        if tuple(x.shape) != expected:
            raise ValueError(f"the fused {self.name} model serves windows of shape {expected}, got {tuple(x.shape)}")
