"""Durations, Kubernetes quantities and Spark memory sizes: patterns, parsing and CEL helpers.

A duration is a whole number followed by one unit: ``ms``, ``s``, ``m``, ``h`` or ``d``
(``500ms``, ``30s``, ``1m``, ``10m``, ``1h``, ``1d``). One unit keeps durations easy to read and
lets the API server compare them cheaply: :func:`cel_millis` turns one into milliseconds in CEL
(CEL's own ``duration()`` does not know days).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import Field

DURATION_PATTERN = r"^[1-9][0-9]{0,8}(ms|s|m|h|d)$"
DURATION_MAX_LENGTH = 16
DURATION_HELP = "a positive whole number and one unit: ms, s, m, h or d (e.g. 500ms, 30s, 1m, 10m, 1h, 1d)"

_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION_RE = re.compile(DURATION_PATTERN)

# Kubernetes resource quantity, restricted to the forms users write for volume sizes.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"
QUANTITY_HELP = "a Kubernetes quantity such as 500Mi, 10Gi or 1Ti"
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
_QUANTITY_FACTOR = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}

# Spark memory: Spark's own form (512m, 2g) or the Kubernetes binary form (512Mi, 2Gi).
SPARK_MEMORY_PATTERN = r"^[1-9][0-9]{0,6}(k|m|g|t|Ki|Mi|Gi|Ti)$"
SPARK_MEMORY_HELP = "a size such as 512m, 2g (Spark style) or 512Mi, 2Gi (Kubernetes style)"
_SPARK_MEMORY_RE = re.compile(SPARK_MEMORY_PATTERN)
_SPARK_MEMORY_MIB = {"k": 1 / 1024, "Ki": 1 / 1024, "m": 1, "Mi": 1, "g": 1024, "Gi": 1024,
                     "t": 1024 * 1024, "Ti": 1024 * 1024}

Duration = Annotated[str, Field(pattern=DURATION_PATTERN, max_length=DURATION_MAX_LENGTH)]
# spec.trigger: a micro-batch interval, or real-time mode (streamapp_api.realtime).
REALTIME = "realtime"
TRIGGER_PATTERN = rf"^([1-9][0-9]{{0,8}}(ms|s|m|h|d)|{REALTIME})$"
Trigger = Annotated[str, Field(pattern=TRIGGER_PATTERN, max_length=DURATION_MAX_LENGTH)]
Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN, max_length=32)]
SparkMemory = Annotated[str, Field(pattern=SPARK_MEMORY_PATTERN, max_length=16)]


def is_duration(text: str) -> bool:
    return isinstance(text, str) and _DURATION_RE.match(text) is not None


def trigger_interval(trigger: str | None) -> timedelta | None:
    """spec.trigger as a micro-batch interval: None when unset (back to back) or real-time."""
    return None if trigger in (None, REALTIME) else parse_duration(trigger)


def parse_duration(text: str) -> timedelta:
    """``"10m"`` -> ``timedelta(minutes=10)``; raises ValueError naming the allowed forms."""
    match = _DURATION_RE.match(text or "")
    if match is None:
        raise ValueError(f"{text!r} is not a duration: use {DURATION_HELP}")
    unit = match.group(1)
    amount = int(text[: -len(unit)])
    return timedelta(seconds=amount * _UNIT_SECONDS[unit])


def spark_interval(text: str) -> str:
    """A duration as a Spark interval string (``"10m"`` -> ``"10 minutes"``)."""
    seconds = parse_duration(text).total_seconds()
    if seconds < 1:
        return f"{int(round(seconds * 1000))} milliseconds"
    return f"{int(seconds)} seconds"


def parse_quantity(text: str) -> int:
    """``"10Gi"`` -> bytes."""
    match = _QUANTITY_RE.match(text or "")
    if match is None:
        raise ValueError(f"{text!r} is not a quantity: use {QUANTITY_HELP}")
    suffix = match.group(2) or ""
    number = text[: len(text) - len(suffix)]
    return int(float(number) * _QUANTITY_FACTOR[suffix])


def spark_memory_mib(text: str) -> int:
    """``"2g"`` or ``"2Gi"`` -> 2048 (MiB, rounded up)."""
    match = _SPARK_MEMORY_RE.match(text or "")
    if match is None:
        raise ValueError(f"{text!r} is not a memory size: use {SPARK_MEMORY_HELP}")
    unit = match.group(1)
    mib = int(text[: -len(unit)]) * _SPARK_MEMORY_MIB[unit]
    return max(1, int(-(-mib // 1)))


def spark_memory(text: str) -> str:
    """The size in the form Spark's configuration expects (``"2Gi"`` -> ``"2048m"``)."""
    return f"{spark_memory_mib(text)}m"


def cel_millis(expr: str) -> str:
    """A CEL expression turning the duration string ``expr`` into whole milliseconds (an int).

    CEL's ``duration()`` accepts ``s``, ``m`` and ``h`` but not ``d``, and building a new string for
    it makes the API server's cost estimate explode; plain arithmetic on the digits stays cheap.
    """
    number = f"int({expr}.substring(0, {expr}.size() - 1))"
    return (
        f"({expr}.endsWith('ms') ? int({expr}.substring(0, {expr}.size() - 2)) : {number} * "
        f"({expr}.endsWith('s') ? 1000 : {expr}.endsWith('m') ? 60000 : "
        f"{expr}.endsWith('h') ? 3600000 : 86400000))"
    )
