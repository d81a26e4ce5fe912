"""Training forecasters from journals: the data set a replay of journals gives (dataset.py), the metrics
(metrics.py), the training loop with its checkpoints (trainer.py), and the command's flow (train.py)."""
