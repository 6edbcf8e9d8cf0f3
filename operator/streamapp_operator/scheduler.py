"""When reconciles run: one at a time per app, coalesced, on a pool of threads, the next look scheduled
after each; driver metrics read in the background, never inside a reconcile.

- **Serialised and coalesced**: at most one reconcile of an app runs and at most one waits. A trigger
  that finds one waiting is dropped: the waiting one reads everything afresh once it starts.
- **The one retry**: a reconcile that fails (the API server, Kafka, a bug) is logged and looked at
  again after ``ERROR_RETRY`` seconds (at most a resync), whatever triggered it. It is never raised to
  kopf, whose own retries of a handler would be a second, unserialised path.
- **Driver events that change nothing** are dropped: a pod event whose driver observation (state,
  readiness, exit code, annotations, IP, uid) equals what the last reconcile saw gives the decision
  nothing new. Deletions always count.
- **The next look**: when the plan asks (restart backoff, debounce window, a terminating pod, Kafka
  down), else after the resync interval. The resync is this requeue rather than a kopf timer, because
  kopf timers put a finalizer on every app and deleting an app must never wait for the operator. A
  moment the plan names as due (the end of a change's health window, minutes on) gets a full look, and
  the resyncs before it may stay cheap. A reconcile stands for every look asked for before it began:
  the next look is what its own plan asks, not an earlier plan's (a backoff long over would otherwise
  still bring a full look).
- **The periodic look is cheap**: it reads the app's partition counts (from the per-cluster cache, no
  API request) and reconciles only when they differ from what the last reconcile saw; changes of the
  app and its driver pod come as watch events anyway. A full reconcile still comes at least every
  ``FULL_EVERY`` resyncs, and after any error or requeue the plan asked for.
- **Children read afresh every ``CHILDREN_EVERY`` resyncs**: reconciles within that time of a full
  read use the children as that read saw them, or as the operator then wrote them (the API server's
  answer to each create and patch, kept compressed) instead of asking again. Children change only through the
  operator, or by hand: a child deleted or edited by hand is put back within ``CHILDREN_EVERY`` resyncs. The app and its driver pod
  are always read afresh, and everything is after the operator starts or when a create met a child
  that was already there.
- **The driver pod as created** is what the next driver event is compared with: its first events
  (added, scheduled) tell the decision nothing new.
- **Driver metrics** are read after a reconcile that saw a running driver, at most every half resync;
  a changed reading asks for a reconcile, which folds it into status.
- **App events that change nothing the user wrote** are dropped: the operator's own status writes come
  back as events, and only a change of the spec, labels, annotations or deletion asks for a reconcile.
- **Only the leader acts** (leader.py): a replica that does not lead only keeps the apps it hears of;
  once it leads it reconciles each of them afresh.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import random
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from .decide.world import Driver, Kafka, Memory, Settings
from .kubeapi import FAN_OUT, ApiError, Kube, load_config
from .observe.blockers import ClaimEvents, NamespaceExecutors
from .observe.kafka import PartitionCache
from .observe.kafka import Probe as PartitionProbe
from .observe.kube import driver as observe_driver
from .observe.metrics import ProgressCache
from .reconcile import Caches, reconcile
from .report import metrics

log = logging.getLogger(__name__)
RESYNC_SECONDS = 30.0  # the default of --resync (__main__)
# Reconciles at once. They mostly wait on the API server: a thousand apps resyncing every 30 s keep
# several busy on a loaded server (bench/README.md, "Control plane"), and new apps and failures come
# on top.
WORKERS = int(os.environ.get("STREAMAPP_OPERATOR_WORKERS", "48"))
ERROR_RETRY = 10.0
CHILDREN_EVERY = 9.5  # resyncs: children left as they were are read afresh this often
FULL_EVERY = CHILDREN_EVERY - 1  # resyncs: the cheap periodic look reconciles at least this often,
# so that the full reconcile which reads the children afresh comes before their cache is too old
JITTER = 0.1  # the periodic look comes up to this share of the resync early, so that apps created
# together do not resync together

Key = tuple[str, str]


@dataclass(slots=True, eq=False)
class _App:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: bool = False  # a reconcile is waiting for the lock
    memory: Memory = field(default_factory=Memory)
    timer: asyncio.TimerHandle | None = None
    driver: Driver | None = None  # as the last reconcile saw it
    known: bytes | None = None  # children as last read or written, packed (None: read them all next time)
    known_at: float = 0.0
    probe: PartitionProbe | None = None  # how to read the app's partition counts again
    kafka: Kafka | None = None  # what the last reconcile saw of them
    periodic: bool = False  # the timer set is the plain periodic look
    due: float | None = None  # loop time of the full look the plan named as due (Plan.due)
    essence: tuple | None = None  # what the user wrote of the app, as its last event had it


def pack(children: dict | None) -> bytes | None:
    """The children a reconcile saw, as compressed JSON: a dozen small objects and the ConfigMap's text
    take several times less memory so, kept for every app between its reconciles."""
    return None if children is None else zlib.compress(json.dumps(children, separators=(",", ":")).encode(), 1)


def unpack(packed: bytes | None) -> dict | None:
    return None if packed is None else json.loads(zlib.decompress(packed))


def essence(body: dict) -> tuple:
    """What of an app only its author changes: its spec (by its generation), labels, annotations and
    deletion. Status is the operator's own."""
    meta = body.get("metadata") or {}
    return (meta.get("generation"), tuple(sorted((meta.get("labels") or {}).items())),
            tuple(sorted((meta.get("annotations") or {}).items())), meta.get("deletionTimestamp"))


