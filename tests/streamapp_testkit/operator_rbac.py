"""What the operator does through the API server, derived from its code, as (apiGroup, resource, verb).

There is no list the operator module exposes, so this reads the code: every ``kube.<verb>(...)`` call
in operator/streamapp_operator (the kind from a literal, or from what the operator renders when the
call passes a whole object), kopf's own needs for the handlers it is given, and the driver Role's
rules (RBAC escalation prevention: only someone holding every verb of a Role may create it).
A call of a shape this module does not know fails the test that uses it, so it is never missed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from streamapp_testbed.paths import REPO_DIR

OPERATOR_DIR = REPO_DIR / "operator" / "streamapp_operator"
EXAMPLE = REPO_DIR / "examples" / "click-sessions.yaml"
VERBS = {"get", "list", "create", "patch", "delete", "request"}
# kopf, for the handlers in handlers.py: it lists and watches StreamApps and driver pods, patches its
# progress annotations onto StreamApps, and posts events (settings.posting).
KOPF = {("streamapp.io", "streamapps", v) for v in ("list", "watch", "patch")} | \
       {("", "pods", v) for v in ("list", "watch")} | {("", "events", "create")}


# The operator replicas, in the release's namespace only: the leader election Lease (leader.py, through
# the kubernetes client's elector rather than kube.*).
REPLICAS = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}


def resource(kind: str, subresource: str | None = None) -> tuple[str, str]:
    from streamapp_operator import kubeapi

    api_version = kubeapi.API_VERSIONS.get(kind, "v1")
    group = api_version.split("/")[0] if "/" in api_version else ""
    plural = kubeapi.PLURALS[kind]
    return group, f"{plural}/{subresource}" if subresource else plural


def _rendered_kinds() -> tuple[set[str], set[str]]:
    """(kinds the operator creates, kinds it converges with patches), from rendering an example."""
    import yaml

    from streamapp_api import load
    from streamapp_operator.render import Launch, NetworkPolicies, SparkUI, UIIngress, render_all, render_children

    app = load(yaml.safe_load(EXAMPLE.read_text()))
    network = NetworkPolicies()  # with --network-policies (the chart's default), so with the NetworkPolicy
    ui = SparkUI(ingress=UIIngress(host="{name}.example.com"))  # and with the Spark UI's Ingress (granted either way)
    created = {o["kind"] for o in render_all(app, "uid-1", Launch(2), network, ui)}
    # The pod is never patched; nor is the Spark authentication Secret (create-only: decide/children.py).
    patched = {o["kind"] for o in render_children(app, "uid-1", Launch(2), network, ui)} - {"Secret"}
    return created, patched


def calls() -> list[tuple[str, int, str, ast.Call]]:
    """Every ``<something>kube.<verb>(...)`` call in the operator: (file, line, verb, node)."""
    out = []
    for path in sorted(OPERATOR_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in VERBS:
                target = node.func.value
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "kube":
                    out.append((str(Path(path).relative_to(REPO_DIR)), node.lineno, node.func.attr, node))
    return out


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _kinds_passed(where: str, node: ast.Call) -> set[str]:
    """The kinds a ``kube.<verb>(kind, ...)`` call receives when ``kind`` is a parameter of the function
    it is in: the literals every call of that function in the same file passes for that parameter."""
    name = node.args[0].id if node.args and isinstance(node.args[0], ast.Name) else None
    tree = ast.parse((REPO_DIR / where).read_text(), where)
    enclosing = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                 and f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
    params = [a.arg for a in enclosing[-1].args.args] if enclosing and name else []
    if name not in params:
        return set()
    at, function = params.index(name), enclosing[-1].name
    passed = {_literal(c.args[at]) for c in ast.walk(tree) if isinstance(c, ast.Call)
              and getattr(c.func, "id", None) == function and len(c.args) > at}
    return set() if None in passed else passed


def operator_calls() -> set[tuple[str, str, str]]:
    from streamapp_operator.observe.kube import child_kinds

    created, patched = _rendered_kinds()
    needs: set[tuple[str, str, str]] = set()
    for where, line, verb, node in calls():
        kind = _literal(node.args[0]) if node.args else None
        if verb in ("get", "list", "delete") and kind:
            needs.add((*resource(kind), verb))
        elif verb in ("get", "list", "delete") and _kinds_passed(where, node):
            needs |= {(*resource(k), verb) for k in _kinds_passed(where, node)}
        elif verb == "get" and where.endswith("observe/kube.py"):  # kube.get(kind, ...) over child_kinds()
            needs |= {(*resource(k), "get") for k, _ in child_kinds(network=True, ingress=True)}
        elif verb == "create":
            needs |= {(*resource(k), "create") for k in created}
        elif verb == "patch" and any(k.arg == "subresource" for k in node.keywords):
            needs.add((*resource("StreamApp", "status"), "patch"))
        elif verb == "patch":
            needs |= {(*resource(k), "patch") for k in patched}
        elif verb == "request" and kind == "POST" and isinstance(node.args[1], ast.JoinedStr) \
                and _literal(node.args[1].values[-1]) == "/events":
            needs.add(("", "events", "create"))
        elif verb == "request" and kind in ("GET", "PATCH") and where.endswith("/webhook.py"):
            # the operator's CA into its ValidatingWebhookConfiguration (webhook.inject_ca_bundle)
            needs.add(("admissionregistration.k8s.io", "validatingwebhookconfigurations", kind.lower()))
        else:
            raise AssertionError(f"{where}:{line}: kube.{verb}(...) of a shape tests/streamapp_testkit/operator_rbac.py "
                                 "does not know: teach it which permission this call needs")
    return needs


def driver_rules() -> set[tuple[str, str, str]]:
    from streamapp_operator.render import DRIVER_RULES

    return {(g, r, v) for rule in DRIVER_RULES for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def needed() -> set[tuple[str, str, str]]:
    return operator_calls() | KOPF | driver_rules()


def granted(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            for v in rule.get("verbs", [])}
