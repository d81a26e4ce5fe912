"""Logging (and later tracing and metrics), configured in one place."""
