"""A Kafka sink's key or value schema registered in (or looked up from) the schema registry under its
subject when the query starts, whatever its type (Avro, Protobuf): the id every value carries, or why
the registry gave none, in words the driver's termination message keeps.
"""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass

from streamapp_api.schema_registry import Registry

log = logging.getLogger("streamapp.runtime")


class SchemaRefused(RuntimeError):
    """The registry would not give the sink's schema an id: the query does not start."""


@dataclass(frozen=True)
class SchemaTarget:
    """Where a sink's key or value schema goes: the registry, the subject, and whether to register it
    there (else only look it up); ``sink`` names the sink in messages, ``part`` is "key" or "value"."""

    registry: Registry
    subject: str
    register: bool
    sink: str
    part: str = "value"


def refusal(target: SchemaTarget, status: int, answer: dict) -> str:
    """Why the registry gave the schema no id: what, the registry's own words, what to do; a line each,
    so that the driver's termination message (each line cut at 400 characters) keeps all three. Pure."""
    code = answer.get("error_code")
    http = f"HTTP {status}" + (f", error {code}" if code is not None else "")
    if status in (401, 403):
        what, todo = f"the registry refused the credentials ({http})", "check spec.kafka.schemaRegistry.secretRef"
    elif not target.register:
        what = f"not there ({http}; registerSchema: false looks it up only)"
        todo = "register that schema (the driver's log shows it), or set registerSchema: true"
    elif status == 409:
        what = f"incompatible with the subject's versions ({http})"
        todo = "make the stream's columns compatible, change the subject's compatibility level, or write to another subject"
    else:
        what, todo = f"refused ({http})", "see the registry's answer"
    return "\n".join([f"{target.sink}: the {target.part} schema under subject {target.subject!r}: {what}",
                      f"the registry's answer: {answer.get('message') or 'none'}",
                      f"{todo} (registry {target.registry.url})"])


def schema_id(target: SchemaTarget, text: str, schema_type: str = "AVRO") -> int:
    """The id of the schema ``text`` (of the registry's ``schema_type``) under the subject: registered
    (the registry answers with the id of an equal schema already there), or looked up. SchemaRefused
    otherwise; RegistryError when it does not answer."""
    subject = urllib.parse.quote(target.subject, safe="")
    path = f"/subjects/{subject}/versions" if target.register else f"/subjects/{subject}"
    # No schemaType for AVRO: the API's default, and what registries that predate the field take.
    body = {"schema": text, **({} if schema_type == "AVRO" else {"schemaType": schema_type})}
    status, answer = target.registry.post(path, body)
    if status == 200 and isinstance(answer.get("id"), int):
        log.info("%s: %s schema id %d under subject %s: %s", target.sink, target.part, answer["id"], target.subject, text)
        return answer["id"]
    why = refusal(target, status, answer)
    log.error("%s\nthe %s schema: %s", why, target.part, text)
    raise SchemaRefused(why)
