"""The alert rules fire on the situations they name, and stay quiet otherwise: `promtool test rules`
on synthetic series (annotations are left out here; `promtool check rules` checks their templates)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from streamapp_testkit.chart_bed import render, rule_groups

pytestmark = pytest.mark.integration
APP = 'namespace="shop", app="orders"'
CALM = 'namespace="shop", app="calm"'
LAG = 'query="q", source="clicks", topic="clicks", partition="0"'

SERIES = [
    # orders: restarted every minute; lag 20000 and rising; no batch since t=60s though records wait.
    (f"streamapp_operator_driver_restarts_total{{{APP}}}", "0+1x60"),
    (f"streamapp_source_lag_records{{{APP}, {LAG}}}", "20000+500x60"),
    (f"streamapp_last_batch_timestamp_seconds{{{APP}, query=\"q\"}}", "60x60"),
    (f"streamapp_query_active{{{APP}, query=\"q\"}}", "1x60"),
    # orders: 100 records a minute of source clicks go to the dead-letter topic (1.7/s).
    (f"streamapp_dead_letter_records_total{{{APP}, source=\"clicks\"}}", "0+100x60"),
    # calm: never restarted, a steady lag, a batch every minute (the value is the current time).
    (f"streamapp_operator_driver_restarts_total{{{CALM}}}", "0x60"),
    (f"streamapp_source_lag_records{{{CALM}, {LAG}}}", "20000x60"),
    (f"streamapp_last_batch_timestamp_seconds{{{CALM}, query=\"q\"}}", "0+60x60"),
    (f"streamapp_query_active{{{CALM}, query=\"q\"}}", "1x60"),
    # calm: one dead letter a minute, below the default threshold (0.1/s).
    (f"streamapp_dead_letter_records_total{{{CALM}, source=\"clicks\"}}", "0+1x60"),
    # The operator: errors on every reconcile, one app Failed. No duration histogram: it looks absent.
    ('streamapp_operator_reconciles_total{result="error"}', "0+5x60"),
    ('streamapp_operator_apps{phase="Failed"}', "1x60"),
    ('streamapp_operator_apps{phase="Running"}', "1x60"),
]


def _alert(name: str, at: str, *labels: dict) -> dict:
    return {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": dict(lab)} for lab in labels]}


def orders(severity: str) -> dict:
    return {"namespace": "shop", "app": "orders", "severity": severity}


def test_alerts_fire_on_what_they_name(tmp_path: Path):
    groups = rule_groups(render("prometheusRule.enabled=true"))
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in SERIES],
            "alert_rule_test": [
                _alert("StreamAppRestartLoop", "2m"),  # not yet 3 restarts in the window
                _alert("StreamAppRestartLoop", "30m", orders("critical")),
                _alert("StreamAppLagGrowing", "10m"),  # growing, but not for 15m yet
                _alert("StreamAppLagGrowing", "40m", orders("warning")),
                _alert("StreamAppNotProgressing", "5m"),  # the last batch is recent enough
                _alert("StreamAppNotProgressing", "30m", orders("critical")),
                _alert("StreamAppOperatorErrors", "5m"),
                _alert("StreamAppOperatorErrors", "30m", {"severity": "warning"}),
                _alert("StreamAppFailed", "30m", {"phase": "Failed", "severity": "critical"}),
                _alert("StreamAppOperatorAbsent", "30m", {"severity": "critical"}),
                _alert("StreamAppDeadLetters", "5m"),  # above the threshold, but not for 10m yet
                _alert("StreamAppDeadLetters", "30m", {**orders("warning"), "source": "clicks"}),
            ],
        }],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = subprocess.run(["promtool", "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
