"""One forward pass captured as a CUDA graph with its copies: what the scorer (scorer.py) and the policy
runner (policy.py) replay on a GPU.

On a stream of its own, after a warm-up (lazy initialisations, workspace allocations), the graph holds the
copy of a pinned host input into a static device buffer, the forward pass, and the copy of its output into
a pinned host buffer: a call writes the input (`inputs`, a numpy view of the pinned buffer), replays the
graph (one launch) and waits for that stream only. A graph removes launch overhead; it does not make
anything deterministic (the deterministic kernels do), and replaying it computes what the same kernels
compute eagerly (tests/ml/test_gpu.py, on the H200).

The warm-up and the capture run with torch's filling of uninitialised memory off. In deterministic mode
torch fills every new tensor of the forward pass with NaN before the kernel that writes it (a guard against
kernels that read memory nobody wrote), and a graph would replay those fills on every call: 31 of the 127
kernels of the attention model's call, 114 of Mamba2's 453 (bench/kernel_census.py). Every kernel of the
forward writes its whole output, so the forecasts stay eager's bit for bit (eager runs with the fills).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
import torch.utils.deterministic


class Captured:
    """`forward` (device tensors [shape] to an output of fixed shape) captured on `device`.
    `after_warm_up` runs between the warm-up and the capture, on the graph's stream (a recurrent policy
    forgets the warm-up's steps there)."""

    def __init__(self, forward: Callable[[torch.Tensor], torch.Tensor], shape: tuple[int, ...],
                 device: torch.device, after_warm_up: Callable[[], None] | None = None) -> None:
        self.stream = torch.cuda.Stream(device)
        self.host_in = torch.zeros(shape, dtype=torch.float32, pin_memory=True)
        self.inputs = self.host_in.numpy()
        self.static_in = torch.zeros(shape, dtype=torch.float32, device=device)
        with torch.no_grad(), torch.cuda.stream(self.stream), unfilled():
            for _ in range(3):
                out = forward(self.static_in)
            if after_warm_up is not None:
                after_warm_up()
            self.host_out = torch.zeros(tuple(out.shape), dtype=torch.float32, pin_memory=True)
            self.stream.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, stream=self.stream):  # the pinned buffers live as long as the graph
                self.static_in.copy_(self.host_in, non_blocking=True)
                static_out = forward(self.static_in)
                self.host_out.copy_(static_out, non_blocking=True)
        self.stream.synchronize()
        self.outputs = self.host_out.numpy()

    def replay(self) -> np.ndarray:
        """The output for what `inputs` holds now: a view of the pinned buffer, which the next call
        overwrites."""
        with torch.cuda.stream(self.stream):
            self.graph.replay()
        self.stream.synchronize()
        return self.outputs


@contextmanager
def unfilled() -> Iterator[None]:
    """New tensors left unfilled in deterministic mode (torch.utils.deterministic.fill_uninitialized_memory
    off) while in the block, as it was after."""
    before = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = before
