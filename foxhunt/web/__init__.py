"""`foxhunt web`: the gateway between a browser (or a script) and foxhunt, in a process of its own.

It reads journals from PostgreSQL (following them through the journal's notifications) and rebuilds each
journal's kernel from its inputs, as replay does, to show positions, orders, PnL and risk; it never asks
the trading process for them. Commands go to the daemon's admin socket with the web user's name, so each
is a journaled `AdminCommand` like one typed into `foxhunt admin`.

- auth.py: tokens, sessions, CSRF and the login rate limit (pure);
- tokens.py: the tokens in PostgreSQL (hashed);
- journals.py: the journals read for the web: kernels that follow them, pages of events, prices;
- app.py: the HTTP and WebSocket routes, the OpenAPI document, the dashboard's files;
- static/: the dashboard (lightweight-charts bundled by scripts/setup).
"""
