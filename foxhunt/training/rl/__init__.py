"""Reinforcement-learning agents that trade through foxhunt's kernel: the market and the trading
environment (market.py, environment.py), the agents' training (rainbow.py, ppo.py) and their evaluation
against simple policies (evaluation.py)."""
