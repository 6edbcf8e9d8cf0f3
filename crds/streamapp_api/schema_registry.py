"""A schema registry of the Confluent REST API as the runtime and ``streamapp validate`` read it: the
client (GET; POST for the Kafka sink's registration), subject naming, and a schema's type.

No pyspark here: the runtime decodes records (streamapp_runtime/compile/avro_values.py,
protobuf_values.py); this module, avro_schemas.py, protobuf_schemas.py and registry_columns.py say what
a schema is, so the runtime at start and ``validate`` before an apply check a spec the same way.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from base64 import b64encode
from dataclasses import dataclass
from typing import Any


class RegistryError(RuntimeError):
    """The registry did not answer as expected (not a missing schema): the batch fails and is retried,
    no record is sent to the dead-letter topic for it."""


@dataclass(frozen=True)
class Registry:
    """Where the schema registry is and the credentials of HTTP Basic auth ('user:password'), if any."""

    url: str
    user_info: str | None = None

    def _request(self, path: str, body: dict[str, Any] | None = None) -> urllib.request.Request:
        request = urllib.request.Request(self.url.rstrip("/") + path,
                                         headers={"Accept": "application/vnd.schemaregistry.v1+json"})
        if body is not None:
            request.data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        if self.user_info:
            request.add_header("Authorization", "Basic " + b64encode(self.user_info.encode()).decode())
        return request

    def post(self, path: str, body: dict[str, Any], timeout: float = 10) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON answer) of POST ``path``: the caller reads a refusal's error_code and message.
        RegistryError when the registry does not answer at all."""
        try:
            with urllib.request.urlopen(self._request(path, body), timeout=timeout) as response:
                answer = json.load(response)
                return response.status, answer if isinstance(answer, dict) else {}
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read() or b"{}")
            except ValueError:
                answer = {}
            return exc.code, answer if isinstance(answer, dict) else {}
        except OSError as exc:
            raise RegistryError(f"schema registry {self.url}: POST {path}: {exc}") from exc

    def get(self, path: str, timeout: float = 10) -> dict[str, Any] | None:
        """The JSON answer of GET ``path``; None for 404 (no such subject, version or id)."""
        request = self._request(path)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer = json.load(response)
            if not isinstance(answer, dict):
                raise RegistryError(f"schema registry {self.url}: GET {path}: not a JSON object")
            return answer
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise RegistryError(f"schema registry {self.url}: GET {path}: HTTP {exc.code} {exc.reason}") from exc
        except (OSError, ValueError) as exc:
            raise RegistryError(f"schema registry {self.url}: GET {path}: {exc}") from exc

    def latest(self, subject: str, timeout: float = 10) -> dict[str, Any] | None:
        """The subject's latest version (``subject``, ``version``, ``id``, ``schema``, ``schemaType``), or
        None when the registry has no such subject."""
        return self.get(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest", timeout)


def topic_subject(topic: str, part: str = "value") -> str:
    """The subject of a topic's values (``part`` "value") or keys ("key") under TopicNameStrategy, the
    serializers' default. Pure."""
    if part not in ("key", "value"):
        raise ValueError(f"part {part!r}: 'key' or 'value'")
    return f"{topic}-{part}"


def schema_type(answer: dict[str, Any]) -> str:
    """The registry's type of a schema it answered with (Avro when it says none, as the API does). Pure."""
    return str(answer.get("schemaType") or "AVRO")
