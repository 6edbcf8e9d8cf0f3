"""A driver-side loop: ``look`` every ``poll`` seconds on a daemon thread of its own, each trouble
logged once (not at every poll) until another or none comes. The rescaler and the snapshot thread."""

from __future__ import annotations

import logging
import threading
from typing import Self

log = logging.getLogger("streamapp.runtime")


class Poller:
    thread_name = "streamapp-poller"

    def __init__(self, poll: float):
        self.poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_warning = ""

    def look(self) -> object:
        raise NotImplementedError

    def _warn(self, message: str) -> None:
        if message != self._last_warning:
            log.warning("%s", message)
            self._last_warning = message

    def _recovered(self) -> None:
        """The trouble is over: the same one, should it come back, is logged again."""
        self._last_warning = ""

    def start(self) -> Self:
        def loop() -> None:
            while not self._stop.wait(self.poll):
                self.look()

        self._thread = threading.Thread(target=loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
