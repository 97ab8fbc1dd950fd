"""How a multi-channel read is split by hash slot, without a server."""

from __future__ import annotations

from redis.crc import key_slot

from durables import routing
from durables.keys import ChannelKeys

READ = ("XREADGROUP", "GROUP", "~session:s", "c", "COUNT", 10, "BLOCK", 200, "STREAMS")


def stream(channel: str) -> str:
    return ChannelKeys("ns", channel).stream


def test_a_read_of_channels_in_one_slot_is_not_split() -> None:
    assert routing.split_read((*READ, stream("a"), stream("a"), "0", ">")) is None


def test_a_read_is_split_by_slot_keeping_each_stream_with_its_position() -> None:
    names = ["a", "b", "c", "d"]
    assert len({key_slot(stream(n).encode()) for n in names}) == 4
    parts = routing.split_read((*READ, *map(stream, names), "0", ">", "5-0", ">"))
    assert parts == [
        (*READ, stream("a"), "0"),
        (*READ, stream("b"), ">"),
        (*READ, stream("c"), "5-0"),
        (*READ, stream("d"), ">"),
    ]


def test_two_channels_sharing_a_tag_slot_are_read_together() -> None:
    same = "ns:{a}:other"  # any key tagged {a} shares the slot of channel a's stream
    parts = routing.split_read((*READ, stream("a"), stream("b"), same, "1-0", ">", "2-0"))
    assert parts == [(*READ, stream("a"), same, "1-0", "2-0"), (*READ, stream("b"), ">")]


def test_merge_joins_resp2_and_resp3_replies_and_gives_none_for_nothing() -> None:
    assert routing.merge([None, [[b"s1", [1]]], [], [[b"s2", [2]]]]) == [
        [b"s1", [1]],
        [b"s2", [2]],
    ]
    assert routing.merge([{b"s1": [1]}, None, {b"s2": [2]}]) == {b"s1": [1], b"s2": [2]}
    assert routing.merge([None, []]) is None
