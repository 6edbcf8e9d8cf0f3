"""From what exists to what ``streamapp cleanup`` removes, keeps, and why. Pure: no Kafka, no Postgres,
no files; ``observe`` gathers a ``Found`` and ``act`` carries out the deletions.

Only names this app makes are matched, never a prefix: ``streamapp.<ns>.<app>.<query>`` for app
``shop`` is not a group of app ``shop.eu``, and the writers' and cursors' names carry the id of a query
of this app's checkpoint. Two apps may share a query name and the ledger table, so ledger rows go only
with the checkpoint ids found here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from streamapp_api import StreamApp, contract

from streamapp_runtime.sinks.dead_letter_topic import writer_name as dead_letter_writer
from streamapp_runtime.sinks.kafka_transactions import writer_id
from streamapp_runtime.sinks.postgres_ledger import BATCHES

DELETE, KEEP = "delete", "keep"
EMPTY = "''"  # the checkpoint id of ledger rows written before the ledger kept one
# Kafka's default transactional.id.expiration.ms: 7 days.
TRANSACTIONAL_ID_WHY = ("Kafka has no way to delete a transactional id: the broker forgets it once unused for "
                        "transactional.id.expiration.ms (7 days by default)")


@dataclass(frozen=True)
class QueryFolder:
    """A query's checkpoint folder, with Spark's id of the query (None when its metadata is unreadable)."""

    root: str  # the state generation's root
    query: str
    id: str | None


@dataclass(frozen=True)
class LedgerRows:
    """Rows of the Postgres sinks' batch ledger for one query and checkpoint, in one database."""

    database: str  # where, as shown (no password)
    query: str
    checkpoint_id: str
    rows: int
    secret: str = ""  # the Postgres Secret of the sink


@dataclass(frozen=True)
class Found:
    """What exists of the app: its checkpoint, the groups and topics on its Kafka cluster, its ledger rows."""

    checkpoint: str | None  # the app's checkpoint base, None when nothing is there
    folders: tuple[QueryFolder, ...] = ()
    owners: dict[str, dict] = field(default_factory=dict)  # root -> its owner marker (checkpoint.fence)
    groups: frozenset[str] = frozenset()
    topics: frozenset[str] = frozenset()
    ledger: tuple[LedgerRows, ...] = ()
    kafka: str = ""  # bootstrap servers, as shown


@dataclass(frozen=True)
class Leftover:
    kind: str
    name: str
    where: str
    action: str  # DELETE or KEEP
    why: str = ""
    target: tuple[str, ...] = ()  # what deleting it takes beyond its name: (secret, query, checkpoint id) of ledger rows


@dataclass(frozen=True)
class Choices:
    delete_sink_topics: bool = False
    keep_dead_letter_topic: bool = False


def query_id(metadata: str | None) -> str | None:
    """Spark's id of a query from its checkpoint's ``metadata`` file (``{"id": "…"}``)."""
    try:
        found = json.loads((metadata or "").splitlines()[0])
    except (ValueError, IndexError):
        return None
    return found.get("id") if isinstance(found, dict) and isinstance(found.get("id"), str) else None


def live_drivers(owners: dict[str, dict]) -> list[str]:
    """Why the checkpoint may still be in use: a driver's owner marker that no clean stop released."""
    return [f"{root}: held by driver {marker.get('owner')} since {marker.get('since', '?')} (not released)"
            for root, marker in sorted(owners.items()) if marker.get("owner") and not marker.get("released")]


def _marker_writers(groups: frozenset[str], query: str, checkpoint_id: str) -> list[str]:
    """The exactly-once writers of a query's checkpoint that committed a marker (their groups)."""
    prefix = writer_id(query, checkpoint_id, 0)[:-1]
    return sorted(g for g in groups if g.startswith(prefix) and g[len(prefix):].isdigit()
                  and writer_id(query, checkpoint_id, int(g[len(prefix):])) == g)


def _look_alikes(app: StreamApp, found: Found, queries: list[str], matched: set[str], where: str) -> list[Leftover]:
    """Groups named like this app's dead-letter cursors or exactly-once writers whose query id is of no
    checkpoint found here: kept, as another app may have sources and queries of the same names."""
    cursors = [dead_letter_writer(s.name, "") for s in app.spec.sources]
    writers = [writer_id(q, "", 0)[:-2] for q in queries]

    def alike(group: str) -> bool:
        rest = [group[len(p):] for p in cursors if group.startswith(p)]
        tails = [group[len(p):].split(".") for p in writers if group.startswith(p)]
        return any(r and "." not in r for r in rest) or any(len(t) == 2 and t[0] and t[1].isdigit() for t in tails)

    return [Leftover("consumer group", g, where, KEEP, "named like this app's, of a checkpoint not found here (another "
                     "app's with the same source or query names, or of a checkpoint deleted before): check it, delete "
                     "it by hand") for g in sorted(found.groups - matched) if alike(g)]


