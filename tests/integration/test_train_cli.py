"""`foxhunt train` and `foxhunt models` end to end: subprocesses, a journal in the session's PostgreSQL,
a model store in a directory."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest

from tests.integration.test_cli import foxhunt, ok, summary
from tests.s3_server import CREDENTIALS

pytestmark = pytest.mark.postgres

TINY = {"FOXHUNT_TRAIN__MAX_STEPS": "20", "FOXHUNT_TRAIN__EVAL_EVERY": "10", "FOXHUNT_TRAIN__WINDOW": "8"}


@pytest.fixture
def market(cli_env, journal_name):
    ok("run", "--journal", journal_name, "--feed", "synthetic:seed=4,n=4000", "--clock", "feed", env=cli_env)
    return journal_name


@pytest.fixture
def env(cli_env):
    return cli_env | TINY


def train(*args: str, env: dict) -> dict:
    return summary("train", *args, env=env)


def test_two_processes_train_the_same_weights_and_the_store_lists_shows_evaluates_and_removes_them(market, env, tmp_path):
    store = str(tmp_path / "models")
    first = train("tft", "--journal", market, "--seed", "3", "--out", store, env=env)
    second = train("tft", "--journal", market, "--seed", "3", "--out", store, env=env)
    assert first["parameter_sha256"] == second["parameter_sha256"]
    assert first["model_id"] == "tft-" + first["parameter_sha256"][:12]
    journals = first["training"]["journals"]
    assert journals[0]["journal"] == market and journals[0]["events"] > 3000 and journals[0]["first_seq"] >= 1
    assert first["feature_set"]["name"] == "core" and first["environment"]["device"] == "cpu"
    assert first["determinism"]["deterministic_algorithms"] == "on"
    assert set(first["metrics"]) == {"validation", "test"} and set(first["metrics"]["test"]) == {"h1", "h4", "h16"}
    other = train("tft", "--journal", market, "--seed", "4", "--out", store, env=env)
    assert other["parameter_sha256"] != first["parameter_sha256"]

    listed = ok("models", "list", "--store", store, env=env).stdout
    assert first["model_id"] in listed and other["model_id"] in listed
    shown = json.loads(ok("models", "show", first["model_id"], "--store", store, env=env).stdout)
    assert shown["parameter_sha256"] == first["parameter_sha256"]
    scored = summary("models", "eval", first["model_id"], "--journal", market, "--store", store, env=env)
    assert set(scored) == {"h1", "h4", "h16"} and scored["h1"]["samples"] > 3000
    table = ok("models", "eval", first["model_id"], "--journal", market, "--store", store, env=env).stdout
    assert "hit_rate" in table and "pinball@0.5" in table

    ok("models", "rm", first["model_id"], "--store", store, env=env)
    gone = foxhunt("models", "show", first["model_id"], "--store", store, env=env)
    assert gone.returncode == 2 and f"no model {first['model_id']}" in gone.stderr


def test_a_model_is_refused_by_a_configuration_with_other_features(market, env, tmp_path):
    store = str(tmp_path / "models")
    trained = train("mlp", "--journal", market, "--out", store, env=env)
    done = foxhunt("models", "eval", trained["model_id"], "--journal", market, "--store", store,
                   env=env | {"FOXHUNT_FEATURES__VOL_HALFLIFE": "8.0"})
    assert done.returncode == 2
    assert "trained on feature set core v1" in done.stderr and "configured feature set is" in done.stderr


def test_a_run_resumes_from_its_checkpoint(market, env, tmp_path):
    store = str(tmp_path / "models")
    whole = train("mamba2", "--journal", market, "--out", store, "--resume", env=env)
    assert whole["training"]["resumed_from"] == 0
    again = train("mamba2", "--journal", market, "--out", store, "--resume", env=env)
    assert again["training"]["resumed_from"] == 20 and again["parameter_sha256"] == whole["parameter_sha256"]


@pytest.mark.parametrize(("args", "message"), [
    (["--journal", "no-such-journal"], "no-such-journal"),
    (["--device", "cuda"], "sees no CUDA device"),
    (["--from", "2030-01-01"], "no market data to train on"),
])
def test_a_request_that_cannot_be_met_is_an_error_that_says_why(market, env, args, message, tmp_path):
    argv = ["train", "mlp", *(["--journal", market] if "--journal" not in args else []), *args,
            "--out", str(tmp_path / "m")]
    done = foxhunt(*argv, env=env)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_model_configuration_that_makes_no_model_is_refused_before_reading_anything(env):
    done = foxhunt("train", "tft", "--journal", "never-read", env=env | {"FOXHUNT_TRAIN__MODELS": "{tft={hidden=31}}",
                                                                       "FOXHUNT_DSN": "postgresql:///nowhere"})
    assert done.returncode == 2
    assert "train.models.tft, over the tiny preset: hidden (31) must be a multiple of heads (2)" in done.stderr


def test_a_time_that_is_not_one_is_a_usage_error(env):
    done = foxhunt("train", "mlp", "--journal", "x", "--from", "yesterday", env=env)
    assert done.returncode == 2 and "expected a time in ISO 8601" in done.stderr


def test_an_ensemble_of_stored_models_is_trained_evaluated_and_keeps_its_members(market, env, tmp_path):
    store = str(tmp_path / "models")
    members = [train(arch, "--journal", market, "--out", store, env=env)["model_id"] for arch in ("mlp", "attention")]
    ensemble = train("ensemble", "--members", ",".join(members), "--journal", market, "--out", store, env=env)
    assert [ref["model_id"] for ref in ensemble["members"]] == members
    weights = ensemble["training"]["weights"]
    assert len(weights) == 2 and all(abs(sum(w[j] for w in weights) - 1) < 1e-6 for j in range(3))
    scored = summary("models", "eval", ensemble["model_id"], "--journal", market, "--store", store, env=env)
    assert set(scored) == {"h1", "h4", "h16"}
    refused = foxhunt("models", "rm", members[0], "--store", store, env=env)
    assert refused.returncode == 2 and f"is a member of {ensemble['model_id']}" in refused.stderr
    ok("models", "rm", ensemble["model_id"], "--store", store, env=env)
    ok("models", "rm", members[0], "--store", store, env=env)
    alone = foxhunt("train", "ensemble", "--members", members[1], "--journal", market, "--out", store, env=env)
    assert alone.returncode == 2 and "two or more different members" in alone.stderr
    stray = foxhunt("train", "mlp", "--members", members[1], "--journal", market, "--out", store, env=env)
    assert stray.returncode == 2 and "only an ensemble's" in stray.stderr


def test_models_go_to_an_s3_bucket_and_back_with_credentials_from_the_environment(market, env, s3_server):
    endpoint = f"http://127.0.0.1:{s3_server.port}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                 region_name="us-east-1").create_bucket(Bucket="desk-models")
    s3 = env | CREDENTIALS | {"FOXHUNT_MODELS__S3_ENDPOINT_URL": endpoint}
    store = "s3://desk-models/foxhunt"
    trained = train("attention", "--journal", market, "--out", store, env=s3)
    assert trained["model_id"] in ok("models", "list", "--store", store, env=s3).stdout
    scored = summary("models", "eval", trained["model_id"], "--journal", market, "--store", store, env=s3)
    assert set(scored) == {"h1", "h4", "h16"}
    ok("models", "rm", trained["model_id"], "--store", store, env=s3)
    assert "no models in s3://desk-models/foxhunt" in ok("models", "list", "--store", store, env=s3).stdout
    secret = s3 | {"AWS_SECRET_ACCESS_KEY": "wrong-secret-value"}
    s3_server.breaking = True
    try:
        broken = foxhunt("train", "mlp", "--journal", market, "--out", store, env=secret)
    finally:
        s3_server.breaking = False
    assert broken.returncode == 2 and "storing weights.safetensors of model mlp-" in broken.stderr
    assert "wrong-secret-value" not in broken.stderr + broken.stdout


def test_a_training_set_reads_an_ingested_file_and_a_recorded_run_together(market, env, journal_name, tmp_path):
    """Bars of one instrument ingested from a file, and the quotes a paper run recorded: both journals'
    market data, each journal's sequence range in the manifest, bars and quotes each their symbol's."""
    path = tmp_path / "gbpusd-m1-bid-2024.csv"
    rows, price, start = ["timestamp,open,high,low,close"], 1.25, 1_704_153_600
    for i in range(2500):
        move = ((i * 7919) % 11 - 5) * 0.00002
        close = round(price + move, 5)
        stamp = dt.datetime.fromtimestamp(start + 60 * i, dt.UTC).isoformat()
        rows.append(f"{stamp},{price:.5f},{max(price, close) + 0.0001:.5f},{min(price, close) - 0.0001:.5f},{close:.5f}")
        price = close
    path.write_text("\n".join(rows) + "\n")
    ingested = f"{journal_name}-bars"
    ok("ingest", str(path), "--journal", ingested, env=env)
    trained = train("mlp", "--journal", market, "--journal", ingested, "--out", str(tmp_path / "m"), env=env)
    journals = {j["journal"]: j for j in trained["training"]["journals"]}
    assert journals[ingested]["events"] == 2500 and journals[ingested]["first_seq"] >= 1
    assert journals[market]["events"] > 3000
    assert trained["training"]["symbols"] == {"EURUSD": journals[market]["events"], "GBPUSD": 2500}


def test_a_daemon_trades_on_the_scores_of_a_model_it_was_trained_for_and_replay_verifies_them(market, env, tmp_path):
    """The whole path with the `foxhunt` command and the session's PostgreSQL: train, run the ensemble
    strategy on the model's scores (a paced feed, on the wall clock), verify with every score recomputed,
    backtest with the journaled scores and with scores computed again."""
    store = str(tmp_path / "models")
    trained = train("mlp", "--journal", market, "--out", store, "--seed", "2", env=env | {"FOXHUNT_TRAIN__MAX_STEPS": "60"})
    run_env = env | {"FOXHUNT_STRATEGY__NAME": "ensemble", "FOXHUNT_MODELS__STORE": store,
                     "FOXHUNT_STRATEGY__ENSEMBLE__MODELS": f'["{trained["model_id"]}"]', "FOXHUNT_SCORING__DEVICE": "cpu",
                     "FOXHUNT_STRATEGY__ENSEMBLE__ENTRY_BPS": "0.0", "FOXHUNT_STRATEGY__ENSEMBLE__FULL_BPS": "0.01",
                     "FOXHUNT_STRATEGY__ENSEMBLE__LEVELS": "20"}
    journal = f"{market}-scored"
    ran = summary("run", "--journal", journal, "--feed", "synthetic:seed=5,n=600,rate=300", env=run_env)
    shown = ok("journal", "show", journal, "--limit", "2000", env=run_env).stdout
    assert "\tModelsLoaded\t" in shown and shown.count("\tModelScored\t") > 300 and "\tTargetChanged\t" in shown
    assert ran["orders"] > 0 and ran["trading_state"] == "ACTIVE"
    verified = summary("replay", journal, "--verify", env=run_env)
    assert verified["scores"].startswith("identical") and verified["scores_recomputed"] == shown.count("\tModelScored\t")
    assert verified["state_digest"] == ran["state_digest"]
    recorded = summary("replay", journal, env=run_env)
    rescored = summary("replay", journal, "--rescore", env=run_env)
    assert recorded["orders"] == rescored["orders"] == ran["orders"]
    refused = foxhunt("replay", journal, "--verify", "--rescore", env=run_env)
    assert refused.returncode == 2 and "--verify recomputes every score already" in refused.stderr
    # its report shows the scores against what followed, and the venue's latency (a wall clock run)
    ok("report", journal, "--out", str(tmp_path / "scored.html"), env=run_env)
    page = (tmp_path / "scored.html").read_text()
    assert "id=\"fig-scores\"" in page and "id=\"fig-latency\"" in page
