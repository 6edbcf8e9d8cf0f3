"""What exists of an app: its checkpoint (every state generation's query folders and owner markers),
the consumer groups and topics of its Kafka cluster, and the rows of its Postgres sinks' batch ledger.
Reads only."""

from __future__ import annotations

from streamapp_api import StreamApp, contract
from streamapp_api.checkpoint import join

from streamapp_runtime.checkpoint import files
from streamapp_runtime.checkpoint.fence import Fence
from streamapp_runtime.checkpoint.record import RECORD_FILE
from streamapp_runtime.cleanup.leftovers import Found, LedgerRows, QueryFolder, query_id
from streamapp_runtime.connections import postgres_uri
from streamapp_runtime.sinks.postgres_ledger import count_rows, ledger_secrets

TIMEOUT_S = 30.0
GENERATION_PREFIX = "gen-"  # streamapp_api.checkpoint.state_generation
METADATA_FILE = "metadata"  # Spark's, in each query's folder: the query's id


def checkpoint_base(flag: str | None, environ: dict[str, str], app: StreamApp, local_default: str) -> str:
    """--checkpoint, else the driver pod's variable, else the app's object-store location (all its state
    generations), else the folder ``streamapp run`` uses here."""
    return flag or environ.get(contract.ENV_CHECKPOINT_DIR) or app.spec.state.checkpoint.location or local_default


def read_checkpoint(base: str) -> tuple[str | None, tuple[QueryFolder, ...], dict[str, dict]]:
    """(the base if a checkpoint is there, its query folders, each state generation's owner marker).
    Empty folders are no checkpoint: an S3-compatible store may list them after their objects are gone."""
    entries = files.names(base)
    roots = [join(base, name) for name in entries if name.startswith(GENERATION_PREFIX)] or [base]
    folders, owners, records = [], {}, False
    for root in roots if entries else []:
        marker = Fence(root, owner="").read()
        if marker:
            owners[root] = marker
        records = records or files.read_text(join(root, RECORD_FILE)) is not None
        for name in files.names(root):
            metadata = files.read_text(join(join(root, name), METADATA_FILE))
            if metadata is not None:
                folders.append(QueryFolder(root, name, query_id(metadata)))
    return (base if folders or owners or records else None), tuple(folders), owners


def read_kafka(admin) -> tuple[frozenset[str], frozenset[str]]:
    """(the consumer groups, the topics) of the cluster, through a confluent_kafka AdminClient."""
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    if listed.errors:
        raise RuntimeError(f"listing the consumer groups: {'; '.join(str(e) for e in listed.errors)}")
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    return frozenset(g.group_id for g in listed.valid), frozenset(topics)


def read_ledger(app: StreamApp, uris: dict[str, str], queries: list[str]) -> tuple[LedgerRows, ...]:
    """The ledger rows of the app's query names, per Postgres Secret of its sinks, counted per checkpoint."""
    found = []
    for secret in ledger_secrets(app):
        where, counted = count_rows(postgres_uri(uris, secret, f"the Postgres sink with Secret {secret!r}"), queries)
        found.extend(LedgerRows(where, query, checkpoint_id, rows, secret) for query, checkpoint_id, rows in counted)
    return tuple(found)


def observe(app: StreamApp, base: str, admin, kafka: str, uris: dict[str, str], planned: list[str]) -> tuple[Found, list[str]]:
    """What exists, and the app's query names (``planned``: its plan's; and its checkpoint's folders)."""
    checkpoint, folders, owners = read_checkpoint(base)
    queries = sorted(set(planned) | {f.query for f in folders})
    groups, topics = read_kafka(admin)
    return Found(checkpoint, folders, owners, groups, topics, read_ledger(app, uris, queries), kafka), queries
