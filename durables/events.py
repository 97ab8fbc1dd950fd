"""Events and messages, and their encoding as stream entries (pure, no I/O)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson

from .errors import ConfigError, PayloadError
from .keys import F_ACK, F_DATA, F_KEY, F_MESSAGE_ID, F_OP, F_PROPS, OP_ACK, OP_DESTROY

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

PropertyValue = str | int | float | bool
Properties = Mapping[str, PropertyValue]
_EMPTY: dict[str, PropertyValue] = {}
_NO_COUNTS: dict[str, int] = {}


class _Owner(Protocol):
    """Whatever delivered an event: it knows how to ack and roll it back."""

    def ack_event(self, event: Event) -> Any: ...

    def rollback_event(self, event: Event, delay_s: float = 0.0) -> Any: ...


@dataclass(frozen=True, slots=True)
class Message:
    """Something to publish: a payload (bytes, str or JSON-able), an optional key and properties."""

    data: Any
    key: str | None = None
    properties: Properties | None = None
    message_id: str | None = None
    """The producer's id: the same id within `dedupe_window_s` is stored once."""


@dataclass(slots=True, eq=False)
class Event:
    """One event as a consumer receives it; `ack()` and `rollback()` go to its consumer."""

    id: str
    channel: str
    data: bytes
    key: str | None = None
    raw_properties: bytes | None = field(default=None, repr=False)
    redelivery_count: int = 0
    replayed: bool = False
    owner: _Owner | None = field(default=None, repr=False)
    destroyed: bool = False
    """A tombstone: on a keyed channel, the key's value was destroyed."""
    ack_timeout_ms: int | None = None
    """An ack-required event: each interested session must acknowledge it this soon."""
    raw_message_id: bytes | None = field(default=None, repr=False)
    _properties: dict[str, PropertyValue] | None = field(default=None, repr=False)

    @property
    def properties(self) -> dict[str, PropertyValue]:
        """The event's properties, decoded on first use."""
        if self._properties is None:
            raw = self.raw_properties
            self._properties = _loads(raw) if raw else _EMPTY
        return self._properties

    @property
    def message_id(self) -> str | None:
        """The producer's id of this event: the `message_id` given to `publish`, else the
        publishing client's producer id and sequence (`<producer>:<sequence>`). Two events
        with the same message id are one publish stored twice (say, across a failover)."""
        raw = self.raw_message_id
        return None if raw is None else raw.decode()

    @property
    def ack_required(self) -> bool:
        """Published with `ack_required=True`: the session must acknowledge it."""
        return self.ack_timeout_ms is not None

    @property
    def redelivered(self) -> bool:
        """True when this event may have been delivered to this durable before."""
        return self.redelivery_count > 0

    @property
    def timestamp(self) -> datetime:
        """When the server stored the event (from the id's milliseconds), in UTC."""
        return datetime.fromtimestamp(int(self.id.partition("-")[0]) / 1000, tz=UTC)

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8."""
        return self.data.decode("utf-8")

    def json(self) -> Any:
        """The payload parsed as JSON."""
        return json.loads(self.data)

    def ack(self) -> Any:
        """Acknowledge this event (on an exclusive durable: and every event before it).

        From the asyncio client it returns an awaitable: the ack is already under way, and
        `await event.ack()` waits for it (and raises what it raised)."""
        return self._owned().ack_event(self)

    def rollback(self, delay: float = 0.0) -> Any:
        """Hand this event back; see the durable kinds for when it comes again.

        On shared and serial durables it is dealt again at once (first in line), or
        after `delay` seconds; on an exclusive durable at the next subscription.
        """
        if not isinstance(delay, int | float) or delay < 0:
            raise ConfigError(f"rollback delay must be a number of seconds >= 0, got {delay!r}")
        return self._owned().rollback_event(self, float(delay))

    def _owned(self) -> _Owner:
        if self.owner is None:
            raise PayloadError("this event was not delivered by a consumer; nothing to ack")
        return self.owner


_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_PLAIN = frozenset({str, int, bool})
"""Property value types that need no closer look (a float must be finite)."""


def encode_data(data: Any) -> bytes:
    """Bytes as they are, str as UTF-8, anything else as compact JSON."""
    kind = type(data)
    if kind is bytes:
        return data  # type: ignore[no-any-return]
    if kind is str:
        return data.encode("utf-8")  # type: ignore[no-any-return]
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    try:
        return _JSON(data).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"payload must be bytes, str or JSON-serialisable: {exc}") from None


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # an integer beyond 64 bits, stored by an older version
        return json.loads(raw)


def encode_properties(properties: Properties | None) -> bytes:
    """Properties as compact JSON, after checking every value is str, int, float (finite)
    or bool.

    On the hot path of every publish: exact type checks first, then orjson (several times
    faster than the standard encoder, which was most of a batch publish's client time).
    """
    if not properties:
        return b""
    if type(properties) is not dict:
        if not isinstance(properties, Mapping):
            raise PayloadError(f"properties must be a mapping, got {type(properties).__name__}")
        properties = dict(properties)
    for name, value in properties.items():
        if type(name) is not str or not name:
            raise PayloadError(f"property names must be non-empty str, got {name!r}")
        if type(value) not in _PLAIN:  # a float, a subclass, or refused: looked at closer
            _check_value(name, value)
    try:
        return orjson.dumps(properties)
    except orjson.JSONEncodeError as exc:  # an integer beyond 64 bits
        raise PayloadError(f"properties cannot be stored: {exc}") from None


def _check_value(name: str, value: object) -> None:
    if not isinstance(value, str | int | float | bool):
        raise PayloadError(
            f"property {name!r} is {type(value).__name__}; use str, int, float or bool"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise PayloadError(f"property {name!r} is {value}; only finite numbers are allowed")


Encoded = tuple[bytes, bytes, bytes, bytes, bytes]
"""One event, checked: data, key, properties, op and the producer's message id ('' for
none); `Batch` packs it as `publish.lua` takes it."""
MAX_MESSAGE_ID = 200
SHAPE_DATA, SHAPE_PROPS, SHAPE_KEYED, SHAPE_FULL = b"d", b"p", b"k", b"x"


class Batch:
    """Events as `publish.lua` takes them: a shape letter per event and only the values
    that letter names (`pack`). Most events carry just a payload and perhaps properties,
    so they take one or two values instead of five: less for redis-py to pack, for the
    server to parse and for the script to read."""

    __slots__ = ("shape", "values")

    def __init__(self) -> None:
        self.shape = bytearray()
        self.values: list[bytes] = []

    def __len__(self) -> int:
        return len(self.shape)

    @classmethod
    def of(cls, *events: Encoded) -> Batch:
        """One batch of the events given (a single publish, a tombstone)."""
        return pack(events, len(events))[0] if events else cls()


def pack(events: Iterable[Encoded], size: int) -> list[Batch]:
    """Encoded events in batches of at most `size` events, each one script call.

    One loop with no call per event: it is a good part of a batch publish's client time
    (0.2 µs per event here, twice that through a method per event)."""
    batches: list[Batch] = []
    batch = Batch()
    shape, values = batch.shape, batch.values
    for encoded in events:
        if len(shape) == size:
            batches.append(batch)
            batch = Batch()
            shape, values = batch.shape, batch.values
        data, key, props, op, mid = encoded
        if op or mid:
            shape += SHAPE_FULL
            values += encoded
        elif key:
            shape += SHAPE_KEYED
            values += (data, key, props)
        elif props:
            shape += SHAPE_PROPS
            values += (data, props)
        else:
            shape += SHAPE_DATA
            values.append(data)
    if shape:
        batches.append(batch)
    return batches


def tombstone(key: str) -> Encoded:
    """A keyed channel's event that says the key's value is gone."""
    return b"", key.encode("utf-8"), b"", OP_DESTROY, b""


def check_message_id(message_id: object) -> bytes:
    """A producer's message id: a non-empty str of at most 200 characters (or None)."""
    if message_id is None:
        return b""
    if not isinstance(message_id, str) or not message_id or len(message_id) > MAX_MESSAGE_ID:
        raise PayloadError(
            f"message_id must be a non-empty str of at most {MAX_MESSAGE_ID} characters, "
            f"got {message_id!r:.80}"
        )
    return message_id.encode("utf-8")


