"""Compiling numba kernels: once, on first use (never at import), with an explicit signature and no
fastmath (live trading and replay must compute the same bits), cached on disk where numba.config.CACHE_DIR
points (bootstrap.configure_numba) unless FOXHUNT_NUMBA_CACHE=0."""

from __future__ import annotations

import functools
import os

import numba

CACHE = os.environ.get("FOXHUNT_NUMBA_CACHE", "1") != "0"


@functools.cache
def compiled(fn, signature: str):
    """`fn` compiled for `signature`; the same dispatcher for every caller."""
    return numba.njit(signature, cache=CACHE, fastmath=False)(fn)
