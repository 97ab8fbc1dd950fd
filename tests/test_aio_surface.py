"""The asyncio client has the sync client's surface: every public method and property of
each sync class, with the same parameters (awaited where it talks to the server)."""

from __future__ import annotations

import inspect

import pytest

import durables
import durables.aio as aio

PAIRS = [
    (durables.Client, aio.AsyncClient),
    (durables.Channel, aio.AsyncChannel),
    (durables.Durable, aio.AsyncDurable),
    (durables.Consumer, aio.AsyncConsumer),
    (durables.Subscription, aio.AsyncSubscription),
    (durables.Session, aio.AsyncSession),
]


def public(cls: type) -> dict[str, object]:
    """Every public member, its bases' too (both clients' classes share bases)."""
    return {n: inspect.getattr_static(cls, n) for n in dir(cls) if not n.startswith("_")}


def parameters(member: object) -> list[tuple[str, object, object]]:
    if isinstance(member, property):
        return []
    signature = inspect.signature(member)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize(("sync", "async_"), PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_the_asyncio_class_has_every_method_of_the_sync_one_with_the_same_parameters(
    sync: type, async_: type
) -> None:
    theirs = public(async_)
    missing = sorted(set(public(sync)) - set(theirs))
    assert missing == []
    differ = {
        name: (parameters(member), parameters(theirs[name]))
        for name, member in public(sync).items()
        if parameters(member) != parameters(theirs[name])
    }
    assert differ == {}


def test_the_asyncio_module_connects_with_the_same_parameters() -> None:
    assert parameters(aio.connect) == parameters(durables.connect)
    assert inspect.iscoroutinefunction(aio.connect)
