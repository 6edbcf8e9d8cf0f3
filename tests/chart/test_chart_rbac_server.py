"""The chart's operator RBAC on the real API server: the operator's service account may do everything
the operator's code does (including creating each app's driver Role under RBAC escalation prevention)
in a watched namespace, and nothing elsewhere or cluster-wide."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from streamapp_testkit.chart_bed import by_kind, render
from streamapp_testkit.operator_rbac import EXAMPLE, needed

pytestmark = pytest.mark.integration


def _reviews(control_plane, user: str, checks: list[tuple]) -> dict[tuple, bool]:
    """SubjectAccessReviews (what `kubectl auth can-i --as` asks) for (namespace, group, resource, verb[, name])."""
    ns_of_user = user.split(":")[2]
    items = []
    for namespace, group, res, verb, *name in checks:
        resource, _, sub = res.partition("/")
        attrs = {"namespace": namespace, "group": group, "resource": resource, "verb": verb}
        if name:
            attrs["name"] = name[0]
        if sub:
            attrs["subresource"] = sub
        items.append({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                      "spec": {"user": user, "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns_of_user}",
                                                        "system:authenticated"], "resourceAttributes": attrs}})
    out = control_plane.kubectl("create", "-o", "json", "-f", "-",
                                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})).stdout
    answers, decoder, at = [], json.JSONDecoder(), 0
    while at < len(out.rstrip()):  # one JSON document per review, back to back
        answer, at = decoder.raw_decode(out, at)
        answers.append(answer)
        while at < len(out) and out[at].isspace():
            at += 1
    assert len(answers) == len(checks), out
    return {check: bool(a["status"].get("allowed")) for check, a in zip(checks, answers)}


@pytest.fixture(scope="module")
def installed_rbac(control_plane):
    suffix = uuid.uuid4().hex[:6]
    release_ns, watched, other = f"rbac-op-{suffix}", f"rbac-apps-{suffix}", f"rbac-other-{suffix}"
    for name in (release_ns, watched, other):
        control_plane.kubectl("create", "namespace", name)
    docs = render(f"watchNamespaces={{{watched}}}", namespace=release_ns)
    rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    control_plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}))
    account = by_kind(docs, "ServiceAccount")[0]["metadata"]["name"]
    yield f"system:serviceaccount:{release_ns}:{account}", watched, other
    control_plane.kubectl("delete", "namespace", release_ns, watched, other, "--wait=false")
    for cluster_wide in by_kind(docs, "ClusterRole") + by_kind(docs, "ClusterRoleBinding"):
        control_plane.kubectl("delete", cluster_wide["kind"].lower(), cluster_wide["metadata"]["name"], "--wait=false",
                              check=False)


def test_the_operator_account_may_do_what_the_operator_does_in_watched_namespaces(control_plane, installed_rbac):
    user, watched, other = installed_rbac
    webhook = {n for n in needed() if n[1] == "validatingwebhookconfigurations"}  # cluster-scoped, one object
    need = sorted(needed() - webhook)
    configuration = by_kind(render(), "ValidatingWebhookConfiguration")[0]["metadata"]["name"]  # the release's
    allowed = _reviews(control_plane, user, [(watched, *n) for n in need] +
                       [("", *n, configuration) for n in sorted(webhook)])
    assert all(allowed.values()), [k for k, v in allowed.items() if not v]
    elsewhere = _reviews(control_plane, user, [(other, *n) for n in need] + [("", *n) for n in need] +
                         [("", *n, "someone-elses-webhook") for n in sorted(webhook)])
    assert not any(elsewhere.values()), [k for k, v in elsewhere.items() if v]


def test_the_operator_account_holds_nothing_more(control_plane, installed_rbac):
    user, watched, _ = installed_rbac
    denied = [(watched, "", "secrets", "list"), (watched, "", "secrets", "watch"), (watched, "", "secrets", "patch"),
              (watched, "", "secrets", "delete"), (watched, "", "configmaps", "delete"),
              (watched, "", "persistentvolumeclaims", "delete"), (watched, "networking.k8s.io", "networkpolicies", "delete"),
              (watched, "rbac.authorization.k8s.io", "roles", "escalate"),
              (watched, "rbac.authorization.k8s.io", "roles", "bind"),
              (watched, "rbac.authorization.k8s.io", "rolebindings", "delete"),
              (watched, "", "pods/exec", "create"), (watched, "apps", "deployments", "create"),
              ("", "", "namespaces", "list"), ("", "", "nodes", "list"),
              ("", "rbac.authorization.k8s.io", "clusterroles", "create"),
              ("", "apiextensions.k8s.io", "customresourcedefinitions", "create")]
    answers = _reviews(control_plane, user, denied)
    assert not any(answers.values()), [k for k, v in answers.items() if v]


def test_the_operator_account_creates_and_patches_an_apps_objects_itself(control_plane, installed_rbac):
    """As the account (impersonated), create what the operator renders for an app (with its
    NetworkPolicy and its Spark key), the driver's Role and RoleBinding included: the API server's
    escalation check passes only when the operator holds every verb of that Role."""
    from streamapp_api import load
    from streamapp_operator.act.apply import with_key
    from streamapp_operator.render import Launch, NetworkPolicies, render_all

    user, watched, _ = installed_rbac
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"]["namespace"] = watched
    objects = [with_key(o) for o in render_all(load(document), str(uuid.uuid4()), Launch(2), NetworkPolicies())]
    for obj in objects:  # no owner here: keep the garbage collector away from them during the test
        obj["metadata"].pop("ownerReferences", None)
    as_operator = (f"--as={user}",)
    for obj in objects:
        control_plane.kubectl("create", *as_operator, "-f", "-", input=json.dumps(obj))
    for obj in objects:
        if obj["kind"] not in ("Pod", "Secret"):  # the Spark key's Secret is create-only
            control_plane.kubectl("-n", watched, "patch", *as_operator, obj["kind"].lower(), obj["metadata"]["name"],
                                  "--type=merge", "-p", '{"metadata":{"labels":{"chart-test":"patched"}}}')
    pod = next(o for o in objects if o["kind"] == "Pod")
    control_plane.kubectl("-n", watched, "delete", *as_operator, "pod", pod["metadata"]["name"], "--wait=false")


def test_the_operator_replicas_share_their_lease_and_webhook_ca_in_the_release_namespace_only(control_plane, installed_rbac):
    from streamapp_testkit.operator_rbac import REPLICAS

    user, watched, other = installed_rbac
    release_ns = user.split(":")[2]
    fullname = by_kind(render(), "Deployment")[0]["metadata"]["name"]
    own = {"leases": fullname, "secrets": f"{fullname}-webhook-ca"}
    shared = [(release_ns, g, r, v, own[r]) for g, r, v in sorted(REPLICAS) if v != "create"] + \
             [(release_ns, g, r, "create") for g, r, v in sorted(REPLICAS) if v == "create"] + \
             [(release_ns, "", "secrets", "get", own["secrets"]), (release_ns, "", "secrets", "create")]
    allowed = _reviews(control_plane, user, shared)
    assert all(allowed.values()), [k for k, v in allowed.items() if not v]
    elsewhere = _reviews(control_plane, user, [
        (release_ns, "coordination.k8s.io", "leases", "update", "another-controllers-lease"),
        (release_ns, "coordination.k8s.io", "leases", "delete", fullname),
        (release_ns, "", "secrets", "get", "another-secret"), (release_ns, "", "secrets", "list"),
        (other, "coordination.k8s.io", "leases", "create"), (watched, "coordination.k8s.io", "leases", "update", fullname)])
    assert not any(elsewhere.values()), [k for k, v in elsewhere.items() if v]
