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
    last_batch: float | None = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "streamapp_source_lag_records":
                query = sample.labels.get("query", "")
                lag_by_query[query] = lag_by_query.get(query, 0) + int(sample.value)
            elif sample.name == "streamapp_last_batch_timestamp_seconds":
                last_batch = max(last_batch or 0.0, sample.value)
    return Progress(
        lag=sum(lag_by_query.values()) if lag_by_query else None,
        last_batch=datetime.fromtimestamp(last_batch, timezone.utc) if last_batch else None,
        sink_lag=tuple(sorted(lag_by_query.items())),
    )


def observe(pod_ip: str | None, timeout: float = TIMEOUT) -> Progress:
    if not pod_ip:
        return Progress()
    url = f"http://{pod_ip}:{names.METRICS_PORT}/metrics"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # pod IPs never go through a proxy
    try:
        with opener.open(url, timeout=timeout) as response:
            return parse(response.read().decode("utf-8", "replace"))
    except (OSError, urllib.error.URLError, ValueError):
        return Progress()
