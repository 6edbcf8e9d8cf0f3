"""Fixtures of the operator's integration tests: the CRD installed once, one operator process for
namespaces named sa-*, and a fresh namespace per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamapp_testkit.operator_bed import CRD, Cluster, OperatorProcess, unique
from streamapp_testbed.waiting import wait_for


@pytest.fixture(scope="session")
def streamapp_crd(control_plane):
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    wait_for("the StreamApp CRD Established", lambda: "True" == control_plane.kubectl(
        "get", "crd/streamapps.streamapp.io", "-o", "jsonpath={.status.conditions[?(@.type=='Established')].status}",
        check=False).stdout.strip())


@pytest.fixture(scope="session")
def operator_process(control_plane, kwok, kafka, streamapp_crd, tmp_path_factory) -> Iterator[OperatorProcess]:
    process = OperatorProcess(tmp_path_factory.mktemp("operator"), "sa-*", control_plane.kubeconfig).start()
    try:
        yield process
    finally:
        process.stop()


def _namespace(control_plane, prefix: str) -> str:
    name = unique(prefix)
    control_plane.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def cluster(control_plane, operator_process, request) -> Iterator[Cluster]:
    namespace = _namespace(control_plane, "sa")
    yield Cluster(control_plane, namespace)
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(f"operator log about {namespace} ({operator_process.workdir / 'operator.log'}):\n"
              f"{operator_process.log_tail(200, namespace)}\n\nits last lines:\n{operator_process.log_tail(30)}")
        events = control_plane.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False)
        print(f"events in {namespace}:\n{events.stdout}{events.stderr}")
        apps = control_plane.kubectl("get", "streamapps", "-n", namespace, "-o", "yaml", check=False)
        print(f"apps in {namespace}:\n{apps.stdout}")
    control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
    control_plane.kubectl("delete", "pv", "-l", f"streamapp-test={namespace}", "--wait=false")


@pytest.fixture
def own_namespace(control_plane, kwok, kafka, streamapp_crd) -> Iterator[Cluster]:
    """A namespace the shared operator does not watch (for tests that run their own operator)."""
    namespace = _namespace(control_plane, "kill")
    yield Cluster(control_plane, namespace)
    control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
    control_plane.kubectl("delete", "pv", "-l", f"streamapp-test={namespace}", "--wait=false")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
