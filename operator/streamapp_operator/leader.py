"""Leader election over a ``coordination.k8s.io`` Lease: of several operator replicas one reconciles,
every one serves the admission webhook.

The kubernetes client's elector (the pattern of client-go: a lease duration, a renew deadline, a retry
period) runs on a thread of its own. The replica that holds the Lease renews it every retry period; the
others try every retry period and take it once its holder has not renewed it for a lease duration.

- **Becoming the leader** calls ``on_leading`` (from the elector's thread).
- **Losing the Lease** (no renewal within the renew deadline: the API server unreachable, the process
  starved) ends the process at once, as controller-runtime does: a replica that may no longer lead
  never acts again, not even a reconcile already under way. The renew deadline and a retry period are
  shorter than the lease duration, so it is gone before another replica may take the Lease; its pod
  restarts as a follower.
- **A graceful stop** (``release``) gives the Lease up, so that another replica takes it within a
  retry period rather than a lease duration (a rolling update).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTimes:
    """Seconds, as client-go counts them (whole seconds: the Lease stores its duration so)."""

    duration: int = 15  # a follower takes a Lease not renewed for this long
    renew_deadline: int = 10  # the leader stops (the process ends) when it could not renew for this long
    retry_period: int = 2  # how often the leader renews and a follower tries

    def problems(self) -> list[str]:
        out = []
        if self.retry_period < 1:
            out.append("the retry period must be at least 1 s")
        if self.renew_deadline <= 1.2 * self.retry_period:  # the elector's own rule: room for a retry
            out.append("the renew deadline must be longer than 1.2 retry periods")
        # A leader learns it lost the Lease a retry period and a renew deadline after its last renewal at
        # the latest; another replica may take it a lease duration after that renewal.
        if self.duration <= self.renew_deadline + self.retry_period:
            out.append("the lease duration must be longer than the renew deadline and a retry period "
                       "(else two replicas may act at once)")
        return out


def parse_lease(value: str) -> tuple[str, str]:
    """'NAMESPACE/NAME' -> (namespace, name)."""
    namespace, _, name = value.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"--leader-election {value!r}: expected NAMESPACE/NAME")
    return namespace, name


def own_identity() -> str:
    """The pod's name (the chart sets POD_NAME), else host and process: unique among the replicas."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


class _Lock(LeaseLock):
    """The client's Lease lock on our API client. It takes nothing once released, and a request that
    fails without an answer (connection refused, a timeout) is a failed try, as an error answer is,
    rather than an exception that would end the elector's thread."""

    def __init__(self, name: str, namespace: str, identity: str, api_client: client.ApiClient):
        super().__init__(name, namespace, identity)
        self.api_instance = client.CoordinationV1Api(api_client)
        self.released = False

    def get(self, name, namespace):  # noqa: ANN001, ANN201 - the client's signature
        try:
            return super().get(name, namespace)
        except Exception as exc:  # noqa: BLE001
            log.warning("leader election: reading Lease %s/%s: %s", namespace, name, exc)
            return False, exc  # not a 404: the elector tries again

    def create(self, name, namespace, election_record):  # noqa: ANN001, ANN201
        try:
            return not self.released and super().create(name, namespace, election_record)
        except Exception as exc:  # noqa: BLE001
            log.warning("leader election: creating Lease %s/%s: %s", namespace, name, exc)
            return False

    def update(self, name, namespace, updated_record):  # noqa: ANN001, ANN201
        try:
            return not self.released and super().update(name, namespace, updated_record)
        except Exception as exc:  # noqa: BLE001
            log.warning("leader election: renewing Lease %s/%s: %s", namespace, name, exc)
            return False


class Election:
    def __init__(self, lease: str, api_client: client.ApiClient, on_leading: Callable[[], None],
                 times: LeaseTimes = LeaseTimes(), identity: str | None = None):
        namespace, name = parse_lease(lease)
        self.identity = identity or own_identity()
        self.lock = _Lock(name, namespace, self.identity, api_client)
        self.leading = False
        self._on_leading = on_leading
        config = electionconfig.Config(self.lock, times.duration, times.renew_deadline, times.retry_period,
                                       self._started, self._stopped)
        self._elector = leaderelection.LeaderElection(config)
        logging.getLogger("leaderelection").setLevel(logging.WARNING)  # it logs every try at INFO

    def start(self) -> None:
        log.info("leader election: %s waits for Lease %s/%s", self.identity, self.lock.namespace, self.lock.name)
        threading.Thread(target=self._run, name="leader-election", daemon=True).start()

    def _run(self) -> None:
        try:
            self._elector.run()  # returns only once the Lease is lost (then _stopped has ended the process)
        except Exception:  # noqa: BLE001 - the elector is gone: a leader must not go on unrenewed
            log.exception("leader election failed")
            if self.leading:
                self._stopped()

    def _started(self) -> None:
        self.leading = True
        log.warning("leader election: %s leads (Lease %s/%s)", self.identity, self.lock.namespace, self.lock.name)
        self._on_leading()

    def _stopped(self) -> None:
        if self.lock.released:
            return
        log.error("leader election: %s lost Lease %s/%s: stopping at once", self.identity, self.lock.namespace,
                  self.lock.name)
        logging.shutdown()
        os._exit(1)  # noqa: SLF001 - not a clean exit: no thread of this process may act again

    def release(self) -> None:
        """Take nothing more; hand the Lease over now if this replica holds it."""
        self.lock.released = True
        if not self.leading:
            return
        api = self.lock.api_instance
        try:
            lease = api.read_namespaced_lease(self.lock.name, self.lock.namespace)
            if lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            api.replace_namespaced_lease(self.lock.name, self.lock.namespace, lease)  # resourceVersion: only ours
            log.info("leader election: %s released Lease %s/%s", self.identity, self.lock.namespace, self.lock.name)
        except ApiException as exc:
            log.warning("leader election: could not release Lease %s/%s: %s", self.lock.namespace, self.lock.name,
                        exc.reason)
