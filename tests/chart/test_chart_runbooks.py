"""Every alert of the chart links a section of docs/runbooks.md that says what it means, where to look,
the likely causes and what to do; the dead-letter alert takes its threshold from the values."""

from __future__ import annotations

import re
import unicodedata

import pytest

from streamapp_testbed.paths import REPO_DIR
from streamapp_testkit.chart_bed import CHART, load_yaml, render, rule_groups

pytestmark = pytest.mark.integration
RUNBOOKS = REPO_DIR / "docs" / "runbooks.md"
PARTS = ("**What it means.**", "**Look.**", "**Likely causes", "**What to do.**")


def github_anchor(heading: str, taken: dict[str, int]) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (letters, digits, '_', '-' and
    spaces stay), spaces to '-'; a repeated one gets '-1', '-2', ..."""
    kept = "".join(c for c in heading.strip().lower()
                   if c in " -_" or unicodedata.category(c)[0] in "LN" or unicodedata.category(c) == "Mn")
    slug = kept.replace(" ", "-")
    count = taken.get(slug, 0)
    taken[slug] = count + 1
    return f"{slug}-{count}" if count else slug


def runbook_sections() -> dict[str, str]:
    """Anchor -> the text of each heading's section, outside code blocks."""
    text = re.sub(r"```.*?```", "", RUNBOOKS.read_text(), flags=re.S)
    taken: dict[str, int] = {}
    sections: dict[str, str] = {}
    anchor = None
    for line in text.splitlines():
        heading = re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading:
            anchor = github_anchor(re.sub(r"[`*_]", "", heading.group(1)), taken)
            sections[anchor] = ""
        elif anchor is not None:
            sections[anchor] += line + "\n"
    return sections


def alerts(*sets: str) -> dict[str, dict]:
    return {r["alert"]: r for g in rule_groups(render("prometheusRule.enabled=true", *sets)) for r in g["rules"]}


def test_github_anchor_follows_githubs_rules():
    taken: dict[str, int] = {}
    assert github_anchor("StreamAppLagGrowing", taken) == "streamapplaggrowing"
    assert github_anchor("When an app is not running", taken) == "when-an-app-is-not-running"
    assert github_anchor("Spark traffic: `ui` & network (v2)", taken) == "spark-traffic-ui--network-v2"
    assert github_anchor("StreamAppLagGrowing", taken) == "streamapplaggrowing-1"


def test_every_alert_links_a_runbook_heading_that_says_what_to_do():
    sections = runbook_sections()
    rules = alerts()
    assert len(rules) >= 7 and "StreamAppDeadLetters" in rules
    for name, rule in rules.items():
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert (REPO_DIR / page).resolve() == RUNBOOKS.resolve(), (name, url)
        assert anchor in sections, f"{name}: {url} names no heading of docs/runbooks.md ({sorted(sections)})"
        missing = [part for part in PARTS if part not in sections[anchor]]
        assert not missing, f"the runbook of {name} lacks {missing}"
    # and no section for an alert the chart does not have
    alert_anchors = {name.lower() for name in rules}
    assert {a for a in sections if a.startswith("streamapp")} == alert_anchors


def test_runbook_links_inside_the_page_resolve():
    sections = runbook_sections()
    text = RUNBOOKS.read_text()
    for link in re.findall(r"\]\(#([^)]+)\)", text):
        assert link in sections, link
    for page, anchor in re.findall(r"\]\(([a-z-]+\.md)#([^)]+)\)", text):
        target = re.sub(r"```.*?```", "", (RUNBOOKS.parent / page).read_text(), flags=re.S)
        taken: dict[str, int] = {}
        anchors = {github_anchor(re.sub(r"[`*_]", "", h), taken) for h in re.findall(r"(?m)^#{1,6}\s+(.+?)\s*$", target)}
        assert anchor in anchors, f"{page}#{anchor}"


def test_runbook_url_follows_the_value():
    base = "https://git.example.com/data/streamapp/-/blob/v1/docs/runbooks.md"
    for name, rule in alerts(f"prometheusRule.runbookURL={base}").items():
        assert rule["annotations"]["runbook_url"] == f"{base}#{name.lower()}"


def test_dead_letter_alert_takes_its_threshold_and_duration_from_the_values():
    defaults = load_yaml(CHART / "values.yaml")["prometheusRule"]
    rule = alerts()["StreamAppDeadLetters"]
    assert rule["expr"].strip().endswith(f"> {defaults['deadLettersPerSecond']}") and rule["for"] == defaults["deadLettersFor"]
    assert "streamapp_dead_letter_records_total" in rule["expr"] and "source" in rule["expr"]
    rule = alerts("prometheusRule.deadLettersPerSecond=2.5", "prometheusRule.deadLettersFor=30m")["StreamAppDeadLetters"]
    assert rule["expr"].strip().endswith("> 2.5") and rule["for"] == "30m"
    assert alerts("prometheusRule.deadLettersPerSecond=0")["StreamAppDeadLetters"]["expr"].strip().endswith("> 0")
