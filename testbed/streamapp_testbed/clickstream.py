"""A generated click stream in the shape of the seed article (uuid, session_id, event, time_spent, ts).

Deterministic for a seed: users open sessions at random moments, click and view pages every few
seconds, and end the session after a while; a few events arrive slightly out of order. Pure.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

START = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Click:
    uuid: str
    session_id: str
    event: str
    time_spent: int
    ts: datetime

    def to_json(self) -> str:
        return json.dumps({"uuid": self.uuid, "session_id": self.session_id, "event": self.event,
                           "time_spent": self.time_spent, "ts": iso(self.ts)})


def iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def generate(seed: int = 0, users: int = 200, minutes: int = 10, start: datetime = START,
             disorder_seconds: float = 5.0) -> list[Click]:
    """Events in arrival order: sorted by time, with a small random shuffle (out of order within seconds)."""
    rng = random.Random(seed)
    events: list[Click] = []
    horizon = start + timedelta(minutes=minutes)
    for u in range(users):
        uuid = f"user-{u:04d}"
        t = start + timedelta(seconds=rng.uniform(0, 60))
        s = 0
        while t < horizon:
            session = f"{uuid}-s{s}"
            end = t + timedelta(seconds=rng.uniform(60, 300))
            while t < min(end, horizon):
                kind = rng.choices(("click", "page_view", "scroll"), weights=(6, 3, 1))[0]
                events.append(Click(uuid, session, kind, rng.randint(1, 30), t))
                t += timedelta(seconds=rng.expovariate(1 / 3.0))
            t = end + timedelta(seconds=rng.uniform(30, 120))
            s += 1
    jitter = [(e.ts + timedelta(seconds=rng.uniform(0, disorder_seconds)), i, e) for i, e in enumerate(events)]
    return [e for _, _, e in sorted(jitter)]
