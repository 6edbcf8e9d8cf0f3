"""Runtime tests: real Kafka, real Spark, real Postgres from the session test bed."""

from __future__ import annotations

import pytest


@pytest.fixture
def names(request):
    """Unique topic/app names per test, so tests share one broker without seeing each other's data."""
    import re
    import uuid

    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30]
    suffix = uuid.uuid4().hex[:6]
    return lambda part: f"{base}-{part}-{suffix}"
