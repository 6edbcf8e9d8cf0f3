"""``streamapp cleanup``: what an app leaves behind once it is deleted, and removing it.

- ``leftovers``: from what exists (``Found``) to what to remove or keep, and why (``Leftover``). Pure.
- ``observe``: what exists, read from the checkpoint, Kafka and the Postgres sinks' databases.
- ``act``: deleting what the plan says to delete.
- ``cli``: the command.

Every name comes from the code that makes it: the consumer groups from ``streamapp_api.contract``, the
exactly-once writers from ``sinks.kafka_transactions``, the dead-letter cursors from
``sinks.dead_letter_topic``, the ledger from ``sinks.postgres_ledger``.
"""
