"""kopf handlers: thin triggers for the one reconcile.

create/resume/update of a StreamApp, a timer, and events of labelled driver pods all call
``Reconciler.run``, which serialises work per app, runs the blocking reconcile in a thread, and
schedules the next look when the plan asks for one (a restart backoff, a debounce window).
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

log = logging.getLogger(__name__)
RESYNC_SECONDS = float(os.environ.get("STREAMAPP_OPERATOR_RESYNC", "30"))


class Reconciler:
    def __init__(self, settings: Settings):
        self.settings = settings
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
            outcome = await asyncio.to_thread(reconcile, self.kube, namespace, name, self.settings,
                                              self.memory.get(key, Memory()))
        if outcome.plan is None:
            self.memory.pop(key, None)
            return
        self.memory[key] = outcome.plan.memory
        if outcome.plan.requeue is not None:
            self.requeue(namespace, name, outcome.plan.requeue.total_seconds())

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


@kopf.timer(GROUP, VERSION, PLURAL, interval=RESYNC_SECONDS, initial_delay=RESYNC_SECONDS)
async def resync(namespace: str, name: str, **_) -> None:
    await RECONCILER.run(namespace, name)


@kopf.on.event("", "v1", "pods", labels={names.LABEL_COMPONENT: "driver", names.LABEL_APP: kopf.PRESENT})
async def driver_pod_event(namespace: str, labels: dict, **_) -> None:
    await RECONCILER.run(namespace, labels[names.LABEL_APP])
