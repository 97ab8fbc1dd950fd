"""The options of a consumer, a subscription and a session, each list defined once.

`durable.consumer(...)`, `durable.subscribe(...)` and `client.session(...)` take their
options as keywords, as they always did, or as one object (`options=`), the same in both
clients: `ConsumerOptions`, `SubscriptionOptions`, `SessionOptions`. An object is checked
when it is made, with the error its keyword gets (`ConfigError` or one of its family), so
a bad value fails where it was written; keywords given beside `options=` replace its
fields (a keyword left at its default keeps the object's value). What depends on the
durable (a window on an exclusive one) is checked when it is used.

Pure: no I/O. The `wait=` of consumers and sessions is here too, for the same reason.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

from .errors import ConfigError, InvalidWindowError
from .selector import compile_filter

Wait: TypeAlias = float | bool
"""How long `consumer()` (exclusive) and `session()` wait for another holder's lease to
lapse: False or 0 (the default) not at all, a number of seconds at most that long, True as
long as it takes (a live holder renews its lease, so True waits until it closes or dies:
a standby)."""

Overflow: TypeAlias = Literal["close", "drop_oldest"]
"""What a session's full queue does at the first event beyond its limit."""

MAX_WINDOW = 100_000
"""The largest window or prefetch: each unacknowledged event held costs the server an
entry per consumer, and a window past this is a mistake (10**9), not a tuning."""

MAX_REPLICAS = 16
"""The most replicas `replicated=` may wait for."""

OptionsT = TypeVar("OptionsT", bound="Options")


def wait_seconds(wait: object) -> float:
    """`wait=` as seconds (infinite for True); `ConfigError` for anything else."""
    if isinstance(wait, bool):
        return math.inf if wait else 0.0
    if not isinstance(wait, int | float) or math.isnan(wait) or wait < 0:
        raise ConfigError(f"wait must be True, False or seconds >= 0, got {wait!r}")
    return float(wait)


def check_replicated(replicated: object) -> None:
    if _not_int(replicated) or not 0 <= replicated <= MAX_REPLICAS:  # type: ignore[operator]
        raise ConfigError(f"replicated must be an int in 0..{MAX_REPLICAS}, got {replicated!r}")


@dataclass(frozen=True, kw_only=True)
class Options:
    """What the three option objects share: made from keywords, checked when made."""

    @classmethod
    def of(cls: type[OptionsT], options: OptionsT | None, **keywords: Any) -> OptionsT:
        """`options` (or the defaults) with the keywords given replacing its fields: the
        object a front method works from, checked (`ConfigError` for a bad value)."""
        if options is None:
            return cls(**keywords)
        if not isinstance(options, cls):
            raise ConfigError(f"options must be a {cls.__name__}, got {options!r:.80}")
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        given = {k: v for k, v in keywords.items() if not _same(v, defaults[k])}
        return dataclasses.replace(options, **given) if given else options


@dataclass(frozen=True, kw_only=True)
class ReaderOptions(Options):
    """What a consumer and a subscription both take."""

    auto_ack: bool | None = None
    """Acknowledge each event once handed out and done with (a fetch's events at the next
    `fetch()` or a clean close; a listener's when it returns); None: True, unless a window
    or prefetch is given (then acknowledgement is explicit, as in Universal Messaging)."""
    filter: str | None = None
    """The consumer's own selector; on a shared or serial durable the latest consumer's
    filter also decides what the durable keeps (Universal Messaging's store filter)."""
    on_notice: Callable[[str], object] | None = None
    """Called with a notice from the durable (another consumer's filter took over)."""
    replicated: int = 0
    """Hand out only events that this many replicas hold (0 to 16), so a failover cannot
    take back what was delivered (a `WAIT` in each read's round trip)."""
    wait: Wait = False
    """Exclusive durables: when another consumer holds the durable, wait for its lease to
    lapse: False raises `DurableInUseError` at once, a number waits at most that many
    seconds, True as long as it takes."""

    def __post_init__(self) -> None:
        compile_filter(self.filter)
        check_replicated(self.replicated)
        wait_seconds(self.wait)

    @property
    def wait_s(self) -> float:
        """`wait` in seconds (infinite for True)."""
        return wait_seconds(self.wait)


