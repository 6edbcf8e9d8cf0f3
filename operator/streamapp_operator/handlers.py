"""kopf handlers: thin triggers for the one reconcile.

create/resume/update of a StreamApp and events of labelled driver pods all go to ``RECONCILER``
(scheduler.py), which serialises and coalesces work per app, runs the blocking reconcile on its
threads and schedules the next look.
"""

from __future__ import annotations

import copy
import logging

import kopf

from streamapp_api import GROUP, PLURAL, VERSION

from . import names
from .decide.world import Settings
from .kubeapi import ApiError
from .report import metrics
from .scheduler import Reconciler

RECONCILER = Reconciler(Settings(default_image=names.DEFAULT_RUNTIME_IMAGE))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=f"{names.GROUP_PREFIX}")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=f"{names.GROUP_PREFIX}", key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60
    # Only driver pods come over the watch (the API server filters): executors and every other pod
    # of a watched namespace never reach the operator.
    settings.watching.label_selectors["", "v1", "pods"] = f"{names.LABEL_COMPONENT}=driver,{names.LABEL_APP}"


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def reconcile_app(namespace: str, name: str, **_) -> None:
    try:
        await RECONCILER.run(namespace, name)
    except ApiError as exc:
        raise kopf.TemporaryError(f"API: {exc}", delay=5) from exc


@kopf.on.create(GROUP, VERSION, PLURAL)
async def reconcile_new_app(namespace: str, name: str, body: kopf.Body, **_) -> None:
    # An app without status has never been reconciled: its body from the event is enough to start.
    created = copy.deepcopy(dict(body)) if not body.get("status") else None
    try:
        await RECONCILER.run(namespace, name, created)
    except ApiError as exc:
        raise kopf.TemporaryError(f"API: {exc}", delay=5) from exc


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)  # optional: no finalizer, deletion is never blocked
async def forget_app(namespace: str, name: str, **_) -> None:
    RECONCILER.forget(namespace, name)
    metrics.forget(namespace, name)


@kopf.on.event("", "v1", "pods", labels={names.LABEL_COMPONENT: "driver", names.LABEL_APP: kopf.PRESENT})
async def driver_pod_event(namespace: str, labels: dict, event: dict, **_) -> None:
    await RECONCILER.driver_event(namespace, labels[names.LABEL_APP], event.get("type"), event["object"])
