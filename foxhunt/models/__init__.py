"""Forecasting models as torch modules: pure (no I/O, no journal, no store), built from their
configurations (configs.py, which imports no torch, so the configuration can name them)."""
