"""The operator's real API client, counting its lists: what the shared per-namespace reads save."""

from __future__ import annotations

from streamapp_operator.kubeapi import Kube


class ListCounter(Kube):
    """The real client, counting its lists."""

    lists = 0

    def list(self, *args, **kwargs):
        self.lists += 1
        return super().list(*args, **kwargs)
