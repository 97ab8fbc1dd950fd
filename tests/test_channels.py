"""Channels and durables: publishing, listing, retention until every durable acked, purge."""

from __future__ import annotations

import time

import pytest

import durables
from durables import (
    ChannelFullError,
    ChannelNotFoundError,
    DurableExistsError,
    DurableNotFoundError,
)

from .helpers import fetch_all, publish

pytestmark = [pytest.mark.on_cluster, pytest.mark.both_clients]


def test_publish_returns_ordered_ids_and_payloads_round_trip(channel: durables.Channel) -> None:
    a = channel.publish(b"\x00raw")
    b = channel.publish("text", key="k1", properties={"region": "eu", "qty": 7, "vip": True})
    c = channel.publish({"json": [1, 2]}, properties={"price": 1.5})
    assert a < b or len(a) < len(b) or a.split("-") < b.split("-")
    dur = channel.durable("reader")
    with dur.consumer() as consumer:
        got = fetch_all(consumer, 3)
    assert [e.id for e in got] == [a, b, c]
    assert got[0].data == b"\x00raw" and got[0].key is None and got[0].properties == {}
    assert got[1].text == "text" and got[1].key == "k1"
    assert got[1].properties == {"region": "eu", "qty": 7, "vip": True}
    assert got[2].json() == {"json": [1, 2]} and got[2].properties == {"price": 1.5}
    assert abs(got[0].timestamp.timestamp() - time.time()) < 60


def test_publish_many_stores_all_in_order(channel: durables.Channel) -> None:
    ids = publish(channel, 2500)  # more than one script call
    info = channel.info()
    assert info.length == 2500 and info.first_id == ids[0] and info.last_id == ids[-1]
    assert len(set(ids)) == 2500


def test_channels_are_listed_with_their_durables(client: durables.Client) -> None:
    client.channel("a").durable("x")
    client.channel("b", ttl=60, capacity=10)
    infos = {i.name: i for i in client.channels()}
    assert set(infos) == {"a", "b"}
    assert infos["a"].durables == ("x",)
    assert infos["b"].ttl_s == 60 and infos["b"].capacity == 10 and infos["b"].full == "reject"


def test_channel_options_left_out_keep_their_stored_value(client: durables.Client) -> None:
    client.channel("prices", keyed=True, ttl=30)
    info = client.channel("prices").info()
    assert info.keyed and info.ttl_s == 30


def test_durable_get_or_create_keeps_the_stored_spec(channel: durables.Channel) -> None:
    channel.durable("billing", kind="shared", filter="region = 'eu'")
    again = channel.durable("billing", kind="shared", filter="region = 'eu'")
    assert again.kind == "shared" and again.spec.filter == "region = 'eu'"
    with pytest.raises(DurableExistsError, match="kind='shared'"):
        channel.durable("billing", kind="serial", filter="region = 'eu'")
    with pytest.raises(DurableExistsError):
        channel.durable("billing", kind="shared")
    assert channel.get_durable("billing").kind == "shared"
    assert [d.name for d in channel.durables()] == ["billing"]


def test_a_durable_asked_for_without_a_kind_is_the_existing_one_whatever_its_kind(
    channel: durables.Channel,
) -> None:
    channel.durable("jobs", kind="shared")
    assert channel.durable("jobs").kind == "shared"
    assert channel.durable("fresh").kind == "exclusive"  # none yet: an exclusive one
    with pytest.raises(DurableExistsError, match="filter='qty > 1'"):
        channel.durable("jobs", filter="qty > 1")  # the filter still has to agree


def test_a_durable_asked_for_by_name_alone_is_the_stored_one_whatever_its_filter(
    channel: durables.Channel,
) -> None:
    channel.publish(b"x", properties={"region": "eu"})
    channel.durable("eu", kind="shared", filter="region = 'eu'", start="earliest")
    found = channel.durable("eu")
    assert found.kind == "shared" and found.spec.filter == "region = 'eu'"
    assert found.depth() == 1
    with pytest.raises(DurableExistsError, match=r"get_durable\('eu'\)"):
        channel.durable("eu", filter="region = 'us'")  # a filter given must still agree
    with pytest.raises(DurableExistsError, match=r"get_durable\('eu'\)"):
        channel.durable("eu", kind="shared")  # as must a kind given with no filter


