"""Manifests kept as test data that must be refused (tests/manifests/invalid, mistakes, attacks).

Each starts with comment lines naming what its refusal must say:
  # expect: <field path the refusal names (the reported path is this field or one inside it)>
  # refused-by: apiserver | validate | yaml   (apiserver: the CRD schema or CEL refuses it; validate:
  #                                      the API's and the policy's checks: streamapp validate and the
  #                                      operator's admission webhook; yaml: the file cannot be read
  #                                      as a manifest, by streamapp validate nor by kubectl)
  # message: <fragment of the message>
  # why: <what is wrong, in words>
"""

from __future__ import annotations

from pathlib import Path

from .paths import REPO_DIR

MANIFESTS = REPO_DIR / "tests" / "manifests"
HEADER_FIELDS = ("expect", "refused-by", "message", "why")


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line.lstrip("# ").partition(": ")
        fields[key] = value.strip()
    return fields


def names_field(reported: str, expected: str) -> bool:
    """Whether a finding at ``reported`` names the field ``expected`` (or one inside it)."""
    return reported == expected or reported.startswith((expected + ".", expected + "["))


def manifests(folder: str) -> list[Path]:
    return sorted((MANIFESTS / folder).glob("*.yaml"))
