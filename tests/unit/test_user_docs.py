"""The user docs speak to users: no issue numbers, run-history or review labels, commit hashes; and
the README is a front door (short, a real manifest, why and when not, a quickstart)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from streamapp_api.document import validate
from streamapp_testbed.paths import REPO_DIR

pytestmark = pytest.mark.unit
README_MAX_LINES = 200

# What developers write about their own work and a user cannot act on. A reference to an upstream
# project's issue (owner/repo#N) is not caught: keep those rare, and only where a user needs them.
JARGON = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "an issue reference": re.compile(r"(?<![\w/.-])#\d+\b"),
    "a run label": re.compile(r"\b(?:stop|lane|session|round) \d+\b(?! (?:s|ms|min|seconds|minutes|records|events"
                              r"|partitions|executors|apps|rounds|kills)\b)", re.I),
    "a seed label": re.compile(r"\bseed[- ](?:\d{3}|articles?)\b", re.I),
    "a bar or goal of the issues": re.compile(r"\bbars? of\b|\bgoal \d\b", re.I),
    "a section sign": re.compile("§"),
    "a review label": re.compile(r"\breview\b|\bS\d+(?:[–-]S\d+)? of\b", re.I),
    # 7–40 hex digits with at least one digit and one letter, not part of a path, URL or longer word
    "a commit hash": re.compile(r"(?<![\w/.:-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/.-])"),
}


def user_docs(root: Path = REPO_DIR) -> list[Path]:
    examples = sorted(p for p in (root / "examples").rglob("*") if p.is_file())
    return [root / "README.md", *sorted((root / "docs").rglob("*.md")), *examples, *sorted(root.glob("charts/*/README.md"))]


def jargon(path: Path, root: Path = REPO_DIR) -> list[str]:
    """`file:line: what: 'the words'` for every developer's label in one file."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for what, pattern in JARGON.items():
            found += [f"{path.relative_to(root)}:{number}: {what}: {m.group(0)!r}" for m in pattern.finditer(line)]
    return found


def test_the_user_docs_carry_no_issue_numbers_run_history_or_review_labels():
    found = [hit for path in user_docs() for hit in jargon(path)]
    assert found == [], "developers' words in the user docs (say what is meant, or move it to DEVELOPMENT.md, " \
                        "bench/README.md or CHANGELOG.md):\n" + "\n".join(found)


@pytest.mark.parametrize("text, what", [
    ("Bars of issue 15: decision ≤ 30 s", "an issue number"),
    ("as in #412", "an issue reference"),
    ("28 min from a clean clone, stop 30 (lane 1: 978 passed)", "a run label"),
    ("the seed-000 click sessions", "a seed label"),
    ("(meets ≥ 0.5 by its median; goal 1)", "a bar or goal of the issues"),
    ("Issue 17 §3", "a section sign"),
    ("see S8 of the security review", "a review label"),
    ("mended in 371d950", "a commit hash"),
])
def test_each_label_is_found_with_its_file_and_line(tmp_path, text, what):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"# Page\n\n{text}\n")
    assert any(hit.startswith(f"docs/page.md:3: {what}: ") for hit in jargon(tmp_path / "docs" / "page.md", tmp_path))


@pytest.mark.parametrize("text", [
    "Kafka 4.4.0 on 4 partitions, p99 0.79 s (0.71–0.95) in 3 rounds",
    "an upstream bug (kubernetes/kubernetes#139992)",
    "s3a://bucket/prefix, `sha256:` digests, 10.244.0.0/24, `FlatJson`, deadline",
    "a session 3 minutes long; restart after 10 s; executors 1..4",
])
def test_ordinary_prose_is_not_taken_for_a_label(tmp_path, text):
    (tmp_path / "page.md").write_text(text + "\n")
    assert jargon(tmp_path / "page.md", tmp_path) == []


def test_the_readme_is_a_front_door():
    text = (REPO_DIR / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    headings = [line.lstrip("#").strip().lower() for line in text.splitlines() if line.startswith("## ")]
    assert any("quickstart" in h for h in headings), headings
    assert any("why" in h and "when not" in h for h in headings), headings
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    manifests = [yaml.safe_load(b) for b in blocks if "kind: StreamApp" in b]
    assert manifests, "the README shows no StreamApp manifest"
    for manifest in manifests:  # a manifest a user copies is one the cluster accepts
        assert [i for i in validate(manifest) if i.severity == "error"] == []
