"""Pure, synchronous, deterministic: no I/O, no wall clock, no unseeded randomness, no async."""
