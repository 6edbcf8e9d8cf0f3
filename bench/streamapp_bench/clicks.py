"""Click events in the shape of seed 000 (uuid, session_id, event, time_spent, ts), fast enough to
fill a topic with millions of them.

Users open sessions, click and view pages every few seconds (a scroll now and then, which the
aggregation filters out) and end the session after one to five minutes. Records are keyed by
session id. `backlog` spreads event time from a fixed start; `paced` stamps each event with the wall
clock at a fixed rate. Deterministic for a seed.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

START_MS = int(datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc).timestamp() * 1000)
KINDS = ("click", "page_view", "scroll")
WEIGHTS = (6, 3, 1)
COUNTED = ("click", "page_view")
WINDOW_MS = 60_000
UNMEASURED = "warmup-"  # uuid prefix of the populations a latency run sends but does not measure


@dataclass
class _User:
    index: int
    session: int = 0
    session_end: int = 0


class _Population:
    """Users whose next event is kept in a heap by event time."""

    def __init__(self, seed: int, users: int, start_ms: int, mean_gap_ms: float = 3000.0):
        self.rng = random.Random(seed)
        self.mean_gap = mean_gap_ms
        self.users = [_User(u) for u in range(users)]
        self.heap: list[tuple[int, int]] = []
        for user in self.users:
            first = start_ms + int(self.rng.uniform(0, 60_000))
            user.session_end = first + int(self.rng.uniform(60_000, 300_000))
            self.heap.append((first, user.index))
        heapq.heapify(self.heap)
        self.kinds = self.rng.choices(KINDS, weights=WEIGHTS, k=4096)

    def next(self) -> tuple[int, _User, str, int]:
        """(event time ms, user, kind, time spent) of the earliest next event."""
        rng = self.rng
        at, index = self.heap[0]
        user = self.users[index]
        kind = self.kinds[int(rng.random() * 4096)]
        spent = 1 + int(rng.random() * 30)
        step = at + int(rng.expovariate(1 / self.mean_gap))
        if step >= user.session_end:  # the session ends; the next one starts after a pause
            step = user.session_end + int(rng.uniform(30_000, 120_000))
            user.session += 1
            user.session_end = step + int(rng.uniform(60_000, 300_000))
            event_user = _User(user.index, user.session - 1)
        else:
            event_user = user
        heapq.heapreplace(self.heap, (step, index))
        return at, event_user, kind, spent


_SECONDS: dict[int, str] = {}


def iso(ms: int) -> str:
    """Milliseconds since the epoch as ISO-8601 UTC with milliseconds (cached per second)."""
    sec, milli = divmod(ms, 1000)
    prefix = _SECONDS.get(sec)
    if prefix is None:
        if len(_SECONDS) > 100_000:
            _SECONDS.clear()
        prefix = _SECONDS[sec] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return f"{prefix}.{milli:03d}Z"


def record(user: _User, kind: str, spent: int, ts_ms: int, prefix: str = "") -> tuple[str, str]:
    uuid = f"{prefix}user-{user.index:05d}"
    session = f"{uuid}-s{user.session}"
    value = (f'{{"uuid": "{uuid}", "session_id": "{session}", "event": "{kind}", '
             f'"time_spent": {spent}, "ts": "{iso(ts_ms)}"}}')
    return session, value


def backlog(n: int, seed: int = 0, users: int = 5000) -> Iterator[tuple[str, str]]:
    """n events in event-time order, spread over about n / (users / 3 s) seconds of event time."""
    population = _Population(seed, users, START_MS)
    for _ in range(n):
        at, user, kind, spent = population.next()
        yield record(user, kind, spent, at)


def paced(rate: float, seconds: float, seed: int = 1, users: int = 5000, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Events at `rate` per second for `seconds`, each stamped with the wall clock when it is made.

    The population's own clock only decides who acts next and when sessions end; event time is now.
    """
    population = _Population(seed, users, START_MS, mean_gap_ms=users * 1000.0 / max(rate, 1.0))
    began = time.time()
    sent = 0
    total = int(rate * seconds)
    while sent < total:
        due = min(total, int((time.time() - began) * rate) + 1)
        if due <= sent:
            time.sleep(0.002)
            continue
        for _ in range(due - sent):
            _, user, kind, spent = population.next()
            yield record(user, kind, spent, int(time.time() * 1000), prefix)
        sent = due


def warm_then_measured(rate: float, seconds: float, warm_seconds: float,
                       cool_seconds: float = 0) -> Iterator[tuple[str, str]]:
    """`warm_seconds` of warm-up events (another population: their uuids start with "warmup-"), then
    `seconds` of measured ones, then `cool_seconds` of unmeasured ones again ("warmup-after-"), at
    `rate` without a break: right after a start, an engine's latency falls for many seconds while the
    JIT and the consumers' fetch sizes settle, and the micro-batch that follows the end of the input
    takes longer than the others; a latency run measures the steady state between."""
    return itertools.chain(paced(rate, warm_seconds, seed=5, prefix=UNMEASURED),
                           paced(rate, seconds, seed=3),
                           paced(rate, cool_seconds, seed=9, prefix=f"{UNMEASURED}after-"))


def measured(record: dict) -> bool:
    """Whether an input event or an output row belongs to the measured population."""
    return not record["uuid"].startswith(UNMEASURED)


def counted(value: str) -> bool:
    return '"event": "click"' in value or '"event": "page_view"' in value


# The events' Avro schema: the example's columns, `ts` as Avro's timestamp in milliseconds (a Spark timestamp).
AVRO_SCHEMA = {"type": "record", "name": "Click", "namespace": "io.streamapp.bench", "fields": [
    {"name": "uuid", "type": "string"}, {"name": "session_id", "type": "string"}, {"name": "event", "type": "string"},
    {"name": "time_spent", "type": "long"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def avro_encoder(registry: str, topic: str):
    """A function of an event's JSON text to its Avro value in the Confluent wire format, as a producer with
    confluent-kafka's AvroSerializer writes it (the schema registered under ``<topic>-value`` at ``registry``)."""
    import json

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(AVRO_SCHEMA))
    context = SerializationContext(topic, MessageField.VALUE)

    def encode(value: str) -> bytes:
        event = json.loads(value)
        event["ts"] = datetime.strptime(event["ts"], "%Y-%m-%dT%H:%M:%S.%f%z")
        return serializer(event, context)

    return encode
