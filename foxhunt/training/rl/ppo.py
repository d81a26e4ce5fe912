"""Recurrent PPO, trained in the trading environment (models/recurrent.py for the network).

Each update: `rollout` steps of all environments with the current policy, the recurrent state stored at
the start of every `bptt` steps; a truncated episode's last reward gets the discounted value of the
observation it ended on (a time limit is not the end of the game); generalised advantage estimation
(Schulman et al. 2016, "High-Dimensional Continuous Control Using GAE", ICLR, eq. 16); then `epochs`
passes over the environments in `minibatches` (a seeded permutation), each sequence re-run from its stored
states for `bptt` steps at a time (truncated backpropagation through time) to give the clipped surrogate
objective (Schulman et al. 2017, eq. 7), the value loss clipped around the rollout's values, and the
entropy bonus. Actions are drawn by inverse transform from a seeded generator, so a run is repeatable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from foxhunt.models.agent_configs import PpoConfig
from foxhunt.models.determinism import seeded
from foxhunt.models.greedy import GreedyRecurrent
from foxhunt.models.recurrent import RecurrentActorCritic
from foxhunt.training.rl.curiosity import CuriosityBonus
from foxhunt.training.rl.environment import VectorTradingEnv, observation_scale, reached
from foxhunt.training.rl.evaluation import Policy
from foxhunt.training.rl.graphed import Step, adam
from foxhunt.training.rl.segments import Progress, Segmented


def draw(net: RecurrentActorCritic, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """An action from the policy, by inverse transform of a uniform draw (or a Gaussian one) of `generator`."""
    if net.continuous:
        noise = torch.randn(out.shape[0], generator=generator, device=out.device)
        return out.squeeze(-1) + net.log_std.exp() * noise
    cdf = torch.softmax(out, dim=-1).cumsum(dim=-1)
    u = torch.rand(out.shape[0], 1, generator=generator, device=out.device)
    return (cdf < u).sum(dim=-1).clamp(max=out.shape[-1] - 1)


class PpoTrainer(Segmented):
    def __init__(self, envs: VectorTradingEnv, cfg: PpoConfig, seed: int, device: torch.device, **segments: Any):
        super().__init__(cfg.steps, cfg.eval_every, seed=seed, **segments)
        self.envs, self.cfg, self.device = envs, cfg, device
        core = envs.core
        self.net = seeded(seed, lambda: RecurrentActorCritic(cfg, core.width, core.cfg.actions, core.cfg.continuous))
        mean, scale = observation_scale(core.market)
        self.net.obs_mean.copy_(torch.from_numpy(mean))
        self.net.obs_scale.copy_(torch.from_numpy(scale))
        self.curiosity = (CuriosityBonus(core.width, cfg.hidden, (mean, scale), cfg.learning_rate, seed, device)
                          if cfg.curiosity > 0 else None)
        self.net.to(device)
        self.optimizer = adam(self.net, device, lr=cfg.learning_rate, eps=1e-5)
        self.sampling = torch.Generator(device=device).manual_seed(seed)  # actions drawn while acting
        self.shuffling = torch.Generator().manual_seed(seed)  # the minibatches' environments
        self.updates = 0
        self.static = self._static(envs.num_envs // cfg.minibatches, core.width)
        self.learn = Step(self._update, [self.net], self.optimizer, graph=cfg.graph and device.type == "cuda")

    def _static(self, per: int, width: int) -> dict[str, torch.Tensor]:
        """A minibatch's rollout slices and the update's statistics, at fixed addresses."""
        cfg, dev = self.cfg, self.device
        T = cfg.rollout
        out = {name: torch.zeros(T, per, device=dev) for name in
               ("starts", "actions", "logp", "values", "rewards", "dones", "advantages", "returns")}
        out["obs"] = torch.zeros(T, per, width, device=dev)
        out["states"] = torch.zeros(T // cfg.bptt, per, self.net.parts, cfg.hidden, device=dev)
        out["stats"] = torch.zeros(3, device=dev)
        return out

    @property
    def model(self) -> RecurrentActorCritic:
        return self.net

    def policy(self) -> Policy:
        return GreedyRecurrent(self.net, self.device)

    def train_segment(self, steps: int, seed: int, progress: Progress | None) -> dict[str, float]:
        cfg, n = self.cfg, self.envs.num_envs
        obs_np, _ = self.envs.reset(seed=seed)
        obs = torch.from_numpy(obs_np).to(self.device)
        state = self.net.initial_state(n, self.device)
        starts = torch.ones(n, device=self.device)
        stats: list[dict[str, float]] = []
        for _ in range(max(steps // (n * cfg.rollout), 1)):
            batch, obs, state, starts = self._rollout(obs, state, starts)
            self.steps += n * cfg.rollout
            stats.append(self._learn(batch))
            if progress is not None:
                progress(self.steps, stats[-1])
        return {k: float(np.mean([s[k] for s in stats])) for k in stats[0]} | {"updates": float(self.updates)}

    def _rollout(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor):
        cfg, net, n, dev = self.cfg, self.net, self.envs.num_envs, self.device
        T = cfg.rollout
        width = obs.shape[1]
        b = {"obs": torch.zeros(T, n, width, device=dev), "starts": torch.zeros(T, n, device=dev),
             "actions": torch.zeros(T, n, device=dev), "logp": torch.zeros(T, n, device=dev),
             "values": torch.zeros(T, n, device=dev), "rewards": torch.zeros(T, n, device=dev),
             "dones": torch.zeros(T, n, device=dev),
             "states": torch.zeros(T // cfg.bptt, n, net.parts, cfg.hidden, device=dev)}
        net.eval()
        with torch.no_grad():
            for t in range(T):
                if t % cfg.bptt == 0:
                    b["states"][t // cfg.bptt] = state * (1.0 - starts).view(-1, 1, 1)
                out, value, state = net.step(obs, state, starts)
                action = draw(net, out, self.sampling)
                b["obs"][t], b["starts"][t], b["actions"][t], b["values"][t] = obs, starts, action.float(), value
                b["logp"][t] = net.distribution(out).log_prob(action)
                sent = action.cpu().numpy()
                next_obs, rewards, terminated, truncated, infos = self.envs.step(
                    sent[:, None].astype(np.float32) if net.continuous else sent)
                if self.curiosity is not None:
                    rewards = rewards + cfg.curiosity * self.curiosity(reached(next_obs, infos))
                reward = torch.from_numpy(rewards.astype(np.float32)).to(dev)
                final = infos.get("final_obs")
                for i in np.flatnonzero(truncated & ~terminated):  # a time limit: the value of where it ended
                    end = torch.from_numpy(final[i]).to(dev).unsqueeze(0)
                    _, tail, _ = net.step(end, state[i : i + 1], torch.zeros(1, device=dev))
                    reward[i] += cfg.gamma * tail[0]
                b["rewards"][t] = reward
                done = torch.from_numpy(terminated | truncated).to(dev).float()
                b["dones"][t] = done
                obs, starts = torch.from_numpy(next_obs).to(dev), done
            _, last_value, _ = net.step(obs, state, starts)
        advantages = torch.zeros(T, n, device=dev)
        running = torch.zeros(n, device=dev)
        for t in reversed(range(T)):
            next_value = last_value if t == T - 1 else b["values"][t + 1]
            alive = 1.0 - b["dones"][t]
            delta = b["rewards"][t] + cfg.gamma * next_value * alive - b["values"][t]
            running = delta + cfg.gamma * cfg.gae_lambda * alive * running
            advantages[t] = running
        b["advantages"], b["returns"] = advantages, advantages + b["values"]
        return b, obs, state, starts

    def _learn(self, b: dict[str, torch.Tensor]) -> dict[str, float]:
        cfg, n, s = self.cfg, self.envs.num_envs, self.static
        per = n // cfg.minibatches
        self.net.train()
        totals = torch.zeros(3, device=self.device)
        for _ in range(cfg.epochs):
            order = torch.randperm(n, generator=self.shuffling).to(self.device)
            for m in range(cfg.minibatches):
                envs = order[m * per : (m + 1) * per]
                for name, whole in b.items():  # every part is [time, env, ...]
                    s[name].copy_(whole.index_select(1, envs))
                self.learn()
                self.updates += 1
                totals += s["stats"]
        count = cfg.epochs * cfg.minibatches
        return dict(zip(("policy_loss", "value_loss", "entropy"), (totals / count).tolist(), strict=True))

    def _update(self) -> None:
        """One minibatch's update on the static tensors (graphed.Step runs it eagerly or replays its graph):
        its sequences re-run from their stored states, `bptt` steps at a time."""
        cfg, net, s = self.cfg, self.net, self.static
        logps, entropies, values = [], [], []
        for c in range(cfg.rollout // cfg.bptt):
            state = s["states"][c]
            for t in range(c * cfg.bptt, (c + 1) * cfg.bptt):
                out, value, state = net.step(s["obs"][t], state, s["starts"][t])
                dist = net.distribution(out)
                action = s["actions"][t]
                logps.append(dist.log_prob(action if net.continuous else action.long()))
                entropies.append(dist.entropy())
                values.append(value)
        logp, entropy, value = torch.stack(logps), torch.stack(entropies).mean(), torch.stack(values)
        adv = s["advantages"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = (logp - s["logp"]).exp()
        policy_loss = -torch.minimum(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv).mean()
        old, returns = s["values"], s["returns"]
        clipped = old + (value - old).clamp(-cfg.value_clip, cfg.value_clip)
        value_loss = 0.5 * torch.maximum((value - returns) ** 2, (clipped - returns) ** 2).mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy * entropy
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        self.optimizer.step()
        s["stats"].copy_(torch.stack((policy_loss, value_loss, entropy)).detach())

    def state(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                "sampling": self.sampling.get_state(), "shuffling": self.shuffling.get_state(),
                "updates": self.updates,
                **({"curiosity": self.curiosity.state()} if self.curiosity is not None else {})}

    def restore(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampling.set_state(state["sampling"])
        self.shuffling.set_state(state["shuffling"])
        self.updates = state["updates"]
        if self.curiosity is not None:
            self.curiosity.restore(state["curiosity"])
