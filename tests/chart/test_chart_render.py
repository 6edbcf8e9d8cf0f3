"""helm lint and helm template of the chart (the pinned helm binary), and what the rendered objects say."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from streamapp_testkit.chart_bed import ALL_ON, CHART, MONITORING_KINDS, NAMESPACE, PYTHONPATH, by_kind, dashboard, helm, one, render
from streamapp_testkit.operator_rbac import REPLICAS, granted, needed

pytestmark = pytest.mark.integration
# Granted beyond what the code calls, on purpose: reading the status the operator patches, and
# update on finalizers, which owner references with blockOwnerDeletion need where the
# OwnerReferencesPermissionEnforcement admission plugin is on.
JUSTIFIED = {("streamapp.io", "streamapps/status", "get"), ("streamapp.io", "streamapps/finalizers", "update")}


@pytest.mark.parametrize("sets", [(), ("rbac.clusterWide=true",), ALL_ON, ("rbac.clusterWide=true", *ALL_ON)],
                         ids=["default", "cluster-wide", "monitoring", "cluster-wide-monitoring"])
def test_helm_lint(sets):
    argv = ["lint", "--strict", str(CHART), "--namespace", NAMESPACE]
    for item in sets:
        argv += ["--set", item]
    result = helm(*argv)
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout, result.stdout


def test_default_render_is_namespaced():
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "ConfigMap", "CustomResourceDefinition",
                     "Deployment", "PodDisruptionBudget", "Role", "Role", "RoleBinding", "RoleBinding", "Service",
                     "Service", "ServiceAccount", "ValidatingWebhookConfiguration"], kinds
    webhook_role = one(docs, "ClusterRole", "-webhook")  # the only cluster-wide grant: its own configuration
    assert webhook_role["rules"] == [{"apiGroups": ["admissionregistration.k8s.io"],
                                      "resources": ["validatingwebhookconfigurations"],
                                      "resourceNames": [one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"]],
                                      "verbs": ["get", "patch"]}]
    role, binding = one(docs, "Role"), one(docs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NAMESPACE
    sa = one(docs, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert one(docs, "CustomResourceDefinition")["metadata"]["name"] == "streamapps.streamapp.io"


def test_rbac_is_exactly_what_the_operator_needs():
    need = needed()
    for sets in [(), ("rbac.clusterWide=true",)]:
        docs = render(*sets)
        rules = [r for kind in ("Role", "ClusterRole") for d in by_kind(docs, kind) for r in d["rules"]]
        have = granted(rules)
        assert not need - have, f"{sets}: the operator's code needs {sorted(need - have)}"
        extra = have - need - JUSTIFIED - REPLICAS
        assert not extra, f"{sets}: granted but never used: {sorted(extra)}"
        assert all(verb != "*" and res != "*" for _, res, verb in have)
        assert not {r for _, r, _ in have} & {"nodes", "namespaces"}
        # get by name only (never list or watch); create: each app's Spark authentication Secret
        assert {v for _, r, v in have if r == "secrets"} == {"get", "create"}


def test_watch_namespaces_get_a_role_each_and_a_flag_each():
    docs = render("watchNamespaces={apps-a,apps-b}")
    roles = [r for r in by_kind(docs, "Role") if not r["metadata"]["name"].endswith("-replicas")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["apps-a", "apps-b"]
    for binding in by_kind(docs, "RoleBinding"):
        assert binding["subjects"][0]["namespace"] == NAMESPACE  # the operator's account lives in the release's
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=apps-a", "--namespace=apps-b"]
    assert [d["metadata"]["name"] for d in by_kind(docs, "ClusterRole")] == ["streamapp-operator-webhook"]


@pytest.mark.parametrize(("release", "sets", "fullname"), [
    ("streamapp-operator", (), "streamapp-operator"),  # the README's, the test bed's and the demo's: not doubled
    ("prod-streamapp-operator", (), "prod-streamapp-operator"),  # a release name holding the chart's
    ("streamapp", (), "streamapp-streamapp-operator"),  # any other release name: prefixed to the chart's
    ("streamapp", ("nameOverride=ops",), "streamapp-ops"),
    ("streamapp", ("fullnameOverride=stream-ops",), "stream-ops"),
])
def test_object_names_follow_helms_fullname_convention(release, sets, fullname):
    argv = ["template", release, str(CHART), "--namespace", NAMESPACE]
    for item in (*ALL_ON, *sets):
        argv += ["--set", item]
    docs = [d for d in yaml.safe_load_all(helm(*argv).stdout) if d]
    deployment = one(docs, "Deployment")
    assert deployment["metadata"]["name"] == fullname
    assert one(docs, "ServiceAccount")["metadata"]["name"] == fullname
    assert one(docs, "PrometheusRule")["metadata"]["name"] == fullname
    assert one(docs, "ClusterRole", "-webhook")["metadata"]["name"] == f"{fullname}-webhook"
    # every object of the release carries the name once, never the chart's name twice
    for doc in docs:
        if doc["kind"] != "CustomResourceDefinition":
            name = doc["metadata"]["name"]
            assert name.startswith(fullname) and "streamapp-operator-streamapp-operator" not in name, name
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--webhook-service={fullname}-webhook.{NAMESPACE}" in args
    # the Services' environment variables (STREAMAPP_OPERATOR_METRICS_PORT=tcp://... under the
    # release streamapp-operator) would collide with the operator's own settings
    assert deployment["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_cluster_wide_option():
    docs = render("rbac.clusterWide=true", *ALL_ON)
    # only the replicas' Lease and CA Secret, in the release's namespace
    assert [r["metadata"]["name"] for r in by_kind(docs, "Role") + by_kind(docs, "RoleBinding")] == \
        ["streamapp-operator-replicas"] * 2
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--namespace")]
    assert one(docs, "PodMonitor")["spec"]["namespaceSelector"] == {"any": True}


def test_deployment_probes_security_and_flags():
    deployment = one(render(), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert f"--liveness=http://0.0.0.0:{ports['health']}/healthz" in container["args"]
    assert f"--metrics-port={ports['metrics']}" in container["args"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    # Ready (an endpoint of the webhook Service) once the webhook listens, not when kopf is up
    assert container["readinessProbe"]["tcpSocket"] == {"port": "webhook"} and "webhook" in ports
    without = one(render("webhook.enabled=false"), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert without["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert "command" not in container  # the image's entrypoint (tini) stays PID 1


def test_every_flag_the_chart_passes_is_one_the_operator_accepts():
    container = one(render("operator.verbose=true"), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    flags = {a.split("=")[0] for a in container["args"] if a.startswith("--")}
    usage = subprocess.run([sys.executable, "-m", "streamapp_operator", "--help"], capture_output=True, text=True,
                           env={"PYTHONPATH": PYTHONPATH}, timeout=60, check=True).stdout
    accepted = set(re.findall(r"--[a-z][a-z-]*", usage))
    assert flags and flags <= accepted, f"the operator does not accept {sorted(flags - accepted)}"


def test_metrics_service_and_monitors_select_what_they_scrape():
    from streamapp_operator import names

    docs = render(*ALL_ON)
    service, deployment = one(docs, "Service"), one(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    monitor = one(docs, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True  # keep the apps' own namespace label
    podmonitor = one(docs, "PodMonitor")
    assert podmonitor["spec"]["selector"]["matchLabels"].items() <= names.labels("app", "driver").items()
    assert podmonitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert podmonitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert {d["kind"] for d in render()} & MONITORING_KINDS == set()


def test_driver_pods_expose_the_port_the_podmonitor_scrapes():
    import yaml

    from streamapp_api import load
    from streamapp_operator.render import Launch, render_driver_pod
    from streamapp_testkit.operator_rbac import EXAMPLE

    pod = render_driver_pod(load(yaml.safe_load(EXAMPLE.read_text())), "uid-1", Launch(1), "hash")
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert "metrics" in ports


def test_dashboard_configmap_carries_the_dashboard_file():
    config_map = one(render(), "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["streamapp.json"]) == dashboard()


@pytest.mark.parametrize("bad", ["rbac.clusterWide=maybe", "watchNamespaces={sa-*}", "metrics.port=0",
                                 "prometheusRule.restartLoopWindow=soon", "unknownKey=1", "image.registry=https://r.example"])
def test_values_schema_refuses(bad):
    result = helm("template", "x", str(CHART), "--set", bad, check=False)
    assert result.returncode != 0 and "schema" in result.stderr.lower(), (bad, result.stderr)


def test_admission_webhook_reaches_the_operator_for_the_watched_namespaces_only():
    docs = render("watchNamespaces={apps-a,apps-b}")
    (config,) = by_kind(docs, "ValidatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    service = one(docs, "Service", "-webhook")
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert hook["clientConfig"]["service"] == {"name": service["metadata"]["name"], "namespace": NAMESPACE,
                                               "path": "/validate-streamapp", "port": 443}
    assert service["spec"]["ports"][0]["targetPort"] == "webhook" and f"--webhook-port={ports['webhook']}" in container["args"]
    assert f"--webhook-configuration={config['metadata']['name']}" in container["args"]
    assert f"--webhook-service={service['metadata']['name']}.{NAMESPACE}" in container["args"]
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["apps-a", "apps-b"]}]
    assert hook["rules"][0]["operations"] == ["CREATE", "UPDATE"] and hook["rules"][0]["resources"] == ["streamapps"]
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None" and hook["timeoutSeconds"] <= 10
    assert "namespaceSelector" not in one(render("rbac.clusterWide=true"), "ValidatingWebhookConfiguration")["webhooks"][0]


def test_cert_manager_option_replaces_the_operators_own_ca():
    docs = render("webhook.certManager.enabled=true")
    config = one(docs, "ValidatingWebhookConfiguration")
    certificate = one(docs, "Certificate", "-webhook")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"
    assert not [d for d in by_kind(docs, "ClusterRole") if d["metadata"]["name"].endswith("-webhook")]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert "--webhook-cert-dir=/etc/streamapp/webhook-tls" in pod["containers"][0]["args"]
    assert not [a for a in pod["containers"][0]["args"] if a.startswith("--webhook-configuration")]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "webhook-tls"]
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert not by_kind(render("webhook.enabled=false"), "ValidatingWebhookConfiguration")


def test_policy_values_become_the_operators_policy_file():
    from streamapp_api import Policy

    docs = render("policy.sparkConf.allow={spark.kubernetes.node.selector.*}")
    text = one(docs, "ConfigMap", "-policy")["data"]["policy.yaml"]
    policy = Policy.from_mapping(yaml.safe_load(text))
    assert policy.images == ("streamapp/runtime",)  # runtimeImage's repository, tag cut off
    assert policy.spark_conf.allow == ("spark.kubernetes.node.selector.*",)
    assert "reflect" in policy.functions.refuse
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert "--policy=/etc/streamapp/policy/policy.yaml" in pod["containers"][0]["args"]
    assert {"name": "policy", "configMap": {"name": one(docs, "ConfigMap", "-policy")["metadata"]["name"]}} in pod["volumes"]


def test_the_charts_policy_defaults_are_the_operators():
    """A policy file from the chart's defaults loosens nothing that Policy() (no file) refuses."""
    from streamapp_api import Policy

    policy = Policy.from_mapping(yaml.safe_load(one(render(), "ConfigMap", "-policy")["data"]["policy.yaml"]))
    assert policy.model_dump(exclude={"images"}) == Policy().model_dump(exclude={"images"})
    docs = render("policy.endpoints.allow={127.0.0.1}", "policy.pods.tolerations.everyTaint=true")
    policy = Policy.from_mapping(yaml.safe_load(one(docs, "ConfigMap", "-policy")["data"]["policy.yaml"]))
    assert policy.endpoints.allow == ("127.0.0.1",) and policy.pods.tolerations.every_taint
    assert policy.pods.tolerations.refuse == Policy().pods.tolerations.refuse


