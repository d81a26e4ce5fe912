"""Risk, in one package: what every order passes and what watches the account.

- limits.py        `RiskLimits`: what `[risk]` configures, each limit with its range
- gate.py          `PreTradeGate`, the pre-trade gate: every order command passes it before a venue sees it
- checks.py        the gate's per-order checks, one numba kernel with its reason codes and a Python twin
- var.py           the portfolio gate: historical VaR and expected shortfall of the book after an order
- breakers.py      equity breakers, the repeated-execution throttle, volatility, price-band, market-wide
- market_rules.py  the market rules the breakers apply, as their texts write them
- safeguards.py    the breakers wired to the kernel's marks and fills
- analytics.py     VaR, expected shortfall and Kelly sizing for users (public as `foxhunt.risk`), over the
                   numba kernels of analytics_nb.py

What each risk event does to the trading state is in core/trading_state.py.
"""
