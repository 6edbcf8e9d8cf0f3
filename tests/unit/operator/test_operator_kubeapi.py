"""What the operator's request counter names each API request by."""

from __future__ import annotations

import pytest

from streamapp_operator.kubeapi import counted, path

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("method", "url", "named"), [
    ("GET", path("Pod", "ns", "app-driver"), ("GET", "pods")),
    ("GET", path("Pod", "ns"), ("LIST", "pods")),
    ("PATCH", path("StreamApp", "ns", "app", "status"), ("PATCH", "streamapps/status")),
    ("DELETE", path("RoleBinding", "ns", "app"), ("DELETE", "rolebindings")),
    ("POST", "/api/v1/namespaces/ns/events", ("POST", "events")),
    ("GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db", ("LIST", "pods")),
    ("GET", "/api/v1/nodes/n1", ("GET", "nodes")),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("GET", "leases")),
])
def test_each_request_is_counted_under_its_verb_and_resource(method, url, named):
    assert counted(method, url) == named
