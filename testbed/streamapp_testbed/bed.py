"""The whole test bed at once, for `make demo`, `make testbed-up` and the benchmarks."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from .kafka import KafkaBroker
from .kube import ControlPlane
from .kwok import Kwok
from .postgres import Postgres
from .prometheus import Prometheus
from .s3 import ObjectStore
from .schema_registry import SchemaRegistry

PARTS = ("kafka", "schema-registry", "postgres", "s3", "prometheus", "kube", "kwok")


@dataclass
class TestBed:
    __test__ = False  # a plain class that pytest would otherwise try to collect where it is imported

    workdir: Path
    kafka: KafkaBroker | None = None
    schema_registry: SchemaRegistry | None = None
    postgres: Postgres | None = None
    s3: ObjectStore | None = None
    prometheus: Prometheus | None = None
    control_plane: ControlPlane | None = None
    kwok: Kwok | None = None

    def endpoints(self) -> dict[str, str]:
        found = {}
        if self.kafka:
            found["kafka bootstrap"] = self.kafka.bootstrap
        if self.schema_registry:
            found["schema registry"] = self.schema_registry.url
        if self.postgres:
            found["postgres"] = self.postgres.dsn
        if self.s3:
            found["s3 endpoint"] = self.s3.endpoint
        if self.prometheus:
            found["prometheus"] = self.prometheus.url
        if self.control_plane:
            found["kube-apiserver"] = self.control_plane.server
            found["kubeconfig"] = str(self.control_plane.kubeconfig)
        if self.kwok:
            found["kwok nodes"] = ", ".join(self.kwok.node_names)
        return found


def start(stack: ExitStack, parts: tuple[str, ...] = PARTS, workdir: Path | None = None) -> TestBed:
    """Start the named parts; `stack` stops them in reverse order when it closes."""
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown test bed parts {sorted(unknown)}; known: {', '.join(PARTS)}")
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="streamapp-testbed-"))
        stack.callback(shutil.rmtree, workdir, True)  # registered first, so it runs after every stop
    bed = TestBed(workdir)
    if "kafka" in parts:
        bed.kafka = KafkaBroker(workdir / "kafka")
        stack.callback(bed.kafka.stop)
        bed.kafka.start()
    if "schema-registry" in parts:
        bed.schema_registry = SchemaRegistry(workdir / "schema-registry")
        stack.callback(bed.schema_registry.stop)
        bed.schema_registry.start()
    if "postgres" in parts:
        bed.postgres = Postgres(workdir / "postgres")
        stack.callback(bed.postgres.stop)
        bed.postgres.start()
    if "s3" in parts:
        bed.s3 = ObjectStore(workdir / "s3")
        stack.callback(bed.s3.stop)
        bed.s3.start()
    if "prometheus" in parts:
        bed.prometheus = Prometheus(workdir / "prometheus")
        stack.callback(bed.prometheus.stop)
        bed.prometheus.start()
    if "kube" in parts or "kwok" in parts:
        bed.control_plane = ControlPlane(workdir / "kube")
        stack.callback(bed.control_plane.stop)
        bed.control_plane.start()
    if "kwok" in parts:
        bed.kwok = Kwok(bed.control_plane, workdir / "kwok")
        stack.callback(bed.kwok.stop)
        bed.kwok.start()
    return bed
