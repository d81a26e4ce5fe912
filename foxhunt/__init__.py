"""foxhunt: an event-sourced trading daemon whose PostgreSQL journal is the single source of truth."""

from foxhunt import compiled

__version__ = "0.1.0"

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source
