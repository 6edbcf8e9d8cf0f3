"""Execute one Plan against the API server, in an order that is safe to interrupt anywhere.

Deletions of the driver are recorded in status first (so an interrupted restart is not mistaken
for a failure); creations are recorded after they happen. The driver pod is created last, after
every child it needs, and only ever with create-if-absent: its fixed name is the fence.
"""

from __future__ import annotations

import base64
import logging
import secrets
from dataclasses import dataclass, field
from functools import partial

from .. import names
from ..decide.children import key
from ..decide.world import Observed, Plan
from ..kubeapi import Conflict, Kube, NotFound
from ..report.status import write_status

log = logging.getLogger(__name__)


SPARK_AUTH_KEY_BYTES = 32


def with_key(obj: dict) -> dict:
    """The object to create: the app's Spark authentication Secret (rendered without its key, so that
    renderings stay deterministic) gets a fresh random key; anything else is created as rendered.
    Created only if absent and never patched (decide/children.py), the key is never rotated under a
    running driver."""
    if obj["kind"] != "Secret" or obj["metadata"]["labels"].get(names.LABEL_COMPONENT) != "spark-auth":
        return obj
    key = base64.b64encode(secrets.token_bytes(SPARK_AUTH_KEY_BYTES)).decode()
    return {**obj, "data": {names.SPARK_AUTH_KEY: key}}


@dataclass
class Acted:
    done: list[str] = field(default_factory=list)  # a short log of what was done (for events and tests)
    written: dict[str, dict] | None = None  # "Kind/name" -> each child as created or patched; None: one was there already
    driver_pod: dict | None = None  # the driver pod as created
    stale: bool = False  # a create found its object there: what was read is old


def execute(kube: Kube, obs: Observed, plan: Plan) -> Acted:
    """Apply the plan."""
    acted = Acted()
    done = acted.done
    if plan.status_first and write_status(kube, obs, plan.status):
        done.append("status")
    # The children do not depend on one another: created and patched at once, all before the driver.
    creates = [partial(lambda obj: kube.create(with_key(obj)), obj) for obj in plan.create]
    patches = [partial(lambda patch: kube.patch(patch), patch) for patch in plan.patch]
    results = kube.gather(creates + patches)
    done += [f"created {obj['kind']}/{obj['metadata']['name']}" for obj, made in zip(plan.create, results) if made]
    done += [f"patched {patch['kind']}/{patch['metadata']['name']}" for patch in plan.patch]
    acted.stale = not all(results)
    if not acted.stale:
        acted.written = {key(obj): result for obj, result in zip((*plan.create, *plan.patch), results)}
    pod_name = names.driver_pod(obs.name)
    if plan.driver == "create" and plan.driver_pod is not None:
        if acted.stale:  # the driver could start on a ConfigMap the decision never saw: decide again first
            log.info("a child of %s/%s was not as read: the driver waits for a fresh read", obs.namespace, obs.name)
        else:
            acted.driver_pod = kube.create(plan.driver_pod)
            if acted.driver_pod is not None:
                done.append(f"created Pod/{pod_name}")
            else:
                acted.stale = True
                log.info("driver pod %s/%s already exists: left as it is", obs.namespace, pod_name)
    elif plan.driver_patch is not None and not acted.stale:
        # the uid in the patch is a precondition: a successor of the pod read is not patched
        try:
            kube.patch(plan.driver_patch)
            done.append(f"patched Pod/{pod_name}")
        except (Conflict, NotFound):
            acted.stale = True
            log.info("driver pod %s/%s is not the one read: not patched", obs.namespace, pod_name)
    elif plan.driver in ("delete", "delete_now"):
        grace = 0 if plan.driver == "delete_now" else None  # None: the pod's own grace period (SIGTERM first)
        if kube.delete("Pod", obs.namespace, pod_name, grace_seconds=grace, uid=obs.driver.uid):
            done.append(f"deleted Pod/{pod_name}")
    # A stale plan's status would describe a world that is not there; the fresh read writes it.
    if not plan.status_first and not acted.stale and write_status(kube, obs, plan.status):
        done.append("status")
    return acted
