"""Forecasters and agents in foxhunt's own Triton kernels: what `[scoring] fuse = true` serves on a GPU
(scorer.py, policy.py), inside the CUDA graph of the scorer or the policy, for the architectures that have
them (attention.py, mamba2.py, tft.py; Rainbow-IQN's acting policy, rainbow.py).

Why: at batch 1 the eager models' graphs spend most of a call in cuBLAS's FP32 GEMMs at 64 rows (SIMT
tiles and split-K reductions) and in the small kernels around them (bench/kernel_census.py). Here a linear
layer is one kernel with what surrounds it (linear.py), and a sequence mixer (attention, the Mamba2 scan)
one kernel a layer: a call is a dozen to two dozen kernels where eager's graph replays a hundred or more
(the TFT 12 kernels and copies where eager's replays 227: docs/benchmarks.md, session 32).

Determinism: fixed tile sizes, warps and stages (no autotuning), no split reductions, no atomics (the
TFT's LSTM programs pass each step's h to each other as tagged words that one store writes and one load
reads whole), so the same input gives the same bytes in every call and every process. The dots run as
three TF32 products on tensor cores (`tf32x3`), which keeps about FP32's accuracy, but every sum runs in
another order than eager's: not eager's bytes (within float32 rounding of them: tests/ml/test_gpu.py). A journal records
that a model was served this way (LoadedModel.fused) and verify serves it the same way; the environment
fingerprint names Triton's version.

Where a model's shapes do not suit the kernels, `unfusable` says why and the scorer serves it as it would
without `fuse`. Under `TRITON_INTERPRET=1` the kernels run on the CPU in numpy: how CI checks their
arithmetic (tests/ml/test_fused.py).
"""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.adapters.inference.fused import attention, mamba2, rainbow, tft
from foxhunt.adapters.inference.fused.linear import FusedForecaster
from foxhunt.models.forecaster import Forecaster
from foxhunt.models.greedy import GreedyQuantiles

FORMS: dict[str, type[FusedForecaster]] = {"attention": attention.FusedAttention, "mamba2": mamba2.FusedMamba2,
                                           "tft": tft.FusedTft}


def _no_kernels(model: nn.Module) -> str | None:
    arch = getattr(model, "arch", type(model).__name__)
    if not isinstance(model, Forecaster) or arch not in FORMS:
        return f"no fused kernels for {arch} (only for {', '.join(FORMS)})"
    return None


def unfusable(model: nn.Module) -> str | None:
    """Why foxhunt's kernels cannot serve `model`; None where they can."""
    return _no_kernels(model) or FORMS[model.arch].unfusable(model)


def fused(model: Forecaster, batch: int) -> nn.Module:
    """`model` in foxhunt's kernels at `batch` windows a call (ValueError naming why where it cannot be: the
    form's own class checks the shapes)."""
    if (why := _no_kernels(model)) is not None:
        raise ValueError(why)
    return FORMS[model.arch](model, batch)


unfusable_policy = rainbow.unfusable  # why an agent's network cannot be served in the kernels; None where it can


def fused_policy(net: nn.Module, device: torch.device) -> GreedyQuantiles:
    """The agent `net`'s acting policy in foxhunt's kernels (ValueError naming why where it cannot be)."""
    return rainbow.FusedRainbow(net, device)
