"""Repeated, interleaved runs and what they add up to. Pure: lists in, numbers out.

One run of each engine after another says little on a shared machine: two such runs of the data plane
gave runtime ÷ hand-written 0.68 and 1.23. So every bench that compares engines runs them in rounds,
each round once through every engine (a, b, c, a, b, c, …), and reports each engine's median with its
spread, and each ratio from the runs of one round (made minutes apart, under about the same load).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .measure import ratio


def interleave(engines: Sequence[str], rounds: int, alternate: bool = False) -> list[tuple[int, str]]:
    """(round, engine) in the order they run: every engine once per round. `alternate` reverses every
    other round, so that on a warming machine no engine of a pair always goes first."""
    order = []
    for i in range(rounds):
        this = list(engines)[::-1] if alternate and i % 2 else list(engines)
        order += [(i, engine) for engine in this]
    return order


def spread(values: Sequence[float | None]) -> dict:
    """Median, lowest and highest of the values that were measured."""
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "runs": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


def per_round_ratio(top: Sequence[float | None], bottom: Sequence[float | None]) -> dict:
    """top[i] ÷ bottom[i] for every round i in which both were measured, as a spread, with the ratio of
    each round (None where either run gave no figure)."""
    each = [ratio(a, b) for a, b in zip(top, bottom)]
    return {**spread(each), "per_round": each}


def quantiles(values: Sequence[float], points: int = 100) -> list[float]:
    """The distribution of `values` in `points` + 1 steps (0 %, 1 %, …, 100 % for 100), plus 99.9 %:
    enough to draw its CDF again from a results file without keeping every value."""
    if not values:
        return []
    ordered = sorted(values)
    last = len(ordered) - 1
    return [float(ordered[round(q * last)]) for q in quantile_levels(points)]


def quantile_levels(points: int = 100) -> list[float]:
    """The fractions `quantiles(…, points)` returns values at, in its order."""
    at = [i / points for i in range(points + 1)]
    at.insert(-1, 0.999)
    return at