def ack_op(ack_timeout_s: float) -> bytes:
    """The op of an ack-required event, its timeout checked."""
    if (
        not isinstance(ack_timeout_s, int | float)
        or isinstance(ack_timeout_s, bool)
        or not (0 < ack_timeout_s <= 86_400)
    ):
        raise ConfigError(f"ack_timeout must be seconds in (0, 86400], got {ack_timeout_s!r}")
    return OP_ACK + str(max(1, int(ack_timeout_s * 1000))).encode()


def encode_event(
    data: Any,
    key: str | None,
    properties: Properties | None,
    max_bytes: int,
    op: bytes = b"",
    message_id: str | None = None,
) -> Encoded:
    """The ARGV values `publish.lua` takes for one ordinary (or ack-required) event, checked."""
    payload = encode_data(data)
    props = encode_properties(properties)
    encoded_key = b"" if key is None else check_key(key).encode("utf-8")
    size = len(payload) + len(props) + len(encoded_key)  # all of it is stored
    if size > max_bytes:
        raise PayloadError(
            f"event is {size} bytes with its key and properties; "
            f"the limit is {max_bytes} (setting max_payload_bytes)"
        )
    mid = check_message_id(message_id) if message_id is not None else b""
    return payload, encoded_key, props, op, mid


def check_key(key: object) -> str:
    """An event key must be a non-empty str."""
    if not isinstance(key, str) or not key:
        raise PayloadError(f"key must be a non-empty str or None, got {key!r}")
    return key


