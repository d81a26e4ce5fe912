"""foxhunt: an event-sourced trading daemon whose PostgreSQL journal is the single source of truth."""

__version__ = "0.1.0"
