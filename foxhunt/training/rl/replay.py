"""Prioritised experience replay (Schaul, Quan, Antonoglou and Silver 2016, ICLR) over n-step transitions.

- `SumTree`: a binary tree of float64 priorities in one array (leaves at capacity..2*capacity-1, each inner
  node the sum of its two children), updated and searched level by level for a whole batch at once with
  numpy. Float64 and a fixed order of additions: the same priorities give the same sums, bit for bit.
- `PrioritizedReplay`: transitions in preallocated arrays, a ring of `capacity`; sampling is stratified
  (one uniform draw from a seeded numpy Generator in each of `batch` equal segments of the total, eq. 1 of
  the paper with P(i) = p_i^alpha / sum p^alpha), with the importance weights (N P(i))^-beta over their
  maximum. New transitions get the largest priority seen so far.
- `NStep`: per environment, the last n transitions folded into one (Sutton 1988; Rainbow's multi-step
  return): R = sum_k gamma^k r_k, the observation n steps later and the discount gamma^n, cut short where
  the episode ended (discount 0 where it was terminated, gamma^k with the last observation where it was
  truncated).
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np
import torch

_ARRAYS = ("obs", "next_obs", "action", "reward", "discount")  # a transition's parts, one array each


class SumTree:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.depth = max(int(np.ceil(np.log2(capacity))), 0)
        self.leaves = 1 << self.depth
        self.nodes = np.zeros(2 * self.leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def update(self, index: np.ndarray, priority: np.ndarray) -> None:
        """Set the leaves `index` (distinct) to `priority`, and their ancestors' sums."""
        node = np.asarray(index, dtype=np.int64) + self.leaves
        self.nodes[node] = priority
        for _ in range(self.depth):
            node = np.unique(node // 2)
            self.nodes[node] = self.nodes[2 * node] + self.nodes[2 * node + 1]

    def find(self, mass: np.ndarray) -> np.ndarray:
        """For each value in [0, total), the leaf whose prefix sum range holds it."""
        node = np.ones(mass.shape, dtype=np.int64)
        mass = mass.astype(np.float64).copy()
        for _ in range(self.depth):
            left = 2 * node
            go_right = mass >= self.nodes[left]
            mass = np.where(go_right, mass - self.nodes[left], mass)
            node = np.where(go_right, left + 1, left)
        return node - self.leaves

    def get(self, index: np.ndarray) -> np.ndarray:
        return self.nodes[np.asarray(index) + self.leaves]


class Batch(NamedTuple):
    index: np.ndarray
    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray  # the n-step return
    next_obs: np.ndarray
    discount: np.ndarray  # gamma^k, 0 where the episode was terminated
    weight: np.ndarray  # importance-sampling weights


class PrioritizedReplay:
    EPSILON = 1e-6  # added to every priority: a transition of zero error can still be drawn

    def __init__(self, capacity: int, observations: int, alpha: float, seed: int) -> None:
        self.capacity, self.alpha = capacity, alpha
        self.tree = SumTree(capacity)
        self.obs = np.zeros((capacity, observations), dtype=np.float32)
        self.next_obs = np.zeros((capacity, observations), dtype=np.float32)
        self.action = np.zeros(capacity, dtype=np.int64)
        self.reward = np.zeros(capacity, dtype=np.float32)
        self.discount = np.zeros(capacity, dtype=np.float32)
        self.size = self.cursor = 0
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)

    def add(self, transitions: list[tuple[np.ndarray, int, float, np.ndarray, float]]) -> None:
        """Transitions (obs, action, n-step return, next obs, discount), stored in order, with one update
        of the tree for all of them (a node is the sum of its children whatever the order of the updates)."""
        k = len(transitions)
        if not k:
            return
        if k > self.capacity:
            raise ValueError(f"{k} transitions at once in a memory of {self.capacity}")
        index = (self.cursor + np.arange(k)) % self.capacity
        obs, action, reward, next_obs, discount = zip(*transitions, strict=True)
        self.obs[index], self.action[index], self.reward[index] = obs, action, reward
        self.next_obs[index], self.discount[index] = next_obs, discount
        self.tree.update(index, np.full(k, self.max_priority ** self.alpha))
        self.cursor = int((self.cursor + k) % self.capacity)
        self.size = min(self.size + k, self.capacity)

    def sample(self, batch: int, beta: float) -> Batch:
        total = self.tree.total
        segment = total / batch
        mass = (np.arange(batch) + self.rng.random(batch)) * segment
        index = np.minimum(self.tree.find(np.minimum(mass, np.nextafter(total, 0.0))), self.size - 1)
        p = self.tree.get(index) / total
        weight = (self.size * p) ** -beta
        weight = (weight / weight.max()).astype(np.float32)
        return Batch(index, self.obs[index], self.action[index], self.reward[index], self.next_obs[index],
                     self.discount[index], weight)

    def update(self, index: np.ndarray, errors: np.ndarray) -> None:
        """New priorities from the sampled transitions' errors (a transition drawn twice keeps the first)."""
        index, first = np.unique(index, return_index=True)
        priority = np.abs(errors[first]).astype(np.float64) + self.EPSILON
        self.max_priority = max(self.max_priority, float(priority.max()))
        self.tree.update(index, priority ** self.alpha)

    def state(self) -> dict[str, Any]:
        """Everything a checkpoint needs to carry on as if never stopped (tensors and plain values, which
        torch.load reads with weights_only)."""
        arrays = {name: torch.from_numpy(getattr(self, name)[: self.size].copy()) for name in _ARRAYS}
        return {"tree": torch.from_numpy(self.tree.nodes.copy()), **arrays, "size": self.size, "cursor": self.cursor,
                "max_priority": self.max_priority, "rng": self.rng.bit_generator.state}

    def restore(self, state: dict[str, Any]) -> None:
        n = self.size = int(state["size"])
        self.tree.nodes[:] = state["tree"].numpy()
        for name in _ARRAYS:
            getattr(self, name)[:n] = state[name].numpy()
        self.cursor, self.max_priority = int(state["cursor"]), float(state["max_priority"])
        self.rng.bit_generator.state = state["rng"]


class NStep:
    """One environment's last n steps; `push` returns the transitions that are complete."""

    def __init__(self, n: int, gamma: float) -> None:
        self.n, self.gamma = n, gamma
        self.steps: deque[tuple[np.ndarray, int, float]] = deque()

    def push(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray, terminated: bool,
             truncated: bool) -> list[tuple[np.ndarray, int, float, np.ndarray, float]]:
        self.steps.append((obs, action, reward))
        out = []
        if terminated or truncated:
            out = self.cut(next_obs, terminated)
        elif len(self.steps) == self.n:
            out.append(self._fold(next_obs, None))
            self.steps.popleft()
        return out

    def cut(self, last_obs: np.ndarray, terminated: bool = False
            ) -> list[tuple[np.ndarray, int, float, np.ndarray, float]]:
        """The episode is over at `last_obs`: every step left folds up to its end."""
        out = []
        while self.steps:
            out.append(self._fold(last_obs, 0.0 if terminated else None))
            self.steps.popleft()
        return out

    def _fold(self, last_obs: np.ndarray, final: float | None) -> tuple[np.ndarray, int, float, np.ndarray, float]:
        ret, discount = 0.0, 1.0
        for _, _, r in self.steps:
            ret += discount * r
            discount *= self.gamma
        obs, action, _ = self.steps[0]
        return obs, action, ret, last_obs, discount if final is None else final
