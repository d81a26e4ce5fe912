"""The venue port (ports.Venue): where orders go and executions come from.

- sim.py       `SimVenue`, the simulated venue: paper trading and backtests (compiled: every quote passes)
- remote.py    a venue that answers on its own thread, through the bus
- wire_log.py  a wrapper that logs every command sent to a venue
- fix/         FIX 4.4 through quickfix: parsing (pure, table-driven), session, venue
- ib/          Interactive Brokers through ib_async: parsing, venue
- recent.py    the ids a venue adapter remembers for a while
"""
