"""durables: durable, shared, serial and keyed subscriptions on Redis Streams."""

from __future__ import annotations

from . import permissions as permissions
from .cache import LocalCache
from .channel import Channel, ChannelInfo
from .client import Client, connect
from .consumer import Consumer
from .durable import Durable, DurableInfo, Kind
from .errors import (
    AccessDeniedError,
    AuthenticationError,
    ChannelFullError,
    ChannelNotFoundError,
    ClientClosedError,
    ConfigError,
    ConnectionLostError,
    ConsumerClosedError,
    DurableExistsError,
    DurableInUseError,
    DurableNotFoundError,
    DurablesError,
    InvalidNameError,
    InvalidStartError,
    InvalidWindowError,
    LeaseLostError,
    PayloadError,
    ReplicationError,
    SelectorError,
    ServerError,
    ServerFullError,
    ServerVersionError,
    SessionExpiredError,
    SessionInUseError,
    StalePublishError,
    UnconnectedError,
    UnsafeServerError,
    deprecated,
)
from .events import Event, Message
from .key_hash import key_hash
from .options import ConsumerOptions, SessionOptions, SubscriptionOptions
from .records import HousekeepReport, Nack, SessionInfo
from .session import ALL_KEYS, Session
from .settings import Settings
from .subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    # connecting
    "Client",
    "Settings",
    "connect",
    # channels and events
    "Channel",
    "ChannelInfo",
    "Event",
    "HousekeepReport",
    "Message",
    "Nack",
    # durables and consuming
    "Consumer",
    "ConsumerOptions",
    "Durable",
    "DurableInfo",
    "Kind",
    "key_hash",
    "Subscription",
    "SubscriptionOptions",
    # durable client sessions
    "ALL_KEYS",
    "LocalCache",
    "Session",
    "SessionInfo",
    "SessionOptions",
    # errors
    "AccessDeniedError",
    "AuthenticationError",
    "ChannelFullError",
    "ChannelNotFoundError",
    "ConfigError",
    "ConnectionLostError",
    "ClientClosedError",
    "ConsumerClosedError",
    "DurableExistsError",
    "DurableInUseError",
    "DurableNotFoundError",
    "DurablesError",
    "InvalidNameError",
    "InvalidStartError",
    "InvalidWindowError",
    "LeaseLostError",
    "PayloadError",
    "ReplicationError",
    "SelectorError",
    "ServerError",
    "ServerFullError",
    "ServerVersionError",
    "SessionExpiredError",
    "SessionInUseError",
    "StalePublishError",
    "UnconnectedError",
    "UnsafeServerError",
]


def __getattr__(name: str) -> type[DurablesError]:
    """Old error names (`ChannelNotFound`), with a `DeprecationWarning`."""
    return deprecated(__name__, name)
