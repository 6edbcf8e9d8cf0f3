"""Deleting what the plan marks ``delete``: Kafka's groups and topics, then the ledger rows, and the
checkpoint last, as it holds the query ids that name the rest (a run stopped half-way finds them again)."""

from __future__ import annotations

from collections.abc import Callable

from streamapp_runtime.checkpoint import files
from streamapp_runtime.cleanup.leftovers import DELETE, Leftover
from streamapp_runtime.connections import postgres_uri
from streamapp_runtime.sinks.postgres_ledger import delete_rows

TIMEOUT_S = 30.0


def _wait(futures: dict, failed: dict[str, str]) -> None:
    for name, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - each one's error is reported with its name
            failed[name] = str(exc)


def delete(leftovers: list[Leftover], admin, uris: dict[str, str],
           delete_checkpoint: Callable[[str], bool] = files.delete_tree) -> dict[str, str]:
    """Delete every leftover marked ``delete``; the ones that failed, name -> why."""
    chosen = [item for item in leftovers if item.action == DELETE]
    failed: dict[str, str] = {}
    groups = [item.name for item in chosen if item.kind == "consumer group"]
    if groups:
        _wait(admin.delete_consumer_groups(groups, request_timeout=TIMEOUT_S), failed)
    topics = [item.name for item in chosen if item.kind.endswith("topic")]
    if topics:
        _wait(admin.delete_topics(topics, operation_timeout=TIMEOUT_S), failed)
    for item in chosen:
        if item.kind == "ledger rows":
            secret, query, checkpoint_id = item.target
            try:
                delete_rows(postgres_uri(uris, secret, f"the Postgres sink with Secret {secret!r}"), query,
                                   checkpoint_id)
            except Exception as exc:  # noqa: BLE001 - reported with its name; the checkpoint is then kept
                failed[item.name] = str(exc)
    for item in chosen:
        if item.kind == "checkpoint":
            if failed:
                failed[item.name] = "kept, as something else could not be deleted: its query ids name the rest"
                continue
            try:
                delete_checkpoint(item.name)
            except Exception as exc:  # noqa: BLE001 - reported with its name
                failed[item.name] = str(exc)
    return failed