def test_filters_of_one_meaning_are_the_same_filter(channel: durables.Channel) -> None:
    channel.durable("eu", kind="shared", filter="region = 'eu' AND qty > 5")
    again = channel.durable("eu", kind="shared", filter="region='eu'   and qty>5")
    assert again.spec.filter == "region = 'eu' AND qty > 5"  # the stored text stays
    with pytest.raises(DurableExistsError):
        channel.durable("eu", kind="shared", filter="region = 'eu' AND qty > 6")


def test_a_start_for_an_existing_durable_with_another_is_warned_about(
    channel: durables.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    publish(channel, 2)
    channel.durable("audit")  # from the earliest
    with caplog.at_level("WARNING", logger="durables.durable"):
        audit = channel.durable("audit", start="latest")
        channel.durable("audit", start="earliest")  # as stored: nothing to say

    assert audit.depth() == 2  # it kept its position
    assert [r.getMessage() for r in caplog.records] == [
        "durable 'audit' on 'orders' exists with start='earliest': start='latest' applies "
        "only when a durable is created, so it keeps its position (delete it and create it "
        "again to move it)"
    ]


def test_missing_things_raise_not_found(client: durables.Client) -> None:
    with pytest.raises(ChannelNotFoundError):
        client.get_channel("nope")
    ch = client.channel("orders")
    with pytest.raises(DurableNotFoundError):
        ch.get_durable("nope")
    ch.delete()
    with pytest.raises(ChannelNotFoundError):
        ch.publish(b"x")
    with pytest.raises(ChannelNotFoundError):
        ch.durable("late")


@pytest.mark.parametrize(
    ("before", "after"), [("keyed", "shared"), ("shared", "serial"), ("serial", "keyed")]
)
def test_a_consumer_whose_durable_was_made_again_as_another_kind_is_told_it_is_gone(
    channel: durables.Channel, before: durables.Kind, after: durables.Kind
) -> None:
    """A durable deleted and made again under its name as another kind is another durable:
    a consumer of the first is told at once that its durable is gone, and is not served by
    the new one's dealing under its own kind's rules (a keyed consumer failed with an
    IndexError on a shared durable's reply)."""
    dur = channel.durable("orders", kind=before)
    with dur.consumer("c", prefetch=5) as consumer:
        channel.publish(b"a", key="k")
        assert [e.data for e in consumer.fetch(timeout=2)] == [b"a"]
        dur.delete()
        channel.durable("orders", kind=after)
        channel.publish(b"b", key="k")
        started = time.monotonic()
        with pytest.raises(DurableNotFoundError, match=f"made again as a {after} durable"):
            consumer.fetch(timeout=2)
        assert time.monotonic() - started < 1.5


def test_delete_channel_removes_events_durables_and_registry(client: durables.Client) -> None:
    ch = client.channel("orders")
    dur = ch.durable("x")
    publish(ch, 3)
    with dur.consumer() as c:  # an exclusive holder's gate
        assert len(c.fetch(timeout=1)) == 3
    holder = dur.consumer("still-attached")  # its gate stays until the durable goes
    assert client.redis.keys(f"{client.namespace}:*gate*")
    assert ch.delete() is True
    assert client.channels() == []
    assert client.redis.keys(f"{client.namespace}:*") == []
    holder.close()
    assert ch.delete() is False


def test_delete_durable_keeps_the_channel_and_the_other_durables(
    channel: durables.Channel,
) -> None:
    one, two = channel.durable("one"), channel.durable("two")
    publish(channel, 2)
    holder = one.consumer()
    assert one.delete() is True and one.delete() is False
    holder.close()
    ns = channel.ctx.namespace
    assert channel.ctx.executor.redis.keys(f"{ns}:*:one*") == []  # its gate went too
    assert two.depth() == 2 and channel.info().durables == ("two",)


def test_start_latest_and_start_at_an_event_id(channel: durables.Channel) -> None:
    ids = publish(channel, 5)
    latest = channel.durable("latest", start="latest")
    middle = channel.durable("middle", start=ids[2])
    publish(channel, 1, start=6)
    assert latest.depth() == 1 and middle.depth() == 4
    with middle.consumer() as c:
        assert [e.text for e in fetch_all(c, 4)] == ["e3", "e4", "e5", "e6"]


def test_two_durables_each_get_every_event_and_retention_waits_for_both(
    client: durables.Client, channel: durables.Channel
) -> None:
    first, second = channel.durable("first"), channel.durable("second")
    publish(channel, 20)
    with first.consumer() as c:
        assert [e.text for e in fetch_all(c, 20)] == [f"e{i}" for i in range(1, 21)]
    client.housekeep()
    assert channel.info().length == 20  # the second has not acked yet
    with second.consumer(auto_ack=False) as c:
        got = fetch_all(c, 20)
        assert [e.text for e in got] == [f"e{i}" for i in range(1, 21)]
        got[9].ack()
    report = client.housekeep()
    assert report.removed == {"orders": 10}
    assert channel.info().length == 10
    assert channel.info().first_id == got[10].id
    with second.consumer() as c:
        assert len(fetch_all(c, 10)) == 10
    client.housekeep()
    assert channel.info().length == 0
    assert first.depth() == 0 and second.depth() == 0


def test_a_channel_without_durables_keeps_its_events(
    client: durables.Client, channel: durables.Channel
) -> None:
    publish(channel, 5)
    client.housekeep()
    assert channel.info().length == 5
    late = channel.durable("late")
    assert late.depth() == 5


def test_purge_up_to_the_last_sequence_of_a_millisecond_removes_that_millisecond(
    channel: durables.Channel,
) -> None:
    ids = publish(channel, 3)
    ms = int(ids[1].partition("-")[0])
    later = [i for i in ids if int(i.partition("-")[0]) > ms]
    assert channel.purge(up_to=f"{ms}-18446744073709551615") == len(ids) - len(later)
    assert channel.info().length == len(later)


def test_purge_removes_events_and_flows_to_durables(channel: durables.Channel) -> None:
    dur = channel.durable("audit")
    ids = publish(channel, 4)
    with dur.consumer(auto_ack=False) as c:
        fetch_all(c, 4)  # e1..e4 pending
    ids += publish(channel, 6, start=5)
    assert dur.transaction_depth() == 4 and dur.depth() == 6
    assert channel.purge(up_to=ids[5]) == 6
    assert dur.transaction_depth() == 0 and dur.depth() == 4
    with dur.consumer() as c:
        assert [e.text for e in fetch_all(c, 4)] == ["e7", "e8", "e9", "e10"]
    publish(channel, 3, start=11)
    assert channel.purge() == 7  # e7..e10 (acked, not trimmed yet) and e11..e13
    assert channel.info().length == 0 and dur.depth() == 0


def test_ttl_removes_expired_events_even_if_unacknowledged(
    client: durables.Client,
) -> None:
    ch = client.channel("short", ttl=0.3)
    dur = ch.durable("slow")
    publish(ch, 3)
    time.sleep(0.5)
    publish(ch, 1, start=4)
    client.housekeep()
    assert ch.info().length == 1 and dur.depth() == 1
    with dur.consumer() as c:
        assert [e.text for e in fetch_all(c, 1)] == ["e4"]


def test_a_full_channel_rejects_rather_than_dropping_what_a_durable_needs(
    client: durables.Client,
) -> None:
    ch = client.channel("bounded", capacity=5)
    dur = ch.durable("d")
    publish(ch, 5)
    with pytest.raises(ChannelFullError, match="capacity of 5"):
        ch.publish(b"one too many")
    assert ch.info().length == 5
    with dur.consumer(auto_ack=False) as c:
        fetch_all(c, 5)[1].ack()
    # two acknowledged: publishing trims them and makes room
    publish(ch, 2, start=6)
    assert ch.info().length == 5


def test_a_full_channel_may_drop_oldest_when_it_says_so(client: durables.Client) -> None:
    ch = client.channel("lossy", capacity=3, full="drop_oldest")
    dur = ch.durable("d")
    publish(ch, 5)
    assert ch.info().length == 3
    client.housekeep()
    with dur.consumer() as c:
        assert [e.text for e in fetch_all(c, 3)] == ["e3", "e4", "e5"]


def test_busy_clients_trim_acknowledged_events_as_they_go(server_url: str, namespace: str) -> None:
    with durables.connect(server_url, namespace=namespace, housekeep_interval_s=0) as client:
        ch = client.channel("orders")
        dur = ch.durable("only")
        publish(ch, 10)
        with dur.consumer() as c:
            fetch_all(c, 10)
        assert ch.info().length == 0  # the ack at close trimmed them, no housekeep() call


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial"])
def test_events_a_filter_rejects_do_not_hold_back_retention_even_with_no_consumer(
    client: durables.Client, channel: durables.Channel, kind: str
) -> None:
    picky = channel.durable("picky", kind=kind, filter="vip = TRUE")  # type: ignore[arg-type]
    channel.publish_many(
        [durables.Message(f"e{i}", properties={"vip": i in (4, 5)}) for i in range(1, 8)]
    )
    assert picky.depth() == 2
    assert client.housekeep().removed == {"orders": 3}  # e1..e3: nobody will ever want them
    assert channel.info().length == 4 and picky.depth() == 2
    with picky.consumer() as c:
        assert [e.text for e in fetch_all(c, 2)] == ["e4", "e5"]
    client.housekeep()
    assert channel.info().length == 0 and picky.depth() == 0


def test_a_keyed_channel_keeps_the_last_value_of_every_key(client: durables.Client) -> None:
    ch = client.channel("prices", keyed=True)
    ch.publish(b"100", key="AAPL")
    last = ch.publish(b"101", key="AAPL")
    ch.publish(b"50", key="MSFT")
    ch.publish(b"no key")
    assert ch.last_values() == {
        "AAPL": (last, b"101"),
        "MSFT": (ch.last_values()["MSFT"][0], b"50"),
    }
    ch.remove_key("MSFT")
    assert set(ch.last_values()) == {"AAPL"}
    assert (
        client.channel("plain").publish(b"1", key="k")
        and client.channel("plain").last_values() == {}
    )
    ch.delete()
    assert client.redis.keys(f"{client.namespace}:{{prices}}:*") == []


def test_a_mixed_batch_round_trips_every_event_exactly(client: durables.Client) -> None:
    ch = client.channel("prices", keyed=True)
    shapes = [
        lambda i: durables.Message(f"plain {i}"),
        lambda i: durables.Message(f"props {i}", properties={"n": i, "vip": i % 2 == 0}),
        lambda i: durables.Message(f"keyed {i}", key=f"k{i % 7}"),
        lambda i: durables.Message(f"both {i}", key=f"k{i % 5}", properties={"x": 1.5}),
        lambda i: durables.Message(f"deduped {i}", message_id=f"m{i % 60}"),
        lambda i: durables.Message(f"all {i}", key="kz", properties={"s": "é"}, message_id=f"a{i}"),
    ]
    messages = [shapes[i * 5 % 6](i) for i in range(2500)]  # three script calls
    ids = ch.publish_many(messages)
    ack = ch.publish(
        "ack", key="k1", properties={"p": 1}, ack_required=True, ack_timeout=60, message_id="ack-1"
    )
    assert ch.publish("ack again", message_id="ack-1") == ack
    ch.remove_key("k2")

    first: dict[str, str] = {}  # message id -> the id it was stored under
    stored, last = [], {}
    for m, event_id in zip(messages, ids, strict=True):
        if m.message_id in first:
            assert event_id == first[m.message_id]  # seen before: its first id stands
            continue
        if m.message_id:
            first[m.message_id] = event_id
        stored.append((event_id, m))
        if m.key:
            last[m.key] = (event_id, m.data.encode())
    assert len(stored) < 2500 and len(set(ids)) == len(stored)
    last["k1"] = (ack, b"ack")
    del last["k2"]
    with ch.durable("reader").consumer() as c:
        got = fetch_all(c, len(stored) + 2, timeout=20)
    assert [e.id for e in got] == [event_id for event_id, _ in stored] + [ack, got[-1].id]
    for (_, m), e in zip(stored, got, strict=False):
        assert (e.text, e.key, e.properties) == (m.data, m.key, m.properties or {})
        assert not e.destroyed and not e.ack_required
    assert (got[-2].text, got[-2].key, got[-2].properties) == ("ack", "k1", {"p": 1})
    assert got[-2].ack_timeout_ms == 60_000 and not got[-2].destroyed
    assert got[-1].destroyed and got[-1].key == "k2" and got[-1].data == b""
    assert ch.last_values() == last
