"""What a change of configuration does to a journal and a running daemon.

A journal's kernel is always built with the configuration of the journal's first run, since that is all
replay can know: its instruments, strategy and venue settings are kept for good (a run with others is
refused), while risk limits may change, through the journal: a `ConfigReloaded` input, at start-up when
the file changed since the last run, or on SIGHUP. Only the limits the file changed move; a limit an
operator set at run time stays.
"""

from __future__ import annotations

import msgspec

from foxhunt import config
from foxhunt.config import TradingConfig
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.errors import ConfigError, JournalArchived
from foxhunt.messages.system import ConfigReloaded
from foxhunt.ports import JournalStore
from foxhunt.runtime.recovery import refuse_if_ingested


def risk_reload(
    kernel: Kernel, old: RiskLimits, new: RiskLimits, source: str, now: int, needs_restart: list[str] | None = None
) -> ConfigReloaded | None:
    """The input that moves the kernel's limits by what changed from `old` to `new` (None: nothing did)."""
    limits, changed = config.apply_risk_changes(kernel.gate.limits, old, new)
    if not changed and not needs_restart:
        return None
    return ConfigReloaded(ts_event=now, ts_init=now, source=source, risk=msgspec.json.encode(limits),
                          changed=changed, needs_restart=needs_restart or [])


async def kernel_config(store: JournalStore, name: str) -> TradingConfig:
    """The configuration the journal's kernel is built with: its first run's. A journal whose first events
    are archived has it from its snapshots, which keep it."""
    try:
        return config.trading_from_json((await refuse_if_ingested(store, name, "trade on")).config)
    except JournalArchived:
        kept = await store.snapshots(name)
        if not kept:
            raise
        return config.trading_from_json(kept[0].config)


async def journal_config(store: JournalStore, name: str, current: TradingConfig) -> TradingConfig:
    """The configuration the journal's kernel was built with; refuses settings it cannot take any more."""
    recorded = await kernel_config(store, name)
    if fixed := config.fixed_changes(recorded, current):
        raise ConfigError(
            f"journal {name!r} was started with other {', '.join(sorted({k.split('.')[0] for k in fixed}))} settings"
            f" ({', '.join(fixed[:5])}{', ...' if len(fixed) > 5 else ''}); a journal keeps them for good, so that"
            " replay follows it: restore them, or trade on a new journal"
        )
    return recorded
