"""Small StreamApps for unit tests, built from plain dicts."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from streamapp_api import StreamApp, StreamAppSpec, load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = {
    "apiVersion": "streamapp.io/v1alpha1",
    "kind": "StreamApp",
    "metadata": {"name": "orders", "namespace": "shop"},
    "spec": {
        "kafka": {"bootstrapServers": "kafka:9092"},
        "sources": [{"name": "orders", "topic": "orders", "format": "json",
                     "schema": {"id": "string", "amount": "double", "customer": "string"}}],
        "streams": [{"name": "big", "from": "orders", "steps": [
            {"filter": "amount > 100"},
            {"keyBy": "customer"},
            {"aggregate": {"groupBy": ["customer"], "columns": {"total": "sum(amount)"}}},
        ], "emit": "updates"}],
        "sinks": [{"from": "big", "kafka": {"topic": "big-orders"}}],
    },
}


def merge(base: dict, overrides: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def manifest(**spec_overrides) -> dict:
    return merge(BASE, {"spec": spec_overrides})


def app(**spec_overrides) -> StreamApp:
    return load(manifest(**spec_overrides))


def spec(**spec_overrides) -> StreamAppSpec:
    return app(**spec_overrides).spec


def example(name: str) -> StreamApp:
    return load(yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()))


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
