"""The Temporal Fusion Transformer (models/tft.py) in Triton kernels.

- Variable selection: the layers that read the features' embeddings folded through them at load
  (`_through_embedding`: the selection network reads a row's 24 values, not its 3,072 embedded ones, and a
  feature's network its one value, its embedding a layer of it); each gated residual network one
  `grn_kernel` launch (the features' as one grid), standardising the window as it reads it; the softmax
  and the weighted sum into the encoder's rows (`selection_kernel`).
- The LSTMs: `lstm_kernel` runs two layers a launch, each in programs of its own, the second taking a step
  as soon as the first has, so the encoder's two layers over 64 steps take about 65 dependent steps
  (cuDNN's persistent kernel runs the model's one layer after the other, 128 steps at about 2.1 µs each
  on the H200). A layer's cells are split among programs (32 for the production preset's 128) that keep
  their rows of the weights in registers and read each step's h from the others as it is published; the
  decoder's layers run the same way from the encoder's final states, over the horizons.
- Between the LSTMs and the attention: the gated skip over the LSTMs, the enrichment network, and the
  attention's keys, values and queries. For one window a call, `enrich_kernel`, a row a program (a
  window's rows are fewer than a GPU's multiprocessors); for several, `gate_kernel`, `grn_kernel` and
  linear.py's kernel over tiles of 16 rows.
- The interpretable attention of the horizons over the window and the horizons before them
  (`attention_kernel`, a head a program over the shared values, the heads' mean folded into the output
  layer), then what follows it (its output layer, gated skip, the position-wise network, the output gate
  and the head) in `tail_kernel`, a horizon's row a program.
- The row programs (`_matvec`) read each stage's weights once and multiply in FP32 on the CUDA cores,
  the row's values staying in registers from stage to stage: at a few rows, tensor-core tiles of 16 rows
  spend their time on rows that are not there (docs/benchmarks.md, session 32).
- Independent kernels run on a side stream beside each other (`_beside`).

Tiles and warps as measured best on the H200 (docs/benchmarks.md, sessions 31 and 32); like linear.py's, fixed,
since other ones give other bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.adapters.inference.fused.linear import (
    BLOCK_M,
    LAYER_NORM_EPS,
    PRECISION,
    WARPS,
    FusedForecaster,
    linear,
    unsuited,
)
from foxhunt.models.forecaster import Forecaster


def cells_per_program(d: int, batch: int, multiprocessors: int | None) -> int:
    """The cells each program of lstm_kernel owns, for `batch` windows of `d` cells a layer: 4, or more
    where a call's programs (a window's two layers', 2 d / cells each) would outnumber half the
    `multiprocessors` (a window's programs wait for each other's h, so all must be resident at once; the
    scorer replays one model at a time); all d where there is no GPU (None: Triton's interpreter, which runs
    the programs one after another). ValueError where even one program a layer and window is too many."""
    if multiprocessors is None:
        return d
    half = multiprocessors // 2
    units = 4
    while units < d and 2 * (d // units) * batch > half:
        units *= 2
    if 2 * (d // units) * batch > half:
        raise ValueError(
            f"the fused TFT's LSTM kernel runs at most {half // 2} windows a call on this GPU, not {batch}")
    return units


def unfusable(model: Forecaster) -> str | None:
    """Why these kernels cannot serve the TFT `model`; None where they can."""
    net = model.net
    d, heads = net.horizon_embedding.shape[1], net.attention.heads
    return unsuited(model.shape.window + len(model.shape.horizons), hidden_size=d, head_width=d // heads)


@triton.jit
def gate_kernel(x_ptr, w_ptr, b_ptr, skip_ptr, g_ptr, beta_ptr, y_ptr, rows, x_stride, skip_stride, y_stride,
                eps, N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """The TFT's gated skip (layers.py's GateAddNorm): y = LayerNorm(skip + GLU(x @ w.T + b)) for the rows r
    < rows, w [2N, K] (GLU: the first N columns times the sigmoid of the last N), all N columns of a row in
    one block."""
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    inside = (r < rows)[:, None] & (cols < N)[None, :]
    skip = tl.load(skip_ptr + r[:, None] * skip_stride + cols[None, :], mask=inside, other=0.0)
    _gate_add_norm(x_ptr, w_ptr, b_ptr, skip, g_ptr, beta_ptr, y_ptr, r, r < rows, x_stride, y_stride, eps, N, K,
                   BLOCK_M, BLOCK_N, BLOCK_K, PRECISION)


@triton.jit
def grn_kernel(x_ptr, mean_ptr, scale_ptr, w2_ptr, b2_ptr, w1_ptr, b1_ptr, wg_ptr, bg_ptr, ws_ptr, bs_ptr, g_ptr,
               beta_ptr, h_ptr, y_ptr, rows, x_stride, y_stride, eps, x_group, y_group, K: tl.constexpr,
               H: tl.constexpr, N: tl.constexpr, STANDARDISE: tl.constexpr, SKIP_LINEAR: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_G: tl.constexpr, PRECISION: tl.constexpr):
    """The TFT's gated residual network (layers.py's GatedResidualNetwork) in one kernel: y = LayerNorm(skip
    + GLU(W1 ELU(W2 x + b2) + b1)) for the rows r < rows; W2 [H, K], W1 [N, H], the GLU's [2N, N]. The
    hidden layer is made BLOCK_H columns at a time, each chunk ELU'd and multiplied into W1's sum at once;
    W1's output goes through `h` ([rows, N], the block's own rows) to the gated skip, which reads it back
    in chunks of BLOCK_G after a barrier. The skip: with SKIP_LINEAR the network's own layer x @ Ws.T + bs
    (Ws [N, K]), else x itself (K = N). With STANDARDISE x is the forecaster's input, standardised here
    ((x - mean) / scale, column by column). Group program_id(1) reads x from x_group values on and writes
    y from y_group values on, with its own parameters, and h from rows x N values on."""
    group = tl.program_id(1)
    x_ptr += group * x_group
    mean_ptr += group * x_group
    scale_ptr += group * x_group
    ws_ptr += group * N * K
    bs_ptr += group * N
    w2_ptr += group * H * K
    b2_ptr += group * H
    w1_ptr += group * N * H
    b1_ptr += group * N
    h_ptr += group * rows * N
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = r < rows
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    out = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        hs = h0 + tl.arange(0, BLOCK_H)
        h_ok = hs < H
        hidden = _linear_rows(x_ptr, mean_ptr, scale_ptr, w2_ptr, b2_ptr, r, row_ok, x_stride, h0, H, K, STANDARDISE,
                              BLOCK_M, BLOCK_H, BLOCK_K, PRECISION)
        hidden = tl.where(hidden > 0.0, hidden, tl.exp(hidden) - 1.0)  # ELU (alpha 1); 0 past H
        w = tl.load(w1_ptr + cols[:, None] * H + hs[None, :], mask=col_ok[:, None] & h_ok[None, :], other=0.0)
        out += tl.dot(hidden, tl.trans(w), input_precision=PRECISION)
    out += tl.load(b1_ptr + cols, mask=col_ok, other=0.0)[None, :]
    inside = row_ok[:, None] & col_ok[None, :]
    tl.store(h_ptr + r[:, None] * N + cols[None, :], out, mask=inside)
    if SKIP_LINEAR:
        skip = _linear_rows(x_ptr, mean_ptr, scale_ptr, ws_ptr, bs_ptr, r, row_ok, x_stride, 0, N, K, STANDARDISE,
                            BLOCK_M, BLOCK_N, BLOCK_K, PRECISION)
    else:
        skip = _inputs(x_ptr, mean_ptr, scale_ptr, r, cols, row_ok, col_ok, x_stride, STANDARDISE)
    tl.debug_barrier()  # the block's rows of h, all its threads', before they are read back
    _gate_add_norm(h_ptr, wg_ptr + group * 2 * N * N, bg_ptr + group * 2 * N, skip, g_ptr + group * N,
                   beta_ptr + group * N, y_ptr + group * y_group, r, row_ok, N, y_stride, eps, N, N, BLOCK_M, BLOCK_N,
                   BLOCK_G, PRECISION)


@triton.jit
def _linear_rows(x_ptr, mean_ptr, scale_ptr, w_ptr, b_ptr, r, row_ok, x_stride, n0, N: tl.constexpr, K: tl.constexpr,
                 STANDARDISE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 PRECISION: tl.constexpr):
    """x[r] @ w.T + b for the block's rows r and the columns n0 to n0 + BLOCK_N - 1, w [N, K]: a [BLOCK_M,
    BLOCK_N] tile (zero past N)."""
    cols = n0 + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = _inputs(x_ptr, mean_ptr, scale_ptr, r, ks, row_ok, k_ok, x_stride, STANDARDISE)
        w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(w), input_precision=PRECISION)
    return acc + tl.load(b_ptr + cols, mask=col_ok, other=0.0)[None, :]


@triton.jit
def tail_kernel(a_ptr, out_w_ptr, out_b_ptr, ag_w_ptr, ag_b_ptr, ag_g_ptr, ag_beta_ptr, enriched_ptr, w2_ptr, b2_ptr,
                w1_ptr, b1_ptr, fg_w_ptr, fg_b_ptr, fg_g_ptr, fg_beta_ptr, og_w_ptr, og_b_ptr, og_g_ptr, og_beta_ptr,
                temporal_ptr, head_w_ptr, head_b_ptr, y_scale_ptr, out_ptr, window, horizons, eps, D: tl.constexpr,
                Q: tl.constexpr, BLOCK_Q: tl.constexpr):
    """What follows the attention, a horizon's row a program (program r: window r // horizons, horizon
    r % horizons), each stage's D values kept in registers for the next: the attention's output layer
    (a's row [D] @ out_w.T + out_b), its gated skip over the row's enriched values, the position-wise
    network (layers.py's GatedResidualNetwork, hidden width D), the output's gated skip over the LSTMs'
    gated values (`temporal`), and the head ([Q]) times the horizon's scale into out's row. `enriched` and
    `temporal` hold a window's rows then its horizons' ([window + horizons, D] a window)."""
    r = tl.program_id(0)
    ds = tl.arange(0, D)
    at = (r // horizons * (window + horizons) + window + r % horizons) * D + ds
    attended = _matvec(out_w_ptr, tl.load(a_ptr + r * D + ds), out_b_ptr, D, D, D)
    gated = _glu_add_norm(attended, ag_w_ptr, ag_b_ptr, tl.load(enriched_ptr + at), ag_g_ptr, ag_beta_ptr, eps, D)
    ff = _grn_row(gated, w2_ptr, b2_ptr, w1_ptr, b1_ptr, fg_w_ptr, fg_b_ptr, fg_g_ptr, fg_beta_ptr, eps, D)
    last = _glu_add_norm(ff, og_w_ptr, og_b_ptr, tl.load(temporal_ptr + at), og_g_ptr, og_beta_ptr, eps, D)
    qs = tl.arange(0, BLOCK_Q)
    out = _matvec(head_w_ptr, last, head_b_ptr, Q, D, BLOCK_Q) * tl.load(y_scale_ptr + r % horizons)
    tl.store(out_ptr + r * Q + qs, out, mask=qs < Q)


@triton.jit
def enrich_kernel(lstm_ptr, skip_ptr, lg_w_ptr, lg_b_ptr, lg_g_ptr, lg_beta_ptr, w2_ptr, b2_ptr, w1_ptr, b1_ptr,
                  eg_w_ptr, eg_b_ptr, eg_g_ptr, eg_beta_ptr, kv_w_ptr, kv_b_ptr, q_w_ptr, q_b_ptr, temporal_ptr,
                  enriched_ptr, kv_ptr, q_ptr, window, horizons, eps, D: tl.constexpr, DH: tl.constexpr):
    """What comes between the LSTMs and the attention, a row a program (program r: window r // (window +
    horizons), step r % (window + horizons), a window's rows then its horizons' in `lstm` and `skip`, [D]
    each): the gated skip over the LSTMs (temporal = LayerNorm(skip + GLU(lstm))), the enrichment network
    (enriched = GRN(temporal)), the row's keys and values (enriched @ kv_w.T + kv_b, [D + DH]) and, for a
    horizon's row, its query ([D], into q's row window * horizons + horizon). For one window a call
    (FusedTft.predict)."""
    r = tl.program_id(0)
    ds = tl.arange(0, D)
    at = r * D + ds
    temporal = _glu_add_norm(tl.load(lstm_ptr + at), lg_w_ptr, lg_b_ptr, tl.load(skip_ptr + at), lg_g_ptr,
                             lg_beta_ptr, eps, D)
    tl.store(temporal_ptr + at, temporal)
    enriched = _grn_row(temporal, w2_ptr, b2_ptr, w1_ptr, b1_ptr, eg_w_ptr, eg_b_ptr, eg_g_ptr, eg_beta_ptr, eps, D)
    tl.store(enriched_ptr + at, enriched)
    kv = kv_ptr + r * (D + DH)
    tl.store(kv + ds, _matvec(kv_w_ptr, enriched, kv_b_ptr, D, D, D))
    tl.store(kv + D + tl.arange(0, DH), _matvec(kv_w_ptr + D * D, enriched, kv_b_ptr + D, DH, D, DH))
    step = r % (window + horizons)
    if step >= window:
        q_row = r // (window + horizons) * horizons + step - window
        tl.store(q_ptr + q_row * D + ds, _matvec(q_w_ptr, enriched, q_b_ptr, D, D, D))


@triton.jit
def _grn_row(x, w2_ptr, b2_ptr, w1_ptr, b1_ptr, g_w_ptr, g_b_ptr, g_g_ptr, g_beta_ptr, eps, D: tl.constexpr):
    """A gated residual network of one row ([D] values, hidden width D, its input the skip): grn_kernel's."""
    hidden = _matvec(w2_ptr, x, b2_ptr, D, D, D)
    hidden = tl.where(hidden > 0.0, hidden, tl.exp(hidden) - 1.0)  # ELU (alpha 1)
    return _glu_add_norm(_matvec(w1_ptr, hidden, b1_ptr, D, D, D), g_w_ptr, g_b_ptr, x, g_g_ptr, g_beta_ptr, eps, D)


