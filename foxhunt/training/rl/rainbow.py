"""Rainbow with an implicit quantile head, trained in the trading environment (models/iqn.py for the
network and its loss, replay.py for the memory).

Acting: noisy layers explore (no epsilon), new noise for every step of the environments; the action
maximises the mean of `act_quantiles` sampled fractions. Learning, one update every `update_every`
environment steps once `learn_start` transitions are stored: a prioritised batch of n-step transitions;
the online network's quantiles of the taken action at N fractions; the target: the n-step return plus the
discounted target network's quantiles at N' fractions of the action the online network picks at the next
observation (double Q, van Hasselt, Guez and Silver 2016); the quantile Huber loss, weighted by the
importance weights; new priorities from each transition's loss. The target network copies the online one
every `target_every` updates. All randomness (initial weights, noise, fractions, sampling) comes from
generators seeded by the run's seed, and the checkpoint holds them.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from foxhunt.models.agent_configs import RainbowConfig
from foxhunt.models.determinism import seeded
from foxhunt.models.greedy import GreedyQuantiles
from foxhunt.models.iqn import QuantileNetwork, pick, quantile_huber_loss
from foxhunt.training.rl.curiosity import CuriosityBonus
from foxhunt.training.rl.environment import VectorTradingEnv, observation_scale, reached
from foxhunt.training.rl.evaluation import Policy
from foxhunt.training.rl.graphed import Step, adam
from foxhunt.training.rl.replay import NStep, PrioritizedReplay
from foxhunt.training.rl.segments import Progress, Segmented


class _Static:
    """The update's inputs (a batch, the sampled fractions) and outputs, at fixed addresses."""

    def __init__(self, cfg: RainbowConfig, width: int, device: torch.device) -> None:
        b = cfg.batch_size
        f = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device=device)
        self.obs, self.next_obs = f(b, width), f(b, width)
        self.action = f(b, dtype=torch.int64)
        self.reward, self.discount, self.weight = f(b), f(b), f(b)
        self.taus, self.taus_act = f(b, cfg.quantiles), f(b, cfg.act_quantiles)
        self.taus_next = f(b, cfg.target_quantiles)
        self.per_sample, self.loss = f(b), f()


PROGRESS_EVERY = 1024  # environment steps between the progress bar's updates within a segment


