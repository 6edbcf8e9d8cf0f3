"""Spark decides what Spark runs: the driver's own check for refused SQL functions, before any query
starts (docs/security.md).

Admission reads every expression with sqlglot; Spark runs it after reading it with its own parser.
Where the two differ (Spark nests block comments, reads hints, escapes and raw strings its own way,
substitutes ${...}), a call the admission check did not see could run. So the driver checks again:

1. each expression site (``expression_sites``) as Spark's parser reads it: an unresolved call of a
   refused function names the field;
2. each query's analysed plan, by expression class (the classes Spark's function registry builds for
   the refused names, and reflection's always): whatever the text said, this is what would run.

Pure: the reading of Spark (``calls_of``, ``class_of``, ``classes_of``) is passed in
(spark_compat's functions on a real session, dicts in the unit tests). Fail closed: a plan that
cannot be walked refuses the app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from streamapp_api import contract

# Reflection's expression class: reflect() and java_method() build it, try_reflect() analyses into it.
CALL_METHOD_VIA_REFLECTION = "org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection"
REFLECTION_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
WHY_PARSER = "Spark's parser reads a call the admission check did not see"
WHY_PLAN = "the query's analysed plan calls it, whatever its text said"


@dataclass(frozen=True)
class Refusal:
    where: str  # a field path (spec.streams[0].steps[1].filter), or "query <name>" for a plan
    function: str | None  # the refused function's name, lower-case; None: the plan could not be checked
    why: str

    def __str__(self) -> str:
        if self.function is None:
            return f"{self.where}: {self.why}"
        return f"{self.where}: function {self.function}() is refused on this cluster ({self.why})"


class AppRefused(Exception):
    """The app calls a refused function: it must not start (the same spec is refused every time)."""

    def __init__(self, refusals: Iterable[Refusal]):
        self.refusals = tuple(refusals)
        super().__init__("; ".join(str(r) for r in self.refusals))


def refused_classes(functions: frozenset[str], class_of: Callable[[str], str | None]) -> dict[str, str]:
    """Expression class -> the refused function it implements, for each refused name Spark's registry
    knows, and reflection's class whenever a reflection function is refused."""
    classes: dict[str, str] = {}
    for name in sorted(functions, key=lambda n: (n != "reflect", n)):  # reflection's class is named reflect()
        found = class_of(name)
        if found:
            classes.setdefault(found, name)
    reflection = sorted(functions & REFLECTION_FUNCTIONS, key=lambda n: (n != "reflect", n))
    if reflection:
        classes.setdefault(CALL_METHOD_VIA_REFLECTION, reflection[0])
    return classes


def site_refusals(sites: Iterable[tuple[str, str]], functions: frozenset[str],
                  calls_of: Callable[[str, bool], Iterable[tuple[str, ...]]]) -> list[Refusal]:
    """The expression sites (field path, text) whose text, as Spark's parser reads it (``calls_of(text,
    is_a_statement)``: name parts of each call), calls a refused function; a name part of any case
    counts (``system.builtin.REFLECT``). A text that does not parse is left to the compiler."""
    found = []
    for path, text in sites:
        try:
            calls = calls_of(text, path.endswith(".sql"))
        except Exception:  # noqa: BLE001 - it does not parse: compiling it fails and says why
            continue
        names = {part.lower() for parts in calls for part in parts}
        found.extend(Refusal(path, name, WHY_PARSER) for name in sorted(names & functions))
    return found


def plan_refusals(query: str, classes: Iterable[str], refused: Mapping[str, str]) -> list[Refusal]:
    """The refused expression classes in one query's plan (``classes``: every node's JVM class)."""
    return [Refusal(f"query {query}", refused[c], WHY_PLAN) for c in sorted(set(classes) & set(refused))]


def check_sites(sites: Iterable[tuple[str, str]], conf: Mapping[str, str],
                calls_of: Callable[[str, bool], Iterable[tuple[str, ...]]]) -> None:
    """Raise AppRefused when Spark's parser reads a refused call in an expression site."""
    functions = contract.parse_refused_functions(conf.get(contract.REFUSED_FUNCTIONS_CONF))
    if functions:
        refusals = site_refusals(sites, functions, calls_of)
        if refusals:
            raise AppRefused(refusals)


def check_plans(frames: Mapping[str, object], conf: Mapping[str, str], class_of: Callable[[str], str | None],
                classes_of: Callable[[object], Iterable[str]]) -> None:
    """Raise AppRefused when a query's plan (``frames``: query name -> DataFrame; ``classes_of`` its
    plan's classes) holds a refused expression class. A plan that cannot be walked refuses the app."""
    functions = contract.parse_refused_functions(conf.get(contract.REFUSED_FUNCTIONS_CONF))
    if not functions:
        return
    refused = refused_classes(functions, class_of)
    refusals = []
    for query, df in frames.items():
        try:
            classes = classes_of(df)
        except Exception as exc:  # noqa: BLE001 - fail closed: what cannot be checked does not run
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise AppRefused([Refusal(f"query {query}", None, "refused: its plan could not be checked for refused "
                                      f"functions ({said})")]) from exc
        refusals.extend(plan_refusals(query, classes, refused))
    if refusals:
        raise AppRefused(refusals)