_new = object.__new__


def _plain_event(
    event_id: str, channel: str, data: bytes, props: bytes | None, count: int, mid: bytes
) -> Event:
    """An Event with no key, op or ack timeout, its fields set one by one: half the cost of
    the dataclass's `__init__` (a call with twelve parameters), on every consumer's hot
    path. Every field is set (`tests/test_event_build.py` checks it against `__init__`)."""
    event = _new(Event)
    event.id = event_id
    event.channel = channel
    event.data = data
    event.key = None
    event.raw_properties = props
    event.redelivery_count = count
    event.replayed = False
    event.owner = None
    event.destroyed = False
    event.ack_timeout_ms = None
    event.raw_message_id = mid
    event._properties = None
    return event


def event_from_entry(
    channel: str, entry: Sequence[Any], counts: Mapping[str, int] = _NO_COUNTS
) -> Event | None:
    """Build an Event from a stream entry `[id, [field, value, ...]]` as the server sent
    it (or redis-py's parsed `(id, {field: value})`).

    Returns None for an entry that was trimmed while pending (its fields are nil).
    On every consumer's hot path: a plain event (its payload alone, or with properties) is
    built without a dictionary of its fields.
    """
    fields = entry[1]
    if not fields:
        return None
    event_id = entry[0].decode()
    count = counts.get(event_id, 0) if counts else 0
    if type(fields) is not dict:  # as sent: [field, value, ...]
        size = len(fields)
        if fields[0] == F_DATA:  # as publish.lua writes: d, m and perhaps p
            if size == 4 and fields[2] == F_MESSAGE_ID:
                return _plain_event(event_id, channel, fields[1], None, count, fields[3])
            if size == 6 and fields[2] == F_MESSAGE_ID and fields[4] == F_PROPS:
                return _plain_event(event_id, channel, fields[1], fields[5], count, fields[3])
        pairs = iter(fields)
        fields = dict(zip(pairs, pairs, strict=True))
    key, op, ack = fields.get(F_KEY), fields.get(F_OP), fields.get(F_ACK)
    event = Event(
        event_id,
        channel,
        fields.get(F_DATA, b""),
        None,
        fields.get(F_PROPS),
        count,
        raw_message_id=fields.get(F_MESSAGE_ID),
    )
    if key is not None:
        event.key = key.decode()
    if op is not None:
        event.destroyed = op == OP_DESTROY
    if ack is not None:
        event.ack_timeout_ms = int(ack)
    return event


RECENT_MESSAGES = 4096
"""A reader remembers at least this many message ids handed out (at most twice as many,
and a batch)."""


class SeenMessages:
    """The message ids a reader handed out lately, to discard an event stored twice.

    A publish stored twice (a failover lost the first copy's record of its producer, a
    producer retried with its own `message_id`) is two entries with one message id: the
    second is discarded, counted and acknowledged. An event delivered again (same entry,
    same id) is not a duplicate: it comes flagged `redelivered`. Two generations of dicts,
    the older dropped whole when the newer is full (a batch may overfill it): one look-up
    per event, or one per batch (`remember_all`)."""

    __slots__ = ("_before", "_now")

    def __init__(self) -> None:
        self._now: dict[bytes, str] = {}
        self._before: dict[bytes, str] = {}

    def remember_all(self, built: Sequence[Event | None]) -> list[Event] | None:
        """A batch as built (None for an entry trimmed while pending): its events, all of
        them remembered, if every entry is an event and none shares its message id with
        another handed out lately or in the batch (the usual): one look at the batch, not
        one per event. None, and nothing remembered: `duplicate` decides each."""
        if None in built:
            return None
        events = cast(list[Event], built)
        mids = {event.raw_message_id: event.id for event in events}
        if (
            len(mids) != len(events)
            or None in mids
            or not self._now.keys().isdisjoint(mids)
            or not self._before.keys().isdisjoint(mids)
        ):
            return None
        self._now.update(cast(dict[bytes, str], mids))
        self._roll()
        return events

    def _roll(self) -> None:
        """The newer generation full: it becomes the older, the older is dropped."""
        if len(self._now) >= RECENT_MESSAGES:
            self._before, self._now = self._now, {}

    def duplicate(self, event: Event) -> bool:
        """Another entry with this event's message id was handed out lately; else remembers it."""
        mid = event.raw_message_id
        if mid is None:  # stored without one (by an older version, or a Spark sink)
            return False
        first = self._now.get(mid) or self._before.get(mid)
        if first is None:
            self._now[mid] = event.id
            self._roll()
            return False
        return first != event.id