@dataclass(frozen=True, kw_only=True)
class ConsumerOptions(ReaderOptions):
    """A synchronous (fetching) consumer's options: `durable.consumer(options=...)`."""

    prefetch: int | None = None
    """Shared and serial durables: the most events the consumer holds unacknowledged (its
    window, 1 to 100,000); `InvalidWindowError` on an exclusive durable."""

    def __post_init__(self) -> None:
        prefetch = self.prefetch
        if prefetch is not None and (_not_int(prefetch) or not 0 < prefetch <= MAX_WINDOW):
            raise InvalidWindowError(
                f"prefetch must be a positive int up to {MAX_WINDOW:,}, got {prefetch!r}"
            )
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class SubscriptionOptions(ReaderOptions):
    """A subscription's (a listener's) options: `durable.subscribe(listener, options=...)`."""

    window: int | None = None
    """Shared and serial durables: the most events the listener holds unacknowledged (1 to
    100,000; a negative one is the client's default window); `InvalidWindowError` on an
    exclusive durable."""

    def __post_init__(self) -> None:
        window = self.window
        if window is not None and (_not_int(window) or window == 0 or window > MAX_WINDOW):
            raise InvalidWindowError(
                f"window must be a positive int up to {MAX_WINDOW:,}, got {window!r}"
            )
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class SessionOptions(Options):
    """A durable client session's options: `client.session(session_id, options=...)`."""

    timeout: float = 60.0
    """Seconds the session's queue and durable interests outlive a disconnect (its
    keep-alive); opened again within it, the session resumes."""
    max_depth: int | None = None
    """The queue limit while connected: the most events not yet acknowledged."""
    disconnected_max_depth: int | None = None
    """A larger queue limit while away, kept after the return until the queue drained to
    80 % of `max_depth`."""
    overflow: Overflow = "close"
    """At the first event beyond the limit: 'close' the session and discard its queue, or
    'drop_oldest' events."""
    recovery_buffer: int | None = None
    """How many events may be in flight (sent, not yet acknowledged); after a broken
    connection they are sent again."""
    auto_ack: bool = True
    """Acknowledge an ack-required event when its listener returns."""
    replicated: int = 0
    """Deliver only events that this many replicas hold (0 to 16)."""
    wait: Wait = False
    """When another client holds the session live, wait for its lease to lapse: False not
    at all (`SessionInUseError`), a number of seconds at most that long, True as long as it
    takes."""

    def __post_init__(self) -> None:
        timeout = self.timeout
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"session timeout must be a positive number of seconds: {timeout!r}")
        for label in ("max_depth", "recovery_buffer", "disconnected_max_depth"):
            value = getattr(self, label)
            if value is not None and (_not_int(value) or value < 1):
                raise ConfigError(f"{label} must be a positive int, got {value!r}")
        if self.overflow not in ("close", "drop_oldest"):
            raise ConfigError(f"overflow must be 'close' or 'drop_oldest', got {self.overflow!r}")
        check_replicated(self.replicated)
        wait_seconds(self.wait)

    @property
    def timeout_ms(self) -> int:
        return int(self.timeout * 1000)

    @property
    def wait_s(self) -> float:
        """`wait` in seconds (infinite for True)."""
        return wait_seconds(self.wait)


def _same(value: object, default: object) -> bool:
    """Whether a keyword was left at its default (`wait=0` is given: it is no `False`)."""
    return value is default or (type(value) is type(default) and value == default)


def _not_int(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool)


__all__ = ["MAX_REPLICAS", "MAX_WINDOW", "ConsumerOptions", "Options", "Overflow",
           "ReaderOptions", "SessionOptions", "SubscriptionOptions", "Wait", "check_replicated",
           "wait_seconds"]  # fmt: skip