@triton.jit
def _matvec(w_ptr, x, b_ptr, N: tl.constexpr, K: tl.constexpr, BLOCK_N: tl.constexpr):
    """w [N, K] @ x [K] + b [N]: BLOCK_N values, zero past N."""
    ns = tl.arange(0, BLOCK_N)
    ok = ns < N
    w = tl.load(w_ptr + ns[:, None] * K + tl.arange(0, K)[None, :], mask=ok[:, None], other=0.0)
    return tl.sum(w * x[None, :], axis=1) + tl.load(b_ptr + ns, mask=ok, other=0.0)


@triton.jit
def _glu_add_norm(x, w_ptr, b_ptr, skip, g_ptr, beta_ptr, eps, D: tl.constexpr):
    """LayerNorm(skip + GLU(w @ x + b)) of one row ([D] values; w [2D, D]): _gate_add_norm's."""
    z = skip + _matvec(w_ptr, x, b_ptr, D, D, D) * tl.sigmoid(_matvec(w_ptr + D * D, x, b_ptr + D, D, D, D))
    centred = z - tl.sum(z, axis=0) / D
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=0) / D + eps)
    ds = tl.arange(0, D)
    return centred * rstd * tl.load(g_ptr + ds) + tl.load(beta_ptr + ds)


@triton.jit
def _inputs(x_ptr, mean_ptr, scale_ptr, r, ks, row_ok, k_ok, x_stride, STANDARDISE: tl.constexpr):
    """x's rows r, columns ks ([BLOCK_M, BLOCK_K], zero outside), with STANDARDISE as the forecaster
    standardises them (models/forecaster.py: (x - mean) / scale)."""
    a = tl.load(x_ptr + r[:, None] * x_stride + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
    if STANDARDISE:
        mean = tl.load(mean_ptr + ks, mask=k_ok, other=0.0)
        scale = tl.load(scale_ptr + ks, mask=k_ok, other=1.0)
        a = tl.where(row_ok[:, None] & k_ok[None, :], (a - mean[None, :]) / scale[None, :], 0.0)
    return a


@triton.jit
def _gate_add_norm(x_ptr, w_ptr, b_ptr, skip, g_ptr, beta_ptr, y_ptr, r, row_ok, x_stride, y_stride, eps,
                   N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """y[r] = LayerNorm(skip + GLU(x[r] @ w.T + b)) for the block's rows r (gate_kernel's), skip the rows'
    [BLOCK_M, BLOCK_N] tile."""
    cols = tl.arange(0, BLOCK_N)
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
    z = tl.where(inside, skip + value * tl.sigmoid(gate), 0.0)
    mean = tl.sum(z, axis=1) / N
    centred = tl.where(inside, z - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / N + eps)
    g = tl.load(g_ptr + cols, mask=col_ok, other=0.0)
    beta = tl.load(beta_ptr + cols, mask=col_ok, other=0.0)
    tl.store(y_ptr + r[:, None] * y_stride + cols[None, :], centred * rstd[:, None] * g[None, :] + beta[None, :],
             mask=inside)


@triton.jit
def selection_kernel(logits_ptr, processed_ptr, y_ptr, rows, window, y_window, F: tl.constexpr, D: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_F: tl.constexpr):
    """The variable selection's sum (models/tft.py's VariableSelection): for the rows r < rows (window r //
    window, step r % window) the softmax of the selection network's logits [rows, F], the features'
    processed embeddings [F, rows, D] weighted by it, summed in the features' order, into y's row
    (r // window) * y_window + r % window."""
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = r < rows
    fs = tl.arange(0, BLOCK_F)
    ds = tl.arange(0, D)
    logits = tl.load(logits_ptr + r[:, None] * F + fs[None, :], mask=row_ok[:, None] & (fs[None, :] < F),
                     other=-1e30)  # the padding's weight exp(-1e30 - max) is 0, and no row is all -inf
    e = tl.exp(logits - tl.max(logits, axis=1)[:, None])
    weights = e / tl.sum(e, axis=1)[:, None]
    out = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for i in range(F):
        weight = tl.sum(tl.where(fs[None, :] == i, weights, 0.0), axis=1)
        embedded = tl.load(processed_ptr + (i * rows + r)[:, None] * D + ds[None, :], mask=row_ok[:, None], other=0.0)
        out += weight[:, None] * embedded
    y_rows = (r // window) * y_window + r % window
    tl.store(y_ptr + y_rows[:, None] * D + ds[None, :], out, mask=row_ok[:, None])


@triton.jit
def _tanh(x):
    """tanh through exp, as 1 - 2 / (exp(2x) + 1): exact at the ends, within a few 1e-8 near 0."""
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def lstm_kernel(pre_ptr, pre_window, w_hh_a_ptr, w_ih_b_ptr, w_hh_b_ptr, b_b_ptr, h0_a_ptr, h0_b_ptr, h0_window,
                c_ptr, h_a_ptr, h_a_window, h_b_ptr, h_b_window, shared_ptr, STEPS, WINDOWS, D: tl.constexpr,
                UNITS: tl.constexpr, START: tl.constexpr):
    """An LSTM layer a (nn.LSTM's gates i, f, g, o) over STEPS steps and, where the grid has the programs
    for it, the layer b on top of it, pipelined: layer b takes step t as soon as layer a has, so two layers
    take about STEPS + 1 dependent steps where one after the other they take 2 x STEPS (as cuDNN runs the
    model's).

    Window program_id(1). Its programs own UNITS cells each, program p of the first D // UNITS the cells
    p * UNITS to (p + 1) * UNITS - 1 of layer a, of the next D // UNITS those of layer b (_layer). A
    program's rows of the weights stay in its registers for the whole window, its cells' c too. The h of a
    step goes to the window's other programs through `shared_ptr` ([2, WINDOWS, STEPS, D] int64, layer a's
    then b's, zero at the launch): each value as a 64-bit word, its float's bits in the low half and 1 in
    the high half, which a single store writes and a single load reads whole. A program that needs a step's
    h reads the step's D words until none is zero (`_published`): one trip to L2 where the step is done, no
    flags and no fences, and a program runs ahead of the others as far as its inputs allow. Every value is
    computed by one program in one order, so the same bytes every call. All the programs of a window must
    be resident at once (cells_per_program).

    pre: layer a's input projection with both its biases, [4D] for step t at pre_ptr + window * pre_window
    + t * 4D (pre_window 0: the same for every window). h_a, h_b: the layers' outputs, step t at h_ptr +
    window * h_window + t * D. The state: zero, or with START layer a's h at h0_a_ptr + window * h0_window
    and layer b's at h0_b_ptr + window * h0_window, the cells at c_ptr, layer a's [WINDOWS, D] then b's;
    the final cells are written back there."""
    p = tl.program_id(0)
    w = tl.program_id(1)
    ks = tl.arange(0, D)
    us = (p % (D // UNITS)) * UNITS + tl.arange(0, UNITS)
    at = us[:, None] * D + ks[None, :]
    shared_a = shared_ptr + w * STEPS * D
    if p < D // UNITS:
        _layer(pre_ptr + w * pre_window, 4 * D, pre_ptr, w_hh_a_ptr, w_hh_a_ptr, h0_a_ptr + w * h0_window,
               c_ptr + w * D + us, h_a_ptr + w * h_a_window, shared_a, STEPS, us, ks, at, D, UNITS, START, False)
    else:
        _layer(shared_a, D, b_b_ptr, w_ih_b_ptr, w_hh_b_ptr, h0_b_ptr + w * h0_window, c_ptr + (WINDOWS + w) * D + us,
               h_b_ptr + w * h_b_window, shared_ptr + (WINDOWS + w) * STEPS * D, STEPS, us, ks, at, D, UNITS, START,
               True)


@triton.jit
def _layer(x_ptr, x_step, b_ptr, w_ih_ptr, w_hh_ptr, h0_ptr, c_ptr, h_ptr, shared, STEPS, us, ks, at, D: tl.constexpr,
           UNITS: tl.constexpr, START: tl.constexpr, PROJECT: tl.constexpr):
    """One program's cells `us` of an LSTM layer over STEPS steps (lstm_kernel's). Its input: with
    PROJECT the h of the layer below as it publishes it (_tagged, step t at x_ptr + t * x_step), projected
    here through w_ih with the biases b; without, already projected with its biases ([4D] for step t at x_ptr
    + t * x_step; b and w_ih unread)."""
    r_i, r_f = tl.load(w_hh_ptr + at), tl.load(w_hh_ptr + D * D + at)
    r_g, r_o = tl.load(w_hh_ptr + 2 * D * D + at), tl.load(w_hh_ptr + 3 * D * D + at)
    if PROJECT:
        x_i, x_f = tl.load(w_ih_ptr + at), tl.load(w_ih_ptr + D * D + at)
        x_g, x_o = tl.load(w_ih_ptr + 2 * D * D + at), tl.load(w_ih_ptr + 3 * D * D + at)
        b_i, b_f = tl.load(b_ptr + us), tl.load(b_ptr + D + us)
        b_g, b_o = tl.load(b_ptr + 2 * D + us), tl.load(b_ptr + 3 * D + us)
    c = tl.zeros([UNITS], dtype=tl.float32)
    if START:
        c = tl.load(c_ptr)
    for s in range(STEPS):
        if PROJECT:
            x = _published(x_ptr + s * x_step + ks, s >= 0)[None, :]
            gi, gf = b_i + tl.sum(x_i * x, axis=1), b_f + tl.sum(x_f * x, axis=1)
            gg, go = b_g + tl.sum(x_g * x, axis=1), b_o + tl.sum(x_o * x, axis=1)
        else:
            pre = x_ptr + s * x_step + us
            gi, gf, gg, go = tl.load(pre), tl.load(pre + D), tl.load(pre + 2 * D), tl.load(pre + 3 * D)
        h = _published(shared + (s - 1) * D + ks, s > 0)
        if START:
            h = tl.where(s > 0, h, tl.load(h0_ptr + ks))
        out, c = _cell(gi, gf, gg, go, r_i, r_f, r_g, r_o, h[None, :], c)
        tl.store(h_ptr + s * D + us, out)
        tl.store(shared + s * D + us, _tagged(out))
    tl.store(c_ptr, c)


@triton.jit
def _cell(gi, gf, gg, go, r_i, r_f, r_g, r_o, h, c):
    """An LSTM cell's step (nn.LSTM's): the gates' input parts gi, gf, gg, go plus the recurrent weights'
    rows times the previous h ([1, D]); the new h and c."""
    gi += tl.sum(r_i * h, axis=1)
    gf += tl.sum(r_f * h, axis=1)
    gg += tl.sum(r_g * h, axis=1)
    go += tl.sum(r_o * h, axis=1)
    c = tl.sigmoid(gf) * c + tl.sigmoid(gi) * _tanh(gg)
    return tl.sigmoid(go) * _tanh(c), c


@triton.jit
def _tagged(h):
    """h's float bits in the low half of a 64-bit word, 1 in the high half: published."""
    return h.to(tl.uint32, bitcast=True).to(tl.int64) | (1 << 32)


@triton.jit
def _published(words, stepped):
    """The h at `words` (_tagged) once every one of its words is published: read past the L1 cache until
    then; zeros, without reading, where not `stepped`."""
    word = tl.load(words, mask=stepped, other=1 << 32, volatile=True)
    waiting = tl.min(word >> 32, axis=0) == 0
    while waiting:
        word = tl.load(words, volatile=True)
        waiting = tl.min(word >> 32, axis=0) == 0
    return word.to(tl.uint32).to(tl.float32, bitcast=True)  # the low half


@triton.jit
def attention_kernel(q_ptr, kv_ptr, o_ptr, window, horizons, sqrt_dh, HEADS: tl.constexpr, D: tl.constexpr,
                     DH: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_T: tl.constexpr, PRECISION: tl.constexpr):
    """The TFT's interpretable attention (layers.py's Attention with shared_values), a window (program id
    0) and head h (program id 1) a program: the window's horizons' queries q [horizons, D] (head h's DH
    columns) over its window + horizons keys and shared values kv [window + horizons, D + DH] (keys, then
    values), horizon j seeing the window and horizons 0..j; the head's weights times the values into o
    [horizons, HEADS DH], columns h DH on. The heads' mean is left to the output layer, whose weights are
    tiled over the heads and divided by HEADS (FusedTft)."""
    w = tl.program_id(0)
    h = tl.program_id(1)
    keys = window + horizons
    qs = tl.arange(0, BLOCK_Q)
    ts = tl.arange(0, BLOCK_T)
    ds = tl.arange(0, DH)
    q_ok = qs < horizons
    t_ok = ts < keys
    seen = t_ok[None, :] & ((ts[None, :] < window) | (ts[None, :] - window <= qs[:, None]))
    kv_row = (w * keys + ts)[:, None] * (D + DH)
    v = tl.load(kv_ptr + kv_row + D + ds[None, :], mask=t_ok[:, None], other=0.0)
    q = tl.load(q_ptr + (w * horizons + qs)[:, None] * D + h * DH + ds[None, :], mask=q_ok[:, None], other=0.0)
    k = tl.load(kv_ptr + kv_row + h * DH + ds[None, :], mask=t_ok[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) / sqrt_dh
    s = tl.where(seen, s, float("-inf"))
    p = tl.exp(s - tl.max(s, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    out = tl.dot(p, v, input_precision=PRECISION)
    tl.store(o_ptr + (w * horizons + qs)[:, None] * (HEADS * DH) + h * DH + ds[None, :], out, mask=q_ok[:, None])


def _grn(grn: nn.Module) -> dict[str, torch.Tensor]:
    """A gated residual network's parameters (layers.py), by name."""
    p = {"fc2_w": grn.fc2.weight, "fc2_b": grn.fc2.bias, "fc1_w": grn.fc1.weight, "fc1_b": grn.fc1.bias,
         "glu_w": grn.gate.glu.proj.weight, "glu_b": grn.gate.glu.proj.bias, "norm_g": grn.gate.norm.weight,
         "norm_b": grn.gate.norm.bias}
    if isinstance(grn.skip, nn.Linear):
        p |= {"skip_w": grn.skip.weight, "skip_b": grn.skip.bias}
    return p


def _through_embedding(p: dict[str, torch.Tensor], f: int, d: int) -> dict[str, torch.Tensor]:
    """The layers that read the features' embeddings, folded through them. Feature i's embedding of the
    standardised x_i is x_i * E[i] + B[i] (models/tft.py's VariableSelection), so a layer W, b over the
    embeddings (in feature-major order, d values each) is a layer over the f standardised features:
    W'[:, i] = W[:, i d:(i + 1) d] @ E[i], b' = b + sum_i W[:, i d:(i + 1) d] @ B[i]. The selection
    network's first layer and skip read f x d values a row where these read f, and each feature's network's
    first layer reads one value, its skip (the embedding) a layer of that value. Summed in float64, then
    rounded: within float32 rounding of the model's order, not its bits."""
    e, bias = p["embed_w"].double(), p["embed_b"].double()

    def folded(w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        per_feature = w.double().view(w.shape[0], f, d)
        return (torch.einsum("oij,ij->oi", per_feature, e).float(),
                (b.double() + torch.einsum("oij,ij->o", per_feature, bias)).float())

    select_fc2 = folded(p["select_fc2_w"], p["select_fc2_b"])
    select_skip = folded(p["select_skip_w"], p["select_skip_b"])
    w, b = p["feature_fc2_w"].double(), p["feature_fc2_b"].double()  # [f, d, d], [f, d]: feature i's own
    feature_w = torch.einsum("ihj,ij->ih", w, e).float().unsqueeze(-1)  # [f, d, 1]: one input each
    feature_b = (b + torch.einsum("ihj,ij->ih", w, bias)).float()
    return {"select_fc2_w": select_fc2[0], "select_fc2_b": select_fc2[1], "select_skip_w": select_skip[0],
            "select_skip_b": select_skip[1], "feature_fc2_w": feature_w, "feature_fc2_b": feature_b,
            # a feature's network adds its input, the embedding, as the skip: a layer of its one value
            "feature_skip_w": p["embed_w"].unsqueeze(-1), "feature_skip_b": p["embed_b"]}


def _gate(gate: nn.Module) -> dict[str, torch.Tensor]:
    """A gated skip's parameters (layers.py's GateAddNorm), by name."""
    return {"glu_w": gate.glu.proj.weight, "glu_b": gate.glu.proj.bias, "norm_g": gate.norm.weight,
            "norm_b": gate.norm.bias}


class FusedTft(FusedForecaster):
    """The TFT (models/tft.py) behind its normalisation (models/forecaster.py)."""

    name = "TFT"
    unfusable = staticmethod(unfusable)

    def __init__(self, forecaster: Forecaster, batch: int) -> None:
        super().__init__(forecaster, batch)
        net = forecaster.net
        self.horizons, self.quantiles = len(forecaster.shape.horizons), len(forecaster.shape.quantiles)
        self.d = d = net.horizon_embedding.shape[1]
        self.heads, self.dh = net.attention.heads, net.attention.d_head
        self.lstm_layers = layers = len(net.decoder.layers)
        gpu = self.device.type == "cuda"
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count if gpu else None
        self.units = cells_per_program(d, batch, sms)
        self.side = torch.cuda.Stream(self.device) if gpu else None  # for the kernels of _beside blocks
        vs = net.selection
        p: dict[str, torch.Tensor] = {"x_mean": forecaster.x_mean, "x_scale": forecaster.x_scale,
                                      "y_scale": forecaster.y_scale.view(1, -1, 1), "embed_w": vs.weight,
                                      "embed_b": vs.bias, "future": net.horizon_embedding,
                                      "head_w": net.head.weight, "head_b": net.head.bias}
        p |= {f"select_{k}": v for k, v in _grn(vs.select).items()}
        p |= {f"feature_{k}": torch.stack([_grn(g)[k] for g in vs.grns]) for k in _grn(vs.grns[0])}
        p |= _through_embedding(p, self.features, d)
        for name, stack in (("enc", net.encoder), ("dec", net.decoder)):
            for i, lstm in enumerate(stack.layers):  # a layer's input projection takes both its biases
                p |= {f"{name}{i}_w_ih": lstm.weight_ih_l0, f"{name}{i}_w_hh": lstm.weight_hh_l0,
                      f"{name}{i}_b": lstm.bias_ih_l0 + lstm.bias_hh_l0}
        with torch.no_grad():  # the decoder's first inputs are learned, the same every call: so is their projection
            p["dec_pre"] = net.horizon_embedding @ p["dec0_w_ih"].T + p["dec0_b"]
        for name, gate in (("lstm_gate", net.lstm_gate), ("attention_gate", net.attention_gate),
                           ("output_gate", net.output_gate)):
            p |= {f"{name}_{k}": v for k, v in _gate(gate).items()}
        for name, grn in (("enrich", net.enrichment), ("ff", net.feed_forward)):
            p |= {f"{name}_{k}": v for k, v in _grn(grn).items()}
        a = net.attention
        # the output layer of the heads' mean: its weights divided by the heads, once for each head's output
        # (attention_kernel's), exact where the heads are a power of 2
        p |= {"q_w": a.q.weight, "q_b": a.q.bias, "kv_w": torch.cat([a.k.weight, a.v.weight]),
              "kv_b": torch.cat([a.k.bias, a.v.bias]), "out_w": torch.cat([a.out.weight / self.heads] * self.heads, 1),
              "out_b": a.out.bias}
        rows, long, short, f = batch * self.window, batch * (self.window + self.horizons), batch * self.horizons, \
            self.features
        self.keep(p, {"s2": (rows, f),
                      "weights": (rows, f), "f2": (f, rows, d),
                      "processed": (f, rows, d), "skip": (long, d), "lstm": (long, d), "pre": (long, 4 * d),
                      "encoded": (max(layers - 1, 1), long, d), "decoded": (max(layers - 1, 1), short, d),
                      "cells": (layers, batch, d),
                      "temporal": (long, d), "e2": (long, d), "enriched": (long, d),
                      "kv": (long, d + self.dh), "enriched_last": (short, d),
                      "q": (short, d), "attended_dh": (short, self.heads * self.dh),
                      "out": (batch, self.horizons, self.quantiles)})
        # what lstm_kernel's programs share, for each launch (a pair of layers, the encoder's then the
        # decoder's), zeroed before a call
        self.register_buffer("shared", torch.zeros((2 * ((layers + 1) // 2), 2, batch, self.window, d),
                                                   dtype=torch.int64, device=self.device), persistent=False)
        with torch.no_grad():  # the decoder's inputs, one learned row a horizon, after each window's rows
            self.skip.view(batch, -1, d)[:, self.window:] = self.future

    @contextmanager
    def _beside(self) -> Iterator[None]:
        """The kernels launched in the block run beside those launched after it until `_rejoin`, on a
        stream of their own, after those launched before it (a CUDA graph captures the two branches); in
        order on the CPU (Triton's interpreter). Each branch writes buffers of its own: the same bytes."""
        if self.side is None:
            yield
            return
        self.side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.side):
            yield

    def _rejoin(self) -> None:
        """What is launched next waits for the kernels of the `_beside` block."""
        if self.side is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.side)

    def _gate(self, x: torch.Tensor, name: str, skip: torch.Tensor, y: torch.Tensor) -> None:
        """y = LayerNorm(skip + GLU(x)) with the gated skip `name`'s parameters (gate_kernel)."""
        w = getattr(self, f"{name}_glu_w")
        n, k = w.shape[-2] // 2, w.shape[-1]
        gate_kernel[(triton.cdiv(x.shape[0], BLOCK_M),)](
            x, w, getattr(self, f"{name}_glu_b"), skip, getattr(self, f"{name}_norm_g"),
            getattr(self, f"{name}_norm_b"), y, x.shape[0], x.stride(0), skip.stride(0), y.stride(0), LAYER_NORM_EPS,
            N=n, K=k, BLOCK_M=BLOCK_M, BLOCK_N=max(16, triton.next_power_of_2(n)), BLOCK_K=64, PRECISION=PRECISION,
            num_warps=8)

    def _grn(self, a: torch.Tensor, name: str, h: torch.Tensor, y: torch.Tensor, *, standardise: bool = False,
             groups: int = 1, x_group: int = 0, y_group: int = 0) -> None:
        """y = the gated residual network `name` of a's rows (grn_kernel), its skip the network's own layer
        where it has one (`name`_skip_w), else a itself; with `standardise` a is the forecaster's input,
        standardised in the kernel. h [rows, N] a group holds its output layer's values. `groups` networks
        (their parameters stacked), group g reading a from x_group * g values on and writing y from y_group
        * g values on."""
        w2, w1 = getattr(self, f"{name}_fc2_w"), getattr(self, f"{name}_fc1_w")
        (hidden, k), n = w2.shape[-2:], w1.shape[-2]
        own = hasattr(self, f"{name}_skip_w")  # the network's own skip layer, made in the kernel
        block_n = max(16, triton.next_power_of_2(n))
        p = {k: getattr(self, f"{name}_{k}") for k in ("fc2_b", "fc1_b", "glu_w", "glu_b", "norm_g", "norm_b")}
        p |= {k: getattr(self, f"{name}_{k}", w2) for k in ("skip_w", "skip_b")}  # w2: unread, where none
        grn_kernel[(triton.cdiv(a.shape[0], BLOCK_M), groups)](
            a, self.x_mean, self.x_scale, w2, p["fc2_b"], w1, p["fc1_b"], p["glu_w"], p["glu_b"], p["skip_w"],
            p["skip_b"], p["norm_g"], p["norm_b"], h, y, a.shape[0], a.stride(0), y.stride(0), LAYER_NORM_EPS,
            x_group, y_group, K=k, H=hidden, N=n, STANDARDISE=standardise,
            SKIP_LINEAR=own, BLOCK_M=BLOCK_M, BLOCK_K=max(16, min(128, triton.next_power_of_2(k))), BLOCK_H=64,
            BLOCK_N=block_n, BLOCK_G=min(32, block_n), PRECISION=PRECISION, num_warps=8)

    def _layers(self, name: str, steps: int, rows: torch.Tensor | None, outputs: list[torch.Tensor], window: int,
                start: list[torch.Tensor] | None) -> None:
        """The LSTM layers `name`0, `name`1, ... over `steps` steps, a pair a launch (lstm_kernel). The first
        layer's input `rows` (a window's `window` values apart), or None: the decoder's learned inputs, whose
        projection `dec_pre` is made once. Layer i's outputs into outputs[i], `window` values a window apart,
        the last layer's in `lstm`'s windows. From zeros, or from the h at start[i] (in `lstm`'s windows) and
        the cells `cells` holds."""
        b, d, layers = self.batch, self.d, self.lstm_layers
        lstm_window = (self.window + self.horizons) * d
        shared = self.shared[: (layers + 1) // 2] if start is None else self.shared[(layers + 1) // 2:]
        windows = [window] * (layers - 1) + [lstm_window]
        initial = start if start is not None else outputs  # unread from zeros
        for a in range(0, layers, 2):
            pair, top = a + 1 < layers, min(a + 1, layers - 1)  # without a pair, layer b's arguments go unread
            if a == 0 and rows is None:
                pre, pre_window = self.dec_pre, 0
            else:
                linear(rows if a == 0 else outputs[a - 1], getattr(self, f"{name}{a}_w_ih"),
                       getattr(self, f"{name}{a}_b"), self.pre)
                pre, pre_window = self.pre, 4 * window
            lstm_kernel[(d // self.units * (2 if pair else 1), b)](
                pre, pre_window, getattr(self, f"{name}{a}_w_hh"), getattr(self, f"{name}{top}_w_ih"),
                getattr(self, f"{name}{top}_w_hh"), getattr(self, f"{name}{top}_b"), initial[a], initial[top],
                lstm_window, self.cells[a], outputs[a], windows[a], outputs[top], windows[top], shared[a // 2], steps,
                b, D=d, UNITS=self.units, START=start is not None, num_warps=WARPS)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """x float32 [batch, window, features] -> forecasts [batch, horizons, quantiles] in log returns: a
        view of a buffer the next call overwrites."""
        self.check(x)
        b, t, f, d, hz = self.batch, self.window, self.features, self.d, self.horizons
        rows = b * t
        # variable selection: the layers over the embeddings are folded through them (_through_embedding),
        # each network reading the window's values and standardising them
        x = x.contiguous().view(rows, f)
        with self._beside():  # the features' networks, a group each: feature i's value is column i of x
            self._grn(x, "feature", self.f2[0], self.processed[0], standardise=True, groups=f, x_group=1,
                      y_group=rows * d)
            self.shared.zero_()
        self._grn(x, "select", self.s2, self.weights, standardise=True)
        self._rejoin()
        selection_kernel[(triton.cdiv(rows, BLOCK_M),)](
            self.weights, self.processed, self.skip, rows, t, t + hz, F=f, D=d, BLOCK_M=BLOCK_M,
            BLOCK_F=max(16, triton.next_power_of_2(f)), num_warps=WARPS)
        # the encoder from zeros, the decoder from its final states: each window's rows then its horizons'
        # rows of `lstm`, the other layers' outputs in `encoded` and `decoded`
        long, short = (t + hz) * d, hz * d  # a window's values in the buffers
        encoded = [*self.encoded[: self.lstm_layers - 1], self.lstm]
        self._layers("enc", t, self.skip, encoded, long, None)
        self._layers("dec", hz, None, [*self.decoded[: self.lstm_layers - 1], self.lstm[t:]], short,
                     [e[t - 1:] for e in encoded])
        # the gated skip over the LSTMs, enrichment, and the attention's projections: a row a program for
        # one window (a window's rows are fewer than a GPU's multiprocessors), else tiles of rows
        if b == 1:
            enrich_kernel[(t + hz,)](
                self.lstm, self.skip, self.lstm_gate_glu_w, self.lstm_gate_glu_b, self.lstm_gate_norm_g,
                self.lstm_gate_norm_b, self.enrich_fc2_w, self.enrich_fc2_b, self.enrich_fc1_w, self.enrich_fc1_b,
                self.enrich_glu_w, self.enrich_glu_b, self.enrich_norm_g, self.enrich_norm_b, self.kv_w, self.kv_b,
                self.q_w, self.q_b, self.temporal, self.enriched, self.kv, self.q, t, hz, LAYER_NORM_EPS, D=d,
                DH=self.dh, num_warps=4)
        else:
            self._gate(self.lstm, "lstm_gate", self.skip, self.temporal)
            self._grn(self.temporal, "enrich", self.e2, self.enriched)
            with self._beside():
                linear(self.enriched, self.kv_w, self.kv_b, self.kv)
            self.enriched_last.view(b, hz, d).copy_(self.enriched.view(b, t + hz, d)[:, t:])
            linear(self.enriched_last, self.q_w, self.q_b, self.q)
            self._rejoin()
        attention_kernel[(b, self.heads)](self.q, self.kv, self.attended_dh, t, hz, math.sqrt(self.dh),
                                          HEADS=self.heads, D=d, DH=self.dh, BLOCK_Q=16,
                                          BLOCK_T=max(16, triton.next_power_of_2(t + hz)), PRECISION=PRECISION,
                                          num_warps=WARPS)
        tail_kernel[(b * hz,)](
            self.attended_dh, self.out_w, self.out_b, self.attention_gate_glu_w, self.attention_gate_glu_b,
            self.attention_gate_norm_g, self.attention_gate_norm_b, self.enriched, self.ff_fc2_w, self.ff_fc2_b,
            self.ff_fc1_w, self.ff_fc1_b, self.ff_glu_w, self.ff_glu_b, self.ff_norm_g, self.ff_norm_b,
            self.output_gate_glu_w, self.output_gate_glu_b, self.output_gate_norm_g, self.output_gate_norm_b,
            self.temporal, self.head_w, self.head_b, self.y_scale, self.out, t, hz, LAYER_NORM_EPS, D=d,
            Q=self.quantiles, BLOCK_Q=triton.next_power_of_2(self.quantiles), num_warps=4)
        return self.out