class Reconciler:
    def __init__(self, settings: Settings, resync: float = RESYNC_SECONDS, workers: int = WORKERS,
                 leading: bool = True):
        self.settings, self.resync, self.workers = settings, resync, workers
        self.leading = leading  # False until leader election makes this replica the one that acts
        self.kube: Kube | None = None
        self.caches: Caches | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.apps: dict[Key, _App] = {}
        self._reads: set[asyncio.Task] = set()

    def _start(self) -> None:
        if self.kube is None:
            self.kube = Kube(load_config(pool_size=self.workers + FAN_OUT), on_request=metrics.api_request)
            self.caches = Caches(PartitionCache(max_age=self.resync), ProgressCache(), ClaimEvents(), NamespaceExecutors())
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="reconcile")

    async def app_event(self, namespace: str, name: str, event_type: str | None, body: dict) -> None:
        """A watch event of an app (``None``: kopf's listing at start)."""
        if event_type == "DELETED":
            self.forget(namespace, name)
            return
        app, now = self.apps.get((namespace, name)), essence(body)
        if app is not None and app.essence == now:
            return  # its status or a re-listing: nothing the decision was not told of
        created = None
        if app is None:  # the first this operator hears of it: without status, never reconciled
            app = self.apps[(namespace, name)] = _App()
            created = copy.deepcopy(body) if not body.get("status") else None
        app.essence = now
        await self.run(namespace, name, created)

    def lead(self) -> None:
        """This replica leads from now on: every app it knows is reconciled afresh."""
        self.leading = True
        log.warning("leading: reconciling %d apps", len(self.apps))
        for namespace, name in list(self.apps):
            self.requeue(namespace, name, 0)

    async def run(self, namespace: str, name: str, created: dict | None = None) -> None:
        """``created``: the body of a create event of an app without status (see ``reconcile``), given
        only by the first event of an app."""
        key = (namespace, name)
        app = self.apps.get(key)
        if app is None:
            app = self.apps[key] = _App()
        if not self.leading:
            return  # known, for when this replica leads
        if app.waiting:
            return  # coalesced into the reconcile that is waiting
        app.waiting = True
        try:
            await app.lock.acquire()
        finally:
            app.waiting = False
        try:
            if app.timer is not None:  # this reconcile reads afresh: it stands for every look asked for before it
                app.timer.cancel()
                app.timer = None
            self._start()
            loop = asyncio.get_running_loop()
            began = loop.time()
            known = unpack(app.known) if app.known is not None and began - app.known_at < self.resync * CHILDREN_EVERY \
                else None
            call = partial(reconcile, self.kube, namespace, name, self.settings, app.memory, caches=self.caches,
                           known=known, created=created)
            outcome = await loop.run_in_executor(self.pool, call)
        except Exception as exc:  # noqa: BLE001 - the one retry: look again (never lose the periodic look)
            retry = min(self.resync, ERROR_RETRY)
            log.warning("reconcile of %s/%s failed, again in %.0f s: %s", namespace, name, retry, exc,
                        exc_info=not isinstance(exc, ApiError))  # a bug's traceback; the API server's answer says enough
            self.requeue(namespace, name, retry)
            return
        finally:
            app.lock.release()
        if outcome.plan is None:
            self.forget(namespace, name)
            return
        app.memory, app.driver = outcome.plan.memory, outcome.driver
        app.probe, app.kafka = outcome.probe, outcome.kafka
        app.known = pack(outcome.children)
        if known is None:  # read afresh by this reconcile: the next full read is due CHILDREN_EVERY resyncs on
            app.known_at = began
        self._read_metrics(key, outcome.driver)
        asked, due = outcome.plan.requeue, outcome.plan.due
        app.due = None if due is None else loop.time() + due.total_seconds()
        if outcome.reread:
            self.requeue(namespace, name, 0)
        elif asked is not None:
            self.requeue(namespace, name, min(asked.total_seconds(), self._periodic()))
            if app.due is not None:
                self.requeue(namespace, name, app.due - loop.time())  # the earlier of the two stands
        else:
            self._next_periodic(namespace, name, app)

    def _periodic(self) -> float:
        return self.resync * (1 - JITTER * random.random())

    def _next_periodic(self, namespace: str, name: str, app: _App) -> None:
        """The periodic look, or the full look the plan named as due if that comes first."""
        delay, now = self._periodic(), asyncio.get_running_loop().time()
        if app.due is not None and app.due - now <= delay:
            self.requeue(namespace, name, app.due - now)
        else:
            self.requeue(namespace, name, delay, periodic=True)

    async def driver_event(self, namespace: str, name: str, event_type: str | None, pod: dict) -> None:
        app = self.apps.get((namespace, name))
        if event_type != "DELETED" and app is not None and app.driver == observe_driver(pod):
            return  # nothing the decision reads from the driver changed
        await self.run(namespace, name)

    def forget(self, namespace: str, name: str) -> None:
        app = self.apps.pop((namespace, name), None)
        if app is not None and app.timer is not None:
            app.timer.cancel()
        if self.caches is not None and self.caches.progress is not None:
            self.caches.progress.forget((namespace, name))

    def requeue(self, namespace: str, name: str, delay: float, periodic: bool = False) -> None:
        app = self.apps.get((namespace, name))
        if app is None:
            return
        loop = asyncio.get_running_loop()
        # One timer per app, the earliest look asked for. It is the cheap periodic look only when every
        # request it stands for was periodic: a look asked for by the plan (a backoff, a debounce) must
        # be a full reconcile, else it ends at the partition counts and the decision waits for the next
        # full reconcile (a replacement driver would wait a resync, not its backoff).
        if app.timer is not None:
            periodic = periodic and app.periodic
            if app.timer.when() <= loop.time() + delay:
                app.periodic = periodic
                return  # the earlier look stands for this one too
            app.timer.cancel()
        app.periodic = periodic
        app.timer = loop.call_later(max(delay, 0.1), lambda: asyncio.ensure_future(self._later(namespace, name)))

    async def _later(self, namespace: str, name: str) -> None:
        app = self.apps.get((namespace, name))
        if app is not None:
            app.timer = None
            if app.periodic and await self._nothing_new(app):
                self._read_metrics((namespace, name), app.driver)
                self._next_periodic(namespace, name, app)
                return
        await self.run(namespace, name)  # retries its own failures

    async def _nothing_new(self, app: _App) -> bool:
        """Whether the periodic look can end at the partition counts: they are as the last reconcile saw
        them (from the cache, no API request), Kafka answered then, and the children were read or written
        less than FULL_EVERY resyncs ago, and the moment the plan named as due has not come."""
        loop = asyncio.get_running_loop()
        if app.probe is None or app.kafka is None or app.kafka.error or app.known is None or \
                loop.time() - app.known_at >= self.resync * FULL_EVERY or app.waiting or app.lock.locked() or \
                (app.due is not None and loop.time() >= app.due):
            return False
        self._start()
        try:
            now = await loop.run_in_executor(self.pool, partial(app.probe.observe, cache=self.caches.partitions))
        except Exception as exc:  # noqa: BLE001 - a look that cannot be cheap is a full one
            log.debug("partition counts of %s: %s", app.probe, exc)
            return False
        return now == app.kafka

    def _read_metrics(self, key: Key, driver: Driver | None) -> None:
        progress = self.caches.progress if self.caches else None
        if progress is None or driver is None or driver.pod.state != "running" or not driver.ip or not driver.uid:
            return
        if progress.due(key, driver.uid, every=self.resync / 2):
            task = asyncio.ensure_future(self._scrape(key, driver.uid, driver.ip))
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)

    async def _scrape(self, key: Key, uid: str, ip: str) -> None:
        if await self.caches.progress.scrape(key, uid, ip):
            self.requeue(*key, 0)

    async def close(self) -> None:
        """The operator stops: no more looks, the metric reads' session closed, the threads let go."""
        for app in self.apps.values():
            if app.timer is not None:
                app.timer.cancel()
        for task in list(self._reads):
            task.cancel()
        await asyncio.gather(*self._reads, return_exceptions=True)
        if self.caches is not None and self.caches.progress is not None:
            await self.caches.progress.close()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
