"""What the session tests share: a listener that writes down what happened, and waiting
for it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import durables


@dataclass
class Recorder:
    """A session listener that writes down what happened, in order."""

    log: list[tuple[str, str, bool]] = field(default_factory=list)
    live: threading.Event = field(default_factory=threading.Event)

    def on_event(self, event: durables.Event) -> None:
        self.log.append(("event", event.text if not event.destroyed else "-", event.replayed))

    def events(self) -> int:
        return sum(1 for kind, _, _ in self.log if kind == "event")

    def after_region_live(self, channel: str) -> None:
        self.log.append(("live", channel, False))
        self.live.set()


def wait_for(recorder: Recorder, events: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while recorder.events() < events:
        assert time.monotonic() < deadline, recorder.log
        time.sleep(0.01)
