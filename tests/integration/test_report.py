"""`foxhunt report` and `replay --report` end to end: a paper run with denials and a breaker, its report
checked against the journal's own summary, then opened in a real browser (Debian's Chromium, driven by
Playwright) as a user would: every figure renders, nothing goes to the console, the figures shown are the
journal's. A screenshot stays in the test's output directory."""

from __future__ import annotations

import re

import pytest

from tests.browser import chromium_page, keep
from tests.integration.test_cli import foxhunt, ok, summary

pytestmark = pytest.mark.postgres

RISKY = {"FOXHUNT_RISK__MAX_DRAWDOWN": "1500", "FOXHUNT_RISK__MAX_ORDERS_PER_WINDOW": "2",
         "FOXHUNT_RISK__ORDER_WINDOW_MS": "20000"}


@pytest.fixture
def traded(cli_env, journal_name):
    """A run that the throttle denies hundreds of orders and the drawdown breaker halts."""
    env = cli_env | RISKY
    run = summary("run", "--journal", journal_name, "--feed", "synthetic:seed=7,n=20000", "--clock", "feed", env=env)
    assert run["denied"] > 100 and run["trading_state"] == "HALTED" and run["fills"] > 20
    return journal_name, summary("replay", journal_name, "--verify", env=cli_env)


def cells(page: str, attribute: str) -> dict[str, str]:
    return dict(re.findall(rf"data-run='0' {attribute}='(\w+)'[^>]*>([^<]*)<", page))


def test_the_report_is_one_offline_file_whose_figures_are_the_journals(cli_env, traded, tmp_path):
    name, verified = traded
    out = tmp_path / "report.html"
    result = summary("report", name, "--out", str(out), env=cli_env)
    page = out.read_text()
    assert not re.search(r"<(script|link)[^>]+(src|href)=", page)  # plotly.js inlined: it opens offline
    shown = cells(page, "data-summary")
    assert shown["pnl"] == f"USD {verified['pnl']['USD']}" and shown["fills"] == str(verified["fills"])
    assert shown["orders"] == str(verified["orders"]) and shown["denied"] == str(verified["denied"])
    assert shown["trading_state"] == "HALTED"
    assert sum(map(int, re.findall(r"data-denials='(\d+)'", page))) == verified["denied"]
    assert "ORDER_THROTTLE" in page and "HALTED" in page
    metrics = result["runs"][name]
    assert metrics["round_trips"] > 10 and -1 < metrics["max_drawdown"] < 0 and 0 < metrics["exposure"] <= 1
    # a window of the run: fewer inputs, the same conventions
    early = summary("report", name, "--out", str(tmp_path / "early.html"), "--to", "2024-01-02T00:10:00", env=cli_env)
    assert early["runs"][name]["periods"] < metrics["periods"]


def test_a_what_if_replay_reports_beside_the_recorded_run(cli_env, traded, tmp_path):
    name, verified = traded
    out = tmp_path / "what-if.html"
    backtest = summary("replay", name, "--set", "risk.max_drawdown=100000", "--report", str(out), env=cli_env)
    page = out.read_text()
    assert backtest["report"] == str(out) and f"{name} (replay)" in page
    recorded, replayed = (dict(re.findall(rf"data-run='{i}' data-summary='(\w+)'>([^<]*)<", page)) for i in (0, 1))
    assert recorded["pnl"] == f"USD {verified['pnl']['USD']}" and recorded["trading_state"] == "HALTED"
    assert replayed["pnl"] == f"USD {backtest['pnl']['USD']}" and replayed["trading_state"] == "ACTIVE"
    # and --compare lays two journals side by side
    compared = summary("report", name, "--compare", name, "--out", str(tmp_path / "c.html"), env=cli_env)
    assert len(compared["runs"]) == 1 and "data-run='1'" in (tmp_path / "c.html").read_text()


def test_a_missing_journal_is_an_error_naming_it(cli_env, tmp_path):
    done = foxhunt("report", "no-such-journal", "--out", str(tmp_path / "x.html"), env=cli_env)
    assert done.returncode == 2 and "no-such-journal" in done.stderr and not (tmp_path / "x.html").exists()


def test_the_report_in_a_real_browser(cli_env, traded, tmp_path):
    """Headless Chromium opens the file: every figure draws, the console stays clean, and what the page
    shows is the journal's summary. The screenshot stays beside the test's output (and under
    FOXHUNT_TEST_ARTIFACTS where that is set)."""
    name, verified = traded
    out = tmp_path / "report.html"
    ok("report", name, "--out", str(out), env=cli_env)
    with chromium_page(1280, 900) as (page, errors):
        page.goto(out.as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length"
                               " >= 2 * Number(document.body.dataset.figures)", timeout=60_000)
        figures = int(page.evaluate("document.body.dataset.figures"))
        drawn = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot'))"
                              ".filter(d => d.querySelectorAll('path, rect').length > 0).length")
        shown = {key: page.inner_text(f"td[data-run='0'][data-summary='{key}']") for key in
                 ("pnl", "fills", "orders", "denied", "trading_state")}
        equity_points = page.evaluate("document.getElementById('fig-equity').calcdata[0].length")
        screenshot = tmp_path / "report.png"
        page.screenshot(path=str(screenshot), full_page=True)
    assert errors == []
    assert figures >= 6 and drawn == figures
    assert shown == {"pnl": f"USD {verified['pnl']['USD']}", "fills": str(verified["fills"]),
                     "orders": str(verified["orders"]), "denied": str(verified["denied"]), "trading_state": "HALTED"}
    assert equity_points > 100
    assert screenshot.stat().st_size > 50_000
    keep(screenshot)


def test_a_missed_escape_still_runs_nothing_the_pages_policy_names_its_own_scripts(tmp_path):
    """The report's second line of defence: were a journal's text ever written unescaped, the policy the page
    carries (its own scripts by their hashes) keeps an injected handler or script element from running,
    while its own figures draw."""
    import plotly.graph_objects as go

    from foxhunt.runtime.report import _page, policy_of

    out = tmp_path / "missed.html"
    figure = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2], name="</script><script>document.title='pwned'</script>"))
    missed = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
    _page(out, "missed escape", [missed], [("line", "A line", figure)], [])
    scripts = policy_of(out.read_bytes()).split("script-src ")[1].split(";")[0]
    assert scripts.startswith("'sha256-") and "unsafe" not in scripts
    with chromium_page(800, 600) as (page, errors):
        page.goto(out.as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=30_000)
        page.wait_for_timeout(500)
        title = page.title()
    assert title == "missed escape"
    assert any("Content Security Policy" in e for e in errors), errors  # refused, and said so
