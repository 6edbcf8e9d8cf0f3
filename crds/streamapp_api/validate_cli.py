"""``streamapp validate FILE...``: check manifests; print findings as FILE:LINE: severity: path: message.

Sources and tables read through a schema registry have their declared columns checked against the
subjects' latest schemas when the registry answers from here (registry_check.py; ``--offline`` skips it).

Exit status: 0 all valid, 1 some manifest invalid (or, with --strict, has warnings), 2 usage or I/O error.
Multi-document files are supported; documents of other kinds (a Secret next to the app) are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from .document import parse
from .errors import InvalidSpec, Issue
from .limits import MAX_DEPTH, MAX_NODES, MAX_TEXT_BYTES, bracket_depth
from .policy import Policy
from .registry_check import RegistryAccess, registry_issues
from .spec import GROUP, KIND

# HTTP Basic credentials ('user:password') for the schema registry, when it asks for them.
REGISTRY_USER_INFO_ENV = "STREAMAPP_SCHEMA_REGISTRY_USER_INFO"

_PART = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[([^\]]*)\]")


def path_parts(path: str) -> list[str | int]:
    """'spec.streams[0].schema[a.b]' -> ['spec', 'streams', 0, 'schema', 'a.b']."""
    parts: list[str | int] = []
    for name, bracket in _PART.findall(path):
        if name:
            parts.append(name)
        elif bracket.isdigit():
            parts.append(int(bracket))
        else:
            parts.append(bracket)
    return parts


def locate(node: yaml.Node | None, path: str) -> int | None:
    """The 1-based line of the deepest YAML node along ``path`` (None without a node)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in path_parts(path):
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


@dataclass
class Report:
    file: str
    document: int
    name: str | None
    issues: list[tuple[Issue, int | None]] = field(default_factory=list)
    skipped: str | None = None

    @property
    def errors(self) -> int:
        return sum(1 for issue, _ in self.issues if issue.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for issue, _ in self.issues if issue.severity == "warning")


