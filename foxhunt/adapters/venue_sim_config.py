"""The simulated venue's settings, as configured under [venue] in config/foxhunt.toml.

Apart from the venue because that is compiled by mypyc (foxhunt/compiled.py), and mypyc drops the class
keywords (frozen=True, forbid_unknown_fields=True) that make a msgspec Struct what it is.
"""

from __future__ import annotations

from decimal import Decimal

import msgspec


class SimVenueConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str = "SIM"
    latency_ns: int = 0
    fee_bps: Decimal = Decimal("0.2")