@pytest.mark.parametrize("registry", ["registry.example.com/team", "127.0.0.1:5000/", "r.example:443"])
def test_image_registry_prefixes_the_operator_image_the_runtime_image_and_the_policy(registry):
    """Where `make push REGISTRY=...` put both images (docs/install.md, step 1)."""
    from streamapp_api.version import __version__

    prefix = registry.rstrip("/")
    docs = render(f"image.registry={registry}")
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{prefix}/streamapp/operator:{__version__}"
    assert f"--runtime-image={prefix}/streamapp/runtime:{__version__}" in container["args"]
    policy = yaml.safe_load(one(docs, "ConfigMap", "-policy")["data"]["policy.yaml"])
    assert policy["images"] == [f"{prefix}/streamapp/runtime"]
    # A runtimeImage given whole wins; the operator's own tag still follows image.tag.
    docs = render(f"image.registry={registry}", "runtimeImage=other.example/rt:7", "image.tag=dev")
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{prefix}/streamapp/operator:dev"
    assert "--runtime-image=other.example/rt:7" in container["args"]


def test_without_a_registry_the_images_are_the_ones_make_images_tags():
    from streamapp_api.version import __version__

    container = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"streamapp/operator:{__version__}"
    assert f"--runtime-image=streamapp/runtime:{__version__}" in container["args"]
    # the tag `make images` printed names both images: a new one rolls the operator on `helm upgrade`
    tagged = one(render("image.tag=0.2.0-0123456789ab"), "Deployment")["spec"]["template"]
    assert tagged["spec"]["containers"][0]["image"] == "streamapp/operator:0.2.0-0123456789ab"
    assert "--runtime-image=streamapp/runtime:0.2.0-0123456789ab" in tagged["spec"]["containers"][0]["args"]
    assert tagged != one(render(), "Deployment")["spec"]["template"]


