"""Configuration: defaults, files, environment overrides, and errors that name the key and source."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from foxhunt import config
from foxhunt.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_config_file_loads_and_equals_the_defaults():
    assert config.load(ROOT / "config" / "foxhunt.toml", env={}) == config.load(None, env={})


def test_file_values_and_environment_overrides(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text('[strategy]\nname = "zscore"\n[strategy.zscore]\nwindow = 50\n')
    cfg = config.load(path, env={"FOXHUNT_STRATEGY__ZSCORE__ENTRY_Z": "2.5", "FOXHUNT_DSN": "host=db dbname=x"})
    assert cfg.strategy.name == "zscore"
    assert (cfg.strategy.zscore.window, cfg.strategy.zscore.entry_z) == (50, 2.5)
    assert cfg.journal.dsn == "host=db dbname=x"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[journal]\nbatchmax = 5\n", r"f\.toml: journal: Object contains unknown field `batchmax`"),
        ("[strategy.ema_cross]\nfast = 'ten'\n", r"f\.toml: strategy\.ema_cross\.fast: Expected `int`, got `str`"),
        ("[strategy.ema_cross]\nfast = 50\n", r"f\.toml: strategy\.ema_cross: ema_cross needs 0 < fast < slow"),
        ("[journal]\ndurability = 'whenever'\n", r"f\.toml: journal\.durability: Invalid enum value 'whenever'"),
        ("[instruments.EURUSD]\ntick_size = 'x'\nlot_size = 1\ncurrency = 'USD'\n", r"instruments\.\*\.tick_size"),
        ("surprise = 1\n", r"f\.toml: Object contains unknown field `surprise`"),
        ("[journal\n", r"f\.toml: invalid TOML"),
        ("[fix]\nlogon_fields = { x = 'Y' }\n", r"f\.toml: fix: logon_fields: 'x' is not a FIX tag number"),
        ("[fix]\nlogon_fields = { 554 = 'pw' }\n", r"fix: logon_fields: tag 554 is set by username and password_env"),
        # one setting of the wrong type per section: told, never converted
        ("[journal]\nbatch_max = '5000'\n", r"journal\.batch_max: Expected `int`, got `str`"),
        ("[journal]\nstall_after = '2'\n", r"journal\.stall_after: Expected `float`, got `str`"),
        ("[state]\ndir = 5\n", r"state\.dir: Expected `str`, got `int`"),
        ("[run]\nseed = '7'\n", r"run\.seed: Expected `int`, got `str`"),
        ("[admin]\nenabled = 1\n", r"admin\.enabled: Expected `bool`, got `int`"),
        ("[fix]\nport = '9876'\n", r"fix\.port: Expected `int`, got `str`"),
        ("[ib]\nclient_id = 1.5\n", r"ib\.client_id: Expected `int`, got `float`"),
        ("[telemetry]\nmetrics_interval = '10'\n", r"telemetry\.metrics_interval: Expected `float`, got `str`"),
        ("[instruments.EURUSD]\ntick_size = '0.00001'\nlot_size = '1000'\ncurrency = 'USD'\nmultiplier = '1'\n",
         r"instruments\.\*\.multiplier: Expected `int`, got `str`"),
        ("[strategy.ema_cross]\nslow = '40'\n", r"strategy\.ema_cross\.slow: Expected `int`, got `str`"),
        ("[risk]\ncollar_bps = '500'\n", r"risk\.collar_bps: Expected `int \| null`, got `str`"),
        ("[risk]\nself_match_prevention = 'yes'\n", r"risk\.self_match_prevention: Expected `bool`, got `str`"),
        ("[venue]\nlatency_ns = '0'\n", r"venue\.latency_ns: Expected `int`, got `str`"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "f.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        config.load(path, env={})


def test_instruments_with_an_impossible_grid_are_refused_by_name(tmp_path):
    cases = [
        ("tick_size = '0'\nlot_size = '1000'", r"instruments\.EURUSD: tick_size and lot_size must be positive"),
        ("tick_size = '0.01'\nlot_size = '1'\nexecution_tick = '0.003'",
         r"instruments\.EURUSD\.execution_tick: 0\.003 must be positive and divide tick_size 0\.01"),
        ("tick_size = '0.01'\nlot_size = '1'\nexecution_tick = '0'", r"execution_tick: 0 must be positive"),
    ]
    for fields, message in cases:
        path = tmp_path / "f.toml"
        path.write_text(f"[instruments.EURUSD]\n{fields}\ncurrency = 'USD'\n")
        with pytest.raises(ConfigError, match=message):
            config.load(path, env={}).trading().build_instruments()
    path.write_text("[instruments.AAPL]\ntick_size = '0.01'\nlot_size = '1'\ncurrency = 'USD'\nexecution_tick = '0.0001'\n")
    assert config.load(path, env={}).trading().build_instruments()["AAPL"].execution_tick == 100_000


def test_decimals_may_be_written_as_strings_or_numbers_and_text_settings_keep_their_digits(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text("[risk]\nmax_order_qty = '5000'\nmax_order_notional = 2500000\nmax_var = 1500.5\n")
    risk = config.load(path, env={}).risk
    assert (risk.max_order_qty, risk.max_order_notional, risk.max_var) == (5000, 2500000, Decimal("1500.5"))
    cfg = config.load(None, env={"FOXHUNT_FIX__SENDER_COMP_ID": "12345", "FOXHUNT_JOURNAL__BATCH_MAX": "500"})
    assert (cfg.fix.sender_comp_id, cfg.journal.batch_max) == ("12345", 500)


def test_bad_environment_override_names_the_variable():
    with pytest.raises(ConfigError, match=r"FOXHUNT_RISK__MAX_ORDER_QTY: risk\.max_order_qty"):
        config.load(None, env={"FOXHUNT_RISK__MAX_ORDER_QTY": "lots"})


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file .*nope.toml"):
        config.load(tmp_path / "nope.toml", env={})


def test_replay_set_overrides_and_their_errors():
    trading = config.load(None, env={}).trading()
    changed = config.trading_from_json(trading.to_json(), ["strategy.ema_cross.fast=5", "risk.max_order_qty=5000"])
    assert changed.strategy.ema_cross.fast == 5 and str(changed.risk.max_order_qty) == "5000"
    assert changed.digest() != trading.digest()
    assert config.trading_from_json(trading.to_json()).digest() == trading.digest()
    with pytest.raises(ConfigError, match="expected key.path=value"):
        config.trading_from_json(trading.to_json(), ["strategy.ema_cross.fast"])
    with pytest.raises(ConfigError, match="unknown field `nope`"):
        config.trading_from_json(trading.to_json(), ["strategy.nope=1"])


def test_instrument_sizes_with_too_many_decimals_are_refused():
    cfg = config.load(None, env={"FOXHUNT_INSTRUMENTS__EURUSD__TICK_SIZE": "0.0000000001"})
    with pytest.raises(ConfigError, match="instruments.EURUSD: more than 9 decimal places"):
        cfg.trading().build_instruments()


def test_the_trading_config_never_carries_the_dsn():
    cfg = config.load(None, env={"FOXHUNT_DSN": "host=db password=secret"})
    assert b"secret" not in cfg.trading().to_json()


def test_fix_logon_fields_read_the_password_from_the_environment_only_when_asked():
    from foxhunt import bootstrap

    fix = config.FixConfig(username="desk", password_env="FH_TEST_PW", logon_fields={"8013": "Y"})
    assert fix.logon({"FH_TEST_PW": "s3cret"}) == [(553, "desk"), (554, "s3cret"), (8013, "Y")]
    assert config.FixConfig().logon({}) == []
    cfg = config.load(None, env={"FOXHUNT_FIX__PORT": "9000", "FOXHUNT_FIX__PASSWORD_ENV": "FH_TEST_PW_UNSET"})
    with pytest.raises(ConfigError, match="fix.password_env: the environment variable FH_TEST_PW_UNSET is not set"):
        bootstrap.fix_venue(cfg)


def test_instruments_declared_on_the_command_line_or_in_a_file(tmp_path):
    cfg = config.load(None, env={})
    declared = config.declare_instruments(cfg, ["BTCUSDT:tick_size=0.01,lot_size=0.00001,currency=USDT,multiplier=1"])
    btc = declared.trading().build_instruments()["BTCUSDT"]
    assert (btc.tick_size, btc.lot_size, btc.currency) == (10_000_000, 10_000, "USDT")
    assert "EURUSD" in declared.instruments  # added to the configured ones
    path = tmp_path / "instruments.toml"
    path.write_text('[ES]\ntick_size = "0.25"\nlot_size = "1"\ncurrency = "USD"\nmultiplier = 50\n')
    assert config.declare_instruments(cfg, [], path).instruments["ES"].multiplier == 50
    for specs, message in (
        (["BTCUSDT:tick_size=0.01,currency=USDT"], r"--instrument BTCUSDT:tick_size=0.01,currency=USDT: missing lot_size"),
        (["BTCUSDT"], "expected SYMBOL:tick_size="),
        (["BTCUSDT:tick_size=0.01,lot_size=1,currency=USDT,colour=red"], "colour"),
        (["BTCUSDT:tick_size=-1,lot_size=1,currency=USDT"], "instruments.BTCUSDT: tick_size and lot_size must be positive"),
        (["BTCUSDT:tick_size=abc,lot_size=1,currency=USDT"], "tick_size"),
    ):
        with pytest.raises(ConfigError, match=message):
            config.declare_instruments(cfg, specs)
    path.write_text('[ES]\ntick_size = "0.25"\n')
    with pytest.raises(ConfigError, match=r"instruments\.toml: \[ES\]: missing lot_size, currency"):
        config.declare_instruments(cfg, [], path)


def test_a_fix_venue_without_the_fix_extra_names_the_extra(monkeypatch):
    import sys

    from foxhunt import bootstrap

    monkeypatch.setitem(sys.modules, "quickfix", None)  # as where the extra is not installed
    with pytest.raises(ConfigError, match=r"pip install 'foxhunt\[fix\]'"):
        bootstrap.fix_venue(config.load(None, env={"FOXHUNT_FIX__PORT": "9876"}))
