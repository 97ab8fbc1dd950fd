"""The hash of an event's key, and which consumer owns a key: the one function the library
routes keys by (a keyed durable's dealing, and a partitioned channel's routing after it).

The server computes the same in Lua (`lua/lib/keyed.lua`), where numbers are doubles and
Redis's Lua has no bit operations that fakeredis's shares: so the hash is plain arithmetic
modulo a prime below 2**26, whose squares stay exact in a double. A keyed durable deals a
key to the attached consumer that scores highest for it (rendezvous hashing): a consumer
that joins takes about 1/n of the keys, one that leaves gives up only its own.
"""

from __future__ import annotations

from collections.abc import Iterable

PRIME = 67_108_859
"""The largest prime below 2**26: every value stays below it, every product below 2**53."""


def _mixed(value: int) -> int:
    """Spread a value over the whole range (keys that differ by a letter land far apart)."""
    for _ in range(2):
        value = (value * 48_271 + 11) % PRIME
        value = (value * value + 7) % PRIME
    return value


def key_hash(key: str) -> int:
    """The hash of an event key (its UTF-8 bytes): an int in [0, 2**26)."""
    value = 0
    for byte in key.encode("utf-8"):
        value = (value * 257 + byte + 1) % PRIME
    return _mixed(value)


def score(key: int, consumer: int) -> int:
    """How strongly the consumer whose id hashes to `consumer` claims the key hash `key`."""
    return _mixed((key * 65_599 + consumer) % PRIME)


def owner_of(key: str, consumers: Iterable[str]) -> str | None:
    """The consumer, of those attached, a keyed durable deals `key` to (None: none
    attached); ties, which are rare, go to the smallest id."""
    hashed = key_hash(key)
    best: tuple[int, str] | None = None
    for consumer in consumers:
        mine = score(hashed, key_hash(consumer))
        if best is None or mine > best[0] or (mine == best[0] and consumer < best[1]):
            best = (mine, consumer)
    return None if best is None else best[1]


__all__ = ["PRIME", "key_hash", "owner_of", "score"]
