"""What the operator's request counter names each API request by."""

from __future__ import annotations

import pytest

from streamapp_operator.kubeapi import path, resource

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("url", "named"), [
    (path("Pod", "ns", "app-driver"), "pods"),
    (path("Pod", "ns"), "pods"),
    (path("StreamApp", "ns", "app", "status"), "streamapps/status"),
    (path("RoleBinding", "ns", "app"), "rolebindings"),
    ("/api/v1/namespaces/ns/events", "events"),
    ("/api/v1/namespaces/ns/pods?labelSelector=a%3Db", "pods"),
    ("/api/v1/nodes/n1", "nodes"),
    ("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", "leases"),
])
def test_each_request_is_counted_under_its_resource(url, named):
    assert resource(url) == named
