"""No module of ours imports itself back, in any package, the bench and the demo included. An import
inside a function, or under `if TYPE_CHECKING:`, counts as much as one at the top: both say which
module knows which, and a cycle hidden in a function is still one module that cannot be read (or
moved) without the other. A cycle is fixed by moving what both need into a lower module.

The same holds one level up: within a package, its subpackages and modules import one another in one
direction (`run` may import `sinks`, or `sinks` `run`, not both), else the layers a contract names
cannot be drawn. The import graph is grimp's (the library import-linter reads it with); the cycles
are its strongly connected components of more than one node."""

from __future__ import annotations

import grimp
import pytest

pytestmark = pytest.mark.unit
ROOT_PACKAGES = ("streamapp_api", "streamapp_operator", "streamapp_runtime", "streamapp_testbed", "streamapp_bench",
                 "streamapp_demo")


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(imports):
        if start in index:
            continue
        work = [(start, iter(sorted(imports.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, successors = work[-1]
            for imported in successors:
                if imported not in index:
                    index[imported] = low[imported] = len(index)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append((imported, iter(sorted(imports.get(imported, ())))))
                    break
                if imported in on_stack:
                    low[module] = min(low[module], index[imported])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles_and_only_those():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    parts = siblings({"p.a.x": {"p.b", "q"}, "p.b": {"p.a.y"}, "p.a.y": {"p.a.x"}, "q": {"p.b"}}, "p")
    assert parts == {"p.a": {"p.b"}, "p.b": {"p.a"}}


def siblings(imports: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The import graph among the direct children of `package`: a module deeper down stands for the
    child (subpackage) it sits in."""
    def child(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1:].split(".")[0]

    graph: dict[str, set[str]] = {}
    for module, imported in imports.items():
        if (importer := child(module)) is not None:
            graph.setdefault(importer, set()).update(c for c in map(child, imported) if c not in (None, importer))
    return graph


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    graph = grimp.build_graph(*ROOT_PACKAGES, cache_dir=None)
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def test_no_module_cycle(imports):
    found = cycles(imports)
    assert not found, "import cycles (each line: modules that import each other, directly or not):\n" + "\n".join(
        " ⇄ ".join(component) for component in found)


def test_no_cycle_between_the_parts_of_a_package(imports):
    packages = sorted({module.rsplit(".", 1)[0] for module in imports if "." in module} | set(ROOT_PACKAGES))
    found = [component for package in packages for component in cycles(siblings(imports, package))]
    assert not found, "parts of a package that import each other (each line, directly or not):\n" + "\n".join(
        " ⇄ ".join(component) for component in found)
