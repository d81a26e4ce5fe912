"""I/O at the edges: journals, venues, feeds. Foreign exceptions are translated here and go no further."""
