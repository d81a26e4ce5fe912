"""`foxhunt train rainbow|ppo` end to end: subprocesses, a mean-reverting market ingested into the session's
PostgreSQL, a model store in a directory; an episode of the trained agent journaled and verified; the
mistakes a user makes refused with what was wrong."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_cli import foxhunt, ok, summary

pytestmark = pytest.mark.postgres

SMALL = {"FOXHUNT_AGENTS__ENV__DECISION_EVERY": "5", "FOXHUNT_AGENTS__ENV__EPISODE_STEPS": "300",
         "FOXHUNT_AGENTS__RAINBOW__STEPS": "2000", "FOXHUNT_AGENTS__RAINBOW__EVAL_EVERY": "1000",
         "FOXHUNT_AGENTS__RAINBOW__LEARN_START": "256", "FOXHUNT_AGENTS__PPO__STEPS": "2048",
         "FOXHUNT_AGENTS__PPO__EVAL_EVERY": "1024"}


@pytest.fixture
def market(cli_env, journal_name):
    ok("ingest", "synthetic:seed=3,n=20000,reversion=0.05,step=20", "--journal", journal_name, env=cli_env)
    return journal_name


@pytest.mark.parametrize("agent", ["rainbow", "ppo"])
def test_train_stores_the_agent_with_its_comparison_and_its_recorded_episode_verifies(agent, market, cli_env,
                                                                                      tmp_path):
    env = cli_env | SMALL
    store = str(tmp_path / "models")
    episode = f"{market}-{agent}"
    m = summary("train", agent, "--journal", market, "--out", store, "--record", episode, env=env)
    assert m["model_id"] == f"{agent}-" + m["parameter_sha256"][:12] and m["arch"] == agent
    assert m["agent"]["symbol"] == "EURUSD" and m["agent"]["actions"] == 5 and m["shape"] is None
    assert m["agent"]["trading"]["strategy"]["name"] == "agent"
    assert m["training"]["steps"] == int(SMALL[f"FOXHUNT_AGENTS__{agent.upper()}__STEPS"])
    assert len(m["training"]["history"]) == 2 and "held out" in m["training"]["held_out"]
    assert set(m["metrics"]["held_out"]) == {"agent", "flat", "buy_and_hold", "random"}
    assert m["metrics"]["held_out"]["flat"]["turnover"] == 0.0

    verified = summary("replay", episode, "--verify", env=env)
    assert verified["mode"] == "verify" and verified["inputs"] > 300
    assert m["model_id"] in ok("models", "list", "--store", store, env=env).stdout
    shown = json.loads(ok("models", "show", m["model_id"], "--store", store, env=env).stdout)
    assert shown["parameter_sha256"] == m["parameter_sha256"]
    table = ok("models", "eval", m["model_id"], "--journal", market, "--store", store, env=env).stdout
    assert "buy_and_hold" in table and "turnover" in table

    # served live: the daemon's strategy `agent` follows it, every decision a PolicyActed that verify recomputes
    live = env | {"FOXHUNT_STRATEGY__NAME": "agent", "FOXHUNT_STRATEGY__AGENT__POLICY": m["model_id"],
                  "FOXHUNT_MODELS__STORE": store, "FOXHUNT_SCORING__DEVICE": "cpu"}
    served = f"{market}-{agent}-live"
    run = summary("run", "--journal", served, "--feed", "synthetic:seed=5,n=3000,reversion=0.05,step=20",
                  "--clock", "feed", env=live)
    assert run["stopped"] == "feed ended" and run["trading_state"] == "ACTIVE"
    shown = ok("journal", "show", served, "--limit", "5000", env=live).stdout
    assert "PolicyActed" in shown and m["model_id"] in shown and "input_digest" in shown
    verified = summary("replay", served, "--verify", env=live)
    assert verified["decisions"].startswith("identical") and verified["decisions_recomputed"] > 0
    assert verified["state_digest"] == run["state_digest"]



def test_iql_learns_offline_from_a_journaled_episode_and_is_stored_like_the_others(market, cli_env, tmp_path):
    env = cli_env | SMALL | {"FOXHUNT_AGENTS__IQL__STEPS": "200", "FOXHUNT_AGENTS__IQL__EVAL_EVERY": "100",
                             "FOXHUNT_AGENTS__IQL__BATCH_SIZE": "32"}
    store = str(tmp_path / "models")
    episode = f"{market}-ppo"
    summary("train", "ppo", "--journal", market, "--out", store, "--record", episode, env=env)
    m = summary("train", "iql", "--journal", episode, "--out", store, env=env)
    assert m["arch"] == "iql" and m["training"]["steps"] == 200 and m["training"]["transitions"] > 100
    assert f"journal {episode} (EURUSD)" in m["training"]["source"]
    assert set(m["metrics"]["held_out"]) == {"agent", "flat", "buy_and_hold", "random"}
    table = ok("models", "eval", m["model_id"], "--journal", market, "--store", store, env=env).stdout
    assert "random" in table
    few = foxhunt("train", "iql", "--journal", episode, "--out", store,
                  env=env | {"FOXHUNT_AGENTS__IQL__BATCH_SIZE": "5000"})
    assert few.returncode == 2 and "fewer than a batch (5000)" in few.stderr and "Traceback" not in few.stderr


def test_what_cannot_train_an_agent_is_refused_with_what_was_wrong(market, cli_env):
    cases = [
        (("train", "rainbow", "--journal", market, "--symbol", "XAUUSD"), {},
         "XAUUSD is not a configured instrument"),
        (("train", "ppo", "--journal", market, "--symbol", "GBPUSD"), {},
         f"journals {market} have no market data of GBPUSD"),
        (("train", "rainbow", "--journal", market), {"FOXHUNT_AGENTS__RAINBOW__SIGMA": "1"},
         "agents: rainbow: unknown setting(s) ['sigma']"),
        (("train", "ppo", "--journal", market), {"FOXHUNT_AGENTS__PPO__BPTT": "7"},
         "rollout (128) must be a multiple of bptt (7)"),
        (("train", "rainbow", "--journal", market), {"FOXHUNT_AGENTS__ENV__CONTINUOUS": "true"},
         "rainbow chooses among discrete actions"),
        (("train", "iql", "--journal", market), {"FOXHUNT_AGENTS__ENV__CONTINUOUS": "true"},
         "iql chooses among discrete actions"),
        (("train", "tft", "--journal", market, "--record", "x"), {}, "--record journals an episode of a trading agent"),
        (("train", "ppo", "--journal", "no-such-journal"), {}, "no-such-journal"),
    ]
    for args, extra, why in cases:
        done = foxhunt(*args, env=cli_env | extra)
        assert done.returncode != 0 and why in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
