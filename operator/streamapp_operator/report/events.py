"""Kubernetes events on the StreamApp, one for every decision that acts."""

from __future__ import annotations

import logging
from datetime import datetime

from streamapp_api import API_VERSION, KIND

from .. import names
from ..decide.status import rfc3339
from ..decide.world import Event, Observed
from ..kubeapi import ApiError, Kube

log = logging.getLogger(__name__)


def render_event(obs: Observed, event: Event, now: datetime) -> dict:
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{obs.name}.", "namespace": obs.namespace},
        "involvedObject": {"apiVersion": API_VERSION, "kind": KIND, "name": obs.name,
                           "namespace": obs.namespace, "uid": obs.uid},
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:1024],
        "source": {"component": names.MANAGED_BY},
        "reportingComponent": names.MANAGED_BY,
        "reportingInstance": names.MANAGED_BY,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def post(kube: Kube, obs: Observed, events: tuple[Event, ...], now: datetime) -> None:
    for event in events:
        log.info("%s/%s %s: %s", obs.namespace, obs.name, event.reason, event.message)
        try:
            kube.request("POST", f"/api/v1/namespaces/{obs.namespace}/events", body=render_event(obs, event, now))
        except ApiError as exc:  # an event lost is not worth failing a reconcile
            log.warning("could not post event %s: %s", event.reason, exc)