def _is_other_kind(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    api_version = str(doc.get("apiVersion", ""))
    if api_version and not api_version.startswith(f"{GROUP}/") and doc.get("kind") != KIND:
        return f"{doc.get('kind', '?')} ({api_version})"
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def expanded_size(root: yaml.Node, limit: int = MAX_NODES) -> int:
    """How many values ``root`` holds with every alias expanded, counted on the node graph (an alias
    is a shared node: memoised, so a billion laughs costs one visit per node); more than ``limit``
    (also for an alias that refers to itself) returns ``limit + 1``."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        if finished:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(limit + 1, 1 + sum(sizes[id(child)] for child in _children(node)))
            continue
        if id(node) in sizes:
            continue
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                return limit + 1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def load_documents(text: str) -> tuple[list[tuple[Any, yaml.Node]], Issue | None]:
    """(document, node) of every YAML document in ``text``, or the Issue that stops reading it: too
    large, not YAML, nested deeper than the reader goes, or aliases that expand beyond the bounds."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_TEXT_BYTES:
        return [], Issue("(file)", f"is {size} bytes long; a manifest file may hold at most {MAX_TEXT_BYTES}")
    if bracket_depth(text, "[{", "]}") > MAX_DEPTH:  # the YAML reader recurses per level: stop before it
        return [], Issue("(yaml)", f"nests mappings or lists deeper than can be read (more than {MAX_DEPTH} levels)")
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        for node in nodes:
            if node is not None and expanded_size(node) > MAX_NODES:
                return [], Issue("(yaml)", f"holds more than {MAX_NODES} values once its aliases (*name) are "
                                 "expanded, or an alias that refers to itself")
        return [(None if node is None else yaml.SafeLoader("").construct_document(node), node) for node in nodes], None
    except RecursionError:
        return [], Issue("(yaml)", "nests mappings or lists deeper than can be read")


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint in the words of the mistake behind it, with the column where it was noticed."""
    problem = str(getattr(exc, "problem", None) or exc)
    mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    column = f" (column {mark.column + 1})" if mark is not None else ""
    if problem.startswith("expected <block end>"):
        since = f" the block that starts on line {context.line + 1}" if context is not None else " the lines around it"
        return (f"this line is indented differently from{since}{column}: give keys of one mapping, and items "
                "of one list, the same indentation, with spaces")
    if problem.startswith("mapping values are not allowed"):
        return (f"a ': ' where none may stand{column}: a value holding ': ' needs quotes, and a nested mapping "
                "starts on a line of its own, indented")
    if "'\\t'" in problem or "\t" in problem:
        return f"a tab{column}: YAML indents with spaces only"
    return problem


def check_text(text: str, file: str, policy: Policy | None = None,
               registry: RegistryAccess | None = None) -> list[Report]:
    """Reports for every document of one YAML text, under ``policy`` (default: ``Policy()``); with
    ``registry``, an app without errors also has its registry-read columns checked against the registry."""
    policy = policy if policy is not None else Policy()
    try:
        loaded, problem = load_documents(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        return [Report(file, 0, None, [(Issue("(yaml)", f"not valid YAML: {yaml_problem(exc)}"), line)])]
    if problem is not None:
        return [Report(file, 0, None, [(problem, 1)])]
    docs = [doc for doc, _ in loaded]
    nodes = [node for _, node in loaded]
    reports = []
    for index, (doc, node) in enumerate(zip(docs, nodes)):
        if doc is None:
            continue
        name = doc.get("metadata", {}).get("name") if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) else None
        other = _is_other_kind(doc)
        if other:
            reports.append(Report(file, index, name, skipped=other))
            continue
        app, issues = parse(doc, policy)
        if registry is not None and app is not None and not any(i.severity == "error" for i in issues):
            issues = [*issues, *registry_issues(app, registry)]
        reports.append(Report(file, index, name, [(issue, locate(node, issue.path)) for issue in issues]))
    if not any(r.skipped is None for r in reports):
        reports.append(Report(file, 0, None, [(Issue("(file)", f"no {KIND} manifest found"), None)]))
    return reports


def check_file(file: str, policy: Policy | None = None, registry: RegistryAccess | None = None) -> list[Report]:
    if file == "-":
        return check_text(sys.stdin.read(), "<stdin>", policy, registry)
    with open(file, encoding="utf-8") as handle:
        return check_text(handle.read(), file, policy, registry)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML manifests ('-' for stdin)")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    parser.add_argument("--policy", metavar="FILE", help="the cluster's policy (YAML: the chart's `policy` values; "
                        "what apps may run: images, sparkConf, functions, Kafka options); default: the safe defaults "
                        "of docs/security.md")
    parser.add_argument("--schema-registry", metavar="URL",
                        help="the schema registry's address from here, when spec.kafka.schemaRegistry.url is one "
                        "only the cluster resolves; HTTP Basic credentials from $" + REGISTRY_USER_INFO_ENV +
                        " ('user:password')")
    parser.add_argument("--offline", action="store_true",
                        help="do not check the columns of Avro sources and tables against the schema registry")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only findings, not valid manifests")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")


def _text(report: Report, quiet: bool) -> list[str]:
    what = f"{KIND} {report.name}" if report.name else f"document {report.document + 1}"
    if report.skipped:
        return [] if quiet else [f"{report.file}: skipped {report.skipped}"]
    lines = []
    for issue, line in report.issues:
        where = f"{report.file}:{line}" if line else report.file
        lines.append(f"{where}: {issue.severity}: {issue.path}: {issue.message}")
    if not quiet or report.errors:
        verdict = "invalid" if report.errors else "valid"
        extra = f" ({report.errors} error(s), {report.warnings} warning(s))" if report.issues else ""
        lines.append(f"{report.file}: {what}: {verdict}{extra}")
    return lines


def run(args: argparse.Namespace) -> int:
    reports: list[Report] = []
    try:
        policy = Policy.from_file(args.policy) if args.policy else None
    except OSError as exc:
        print(f"streamapp validate: cannot read {args.policy}: {exc.strerror}", file=sys.stderr)
        return 2
    except InvalidSpec as exc:
        print(f"streamapp validate: --policy {args.policy}: {exc}", file=sys.stderr)
        return 2
    registry = None if args.offline else RegistryAccess(args.schema_registry, os.environ.get(REGISTRY_USER_INFO_ENV))
    for file in args.files:
        try:
            reports.extend(check_file(file, policy, registry))
        except OSError as exc:
            print(f"streamapp validate: cannot read {file}: {exc.strerror}", file=sys.stderr)
            return 2
    if args.output == "json":
        print(json.dumps([
            {"file": r.file, "document": r.document, "name": r.name, "skipped": r.skipped,
             "issues": [{"path": i.path, "message": i.message, "severity": i.severity, "line": line}
                        for i, line in r.issues]}
            for r in reports], indent=2))
    else:
        for report in reports:
            for line in _text(report, args.quiet):
                print(line)
    failed = any(r.errors or (args.strict and r.warnings) for r in reports)
    return 1 if failed else 0
