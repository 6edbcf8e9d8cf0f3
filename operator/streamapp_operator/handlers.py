"""kopf handlers: thin triggers for the one reconcile.

create/resume/update of a StreamApp and events of labelled driver pods all call ``Reconciler.run``,
which serialises work per app, runs the blocking reconcile in a thread, and schedules the next look:
when the plan asks (a restart backoff, a debounce window), else after the resync interval (the
periodic timer that folds partitions and progress into status).
"""

from __future__ import annotations

import asyncio
import logging
import os

import kopf

from streamapp_api import GROUP, PLURAL, VERSION

from . import names
from .decide.world import Memory, Settings
from .kubeapi import ApiError, Kube
from .reconcile import reconcile
from .report import metrics

log = logging.getLogger(__name__)
RESYNC_SECONDS = float(os.environ.get("STREAMAPP_OPERATOR_RESYNC", "30"))
ERROR_RETRY = 10.0


class Reconciler:
    def __init__(self, settings: Settings, resync: float = RESYNC_SECONDS):
        self.settings, self.resync = settings, resync
        self.kube: Kube | None = None
        self.locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.memory: dict[tuple[str, str], Memory] = {}
        self.timers: dict[tuple[str, str], asyncio.TimerHandle] = {}

    async def run(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        lock = self.locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self.kube is None:
                self.kube = Kube()
            try:
                outcome = await asyncio.to_thread(reconcile, self.kube, namespace, name, self.settings,
                                                  self.memory.get(key, Memory()))
            except Exception:
                self.requeue(namespace, name, min(self.resync, ERROR_RETRY))  # never lose the periodic look
                raise
        if outcome.plan is None:
            self.forget(namespace, name)
            return
        self.memory[key] = outcome.plan.memory
        # The periodic resync is this requeue too: a kopf timer would put a finalizer on every app,
        # and deleting an app must never wait for the operator.
        delay = self.resync if outcome.plan.requeue is None else min(outcome.plan.requeue.total_seconds(), self.resync)
        self.requeue(namespace, name, delay)

    def forget(self, namespace: str, name: str) -> None:
        self.memory.pop((namespace, name), None)
        timer = self.timers.pop((namespace, name), None)
        if timer is not None:
            timer.cancel()

    def requeue(self, namespace: str, name: str, delay: float) -> None:
        key = (namespace, name)
        loop = asyncio.get_running_loop()
        previous = self.timers.get(key)
        if previous is not None and previous.when() <= loop.time() + delay:
            return  # an earlier look is already scheduled
        if previous is not None:
            previous.cancel()
        self.timers[key] = loop.call_later(max(delay, 0.1), lambda: asyncio.ensure_future(self._later(namespace, name)))

    async def _later(self, namespace: str, name: str) -> None:
        self.timers.pop((namespace, name), None)
        try:
            await self.run(namespace, name)
        except Exception as exc:  # noqa: BLE001 - the timer will look again
            log.warning("requeued reconcile of %s/%s failed: %s", namespace, name, exc)


RECONCILER = Reconciler(Settings(default_image=names.DEFAULT_RUNTIME_IMAGE))


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=f"{names.GROUP_PREFIX}")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=f"{names.GROUP_PREFIX}", key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def reconcile_app(namespace: str, name: str, **_) -> None:
    try:
        await RECONCILER.run(namespace, name)
    except ApiError as exc:
        raise kopf.TemporaryError(f"API: {exc}", delay=5) from exc


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)  # optional: no finalizer, deletion is never blocked
async def forget_app(namespace: str, name: str, **_) -> None:
    RECONCILER.forget(namespace, name)
    metrics.forget(namespace, name)


@kopf.on.event("", "v1", "pods", labels={names.LABEL_COMPONENT: "driver", names.LABEL_APP: kopf.PRESENT})
async def driver_pod_event(namespace: str, labels: dict, **_) -> None:
    await RECONCILER.run(namespace, labels[names.LABEL_APP])
