"""What the latency benchmarks report of their samples: p50, p99 and p99.9 in microseconds, and how many."""

from __future__ import annotations

import numpy as np


def percentiles(ns: list[int]) -> dict[str, float]:
    """Samples in nanoseconds to {"p50_us", "p99_us", "p99.9_us", "n"}."""
    a = np.array(ns, dtype=np.float64) / 1e3
    return {"p50_us": round(float(np.percentile(a, 50)), 1), "p99_us": round(float(np.percentile(a, 99)), 1),
            "p99.9_us": round(float(np.percentile(a, 99.9)), 1), "n": int(a.size)}
