"""The driver's progress from its metrics endpoint; unreachable means "no data", never an error."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import datetime, timezone

from prometheus_client.parser import text_string_to_metric_families

from .. import names
from ..decide.world import Progress

TIMEOUT = 1.0


def parse(text: str) -> Progress:
    lag_by_query: dict[str, int] = {}
    batch_by_query: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            query = sample.labels.get("query", "")
            if sample.name == "streamapp_source_lag_records":
                lag_by_query[query] = lag_by_query.get(query, 0) + int(sample.value)
            elif sample.name == "streamapp_last_batch_timestamp_seconds" and sample.value > 0:
                batch_by_query[query] = max(batch_by_query.get(query, 0.0), sample.value)

    def moment(seconds: float | None) -> datetime | None:
        return datetime.fromtimestamp(seconds, timezone.utc) if seconds else None

    return Progress(
        lag=sum(lag_by_query.values()) if lag_by_query else None,
        last_batch=moment(max(batch_by_query.values(), default=None)),
        sink_lag=tuple(sorted(lag_by_query.items())),
        sink_last_batch=tuple(sorted((q, moment(t)) for q, t in batch_by_query.items())),
    )


def observe(pod_ip: str | None, timeout: float = TIMEOUT, port: int = names.METRICS_PORT) -> Progress:
    if not pod_ip:
        return Progress()
    url = f"http://{pod_ip}:{port}/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # pod IPs never go through a proxy
    try:
        with opener.open(url, timeout=timeout) as response:
            return parse(response.read().decode("utf-8", "replace"))
    except (OSError, urllib.error.URLError, ValueError):
        return Progress()
