"""'Did you mean ...?' for a misspelled name, from the names that would have been right."""

from __future__ import annotations

import difflib
from typing import Iterable


def close_matches(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to ``name`` (ignoring case), best first; none if nothing is close."""
    by_folded: dict[str, str] = {}
    for candidate in candidates:
        by_folded.setdefault(candidate.lower(), candidate)
    found = difflib.get_close_matches(name.lower(), list(by_folded), n=n, cutoff=0.6)
    return [by_folded[f] for f in found if f != name.lower() or by_folded[f] != name]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """" (did you mean 'user'?)" (or 'user' or 'users'), or '' when nothing is close."""
    found = close_matches(name, candidates)
    if not found:
        return ""
    return " (did you mean " + " or ".join(repr(f) for f in found) + "?)"
