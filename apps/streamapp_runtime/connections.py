"""How the runtime's own clients reach what an app names: Kafka through librdkafka (the admin client,
the dead-letter and exactly-once producers) and Postgres by its connection URI. Pure configuration,
no connection is opened here; the lowest layer of the runtime, so sinks and the process both use it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TypeVar

from streamapp_api import contract

log = logging.getLogger("streamapp.runtime")
Client = TypeVar("Client")


class MissingConnection(ValueError):
    """A sink names a connection the runtime was given no URI for; the message says how to give it."""


def admin_config(options: dict[str, str]) -> dict[str, str]:
    """Spark's ``kafka.``-prefixed options -> a confluent_kafka client configuration: the credentials
    read back from the Java client's form (``kafka_credentials.librdkafka_options``). Pure."""
    given = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    return {"bootstrap.servers": given["bootstrap.servers"], "socket.timeout.ms": "10000",
            **contract.admin_client_options(given)}


def librdkafka_client(make: Callable[[dict[str, str]], Client], config: dict[str, str]) -> Client:
    """``make(config)`` for a confluent_kafka client, leaving out the options only the Java client knows
    (librdkafka refuses them by name)."""
    from confluent_kafka import KafkaException

    config = dict(config)
    while True:
        try:
            return make(config)
        except KafkaException as exc:
            unknown = re.search(r'No such configuration property: "([^"]+)"', str(exc))
            if unknown is None or unknown.group(1) not in config:
                raise
            log.debug("Kafka option %s is for the Java client only; not used by librdkafka", unknown.group(1))
            del config[unknown.group(1)]


def postgres_env_name(secret: str) -> str:
    """The key of a Secret's URI among the runtime's Postgres URIs: its variable without the prefix."""
    return contract.postgres_uri_env(secret).removeprefix(contract.ENV_POSTGRES_PREFIX)


def postgres_uri(uris: dict[str, str], secret: str, where: str) -> str:
    """The connection URI of the Postgres Secret ``secret`` (``uris`` keyed by ``postgres_env_name``,
    ``*`` for any), else MissingConnection naming the field ``where`` and how to give one."""
    uri = uris.get(postgres_env_name(secret)) or uris.get("*")
    if not uri:
        raise MissingConnection(f"{where}.secretRef: no connection URI for Secret {secret!r}; set "
                                f"{contract.ENV_POSTGRES_PREFIX}{postgres_env_name(secret)}=postgresql://... (the "
                                f"operator does this from the Secret) or pass --postgres {secret}=postgresql://...")
    return uri