class RainbowTrainer(Segmented):
    def __init__(self, envs: VectorTradingEnv, cfg: RainbowConfig, seed: int, device: torch.device, **segments: Any):
        super().__init__(cfg.steps, cfg.eval_every, seed=seed, **segments)
        if envs.core.cfg.continuous:
            raise ValueError("Rainbow chooses among discrete actions: set agents.env.continuous = false")
        self.envs, self.cfg, self.device = envs, cfg, device
        width, actions = envs.core.width, envs.core.cfg.actions
        self.actions = actions
        self.online = seeded(seed, lambda: QuantileNetwork(cfg, width, actions))
        mean, scale = observation_scale(envs.core.market)
        self.online.obs_mean.copy_(torch.from_numpy(mean))
        self.online.obs_scale.copy_(torch.from_numpy(scale))
        self.curiosity = (CuriosityBonus(width, cfg.hidden, (mean, scale), cfg.learning_rate, seed, device)
                          if cfg.curiosity > 0 else None)
        self.online.to(device)
        self.target = copy.deepcopy(self.online)
        self.optimizer = adam(self.online, device, lr=cfg.learning_rate, eps=cfg.adam_eps)
        self.noise = torch.Generator(device=device).manual_seed(seed)  # noise and sampled fractions
        self.memory = PrioritizedReplay(cfg.buffer, width, cfg.alpha, seed)
        self.updates = 0
        self.debt = 0  # environment steps not yet paid for with an update
        self.static = _Static(cfg, width, device)
        self.learn = Step(self._learn, [self.online, self.target], self.optimizer,
                         graph=cfg.graph and device.type == "cuda")

    @property
    def model(self) -> QuantileNetwork:
        return self.online

    def policy(self) -> Policy:
        return GreedyQuantiles(self.online, self.device)

    def _rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=self.noise, device=self.device)

    def act(self, obs: np.ndarray) -> np.ndarray:
        self.online.train()
        with torch.no_grad():
            self.online.resample(self.noise)
            x = torch.from_numpy(obs).to(self.device)
            q = self.online.q_values(x, self._rand(x.shape[0], self.cfg.act_quantiles))
            return q.argmax(dim=1).cpu().numpy()

    def train_segment(self, steps: int, seed: int, progress: Progress | None) -> dict[str, float]:
        cfg, envs = self.cfg, self.envs
        n = envs.num_envs
        folds = [NStep(cfg.n_step, cfg.gamma) for _ in range(n)]
        obs, _ = envs.reset(seed=seed)
        losses: list[float] = []
        for _ in range(max(steps // n, 1)):
            actions = self.act(obs)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            seen = reached(next_obs, infos)
            if self.curiosity is not None:
                rewards = rewards + cfg.curiosity * self.curiosity(seen)
            done = []
            for i in range(n):
                done += folds[i].push(obs[i], int(actions[i]), float(rewards[i]), seen[i], bool(terminated[i]),
                                      bool(truncated[i]))
            self.memory.add(done)
            obs = next_obs
            self.steps += n
            self.debt += n
            while self.memory.size >= max(cfg.learn_start, cfg.batch_size) and self.debt >= cfg.update_every:
                self.debt -= cfg.update_every
                losses.append(self.update())
            if progress is not None and self.steps % PROGRESS_EVERY < n and losses:
                progress(self.steps, {"loss": losses[-1]})
        for i in range(n):  # the segment ends every episode: the steps not yet folded are cut there
            self.memory.add(folds[i].cut(obs[i]))
        return {"loss": float(np.mean(losses)) if losses else float("nan"), "updates": float(self.updates)}

    def update(self) -> float:
        """One update from a prioritised batch; returns its loss."""
        cfg, s = self.cfg, self.static
        beta = cfg.beta0 + (1.0 - cfg.beta0) * min(1.0, self.steps / cfg.steps)
        b = self.memory.sample(cfg.batch_size, beta)
        for name in ("obs", "action", "reward", "next_obs", "discount", "weight"):
            getattr(s, name).copy_(torch.from_numpy(getattr(b, name)))
        self.online.train()
        self.target.train()
        self.online.resample(self.noise)
        self.target.resample(self.noise)
        s.taus.copy_(self._rand(cfg.batch_size, cfg.quantiles))
        s.taus_act.copy_(self._rand(cfg.batch_size, cfg.act_quantiles))
        s.taus_next.copy_(self._rand(cfg.batch_size, cfg.target_quantiles))
        self.learn()
        self.memory.update(b.index, s.per_sample.cpu().numpy())
        self.updates += 1
        if self.updates % cfg.target_every == 0:
            with torch.no_grad():
                for mine, theirs in zip(self.target.parameters(), self.online.parameters(), strict=True):
                    mine.copy_(theirs)  # in place: a captured graph reads these very tensors
        return float(s.loss.item())

    def _learn(self) -> None:
        """The update on the static tensors (graphed.Step runs it eagerly or replays its graph)."""
        cfg, s = self.cfg, self.static
        z = pick(self.online(s.obs, s.taus), s.action, self.actions)
        with torch.no_grad():
            best = self.online.q_values(s.next_obs, s.taus_act).argmax(dim=1)
            z_next = pick(self.target(s.next_obs, s.taus_next), best, self.actions)
            target = s.reward.unsqueeze(1) + s.discount.unsqueeze(1) * z_next
        per_sample = quantile_huber_loss(z, s.taus, target, cfg.kappa)
        loss = (s.weight * per_sample).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.online.parameters(), cfg.grad_clip)
        self.optimizer.step()
        s.per_sample.copy_(per_sample.detach())
        s.loss.copy_(loss.detach())

    def state(self) -> dict[str, Any]:
        return {"online": self.online.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.optimizer.state_dict(), "noise": self.noise.get_state(),
                "memory": self.memory.state(), "updates": self.updates, "debt": self.debt,
                **({"curiosity": self.curiosity.state()} if self.curiosity is not None else {})}

    def restore(self, state: dict[str, Any]) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.noise.set_state(state["noise"])
        self.memory.restore(state["memory"])
        self.updates, self.debt = state["updates"], state["debt"]
        if self.curiosity is not None:
            self.curiosity.restore(state["curiosity"])
