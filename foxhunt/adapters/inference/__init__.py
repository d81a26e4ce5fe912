"""Model inference at the edge of the loop: a model served at a fixed batch shape (scorer.py), through a
captured CUDA graph on a GPU or eagerly on the CPU."""
