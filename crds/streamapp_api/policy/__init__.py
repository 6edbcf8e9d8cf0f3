"""What an app may run on a shared cluster: the operator-level policy (the chart's ``policy`` values).

The API's own checks say whether a StreamApp makes sense; the policy says whether this cluster lets its
author run it. ``streamapp validate``, the admission webhook and every reconcile apply the same policy;
without a policy file they apply ``Policy()``, the choice for a cluster whose StreamApp authors are not
its admins (docs/security.md). Allow, don't deny, and canonicalise first: each key and reference is
put in the form its consumer reads (kafka.py, spark.py, places.py, images.py, pods.py, code.py) before it is
judged. Pure functions over the models.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..checkpoint import S3, Checkpoint, CheckpointDefault
from ..contract import DEFAULT_REFUSED_FUNCTIONS
from ..errors import Issue, shown
from ..expressions import expression_sites, functions_in
from ..sinks import is_relative_table_path
from ..spec import StreamApp
from . import kafka, places
from .code import user_code_issues
from .images import image_allowed, parse_image
from .model import DEFAULT_IMAGES, Policy
from .pods import placement_policy_issues
from .spark import SAFE_SPARK_CONF, spark_conf_issues

__all__ = ["DEFAULT_IMAGES", "DEFAULT_REFUSED_FUNCTIONS", "SAFE_SPARK_CONF", "Policy", "check_policy",
           "image_allowed", "kafka_secret_issues"]


def _check_image(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    image = app.spec.image
    if image is None:
        return
    try:
        ref = parse_image(image)
    except ValueError as exc:
        if "*" not in policy.images:
            yield Issue("spec.image", f"image {shown(image)} is not an image reference ({exc}); write it as "
                        "registry/repository:tag, e.g. docker.io/streamapp/runtime:1")
        return
    if not image_allowed(image, policy.images):
        allowed = ", ".join(policy.images) or "(none: only the operator's runtime image)"
        yield Issue("spec.image", f"image {shown(image)} ({ref}) is not allowed on this cluster; images must start "
                    f"with one of: {allowed} (operator policy 'images'); leave spec.image out to run the operator's "
                    "runtime image")
    elif not ref.qualified and "*" not in policy.images:
        yield Issue("spec.image", f"image {shown(image)} names no registry; write it fully qualified, as the "
                    f"container runtime reads it: {str(ref)!r}")


def _check_kafka(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    yield from kafka.option_issues(app.spec.kafka.options or {}, policy.kafka_options.allow)
    for i, sink in enumerate(app.spec.sinks):
        for kind, target in sink.targets():
            topic = target.topic_written()
            if topic is not None and kafka.internal_topic(topic):
                yield kafka.topic_issue(f"spec.sinks[{i}].{kind}.topic", topic, "sink topic")
    letter = app.spec.dead_letter
    if letter.enabled and letter.topic is not None and kafka.internal_topic(letter.topic):
        yield kafka.topic_issue("spec.deadLetter.topic", letter.topic, "dead-letter topic")


def _check_state(app: StreamApp, policy: Policy, default: CheckpointDefault | None) -> Iterator[Issue]:
    """The author's checkpoint location and S3 endpoint (the operator's default, an admin's, is not judged)."""
    checkpoint = app.spec.state.checkpoint
    if checkpoint.location is None:
        return
    namespace, name = app.metadata.namespace or "default", app.metadata.name
    if default is not None and _is_default(checkpoint, default.for_app(namespace, name)):
        return
    refusal = places.location_refusal(checkpoint.location, namespace, name, policy.checkpoints.locations)
    if refusal is not None:
        yield Issue("spec.state.checkpoint.location", refusal)
    if checkpoint.s3 is not None and checkpoint.s3.endpoint is not None:
        refusal = places.endpoint_refusal(checkpoint.s3.endpoint, policy.endpoints.allow)
        if refusal is not None:
            yield Issue("spec.state.checkpoint.s3.endpoint", refusal)


def _check_tables(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    """Where parquet and delta sinks write: an s3a:// path must lie under the admin's table locations. A
    relative path is under the app's own storage, which the API's pattern keeps it inside."""
    namespace, name = app.metadata.namespace or "default", app.metadata.name
    for i, sink in enumerate(app.spec.sinks):
        for kind, target in sink.targets():
            path = target.table_path()
            if path is not None and not is_relative_table_path(path):
                refusal = places.table_refusal(path, namespace, name, policy.tables.locations)
                if refusal is not None:
                    yield Issue(f"spec.sinks[{i}].{kind}.path", refusal)


def _is_default(checkpoint: Checkpoint, default: dict[str, Any]) -> bool:
    s3 = S3.model_validate(default["s3"]) if default.get("s3") else None
    return checkpoint.location == default["location"] and checkpoint.s3 == s3


def _check_pods(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    yield from placement_policy_issues(app.spec.driver, "spec.driver", policy.pods)
    yield from placement_policy_issues(app.spec.executor, "spec.executor", policy.pods)


def _check_functions(app: StreamApp, policy: Policy) -> Iterator[Issue]:
    refused = {f.lower() for f in policy.functions.refuse}
    if not refused:
        return
    for path, text in expression_sites(app):  # what does not parse has no functions (the API's checks say why)
        for name in sorted(functions_in(text) & refused):
            yield Issue(path, f"function {name}() is refused on this cluster: it calls arbitrary Java methods "
                        "(operator policy 'functions.refuse')" if "reflect" in name or "java" in name else
                        f"function {name}() is refused on this cluster (operator policy 'functions.refuse')")


def check_policy(app: StreamApp, policy: Policy | None = None,
                 checkpoint: CheckpointDefault | None = None) -> list[Issue]:
    """Every way ``app`` breaks ``policy`` (default: ``Policy()``), each naming the field. ``checkpoint``:
    the operator's default location, which is the admin's and not judged as an author's."""
    policy = policy or Policy()
    return [*_check_image(app, policy), *spark_conf_issues(app.spec.spark_conf or {}, policy.spark_conf.allow),
            *_check_kafka(app, policy), *_check_state(app, policy, checkpoint), *_check_tables(app, policy), *_check_pods(app, policy),
            *_check_functions(app, policy), *user_code_issues(app, policy.user_code)]


def kafka_secret_issues(app: StreamApp, data: dict[str, str], policy: Policy | None = None) -> list[Issue]:
    """What the Secret spec.kafka.secretRef names (its keys and decoded values) breaks: the operator
    asks before a driver starts; each issue names spec.kafka.secretRef and the Secret's key."""
    ref = app.spec.kafka.secret_ref
    if ref is None:
        return []
    return kafka.secret_issues(ref.name, data, (policy or Policy()).kafka_options.allow)
