"""What the scaling decisions (``scaling/``) remember between reconciles of one app: ``world.Memory``
holds it; it is lost when the operator restarts (a debounce or a stabilisation window is then waited
again). A leaf outside the package: ``world`` imports it and ``scaling/`` imports ``world``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class PendingScale:
    """A partition-driven executor count seen since ``since`` and not yet acted on."""

    executors: int
    since: datetime


@dataclass(frozen=True)
class LagReading:
    query: str
    at: datetime  # the batch's time
    lag: int


@dataclass(frozen=True)
class Recommendation:
    at: datetime
    executors: int


@dataclass(frozen=True)
class LoadHistory:
    """scaling.mode load: each query's lag at its recent batches, and the counts recently asked for."""

    lags: tuple[LagReading, ...] = ()
    recommendations: tuple[Recommendation, ...] = ()
