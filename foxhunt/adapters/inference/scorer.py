"""A model served at a fixed batch shape: windows of feature rows in, forecasts out.

- A call always runs the model on `batch` rows: on CUDA the rows given, then zeros; on the CPU one row a
  pass, first, then zeros. The shapes never change, so the kernels (and on CUDA the algorithms cuBLAS and
  cuDNN pick for a shape) never change, and a row's forecast never depends on how many rows came with it,
  nor on what they held, nor on its place among them (tests/ml/test_scorer.py and the runner's contract
  check it bit for bit).
- On CUDA, after `make_deterministic`, the forward pass is captured once as a CUDA graph with its copies
  in and out (graphs.py): a call writes the pinned input and replays it, one launch. The forward is the
  model's own, fused by torch.compile (`compile`), or foxhunt's Triton kernels (`fuse`, fused/) where
  the model has them.
- On the CPU the model runs eagerly, at the same fixed batch, a window a pass.
"""

from __future__ import annotations

import copy
from types import ModuleType

import numpy as np
import torch
from torch import nn

from foxhunt.adapters.inference.graphs import Captured
from foxhunt.ports import ModelRunner


class Scorer:
    def __init__(self, model: nn.Module, window: int, features: int, device: torch.device, batch: int = 1,
                 graph: bool = True, compile: bool = False, fuse: bool = False) -> None:
        self.window, self.features, self.batch, self.device = window, features, batch, device
        # its own copy: a graph reads the weights where they were at the capture, and the caller's module may
        # move them (an LSTM's `.to()` flattens its weights into a new buffer, freeing the old one)
        self.model = copy.deepcopy(model).to(device).eval()
        # on CUDA, optionally the forward in foxhunt's Triton kernels (where the model has them: `unfused`
        # says why not) or the model's forward fused by Inductor (torch.compile without its own CUDA
        # graphs: the scorer's graph captures the fused kernels). Neither gives eager's bits: a journal
        # records which (LoadedModel.fused, .compiled) and verify serves the same way. On the CPU the model
        # always runs eagerly.
        self.fused, self.unfused = False, ""
        if fuse:
            self.unfused = _fused_form(self, batch)
        self.compiled = compile and device.type == "cuda" and not self.fused
        self.forward = (torch.compile(self.model.predict, mode="default", dynamic=False) if self.compiled
                        else self.model.predict)
        shape = (batch, window, features)
        self.captured: Captured | None = None
        if device.type == "cuda" and graph:
            self.captured = Captured(self.forward, shape, device)
            self.in_view = self.captured.inputs
            return
        with torch.no_grad():
            probe = self.forward(torch.zeros(shape, device=device))
        if device.type == "cuda":  # eagerly on the GPU: the same copies, around the forward
            self.stream = torch.cuda.Stream(device)
            self.host_in = torch.zeros(shape, dtype=torch.float32, pin_memory=True)
            self.host_out = torch.zeros(tuple(probe.shape), dtype=torch.float32, pin_memory=True)
            self.static_in = torch.zeros(shape, dtype=torch.float32, device=device)
        else:
            self.host_in = torch.zeros(shape, dtype=torch.float32)
        self.in_view = self.host_in.numpy()

    @property
    def graph(self) -> torch.cuda.CUDAGraph | None:
        return self.captured.graph if self.captured is not None else None

    def score(self, windows: np.ndarray) -> np.ndarray:
        """windows float32 [n <= batch, window, features] -> forecasts float32 [n, horizons, quantiles],
        a fresh array (the buffers are reused by the next call)."""
        n = windows.shape[0]
        if not 0 < n <= self.batch or windows.shape[1:] != (self.window, self.features):
            raise ValueError(f"expected 1 to {self.batch} windows of shape ({self.window}, {self.features}),"
                             f" got {windows.shape}")
        if self.device.type != "cuda":
            return self._one_by_one(windows)
        self.in_view[:n] = windows
        self.in_view[n:] = 0.0
        if self.captured is not None:
            return self.captured.replay()[:n].copy()
        with torch.cuda.stream(self.stream), torch.no_grad():
            self.static_in.copy_(self.host_in, non_blocking=True)
            self.host_out.copy_(self.forward(self.static_in), non_blocking=True)
        self.stream.synchronize()
        return self.host_out.numpy()[:n].copy()

    def _one_by_one(self, windows: np.ndarray) -> np.ndarray:
        """On the CPU each window has a pass of its own, in the batch's first row, the others zeros: MKL
        rounds a GEMM's row by its place among the others where the output has few columns (a quantile
        head's two: tests/contract/test_model_runner_contract.py), and verify recomputes a score alone."""
        out = []
        with torch.no_grad():
            for window in windows:
                self.in_view[0] = window
                out.append(self.forward(self.host_in)[0].numpy().copy())
        return np.stack(out)


def fused_kernels(device: torch.device) -> tuple[ModuleType | None, str]:
    """foxhunt's Triton kernels (the package fused/) where `device` runs them; else None and why not."""
    if device.type != "cuda":
        return None, "fused kernels run on CUDA only"
    try:
        from foxhunt.adapters.inference import fused  # Triton, which CUDA builds of torch bring
    except ImportError as e:
        return None, f"triton cannot be imported: {e}"
    return fused, ""


def _fused_form(scorer: Scorer, batch: int) -> str:
    """The scorer's model replaced by foxhunt's Triton kernels of it (fused/); else why not."""
    fused, why = fused_kernels(scorer.device)
    if fused is None:
        return why
    if why := fused.unfusable(scorer.model):
        return why
    try:
        scorer.model, scorer.fused = fused.fused(scorer.model, batch), True
    except ValueError as e:  # what only the GPU or the batch rules out (the TFT's encoder: fused/tft.py)
        return str(e)
    return ""


input_digest = ModelRunner.input_digest  # what a ModelScored event names: SHA-256 of the float32 bytes
