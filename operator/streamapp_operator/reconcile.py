"""One reconcile of one StreamApp: observe → decide (pure) → act (idempotent) → report.

Everything that triggers work (create, update, resume, the timer, a driver pod's event) ends up
here; it always starts from a fresh read of the app, so it is level-based and safe to repeat.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from streamapp_api import Policy, StreamApp
from streamapp_api.checkpoint import CheckpointDefault
from streamapp_api.policy import kafka_secret_issues

from . import names
from .act.apply import execute
from .decide import diagnosis
from .decide.pause import pause_asked
from .decide.restore import other_app
from .decide.upgrade import may_roll_back
from .decide.plan import plan as decide
from .decide.world import Driver, Kafka, Memory, Observed, Plan, Progress, Settings
from .kubeapi import Kube
from .observe import blockers
from .observe import kafka as kafka_observe
from .observe import kube as kube_observe
from .observe import metrics as metrics_observe
from .observe.restore import restore_source
from .report import events, metrics


# A driver that has run this long without finishing a batch has its executor pods looked at.
EXECUTORS_DUE = timedelta(seconds=60)


@dataclass
class Outcome:
    plan: Plan | None
    done: list[str] = field(default_factory=list)
    driver: Driver | None = None  # the driver pod as this reconcile saw it
    children: dict | None = None  # kube_observe.remembered: the children it saw and left as they were
    probe: kafka_observe.Probe | None = None  # how to read the app's partition counts again
    kafka: Kafka | None = None  # what they were
    reread: bool = False  # what this reconcile read (or took as absent) was not so: read everything again now


@dataclass
class Caches:
    """What reconciles share instead of asking again each time: partition counts per Kafka cluster,
    the driver's progress as last read in the background, the claims' events and the executor pods
    of each namespace. Without them, each is read now."""

    partitions: kafka_observe.PartitionCache | None = None
    progress: metrics_observe.ProgressCache | None = None
    claim_events: blockers.ClaimEvents | None = None
    executors: blockers.NamespaceExecutors | None = None


def read(kube: Kube, namespace: str, name: str, known: dict | None = None,
         network: bool = False, ingress: bool = False) -> tuple[dict | None, dict | None, dict]:
    """The app, its driver pod and its children (but the ``known`` ones, remembered from a recent
    reconcile), asked at once: (app, pod, "Kind/name" -> child or None)."""
    reads = kube_observe.child_reads(kube, namespace, name, known, network, ingress)
    body, pod, *found = kube.gather([lambda: kube.get("StreamApp", namespace, name),
                                     lambda: kube.get("Pod", namespace, names.driver_pod(name)), *reads.values()])
    return body, pod, {**(known or {}), **dict(zip(reads, found))}


def observe(kube: Kube, body: dict, pod: dict | None, children: dict,
            caches: Caches | None = None, policy: Policy | None = None,
            checkpoint: CheckpointDefault | None = None) -> tuple[Observed, kafka_observe.Probe | None]:
    caches = caches or Caches()
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    app, issues = kube_observe.checked_app(body, policy, checkpoint)
    common = dict(name=name, namespace=namespace, uid=meta["uid"], generation=int(meta.get("generation") or 0),
                  status=dict(body.get("status") or {}), paused=pause_asked(meta.get("annotations")))
    if app is None:
        return Observed(app=None, issues=tuple(issues), **common), None
    secret = kube_observe.kafka_secret(kube, namespace, app)
    refused = kafka_secret_issues(app, secret or {}, policy)  # its keys become client options of the driver
    if refused:
        return Observed(app=None, issues=tuple(refused), **common), None
    probe = kafka_observe.Probe.of(app, secret) if secret is not None else None
    driver = kube_observe.driver(pod)
    # the app to restore from is read only when a driver may start and it is not resolved yet
    other = other_app(app, ((body.get("status") or {}).get("state") or {}).get("restoreFrom")) \
        if driver.pod.state == "absent" and not app.spec.suspend else None
    source = restore_source(kube, namespace, other, policy, checkpoint) if other else None
    stable = kube_observe.stable_app(body, policy, checkpoint) \
        if may_roll_back(app, common["status"], common["generation"]) else None
    if driver.pod.state != "running":
        progress = Progress()
    elif caches.progress is not None:
        progress = caches.progress.latest((namespace, name), driver.uid)
    else:
        progress = metrics_observe.observe(driver.ip)
    return Observed(
        app=app, children=children,
        applied=kube_observe.applied(children.get(f"ConfigMap/{names.config_map(name)}")),
        driver=driver, kafka=kafka_observe.observe(app, secret, secret_missing=secret is None, cache=caches.partitions),
        progress=progress, restore_source=source, stable_app=stable, **_blockers(kube, namespace, app, driver, progress, datetime.now(timezone.utc),
                                        caches.claim_events, caches.executors), **common,
    ), probe


def _blockers(kube: Kube, namespace: str, app: StreamApp, driver: Driver, progress: Progress,
              now: datetime, claim_events: blockers.ClaimEvents | None = None,
              executors: blockers.NamespaceExecutors | None = None) -> dict:
    """What may keep the app from running (Observed's claim, missing_secrets and missing_config_maps,
    executor_pods), asked only when it may: the Secrets and ConfigMaps before a driver is started, the claim while the scheduler cannot
    place the driver for a reason that names volumes (diagnosis.claim_may_block), the executors while the driver is not Ready, has fewer executors than it was
    started with (some may wait for a node: the Scaling condition) or has finished no batch a minute on."""
    name, pod = app.metadata.name, driver.pod
    if pod.state == "absent" and (diagnosis.referenced_secrets(app) or diagnosis.referenced_config_maps(app)):
        return {"missing_secrets": blockers.missing_secrets(kube, namespace, app),
                "missing_config_maps": blockers.missing_config_maps(kube, namespace, app)}
    if pod.state == "pending" and diagnosis.claim_may_block(pod.unschedulable):
        return {"claim": blockers.claim(kube, namespace, name, claim_events)}
    if pod.state == "running" and (not pod.ready or fewer_executors(driver, progress) or (
            progress.last_batch is None and pod.running_since is not None and now - pod.running_since > EXECUTORS_DUE)):
        return {"executor_pods": blockers.executor_pods(kube, namespace, name, executors)}
    return {}


def fewer_executors(driver: Driver, progress: Progress) -> bool:
    """The driver reports fewer executors than it was started with, or reports none (not answering)."""
    return progress.executors is None or (driver.executors is not None and progress.executors < driver.executors)


def reconcile(kube: Kube, namespace: str, name: str, settings: Settings, memory: Memory,
              now: datetime | None = None, caches: Caches | None = None, known: dict | None = None,
              created: dict | None = None) -> Outcome:
    """``created``: the app as its create event brought it, when it has no status yet, so nothing of
    it can exist: its driver pod and children are taken as absent rather than read, and the first
    driver goes out a round trip and ten requests (more with NetworkPolicies or UI Ingresses) sooner. A create that
    finds one there after all (an operator that died half-way through this app; an app deleted and
    made again before the old one's children were collected) holds the driver back and asks for a
    full reconcile at once."""
    started = time.monotonic()
    result = "error"
    network, ingress = settings.network is not None, settings.ui.ingress is not None
    try:
        if created is not None:
            body, pod, children = created, None, dict.fromkeys(kube_observe.child_keys(name, network, ingress))
        else:
            body, pod, children = read(kube, namespace, name, known, network, ingress)
        if body is None or body["metadata"].get("deletionTimestamp"):
            metrics.forget(namespace, name)
            result = "gone"
            return Outcome(None)
        obs, probe = observe(kube, body, pod, children, caches, settings.policy, settings.checkpoint)
        moment = now or datetime.now(timezone.utc)
        plan = decide(obs, settings, memory, moment)
        acted = execute(kube, obs, plan)
        done = acted.done
        if done and not acted.stale:
            events.post(kube, obs, plan.events, moment)
        result = "invalid" if obs.app is None else ("changed" if done else "unchanged")
        metrics.record(namespace, name, result, time.monotonic() - started, plan.status.get("phase"),
                       plan.restarted, plan.desired_executors, obs.kafka.partitions)
        # What the next reconciles may take as read: the children as seen, or as written when every
        # write answered with the object; the driver as created (its own first events tell nothing new).
        children = None
        if obs.app is not None and acted.written is not None:
            children = kube_observe.remembered({**obs.children, **acted.written})
        driver = kube_observe.driver(acted.driver_pod) if acted.driver_pod else obs.driver
        return Outcome(plan, done, driver, None if acted.stale else children, probe, obs.kafka, acted.stale)
    finally:
        if result == "error":
            metrics.record(namespace, name, result, time.monotonic() - started)
