"""A model served at a fixed batch shape: windows of feature rows in, forecasts out.

- A call always runs the model on `batch` rows: the rows given, then zeros. The shapes never change, so
  the kernels (and on CUDA the algorithms cuBLAS and cuDNN pick for a shape) never change, and a row's
  forecast never depends on how many rows came with it, nor on what they held (each row's arithmetic is
  its own; tests/ml/test_scorer.py checks it bit for bit).
- On CUDA, after `make_deterministic`, the forward pass is captured once as a CUDA graph with its copies
  in and out (graphs.py): a call writes the pinned input and replays it, one launch.
- On the CPU the model runs eagerly, at the same fixed batch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from foxhunt.adapters.inference.graphs import Captured
from foxhunt.ports import ModelRunner


class Scorer:
    def __init__(self, model: nn.Module, window: int, features: int, device: torch.device, batch: int = 1,
                 graph: bool = True, compile: bool = False) -> None:
        self.window, self.features, self.batch, self.device = window, features, batch, device
        self.model = model.to(device).eval()
        # on CUDA, optionally the model's forward fused by Inductor (torch.compile without its own CUDA
        # graphs: the scorer's graph captures the fused kernels). Not eager's bits: a journal records it
        # (LoadedModel.compiled) and verify compiles the same way. On the CPU the model always runs eagerly.
        self.compiled = compile and device.type == "cuda"
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
        self.in_view[:n] = windows
        self.in_view[n:] = 0.0
        if self.captured is not None:
            return self.captured.replay()[:n].copy()
        if self.device.type != "cuda":
            with torch.no_grad():
                return self.forward(self.host_in)[:n].numpy().copy()
        with torch.cuda.stream(self.stream), torch.no_grad():
            self.static_in.copy_(self.host_in, non_blocking=True)
            self.host_out.copy_(self.forward(self.static_in), non_blocking=True)
        self.stream.synchronize()
        return self.host_out.numpy()[:n].copy()


input_digest = ModelRunner.input_digest  # what a ModelScored event names: SHA-256 of the float32 bytes