def test_replicas_elect_a_leader_share_the_webhook_ca_and_spread_over_nodes():
    docs = render()
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    args, env = pod["containers"][0]["args"], pod["containers"][0]["env"]
    fullname = deployment["metadata"]["name"]
    assert f"--leader-election={NAMESPACE}/{fullname}" in args
    assert f"--webhook-ca-secret={NAMESPACE}/{fullname}-webhook-ca" in args
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in env
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    budget = one(docs, "PodDisruptionBudget")
    assert budget["spec"] == {"maxUnavailable": 1, "selector": deployment["spec"]["selector"]}
    role = one(docs, "Role", "-replicas")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert granted(role["rules"]) == REPLICAS | {("", "secrets", "get"), ("", "secrets", "create")}
    assert {n for r in role["rules"] for n in r.get("resourceNames", [])} == {fullname, f"{fullname}-webhook-ca"}

    single = render("operator.replicas=1", "webhook.certManager.enabled=true", "affinity.nodeAffinity.x=y")
    assert not by_kind(single, "PodDisruptionBudget")  # a budget of one pod would block every drain
    assert one(single, "Deployment")["spec"]["template"]["spec"]["affinity"] == {"nodeAffinity": {"x": "y"}}
    assert granted(one(single, "Role", "-replicas")["rules"]) == REPLICAS  # cert-manager's certificate: no CA Secret
    assert not [a for a in one(single, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
                if a.startswith("--webhook-ca-secret")]
