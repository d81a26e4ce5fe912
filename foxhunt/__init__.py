"""foxhunt: an event-sourced trading daemon whose PostgreSQL journal is the single source of truth.

Importing foxhunt does nothing but define it. What a process does first (the compiled modules' check,
foxhunt/compiled.py) is its entry point's to do: the `foxhunt` command's (foxhunt/__main__.py), the test
suite's (tests/conftest.py) and each benchmark's.
"""

__version__ = "0.1.0"
