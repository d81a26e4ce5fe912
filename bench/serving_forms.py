"""Experiment (issue 22): how far exact-math serving forms with fewer kernels take the sequence models'
batch-1 latency on the H200, against the scorer's graph of the eager model, in one run.

- attention: one GEMM for Q, K and V (the three weights stacked), torch's fused scaled_dot_product_attention
  (the memory-efficient kernel for float32) in place of matmul/scale/softmax/matmul, and in the last block
  only the last row's query and feed-forward (the forecast reads the last row alone); eagerly graphed, and
  compiled by Inductor (no autotuning) then graphed.
- mamba2: the same weights at chunk = window (one chunk: no state passed between chunks), compiled.
- the TFT's floor: its two stacked LSTM layers alone over 64 steps, graphed.
Prints p50/p99/p99.9 of Scorer.score (copies included), the largest difference from the eager model's
forecast, and whether graph replay equals the form's own eager run bit for bit.

    python bench/serving_forms.py [--calls 5000]      (on the H200)
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from compiled_graph import CompiledPredict, setting, timed  # bench/
from torch import nn
from torch.nn import functional as F

from foxhunt.adapters.inference.scorer import Scorer
from foxhunt.models.configs import TrainConfig
from foxhunt.models.forecaster import build


class ServedAttention(nn.Module):
    """AttentionForecaster's function, with fewer kernels (see the module's docstring)."""

    def __init__(self, forecaster: nn.Module) -> None:
        super().__init__()
        self.f = forecaster
        net = forecaster.net
        self.net = net
        self.qkv = [(torch.cat([b.attn.q.weight, b.attn.k.weight, b.attn.v.weight]).detach(),
                     torch.cat([b.attn.q.bias, b.attn.k.bias, b.attn.v.bias]).detach()) for b in net.blocks]

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        f, net = self.f, self.net
        h = net.embed((x - f.x_mean) / f.x_scale) + net.position
        last = len(net.blocks) - 1
        for i, block in enumerate(net.blocks):
            a = block.attn
            b, t, _ = h.shape
            n = block.norm1(h)
            qkv = F.linear(n, *self.qkv[i]).view(b, t, 3, a.heads, a.d_head)
            q, k, v = qkv.unbind(2)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            if i == last:
                q, h = q[:, :, -1:], h[:, -1:]
            out = F.scaled_dot_product_attention(q, k, v)
            h = h + a.out(out.transpose(1, 2).reshape(b, -1, a.heads * a.d_head))
            h = h + block.ff(block.norm2(h))
        return net.head(net.norm(h[:, -1])) * f.y_scale.unsqueeze(-1)


class StackedLstmOnly(nn.Module):
    def __init__(self, d: int, layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.LSTM(d, d, batch_first=True) for _ in range(layers))
        self.proj = nn.Linear(11, d)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x[..., :11])
        for lstm in self.layers:
            h, _ = lstm(h)
        return h[:, -1:, :3]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=5000)
    args = p.parse_args()
    device, spec, shape, inputs = setting()

    def report(name: str, scorer: Scorer, reference: Scorer | None, eager_of: nn.Module | None) -> None:
        out: dict[str, object] = {"latency_us": timed(scorer, inputs, args.calls)}
        got = np.stack([scorer.score(x) for x in inputs[:32]])
        if reference is not None:
            ref = np.stack([reference.score(x) for x in inputs[:32]])
            out["largest_abs_diff_from_eager_model"] = float(np.max(np.abs(got - ref)))
        if eager_of is not None:
            with torch.no_grad():
                eager = np.stack([eager_of.predict(torch.from_numpy(x).to(device)).cpu().numpy() for x in inputs[:32]])
            out["graph_equals_own_eager"] = bool(np.array_equal(got, eager))
        print(name, json.dumps(out), flush=True)

    cfg = TrainConfig().model("attention", "production")
    model = build("attention", cfg, shape, seed=1).to(device).eval()
    base = Scorer(model, 64, spec.width, device)
    report("attention graph of eager", base, None, None)
    served = ServedAttention(model).to(device).eval()
    try:
        report("attention served, graph", Scorer(served, 64, spec.width, device), base, served)
    except Exception as e:  # noqa: BLE001 - reported
        print("attention served failed:", type(e).__name__, str(e)[:300], flush=True)
    try:
        report("attention served, compiled, graph", Scorer(CompiledPredict(served), 64, spec.width, device), base, None)
    except Exception as e:  # noqa: BLE001 - reported
        print("attention served compiled failed:", type(e).__name__, str(e)[:300], flush=True)

    cfg = TrainConfig().model("mamba2", "production")
    model = build("mamba2", cfg, shape, seed=1).to(device).eval()
    base = Scorer(model, 64, spec.width, device)
    report("mamba2 graph of eager", base, None, None)
    for block in model.net.blocks:
        block.chunk = 64
    one_chunk = model
    report("mamba2 one chunk, graph", Scorer(one_chunk, 64, spec.width, device), base, one_chunk)
    try:
        report("mamba2 one chunk, compiled, graph", Scorer(CompiledPredict(one_chunk), 64, spec.width, device), base, None)
    except Exception as e:  # noqa: BLE001 - reported
        print("mamba2 compiled failed:", type(e).__name__, str(e)[:300], flush=True)

    lstm = StackedLstmOnly(128, 2).to(device).eval()
    report("tft's two LSTM layers alone, graph", Scorer(lstm, 64, spec.width, device), None, None)


if __name__ == "__main__":
    main()
