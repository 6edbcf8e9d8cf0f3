"""The operator's layers import in one direction only: pure code never reaches adapters or kopf."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
PACKAGE = Path(__file__).resolve().parents[3] / "operator" / "streamapp_operator"
PURE = ("names", "render", "decide")
ADAPTERS = ("kubeapi", "observe", "act", "report")
FORBIDDEN_IN_PURE = {"kopf", "kubernetes", "confluent_kafka", "urllib", "prometheus_client", "socket", "pyspark",
                     "streamapp_operator.kubeapi", "streamapp_operator.observe", "streamapp_operator.act",
                     "streamapp_operator.report", "streamapp_operator.reconcile", "streamapp_operator.handlers"}


def _module(path: Path) -> str:
    return ".".join(("streamapp_operator", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    package = _module(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            else:
                found.add(node.module)
    return found


def _layer_files(*layers):
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if top in layers:
            yield path


def _violations(paths, forbidden):
    return [(str(p.relative_to(PACKAGE)), m) for p in paths for m in _imports(p)
            if any(m == f or m.startswith(f + ".") for f in forbidden)]


def test_pure_layers_import_no_adapter_no_io_and_no_kopf():
    assert list(_layer_files(*PURE)), "no pure modules found"
    assert _violations(_layer_files(*PURE), FORBIDDEN_IN_PURE) == []


def test_only_handlers_and_the_entry_point_import_kopf():
    everything = [p for p in PACKAGE.rglob("*.py") if p.name not in ("handlers.py", "__main__.py")]
    assert _violations(everything, {"kopf"}) == []


def test_adapters_never_import_the_orchestration():
    assert _violations(_layer_files(*ADAPTERS), {"streamapp_operator.reconcile", "streamapp_operator.handlers"}) == []


def test_the_checker_sees_a_violation():
    bad = PACKAGE / "decide" / "plan.py"
    assert "streamapp_operator.render" in _imports(bad)  # relative imports resolve to full names


def test_import_linter_contracts_hold():
    import os
    import subprocess
    import sys

    config = PACKAGE.parent / ".importlinter"
    linter = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(PACKAGE.parents[1] / p) for p in ("crds", "operator"))}
    result = subprocess.run([str(linter), "--config", str(config), "--no-cache"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout
