"""A model served at a fixed batch shape: windows of feature rows in, forecasts out.

- A call always runs the model on `batch` rows: the rows given, then zeros. The shapes never change, so
  the kernels (and on CUDA the algorithms cuBLAS and cuDNN pick for a shape) never change, and a row's
  forecast never depends on how many rows came with it, nor on what they held (each row's arithmetic is
  its own; tests/ml/test_scorer.py checks it bit for bit).
- On CUDA, after `make_deterministic` and a warm-up, the forward pass is captured once as a CUDA graph on
  a stream of its own, with static device buffers and pinned host buffers, the copies in and out captured
  with it: a call writes the pinned input, replays the graph (one launch: copy in, forward, copy out) and
  waits for that stream only. A graph removes launch overhead; it
  does not make anything deterministic (the deterministic kernels do), and replaying it computes what the
  same kernels compute eagerly (checked on the H200).
- On the CPU the model runs eagerly, at the same fixed batch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from foxhunt.ports import ModelRunner


class Scorer:
    def __init__(self, model: nn.Module, window: int, features: int, device: torch.device, batch: int = 1,
                 graph: bool = True, compile: bool = False) -> None:
        self.window, self.features, self.batch, self.device = window, features, batch, device
        self.model = model.to(device).eval()
        self.graph: torch.cuda.CUDAGraph | None = None
        # on CUDA, optionally the model's forward fused by Inductor (torch.compile without its own CUDA
        # graphs: the scorer's graph captures the fused kernels). Not eager's bits: a journal records it
        # (LoadedModel.compiled) and verify compiles the same way. On the CPU the model always runs eagerly.
        self.compiled = compile and device.type == "cuda"
        self.forward = (torch.compile(self.model.predict, mode="default", dynamic=False) if self.compiled
                        else self.model.predict)
        shape = (batch, window, features)
        with torch.no_grad():
            probe = self.forward(torch.zeros(shape, device=device))
        self.out_shape = tuple(probe.shape)
        if device.type == "cuda":
            self.stream = torch.cuda.Stream(device)
            self.host_in = torch.zeros(shape, dtype=torch.float32, pin_memory=True)
            self.host_out = torch.zeros(self.out_shape, dtype=torch.float32, pin_memory=True)
            self.static_in = torch.zeros(shape, dtype=torch.float32, device=device)
            if graph:
                self._capture()
            else:
                self.static_out = torch.zeros(self.out_shape, device=device)
        else:
            self.host_in = torch.zeros(shape, dtype=torch.float32)
        self.in_view = self.host_in.numpy()

    def _capture(self) -> None:
        """Warm up on the scorer's stream (lazy initialisations, workspace allocations), then capture."""
        with torch.no_grad(), torch.cuda.stream(self.stream):
            for _ in range(3):
                self.forward(self.static_in)
            self.stream.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self.stream):  # the pinned buffers live as long as the graph
                self.static_in.copy_(self.host_in, non_blocking=True)
                self.static_out = self.forward(self.static_in)
                self.host_out.copy_(self.static_out, non_blocking=True)
        self.stream.synchronize()

    def score(self, windows: np.ndarray) -> np.ndarray:
        """windows float32 [n <= batch, window, features] -> forecasts float32 [n, horizons, quantiles],
        a fresh array (the buffers are reused by the next call)."""
        n = windows.shape[0]
        if not 0 < n <= self.batch or windows.shape[1:] != (self.window, self.features):
            raise ValueError(f"expected 1 to {self.batch} windows of shape ({self.window}, {self.features}),"
                             f" got {windows.shape}")
        self.in_view[:n] = windows
        self.in_view[n:] = 0.0
        if self.device.type != "cuda":
            with torch.no_grad():
                return self.forward(self.host_in)[:n].numpy().copy()
        with torch.cuda.stream(self.stream):
            if self.graph is not None:
                self.graph.replay()  # the copies in and out are in it
            else:
                self.static_in.copy_(self.host_in, non_blocking=True)
                with torch.no_grad():
                    self.static_out.copy_(self.forward(self.static_in))
                self.host_out.copy_(self.static_out, non_blocking=True)
        self.stream.synchronize()
        return self.host_out.numpy()[:n].copy()


input_digest = ModelRunner.input_digest  # what a ModelScored event names: SHA-256 of the float32 bytes
