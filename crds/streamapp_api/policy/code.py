"""User code (python steps, spec.udfs, spec.userCode): whether the admin lets an app's author run it. Module
names are put in one form before they are compared: dotted ASCII identifiers, as Python imports them
(the API's pattern keeps Unicode out, whose NFKC folding gives one module several spellings). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fnmatch import fnmatchcase

from ..base import MODULE_PATTERN
from ..errors import Issue, shown
from ..spec import StreamApp
from .model import UserCodePolicy

_MODULE = re.compile(MODULE_PATTERN)


def canonical_module(name: str) -> str | None:
    """``name`` as Python imports it, or None when it is no dotted name of identifiers. A policy entry
    may end in '.*' (the same as without it: a module allows those under it)."""
    name = name.strip().removesuffix(".*")
    return name if _MODULE.fullmatch(name) else None


def module_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``allowed`` or under one (by whole dotted parts: 'acme' allows
    'acme.enrich', never 'acmeevil')."""
    canonical = canonical_module(module)
    if canonical is None:
        return False
    for entry in allowed:
        if entry.strip() == "*":
            return True
        prefix = canonical_module(entry)
        if prefix is not None and (canonical == prefix or canonical.startswith(prefix + ".")):
            return True
    return False


def user_code_issues(app: StreamApp, policy: UserCodePolicy) -> Iterator[Issue]:
    """Every python step, udf and user-code ConfigMap the policy does not allow, each at its field."""
    namespace = app.metadata.namespace or "default"
    allowed_here = any(fnmatchcase(namespace, pattern) for pattern in policy.namespaces)
    why_not = (f"user code is refused in namespace {namespace!r}: it runs arbitrary code in the driver and the "
               "executors with the app's service account and Secrets (operator policy 'userCode.namespaces': "
               f"{', '.join(policy.namespaces) or 'none'})")
    config_maps = app.spec.user_code.config_maps if app.spec.user_code is not None else []
    for k, name in enumerate(config_maps):
        where = f"spec.userCode.configMaps[{k}]"
        if not allowed_here:
            yield Issue(where, why_not)
        elif not any(fnmatchcase(name, pattern) for pattern in policy.config_maps):
            yield Issue(where, f"ConfigMap {shown(name)} is not allowed to hold user code on this cluster (operator "
                        f"policy 'userCode.configMaps': {', '.join(policy.config_maps) or 'none'})")
    for k, udf in enumerate(app.spec.udfs or []):
        if not allowed_here:
            yield Issue(f"spec.udfs[{k}]", why_not)
        elif not module_allowed(udf.module, policy.modules):
            yield Issue(f"spec.udfs[{k}].module", f"module {shown(udf.module)} is not allowed on this cluster "
                        f"(operator policy 'userCode.modules': {', '.join(policy.modules) or 'none'})")
    for i, stream in enumerate(app.spec.streams):
        for j, step in enumerate(stream.steps):
            if step.python is None:
                continue
            where = f"spec.streams[{i}].steps[{j}].python"
            if not allowed_here:
                yield Issue(where, why_not)
            elif not module_allowed(step.python.module, policy.modules):
                yield Issue(f"{where}.module", f"module {shown(step.python.module)} is not allowed on this cluster "
                            f"(operator policy 'userCode.modules': {', '.join(policy.modules) or 'none'})")