def kafka_leftovers(app: StreamApp, namespace: str, found: Found, queries: list[str], choices: Choices) -> list[Leftover]:
    where = f"Kafka {found.kafka}"
    ids = sorted({f.id for f in found.folders if f.id})
    out = [Leftover("consumer group", g, where, DELETE, "the lag of a query, for kafka-consumer-groups and KEDA")
           for g in sorted({contract.consumer_group(namespace, app.metadata.name, q) for q in queries} & found.groups)]
    exactly_once_letters = app.spec.dead_letter.delivery == "exactly-once"
    for name in sorted({dead_letter_writer(s.name, i) for s in app.spec.sources for i in ids} & found.groups):
        out.append(Leftover("consumer group", name, where, DELETE, "how far a source's dead letters are written"))
        if exactly_once_letters:
            out.append(Leftover("transactional id", name, where, KEEP, TRANSACTIONAL_ID_WHY))
    for folder in found.folders:
        for name in _marker_writers(found.groups, folder.query, folder.id) if folder.id else []:
            out.append(Leftover("consumer group", name, where, DELETE, "an exactly-once writer's last committed batch"))
            out.append(Leftover("transactional id", name, where, KEEP, TRANSACTIONAL_ID_WHY))
    out += _look_alikes(app, found, queries, {item.name for item in out} | {
        contract.consumer_group(namespace, app.metadata.name, q) for q in queries}, where)
    topic = app.dead_letter_topic
    if topic and topic in found.topics:
        out.append(Leftover("dead-letter topic", topic, where, KEEP if choices.keep_dead_letter_topic else DELETE,
                            "kept: --keep-dead-letter-topic" if choices.keep_dead_letter_topic else "the app's bad records"))
    for sink in app.spec.sinks:
        written = sink.target.topic_written()
        if written and written in found.topics and written != topic:
            keep = not choices.delete_sink_topics
            out.append(Leftover("sink topic", written, where, KEEP if keep else DELETE,
                                "the app's output, the user's data: deleted only with --delete-sink-topics" if keep
                                else "--delete-sink-topics"))
    return out


def ledger_leftovers(found: Found) -> list[Leftover]:
    ids = {(f.query, f.id) for f in found.folders if f.id}
    out = []
    for rows in found.ledger:
        name = f"{BATCHES} query={rows.query} checkpoint_id={rows.checkpoint_id or EMPTY}"
        if (rows.query, rows.checkpoint_id) in ids:
            out.append(Leftover("ledger rows", name, rows.database, DELETE, f"{rows.rows} row(s): batches written",
                                (rows.secret, rows.query, rows.checkpoint_id)))
        else:
            out.append(Leftover("ledger rows", name, rows.database, KEEP, f"{rows.rows} row(s) of a checkpoint not "
                                "found here (another app with a query of this name, or a checkpoint deleted before)"))
    return out


def plan(app: StreamApp, namespace: str, queries: list[str], found: Found, choices: Choices = Choices()) -> list[Leftover]:
    """Everything the app left behind, each with what cleanup does with it. ``queries``: the names of
    the app's queries (its plan's, and the folders of its checkpoint)."""
    out = kafka_leftovers(app, namespace, found, queries, choices) + ledger_leftovers(found)
    for sink in app.spec.sinks:
        if sink.target.topic_written() is None:
            out.append(Leftover("sink output", sink.target.target_name(), f"{sink.kind} sink {sink.query_name}",
                                KEEP, "the app's output, the user's data"))
    if found.checkpoint:
        out.append(Leftover("checkpoint", found.checkpoint, "object store" if "://" in found.checkpoint and
                            not found.checkpoint.startswith("file:") else "volume or local folder", DELETE,
                            "offsets and state of every query, every state generation"))
    return out


def format_table(leftovers: list[Leftover]) -> str:
    header = ("ACTION", "KIND", "NAME", "WHERE", "WHY")
    rows = [header] + [(item.action, item.kind, item.name, item.where, item.why) for item in leftovers]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows)
