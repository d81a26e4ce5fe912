"""What a feature set is: its name, its version, its parameters, and the digest of all three with the
formulas' own version, which a model records when it is trained and a scorer checks before it serves.

A row holds, in this order (`FeatureSpec.names()`):
- `ret_<h>`: the log return of the reference price over the symbol's last h events;
- `vol`: the square root of an exponentially weighted mean of squared one-event log returns, taken at the
  events that set the reference price (half-life `vol_halflife` such events);
- `spread_bps`: the last quote's spread over its mid, in basis points;
- `quote_imbalance`: (bid size - ask size) / (bid size + ask size) of the last quote with sizes;
- `ofi`: order-flow imbalance of the quotes (Cont, Kukanov and Stoikov 2014, "The price impact of order
  book events", J. Financial Econometrics 12(1), eq. 2), exponentially weighted (half-life `flow_halflife`
  quotes) and divided by the likewise weighted mean depth;
- `trade_imbalance`: exponentially weighted signed trade size over weighted trade size, where trades
  carry their aggressor (half-life `flow_halflife` trades);
- `tod_sin`, `tod_cos`: the time of day (UTC) of the event on the unit circle.
The reference price is a quote's mid, a bar's close, or a trade's price while the symbol has had no quote.
A feature with too little history to be defined is 0.0 (never NaN).
"""

from __future__ import annotations

import hashlib

import msgspec

# The formulas' version: bumped with any change to what core/features/kernels.py computes, so that a model
# trained on the old rows is refused (tests/unit/test_features.py pins the rows of a fixed input).
FORMULAS = 1


class FeatureSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str = "core"
    version: int = 1
    return_horizons: tuple[int, ...] = (1, 4, 16, 64)  # events of the symbol
    vol_halflife: float = 32.0  # price-setting events
    flow_halflife: float = 16.0  # quotes (ofi) or trades (trade_imbalance)

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"name must be letters, digits, '-' and '_', got {self.name!r}")
        if self.version < 1:
            raise ValueError(f"version must be positive, got {self.version}")
        horizons = self.return_horizons
        if not horizons or list(horizons) != sorted(set(horizons)) or horizons[0] < 1 or horizons[-1] > 100_000:
            raise ValueError(f"return_horizons must be increasing, distinct, in 1..100000, got {list(horizons)}")
        if not 0 < self.vol_halflife <= 1e9 or not 0 < self.flow_halflife <= 1e9:
            raise ValueError("vol_halflife and flow_halflife must be positive (and at most 1e9)")

    def names(self) -> list[str]:
        return [f"ret_{h}" for h in self.return_horizons] + [
            "vol", "spread_bps", "quote_imbalance", "ofi", "trade_imbalance", "tod_sin", "tod_cos",
        ]

    @property
    def width(self) -> int:
        return len(self.return_horizons) + 7

    def label(self) -> str:
        return f"{self.name} v{self.version} ({self.digest()[:12]})"

    def digest(self) -> str:
        """SHA-256 of the definition: the parameters (canonical JSON) and the formulas' version."""
        body = msgspec.json.encode({"formulas": FORMULAS, "spec": msgspec.to_builtins(self)}, order="sorted")
        return hashlib.sha256(body).hexdigest()
