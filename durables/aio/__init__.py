"""durables for asyncio: the same channels, durables, consumers, subscriptions and sessions,
awaited, on redis-py's asyncio client.

    import durables.aio as aio
    client = await aio.connect(url)
"""

from __future__ import annotations

from ..options import ConsumerOptions, SessionOptions, SubscriptionOptions
from .channel import AsyncChannel
from .client import AsyncClient, connect
from .consumer import AsyncConsumer, AsyncSubscription
from .durable import AsyncDurable
from .session import AsyncSession

__all__ = [
    "AsyncChannel",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncDurable",
    "AsyncSession",
    "AsyncSubscription",
    "ConsumerOptions",
    "SessionOptions",
    "SubscriptionOptions",
    "connect",
]
