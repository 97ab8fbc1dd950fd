"""How a multi-channel read is split by hash slot and a pipeline grouped by node, without a
server: `durables.io.routing`'s decisions and plans, as both clients carry them out."""

from __future__ import annotations

from typing import Any

import pytest
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from durables import verdicts
from durables.io import routing
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


def test_the_slot_of_a_read_is_found_without_the_server_and_only_for_reads() -> None:
    slot = key_slot(stream("a").encode())
    assert routing.read_slot((*READ, stream("a"), ">")) == slot
    assert (
        routing.read_slot(("XREAD", "COUNT", 1, "STREAMS", stream("a"), "ns:{a}:x", "0", "0"))
        == slot
    )
    names = ["a", "b"]
    assert len({key_slot(stream(n).encode()) for n in names}) == 2
    assert routing.read_slot((*READ, stream("a"), stream("b"), ">", ">")) is None  # split first
    assert routing.read_slot(("XACK", stream("a"), "g", "1-0")) is None  # redis-py places it


def test_merge_joins_resp2_and_resp3_replies_and_gives_none_for_nothing() -> None:
    assert routing.merge([None, [[b"s1", [1]]], [], [[b"s2", [2]]]]) == [
        [b"s1", [1]],
        [b"s2", [2]],
    ]
    assert routing.merge([{b"s1": [1]}, None, {b"s2": [2]}]) == {b"s1": [1], b"s2": [2]}
    assert routing.merge([None, []]) is None


def test_a_wait_goes_to_the_node_of_the_write_before_it_and_keyless_ones_apart() -> None:
    commands = [("EVALSHA", "s", 1, "k1"), ("WAIT", 1, 100), ("XLEN", "k2"), ("PING",)]
    assert routing.by_node(commands, ["n1", None, "n2", None]) == {
        "n1": [0, 1],
        "n2": [2],
        None: [3],
    }


def test_a_pipeline_plan_sends_again_only_what_was_redirected_and_raises_an_outage() -> None:
    commands = [("XLEN", "a"), ("XLEN", "b")]
    plan = routing.pipeline(commands, ["n1", "n1"])
    step = next(plan)
    assert step == routing.OnNode("n1", [("XLEN", "a"), ("XLEN", "b")])
    moved = MovedError("1 127.0.0.1:7001")
    assert plan.send([3, moved]) == routing.Send(("XLEN", "b"))
    with pytest.raises(StopIteration) as done:
        plan.send(5)
    assert done.value.value == [3, 5]

    plan = routing.pipeline(commands, ["n1", "n1"])
    next(plan)
    with pytest.raises(ClusterDownError):
        plan.send([3, ClusterDownError("CLUSTERDOWN The cluster is down")])


NON_LOCAL = "Attempted to access a non local key in a cluster node script: on @user_script:129."


def test_replies_of_a_slot_moving_are_told_from_an_outage_and_from_other_errors() -> None:
    moving = [
        MovedError("3999 127.0.0.1:7001"),
        AskError("3999 127.0.0.1:7001"),
        TryAgainError("Multiple keys request during rehashing of slot"),
        ClusterError("TTL exhausted."),
        ResponseError(NON_LOCAL),
    ]
    assert all(verdicts.moving(exc) for exc in moving)
    others = [
        ClusterDownError("The cluster is down"),  # a shard without its primary: an outage
        ResponseError("NOGROUP No such key"),
        ResponseError("FULL 100"),
        RedisConnectionError("Connection refused"),
    ]
    assert not any(verdicts.moving(exc) for exc in others)


def test_a_pipeline_plan_raises_a_script_stopped_at_a_moved_key() -> None:
    plan = routing.pipeline([("EVALSHA", "x", 1, "a"), ("XLEN", "a")], ["n1", "n1"])
    next(plan)
    with pytest.raises(ResponseError, match="non local key"):
        plan.send([ResponseError(NON_LOCAL), 3])


def sent(step: routing.Step) -> tuple[Any, ...]:
    assert isinstance(step, routing.Send)
    return step.args


def test_a_split_read_reads_each_slot_once_then_blocks_on_each_in_slices() -> None:
    now = [0.0]
    plan = routing.read_by_slot((*READ, stream("a"), stream("b"), ">", ">"), lambda: now[0])
    first = [sent(next(plan)), sent(plan.send(None))]
    assert [routing.block_ms(args) for args in first] == [None, None]
    slices = [sent(plan.send(None))]  # BLOCK 200 over two slots: 50 ms each in turn
    for _ in range(3):
        now[0] += 0.04
        slices.append(sent(plan.send(None)))
    assert [routing.block_ms(args) for args in slices] == [50, 50, 50, 50]
    assert [args[-2] for args in slices] == [stream("a"), stream("b")] * 2
    with pytest.raises(StopIteration) as done:
        plan.send([[stream("b").encode(), [(b"1-0", {})]]])
    assert done.value.value == [[stream("b").encode(), [(b"1-0", {})]]]

    plan = routing.read_by_slot((*READ, stream("a"), stream("b"), ">", ">"), lambda: now[0])
    next(plan), plan.send(None), plan.send(None)
    now[0] += 0.2
    with pytest.raises(StopIteration) as done:
        plan.send(None)  # the block time is over: nothing came
    assert done.value.value is None
