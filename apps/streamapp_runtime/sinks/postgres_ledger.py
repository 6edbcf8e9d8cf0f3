"""The Postgres sink's batch ledger (``streamapp_batches``, sinks/postgres.py) as ``streamapp cleanup``
reads and deletes it: rows per query and checkpoint, in the database of each Postgres sink's Secret."""

from __future__ import annotations

from streamapp_api import StreamApp

from streamapp_runtime.sinks.postgres import BATCHES

TIMEOUT_S = 30


def ledger_secrets(app: StreamApp) -> list[str]:
    """The Postgres Secrets the app's sinks write (and keep their ledger) through, each once."""
    return sorted({sink.postgres.secret_ref.name for sink in app.spec.sinks if sink.postgres is not None})


def count_rows(uri: str, queries: list[str]) -> tuple[str, list[tuple[str, str, int]]]:
    """(the database, as shown without its password; its ledger's (query, checkpoint id, rows) of these
    queries). No ledger table: none."""
    import psycopg

    with psycopg.connect(uri, connect_timeout=TIMEOUT_S) as conn:
        where = f"Postgres {conn.info.host}:{conn.info.port}/{conn.info.dbname}"
        if conn.execute("SELECT to_regclass(%s)", (BATCHES,)).fetchone()[0] is None:
            return where, []
        counted = conn.execute(f"SELECT query, checkpoint_id, count(*) FROM {BATCHES} WHERE query = ANY(%s) "
                               "GROUP BY query, checkpoint_id ORDER BY query, checkpoint_id", (queries,)).fetchall()
    return where, [(query, checkpoint_id, rows) for query, checkpoint_id, rows in counted]


def delete_rows(uri: str, query: str, checkpoint_id: str) -> int:
    """Delete the ledger rows of one query's checkpoint; how many."""
    import psycopg

    with psycopg.connect(uri, connect_timeout=TIMEOUT_S) as conn:
        return conn.execute(f"DELETE FROM {BATCHES} WHERE query = %s AND checkpoint_id = %s",
                            (query, checkpoint_id)).rowcount
