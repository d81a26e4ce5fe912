"""A training step on static tensors, run eagerly or captured once as a CUDA graph and replayed.

The step (`fn`) reads its inputs from tensors the caller refills before each call and writes its outputs
into tensors the caller reads after; it zeroes the gradients, runs forward and backward, clips and steps
the optimiser. A graph only removes the launch overhead of its hundreds of small kernels: the same
kernels run in the same order, so with the same optimiser (Adam with `capturable=True` on CUDA, eager or
not) the weights are the same bits either way (bench/train_agents_gpu.py checks it on the H200).

Capture needs a few warm-up runs first (on a side stream, so the caching allocator and the optimiser's
state settle), and those would train: the weights, buffers and optimiser state are copied aside before
and put back after, and optimiser state the warm-up created is zeroed, as Adam's is before its first step.
Randomness stays outside the graph: the caller draws it into the static tensors from seeded generators.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

WARMUP = 3


def adam(module: nn.Module, device: torch.device, **kwargs: float) -> torch.optim.Adam:
    """Adam as both forms of a step use it: capturable on CUDA (its step count a device tensor)."""
    return torch.optim.Adam(module.parameters(), capturable=device.type == "cuda", **kwargs)


class Step:
    def __init__(self, fn: Callable[[], None], modules: list[nn.Module], optimizer: torch.optim.Optimizer,
                 graph: bool) -> None:
        self.fn, self.modules, self.optimizer = fn, modules, optimizer
        self.use_graph = graph
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self) -> None:
        if not self.use_graph:
            self.fn()
            return
        if self.graph is None:
            self.graph = self._capture()
        self.graph.replay()

    def _tensors(self) -> list[torch.Tensor]:
        out = [t for m in self.modules for t in (*m.parameters(), *m.buffers())]
        for state in self.optimizer.state.values():
            out.extend(v for v in state.values() if isinstance(v, torch.Tensor))
        return out

    def _capture(self) -> torch.cuda.CUDAGraph:
        kept = {id(t): t.detach().clone() for t in self._tensors()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self.fn()
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for t in self._tensors():
                if id(t) in kept:
                    t.copy_(kept[id(t)])
                else:
                    t.zero_()  # optimiser state the warm-up made: as it is before a first step
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.fn()
        return graph
