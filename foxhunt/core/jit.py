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


def direct(dispatcher):
    """The compiled code of a dispatcher with one explicit signature, callable from Python without numba's
    dispatch: the dispatcher types every argument on every call to pick an overload (about 90 ns an
    argument), which the order path's check, with one signature only, does not need. The arguments are
    converted to the signature's types as given: the arrays passed must have the declared dtype and be
    contiguous (numba checks an array's element size, not its dtype), which the callers' own arrays are."""
    (signature,) = dispatcher.signatures
    return dispatcher.overloads[signature].entry_point
