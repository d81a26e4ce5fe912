"""foxhunt's public risk analytics: value at risk, expected shortfall, Kelly sizing, price bands.

The analytics live in the core's risk package (foxhunt/core/risk/analytics.py, which states their
conventions); this module is where users import them from, as they always have:

    from foxhunt.risk import var_historical, expected_shortfall, kelly_fraction
"""

from foxhunt.core.risk.analytics import (
    PortfolioVar,
    RiskInputError,
    expected_shortfall,
    kelly_continuous,
    kelly_fraction,
    kelly_multi,
    kelly_size,
    luld_band,
    mwcb_halt,
    normal_quantile,
    portfolio_var,
    price_band,
    tail_count,
    var_cornish_fisher,
    var_historical,
    var_parametric,
    var_parametric_from,
)

__all__ = [
    "RiskInputError",
    "tail_count",
    "var_historical",
    "expected_shortfall",
    "var_parametric",
    "var_parametric_from",
    "var_cornish_fisher",
    "PortfolioVar",
    "portfolio_var",
    "normal_quantile",
    "kelly_fraction",
    "kelly_continuous",
    "kelly_multi",
    "kelly_size",
    "luld_band",
    "mwcb_halt",
    "price_band",
]
