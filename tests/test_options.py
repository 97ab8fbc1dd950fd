"""Options objects: `ConsumerOptions`, `SubscriptionOptions` and `SessionOptions` are the
keywords of `consumer()`, `subscribe()` and `session()` as one object, on both clients:
the same behaviour, and a bad value gets the error its keyword gets."""

from __future__ import annotations

import dataclasses

import pytest

import durables
import durables.aio as aio
from durables import ConfigError, ConsumerOptions, SessionOptions, SubscriptionOptions
from durables.errors import InvalidWindowError

from .helpers import wait_for

pytestmark = pytest.mark.both_clients


def test_both_clients_export_the_same_option_objects() -> None:
    assert aio.ConsumerOptions is ConsumerOptions
    assert aio.SubscriptionOptions is SubscriptionOptions
    assert aio.SessionOptions is SessionOptions


def test_an_options_object_equals_the_keywords(channel: durables.Channel) -> None:
    work = channel.durable("work", kind="shared")
    channel.publish_many([durables.Message(str(n)) for n in range(1, 7)])
    options = ConsumerOptions(prefetch=3, auto_ack=False)
    one, two = (
        work.consumer("one", options=options),
        work.consumer("two", prefetch=3, auto_ack=False),
    )
    with one, two:
        assert one.auto_ack is two.auto_ack is False
        first, second = one.fetch(timeout=2), two.fetch(timeout=2)
        assert len(first) == len(second) == 3  # each its window of 3
        assert one.fetch(timeout=0.2) == []  # the window is full
        one.commit()
        two.commit()
    assert work.depth() == 0 and work.transaction_depth() == 0


def test_keywords_beside_an_options_object_replace_its_fields(channel: durables.Channel) -> None:
    work = channel.durable("work", kind="shared")
    channel.publish_many([durables.Message(str(n)) for n in range(1, 5)])
    with work.consumer("one", options=ConsumerOptions(prefetch=1), prefetch=2) as one:
        assert [e.text for e in one.fetch(timeout=2)] == ["1", "2"]
        assert one.auto_ack is False  # a window: explicit acknowledgement
        one.commit()


def test_a_subscription_takes_its_options_as_an_object(channel: durables.Channel) -> None:
    got: list[str] = []
    work = channel.durable("work", kind="shared")
    sub = work.subscribe(
        lambda e: got.append(e.text), options=SubscriptionOptions(window=4, auto_ack=True)
    )
    try:
        channel.publish(b"hello")
        wait_for(lambda: got == ["hello"])
        wait_for(lambda: work.transaction_depth() == 0)
    finally:
        sub.close()


def test_a_session_takes_its_options_as_an_object(client: durables.Client) -> None:
    options = SessionOptions(timeout=30, max_depth=10, overflow="drop_oldest")
    with client.session("mobile", options=options) as s:
        info = s.info()
        assert (info.timeout_s, info.queue_limit) == (30, 10)
        assert s.overflow == "drop_oldest"
    with client.session("mobile", timeout=30, max_depth=10, overflow="drop_oldest") as again:
        assert again.resumed and again.info().queue_limit == 10


@pytest.mark.parametrize(
    ("keywords", "error", "message"),
    [
        ({"prefetch": 10**9}, InvalidWindowError, "up to 100,000"),
        ({"prefetch": 0}, InvalidWindowError, "prefetch must be a positive int"),
        ({"replicated": 17}, ConfigError, "replicated must be an int in 0..16"),
        ({"wait": -1}, ConfigError, "wait must be True, False or seconds"),
        ({"filter": "region = "}, durables.SelectorError, "region"),
    ],
)
def test_a_bad_consumer_option_gets_the_keywords_error(
    channel: durables.Channel, keywords: dict[str, object], error: type[Exception], message: str
) -> None:
    work = channel.durable("work", kind="shared")
    with pytest.raises(error, match=message):
        work.consumer(**keywords)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        ConsumerOptions(**keywords)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):  # a field of a good object replaced
        dataclasses.replace(ConsumerOptions(auto_ack=False), **keywords)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"timeout": 0}, "session timeout must be a positive number"),
        ({"max_depth": 0}, "max_depth must be a positive int"),
        ({"recovery_buffer": True}, "recovery_buffer must be a positive int"),
        ({"overflow": "spill"}, "overflow must be 'close' or 'drop_oldest'"),
        ({"replicated": -1}, "replicated must be an int in 0..16"),
    ],
)
def test_a_bad_session_option_gets_the_keywords_error(
    client: durables.Client, keywords: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        client.session("mobile", **keywords)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=message):
        SessionOptions(**keywords)  # type: ignore[arg-type]


def test_a_window_on_an_exclusive_durable_is_refused_from_an_object_too(
    channel: durables.Channel,
) -> None:
    billing = channel.durable("billing")
    with pytest.raises(InvalidWindowError, match="shared and serial durables only"):
        billing.consumer(options=ConsumerOptions(prefetch=2))
    with pytest.raises(InvalidWindowError, match="shared and serial durables only"):
        billing.subscribe(lambda e: None, options=SubscriptionOptions(window=2))


def test_options_of_another_kind_are_refused(channel: durables.Channel) -> None:
    work = channel.durable("work", kind="shared")
    with pytest.raises(ConfigError, match="options must be a ConsumerOptions"):
        work.consumer(options=SubscriptionOptions(window=2))  # type: ignore[arg-type]
