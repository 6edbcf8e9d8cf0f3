"""Session-wide test bed: each part starts once, on first use, and is stopped at the end.

A part that fails to start fails the tests that need it (StartupError with the part's log); nothing
is skipped. Every fixture binds to 127.0.0.1 and the Kubernetes fixtures only ever hand out the test
bed's own kubeconfig.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from streamapp_testbed import netguard
from streamapp_testbed.kafka import KafkaBroker
from streamapp_testbed.kube import ControlPlane, assert_testbed_kubeconfig
from streamapp_testbed.kwok import Kwok
from streamapp_testkit import SHORT_LIVED_JVM_OPTIONS
from streamapp_testbed.paths import local_run_env
from streamapp_testbed.postgres import Postgres
from streamapp_testbed.prometheus import Prometheus
from streamapp_testbed.s3 import ObjectStore
from streamapp_testbed.schema_registry import SchemaRegistry


@pytest.fixture(scope="session")
def kafka(tmp_path_factory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    try:
        yield broker.start()
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory) -> Iterator[SchemaRegistry]:
    """A real schema registry (the Confluent REST API), empty at the start of the run."""
    registry = SchemaRegistry(tmp_path_factory.mktemp("schema-registry"))
    try:
        yield registry.start()
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def schema_registry_with_auth(tmp_path_factory) -> Iterator[SchemaRegistry]:
    """Another registry that asks every client for HTTP Basic credentials (`client_conf()` has them)."""
    registry = SchemaRegistry(tmp_path_factory.mktemp("schema-registry-auth"), basic_auth=True)
    try:
        yield registry.start()
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path_factory.mktemp("kube"))
    try:
        cp.start()
        assert_testbed_kubeconfig(cp.kubeconfig)
        # Anything a test starts (kubectl, the kubernetes client, the operator) sees only this one.
        previous = os.environ.get("KUBECONFIG")
        os.environ["KUBECONFIG"] = str(cp.kubeconfig)
        yield cp
    finally:
        cp.stop()
        if "previous" in locals():
            if previous is None:
                os.environ.pop("KUBECONFIG", None)
            else:
                os.environ["KUBECONFIG"] = previous


@pytest.fixture(scope="session")
def kwok(control_plane, tmp_path_factory) -> Iterator[Kwok]:
    nodes = Kwok(control_plane, tmp_path_factory.mktemp("kwok"))
    try:
        yield nodes.start()
    finally:
        nodes.stop()


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory) -> Iterator[Prometheus]:
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"))
    try:
        yield prom.start()
    finally:
        prom.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory) -> Iterator[Postgres]:
    pg = Postgres(tmp_path_factory.mktemp("postgres"))
    try:
        yield pg.start()
    finally:
        pg.stop()


@pytest.fixture(scope="session")
def object_store(tmp_path_factory) -> Iterator[ObjectStore]:
    """The test bed's S3-compatible server (SeaweedFS)."""
    store = ObjectStore(tmp_path_factory.mktemp("s3"))
    try:
        yield store.start()
    finally:
        store.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark for the session, built the way `streamapp run` builds its own (the runtime's
    defaults and session code), with test-sized memory, 2 shuffle partitions and scratch space here."""
    from streamapp_runtime.run.session import create_session, stop_session
    from streamapp_runtime.run.settings import merge_conf, spark_defaults

    workdir = tmp_path_factory.mktemp("spark")
    conf = merge_conf({
        "spark.sql.shuffle.partitions": "2",
        "spark.local.dir": str(workdir / "local"),
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={workdir}",
    }, spark_defaults("testbed", "rocksdb", {}))
    session = create_session(conf)
    try:
        yield session
    finally:
        stop_session(session)


SCRATCH = pytest.StashKey[str]()


def pytest_configure(config):
    # pytest finds the packages through pyproject's `pythonpath`; Spark's Python workers and the
    # processes tests start find them through the environment, as under the Makefile.
    folders = [str(config.rootpath / p) for p in config.getini("pythonpath")]
    given = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(given + [f for f in folders if f not in given])
    # A local run of the runtime, in this process or in a `streamapp run` a test starts, finds the
    # Kafka connector jars that `make deps` resolved (a unit-only run may have none: it needs none).
    try:
        for key, value in local_run_env().items():
            os.environ.setdefault(key, value)
    except FileNotFoundError:
        pass
    # Every Spark JVM a test starts (the session's, each `streamapp run`'s) lives for seconds to minutes
    # on small inputs: the C1 compiler alone and the serial collector spend far less CPU on them than
    # the JVM's defaults (C2 compiler threads, G1's), CPU the two lanes of `make test` share. Neither
    # changes what Spark computes; `make bench` and the images keep the JVM's defaults.
    # Delta rebuilds a table's snapshot from its log in spark.databricks.delta.snapshotPartitions tasks
    # (50 by default) at every batch that writes it: on the tests' tables of a few files those tasks
    # were most of a Delta batch. A JVM system property `spark.*` is a setting of that JVM's Spark
    # session; it changes no result either.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{SHORT_LIVED_JVM_OPTIONS} -Dspark.databricks.delta.snapshotPartitions=1")
    # Scratch space of this run, removed at its end: Spark's local dirs (a driver killed with -9
    # never removes its own, and a run used to leave ~80 of them under /tmp), helm's home, the
    # webhook's certificates, whatever a test's tempfile.mkdtemp makes.
    # tmp_path stays where pytest keeps its last three runs' folders, for a look after a failure.
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    scratch = tempfile.mkdtemp(prefix="streamapp-tests-")
    os.chmod(scratch, 0o755)  # Postgres runs as its own user and must reach its folder in here
    config.stash[SCRATCH] = scratch
    os.environ["TMPDIR"] = os.environ["SPARK_LOCAL_DIRS"] = tempfile.tempdir = scratch


def pytest_unconfigure(config):
    scratch = config.stash.get(SCRATCH, None)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)


LEVELS = {"unit", "integration", "e2e"}


def pytest_collection_modifyitems(config, items):
    """Every test says which level of the pyramid it is on, so `-m unit` really means no test bed."""
    unmarked = [item.nodeid for item in items if not LEVELS & {m.name for m in item.iter_markers()}]
    if unmarked:
        raise pytest.UsageError("tests without a unit/integration/e2e marker:\n  " + "\n  ".join(unmarked))


# --- the network guard (streamapp_testbed.netguard): no packet of a test run leaves this machine ----
GUARD = pytest.StashKey[object]()


def pytest_collection_finish(session):
    """Before any test bed part starts: the kernel guard when a selected test starts processes, the
    in-process audit hook when every selected test is a unit test."""
    starts_processes = any({"integration", "e2e"} & {m.name for m in item.iter_markers()} for item in session.items)
    run = netguard.run_id()
    if starts_processes:
        problem = netguard.KernelGuard.check_prerequisites()
        if problem:
            raise pytest.UsageError(f"{problem}; it is part of every test run that starts processes")
        session.config.stash[GUARD] = netguard.KernelGuard(run).start()
    else:
        session.config.stash[GUARD] = netguard.AuditGuard(run).start()


def pytest_sessionfinish(session, exitstatus):
    """After every fixture is torn down: the run fails if any of its processes tried to leave."""
    guard = session.config.stash.get(GUARD, None)
    if guard is None:
        return
    passed, text = netguard.report(guard.stop(), guard.run_id)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter:
        reporter.write("\n")
        reporter.write_line(text)
    else:
        print(text)
    if not passed and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
