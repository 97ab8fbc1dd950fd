"""Durable client sessions (GemFire's durable clients): interest, marker replay, client cache,
bad input.

Disconnects, timeouts and keep-alive are in `test_session_disconnects.py`."""

from __future__ import annotations

import logging
import time

import pytest

import durables
from durables import ALL_KEYS, ChannelNotFoundError, ConfigError, SessionInUseError

from .session_support import Recorder, wait_for

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def test_replay_then_after_region_live_then_live_events_update_the_cache(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("mobile", timeout=30) as s:
        s.register_interest("prices")
    prices.publish(b"100", key="AAPL")  # queued while away
    prices.publish(b"101", key="AAPL")
    rec = Recorder()
    with client.session("mobile", timeout=30) as s:
        assert s.resumed
        s.cache("prices").put("AAPL", b"99-local")
        s.add_listener("prices", rec)
        s.ready_for_events()
        wait_for(rec, 2)
        assert rec.live.wait(5)
        assert s.cache("prices").get("AAPL") == b"99-local"  # replayed events left it alone
        prices.publish(b"102", key="AAPL")
        wait_for(rec, 3)
        assert s.cache("prices").get("AAPL") == b"102"  # the live one updated it
    assert rec.log == [
        ("event", "100", True),
        ("event", "101", True),
        ("live", "prices", False),
        ("event", "102", False),
    ]


def test_a_brand_new_session_replays_what_came_between_registration_and_ready(
    client: durables.Client, prices: durables.Channel
) -> None:
    rec = Recorder()
    with client.session("fresh", timeout=30) as s:
        assert not s.resumed
        s.register_interest("prices")
        prices.publish(b"1", key="A")
        s.add_listener("prices", rec)
        s.ready_for_events()
        wait_for(rec, 1)
        assert rec.live.wait(5)
        prices.publish(b"2", key="A")
        wait_for(rec, 2)
    assert rec.log == [("event", "1", True), ("live", "prices", False), ("event", "2", False)]


def test_after_region_live_comes_once_per_channel_even_with_nothing_to_replay(
    client: durables.Client, prices: durables.Channel
) -> None:
    client.channel("news")
    rec = Recorder()
    with client.session("two", timeout=30) as s:
        s.register_interest("prices")
        s.register_interest("news")
        s.add_listener("prices", rec)
        s.add_listener("news", rec)
        s.ready_for_events()
        deadline = time.monotonic() + 5
        while len(rec.log) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        client.channel("news").publish(b"n1")
        wait_for(rec, 1)
    assert sorted(rec.log[:2]) == [("live", "news", False), ("live", "prices", False)]
    assert rec.log[2:] == [("event", "n1", False)]


def test_interest_in_some_keys_or_a_regex_queues_only_those(
    client: durables.Client, prices: durables.Channel
) -> None:
    rec = Recorder()
    with client.session("picky", timeout=30) as s:
        s.register_interest("prices", ["AAPL"])
        s.register_interest("prices", regex="MS.*")  # replaces the first interest
        s.add_listener("prices", rec)
        s.ready_for_events()
        for key in ("AAPL", "MSFT", "MSCI", "IBM"):
            prices.publish(key.encode(), key=key)
        wait_for(rec, 2)
        time.sleep(0.2)
    assert [text for kind, text, _ in rec.log if kind == "event"] == ["MSFT", "MSCI"]


# -- interest responses and the client cache ------------------------------------------


def test_interest_response_fills_an_empty_cache_with_current_values(
    client: durables.Client, prices: durables.Channel
) -> None:
    prices.publish(b"100", key="AAPL")
    prices.publish(b"50", key="MSFT")
    with client.session("s", timeout=30) as s:
        assert s.register_interest("prices", ["AAPL"]) == {"AAPL": b"100"}
        assert s.cache("prices").items() == {"AAPL": b"100"}


def test_interest_response_rules_one_by_one(
    client: durables.Client, prices: durables.Channel
) -> None:
    for key, value in (("valid", b"server"), ("invalid", b"server"), ("destroyed", b"server")):
        prices.publish(value, key=key)
    with client.session("s", timeout=30) as s:
        cache = s.cache("prices")
        cache.put("valid", b"app")  # an application operation came first
        cache.invalidate("invalid")
        cache.destroy("destroyed")
        s.register_interest("prices")
        assert cache.get("valid") == b"app"  # a valid entry is not overwritten
        assert cache.get("invalid") == b"server"  # an invalid one is replaced
        assert cache.entry("destroyed") is None  # not updated, removed after the response
        assert "destroyed" not in cache


def test_an_empty_interest_response_leaves_the_cache_empty(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("s", timeout=30) as s:
        assert s.register_interest("prices") == {}
        assert len(s.cache("prices")) == 0


def test_live_tombstones_remove_cache_entries(
    client: durables.Client, prices: durables.Channel
) -> None:
    rec = Recorder()
    with client.session("s", timeout=30) as s:
        s.register_interest("prices")
        s.add_listener("prices", rec)
        s.ready_for_events()
        assert rec.live.wait(5)
        prices.publish(b"1", key="K")
        wait_for(rec, 1)
        assert s.cache("prices").get("K") == b"1"
        prices.remove_key("K")
        wait_for(rec, 2)
        assert s.cache("prices").entry("K") is None


# -- bad input -------------------------------------------------------------------------


def test_bad_interests_and_a_second_live_session_are_refused(
    client: durables.Client, prices: durables.Channel
) -> None:
    with client.session("first", timeout=30) as first:
        with pytest.raises(ChannelNotFoundError):
            first.register_interest("no-such-channel")
        with pytest.raises(ConfigError, match="regex"):
            first.register_interest("prices", regex="(unclosed")
        with pytest.raises(ConfigError):
            first.register_interest("prices", keys="AAPL")
        with pytest.raises(SessionInUseError):
            client.session("first", timeout=30)
        first.register_interest("prices")  # the first keeps working
        first.put("prices", "A", b"1")
        assert set(first.interests) == {"prices"}
    with pytest.raises(durables.InvalidNameError):
        client.session("bad id", timeout=30)
    with pytest.raises(ConfigError):
        client.session("ok", timeout=0)
    assert ALL_KEYS is durables.ALL_KEYS


def test_a_deliberate_close_is_logged_as_news_not_as_a_warning(
    client: durables.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="durables"), client.session("calm", timeout=30):
        pass
    closes = [r for r in caplog.records if "-> closed" in r.getMessage()]
    assert closes and all(r.levelno == logging.INFO for r in closes)


def test_a_plain_function_is_a_listener_and_anything_else_is_refused_at_once(
    client: durables.Client,
) -> None:
    got: list[str] = []
    channel = client.channel("orders")
    with client.session("fn", timeout=30) as s:
        s.register_interest("orders")
        s.add_listener("orders", lambda event: got.append(event.text))
        with pytest.raises(ConfigError, match="function of the event or an object"):
            s.add_listener("orders", 42)  # type: ignore[arg-type]
        s.ready_for_events()
        channel.publish("hello")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
    assert got == ["hello"]
