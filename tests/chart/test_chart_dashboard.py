"""The dashboard's queries through Debian's promtool: each one parses, the lag in seconds is what its
description says (records behind / records read per second), and dead letters have a panel."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from streamapp_testkit.chart_bed import dashboard, dashboard_queries

pytestmark = pytest.mark.integration
APP = 'namespace="shop", app="orders"'


def concrete(expr: str) -> str:
    """A query as Grafana sends it for the app shop/orders."""
    return expr.replace("$namespace", "shop").replace("$app", "orders")


def panel(title: str) -> dict:
    (found,) = [p for p in dashboard()["panels"] if p["title"] == title]
    return found


def promtool(tmp_path: Path, *argv: str) -> None:
    result = subprocess.run(["promtool", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_dashboard_query_parses(tmp_path: Path):
    queries = dashboard_queries(dashboard())
    rules = [{"record": f"dashboard:query_{i}", "expr": concrete(q)} for i, q in enumerate(queries)
             if not q.startswith("label_values(")]  # a Grafana function, not PromQL
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    promtool(tmp_path, "check", "rules", "queries.yaml")


def test_lag_in_seconds_is_records_behind_over_the_read_rate(tmp_path: Path):
    lag_panel = panel("Lag in seconds (estimated)")
    assert lag_panel["fieldConfig"]["defaults"]["unit"] == "s"
    assert "estimated" in lag_panel["description"].lower() and "divided by" in lag_panel["description"]
    (per_query,) = [concrete(t["expr"]) for t in lag_panel["targets"]]
    (slowest,) = [concrete(t["expr"]) for t in panel("Lag (seconds, estimated)")["targets"]]
    series = [
        # query q: 1000 + 2000 records behind, reading 600 records a minute (10/s): 300 s to read them.
        (f'streamapp_source_lag_records{{{APP}, query="q", source="s", topic="t", partition="0"}}', "1000x20"),
        (f'streamapp_source_lag_records{{{APP}, query="q", source="s", topic="t", partition="1"}}', "2000x20"),
        (f'streamapp_input_rows_total{{{APP}, query="q"}}', "0+600x20"),
        # query r: 100 behind at 50/s: 2 s.
        (f'streamapp_source_lag_records{{{APP}, query="r", source="s", topic="t", partition="0"}}', "100x20"),
        (f'streamapp_input_rows_total{{{APP}, query="r"}}', "0+3000x20"),
        # another app's series stay out
        ('streamapp_source_lag_records{namespace="shop", app="other", query="q", source="s", topic="t", partition="0"}',
         "9000x20"),
        ('streamapp_input_rows_total{namespace="shop", app="other", query="q"}', "0+1x20"),
    ]
    (tmp_path / "empty.yaml").write_text(yaml.safe_dump({"groups": []}))
    tests = {"rule_files": ["empty.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": [
            {"expr": per_query, "eval_time": "10m",
             "exp_samples": [{"labels": '{query="q"}', "value": 300}, {"labels": '{query="r"}', "value": 2}]},
            {"expr": slowest, "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": 300}]},
        ],
    }]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    promtool(tmp_path, "test", "rules", "tests.yaml")


def test_dead_letters_have_their_own_panel():
    dead = panel("Dead letters")
    exprs = " ".join(t["expr"] for t in dead["targets"])
    assert "streamapp_dead_letter_records_total" in exprs and "streamapp_dead_letter_failures_total" in exprs
    assert "by (source)" in exprs and dead["fieldConfig"]["defaults"]["unit"] == "rowsps"
    assert "streamapp.error" in dead["description"]  # where a user reads why a record was dead-lettered
    assert "streamapp_dead_letter_records_total" in panel("Dead letters (1h)")["targets"][0]["expr"]


def test_panels_do_not_overlap():
    cells = set()
    for p in dashboard()["panels"]:
        pos = p["gridPos"]
        assert pos["x"] + pos["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine
