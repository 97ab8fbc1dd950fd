"""A run checker for fault tests: what was published, what came out, and what went wrong.

Why: under faults a test cannot compare two lists; it must say which promise broke. The
checker records, from any thread, what a run attempted (publish calls), confirmed (a
publish returned an id) and delivered (what consumers saw, in order), and counts what a
durable must never do: lose a confirmed event, deliver one twice without flagging it as
redelivered, deliver out of order, or deliver something nobody published.

Messages are known by a token the test chooses (usually the payload text), not by id: a
publish whose reply was lost may still have been stored, and its deliveries then carry an
id the publisher never saw. One checker follows one durable (each durable gets every event).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import redis

from durables import ids

_SAMPLES = 5
PUBLISH_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    ConnectionError,
    TimeoutError,
)
"""What `Checker.publish` takes as "the publish may or may not have been stored"."""


class Delivered(Protocol):
    """What the checker reads of a delivered event (a `durables.Event` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def redelivered(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery as recorded: who got which token under which id, and whether flagged."""

    consumer: str
    token: str
    event_id: str
    redelivered: bool
    order_scope: str
    """Deliveries are checked for order within one scope: the consumer, unless told otherwise."""

    def __str__(self) -> str:
        flag = " (redelivered)" if self.redelivered else ""
        return f"{self.token!r} as {self.event_id} to {self.consumer}{flag}"


@dataclass(frozen=True, slots=True)
class Report:
    """The counts of a run; assert on them (`lost == 0`, `duplicated == duplicated_flagged`)."""

    attempted: int
    """Publish calls made (a retried token counts each time)."""
    confirmed: int
    """Distinct tokens whose publish returned an id."""
    delivered: int
    """Deliveries recorded, duplicates included."""
    lost: int
    """Confirmed tokens never delivered."""
    duplicated: int
    """Deliveries of a token beyond its first."""
    duplicated_flagged: int
    """Of `duplicated`, those that carried redelivered=True."""
    reordered: int
    """First deliveries whose id is lower than an earlier first delivery's in the same scope."""
    unexpected: int
    """Distinct tokens delivered but never attempted."""
    republished: int
    """Distinct tokens seen under more than one id (a publish stored twice, e.g. on a retry)."""

    @property
    def ok(self) -> bool:
        """No loss, no unflagged duplicate, no reordering, nothing unexpected."""
        return (
            self.lost == 0
            and self.duplicated == self.duplicated_flagged
            and self.reordered == 0
            and self.unexpected == 0
        )

    def __str__(self) -> str:
        return (
            f"attempted={self.attempted} confirmed={self.confirmed} delivered={self.delivered} "
            f"lost={self.lost} duplicated={self.duplicated} (flagged {self.duplicated_flagged}) "
            f"reordered={self.reordered} unexpected={self.unexpected} "
            f"republished={self.republished}"
        )


class Checker:
    """Thread-safe record of one run; `report()` counts, `explain()` names examples."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: list[str] = []
        self._confirmed: dict[str, list[str]] = defaultdict(list)
        self._deliveries: list[Delivery] = []

    # -- recording (any thread) -----------------------------------------------------------

    def attempt(self, token: str) -> None:
        """A publish of `token` is about to be made."""
        with self._lock:
            self._attempts.append(token)

    def confirm(self, token: str, event_id: str) -> None:
        """The publish of `token` returned `event_id`: the server stored it."""
        event_id = ids.normal(event_id)
        with self._lock:
            self._confirmed[token].append(event_id)

    def publish(
        self,
        token: str,
        send: Callable[[], str],
        errors: tuple[type[BaseException], ...] = PUBLISH_ERRORS,
    ) -> str | None:
        """Attempt, call `send`, confirm its id; None when it raised one of `errors` (in doubt)."""
        self.attempt(token)
        try:
            event_id = send()
        except errors:
            return None
        self.confirm(token, event_id)
        return event_id

    def deliver(
        self,
        consumer: str,
        token: str,
        event_id: str,
        *,
        redelivered: bool = False,
        order_scope: str | None = None,
    ) -> None:
        """`consumer` got `token` as `event_id`; `order_scope` (say a serial key) groups order."""
        delivery = Delivery(
            consumer,
            token,
            ids.normal(event_id),
            redelivered,
            consumer if order_scope is None else order_scope,
        )
        with self._lock:
            self._deliveries.append(delivery)

    def deliver_event(
        self, consumer: str, event: Delivered, *, order_scope: str | None = None
    ) -> None:
        """Record a delivered event whose payload text is its token."""
        self.deliver(
            consumer, event.text, event.id, redelivered=event.redelivered, order_scope=order_scope
        )

    # -- results --------------------------------------------------------------------------

    def deliveries(self) -> list[Delivery]:
        """Every delivery so far, in the order recorded."""
        with self._lock:
            return list(self._deliveries)

    def report(self) -> Report:
        """The counts of everything recorded so far."""
        return self._analysis().report()

    def explain(self, limit: int = _SAMPLES) -> str:
        """The report and up to `limit` example tokens of each fault, for assert messages."""
        return self._analysis().explain(limit)

    def _analysis(self) -> _Analysis:
        with self._lock:
            return _Analysis(
                list(self._attempts),
                {token: list(found) for token, found in self._confirmed.items()},
                list(self._deliveries),
            )


class _Analysis:
    """The faults in one snapshot of a run (pure: no locks, no I/O)."""

    def __init__(
        self, attempts: list[str], confirmed: dict[str, list[str]], deliveries: list[Delivery]
    ) -> None:
        self.attempts = attempts
        self.confirmed = confirmed
        self.deliveries = deliveries
        delivered = {d.token for d in deliveries}
        attempted = set(attempts)
        self.lost = [t for t in confirmed if t not in delivered]
        self.unexpected = sorted(delivered - attempted)
        self.duplicates = _duplicates(deliveries)
        self.reordered = _reordered(deliveries)
        self.republished = _republished(confirmed, deliveries)

    def report(self) -> Report:
        return Report(
            attempted=len(self.attempts),
            confirmed=len(self.confirmed),
            delivered=len(self.deliveries),
            lost=len(self.lost),
            duplicated=len(self.duplicates),
            duplicated_flagged=sum(d.redelivered for d in self.duplicates),
            reordered=len(self.reordered),
            unexpected=len(self.unexpected),
            republished=len(self.republished),
        )

    def explain(self, limit: int) -> str:
        lines = [str(self.report())]
        unflagged = [d for d in self.duplicates if not d.redelivered]
        for name, found in (
            ("lost", self.lost),
            ("unflagged duplicates", unflagged),
            ("reordered", self.reordered),
            ("unexpected", self.unexpected),
            ("republished", self.republished),
        ):
            if found:
                lines.append(f"  {name}: {', '.join(map(str, _head(found, limit)))}")
        return "\n".join(lines)


def _duplicates(deliveries: Iterable[Delivery]) -> list[Delivery]:
    """Every delivery of a token after its first."""
    seen: set[str] = set()
    extra = []
    for d in deliveries:
        if d.token in seen:
            extra.append(d)
        seen.add(d.token)
    return extra


def _reordered(deliveries: Iterable[Delivery]) -> list[Delivery]:
    """First deliveries below the highest first delivery before them in their scope.

    Later deliveries of a token are left out: a redelivery comes back out of order by design.
    """
    seen: set[str] = set()
    highest: dict[str, tuple[int, int]] = {}
    late = []
    for d in deliveries:
        if d.token in seen:
            continue
        seen.add(d.token)
        position = ids.key(d.event_id)
        top = highest.get(d.order_scope)
        if top is not None and position < top:
            late.append(d)
        else:
            highest[d.order_scope] = position
    return late


def _republished(confirmed: dict[str, list[str]], deliveries: Iterable[Delivery]) -> list[str]:
    """Tokens stored under more than one id, as confirmed or as delivered."""
    seen: dict[str, set[str]] = defaultdict(set)
    for token, found in confirmed.items():
        seen[token].update(found)
    for d in deliveries:
        seen[d.token].add(d.event_id)
    return sorted(token for token, found in seen.items() if len(found) > 1)


def _head(items: list[str] | list[Delivery], limit: int) -> list[str]:
    shown = [repr(item) if isinstance(item, str) else str(item) for item in items[:limit]]
    if len(items) > limit:
        shown.append(f"... {len(items) - limit} more")
    return shown
