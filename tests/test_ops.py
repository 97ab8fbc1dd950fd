"""The pure layer without a server: the exact commands operations send and how their
replies are read (the readers' state machines: test_reader_states.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from redis.connection import Connection

import durables
from durables import keys, scripts
from durables.events import Batch, pack
from durables.ops import channels, sessions
from durables.ops import durables as durable_ops
from durables.ops.base import Op, command
from durables.readers.exclusive.cursor import ExclusiveCursor
from durables.readers.shared.handout import SharedHandout
from durables.records import DurableSpec

K = keys.ChannelKeys("ns", "orders")


def wire_bytes(op: Op[Any]) -> bytes:
    """The bytes redis-py puts on the socket for `op` (RESP), as the executor sends it."""
    sha = scripts.sha(op.script) if op.script else ""
    packed: list[bytes] = Connection().pack_command(*op.wire(sha))  # type: ignore[no-untyped-call]
    return b"".join(packed)


def entry(event_id: str, **fields: str) -> tuple[bytes, list[bytes]]:
    flat = [part.encode() for item in fields.items() for part in item]
    return event_id.encode(), flat


# -- commands and scripts as bytes ------------------------------------------------------


def test_a_command_is_sent_as_it_is_written() -> None:
    assert wire_bytes(command("XLEN", K.stream)) == b"*2\r\n$4\r\nXLEN\r\n$13\r\nns:{orders}:s\r\n"


def test_a_script_call_is_evalsha_with_its_keys_then_its_args() -> None:
    op = channels.publish(K, Batch.of((b"data", b"", b"", b"", b"m-1")), 5000, "p.0", 7)
    sha = scripts.sha("publish")
    assert op.wire(sha) == (
        "EVALSHA",
        sha,
        9,
        K.stream,
        K.meta,
        K.session_trips,
        K.session_limits,
        K.overflowed,
        K.last_values,
        K.last_ids,
        K.message_ids,
        K.message_times,
        5000,
        b"x",
        "p.0",
        7,
        b"data",
        b"",
        b"",
        b"",
        b"m-1",
    )
    assert wire_bytes(op).startswith(b"*21\r\n$7\r\nEVALSHA\r\n$40\r\n" + sha.encode())


def test_a_publish_of_plain_events_names_only_the_keys_it_may_touch() -> None:
    plain = Batch.of((b"a", b"", b"", b"", b""), (b"b", b"", b"{}", b"", b""))
    op = channels.publish(K, plain, 0, "p.0", 1)
    assert op.wire("sha")[:8] == (
        "EVALSHA",
        "sha",
        5,
        K.stream,
        K.meta,
        K.session_trips,
        K.session_limits,
        K.overflowed,
    )
    keyed = Batch.of((b"a", b"", b"", b"", b""), (b"b", b"k1", b"", b"", b""))
    assert channels.publish(K, keyed, 0, "p.0", 1).wire("sha")[2] == 9
    # where no session has a trip point, the stream and the meta hash alone
    bare = channels.publish(K, plain, 0, "p.0", 1, trips=False)
    assert bare.wire("sha")[:5] == ("EVALSHA", "sha", 2, K.stream, K.meta)
    assert channels.publish(K, keyed, 0, "p.0", 1, trips=False).wire("sha")[2] == 9


def test_a_batch_sends_each_event_with_only_the_values_its_shape_names() -> None:
    batch = Batch.of(
        (b"plain", b"", b"", b"", b""),
        (b"with-props", b"", b'{"n":1}', b"", b""),
        (b"keyed", b"k1", b"", b"", b""),
        (b"", b"k1", b"", b"destroy", b""),
        (b"acked", b"", b"", b"ack:500", b""),
    )
    op = channels.publish(K, batch, 0, "p.0", 1)
    assert op.args == (
        0,
        b"dpkxx",
        "p.0",
        1,
        b"plain",
        b"with-props",
        b'{"n":1}',
        b"keyed",
        b"k1",
        b"",
        b"",
        b"k1",
        b"",
        b"destroy",
        b"",
        b"acked",
        b"",
        b"",
        b"ack:500",
        b"",
    )


def test_events_are_packed_in_order_into_batches_of_at_most_the_size() -> None:
    plain, keyed = (b"a", b"", b"", b"", b""), (b"b", b"k", b"", b"", b"")
    batches = pack([plain, keyed, plain, keyed, plain], 2)
    assert [bytes(b.shape) for b in batches] == [b"dk", b"dk", b"d"]
    assert [b.values for b in batches] == [[b"a", b"b", b"k", b""]] * 2 + [[b"a"]]
    assert pack([], 2) == []


def test_script_shas_are_the_sha1_of_the_spliced_source() -> None:
    for name in scripts.NAMES:
        text = scripts.source(name)
        assert not any(line.startswith("--@include") for line in text.splitlines()), name
        assert scripts.sha(name) == hashlib.sha1(text.encode()).hexdigest()


def test_scripts_leave_out_the_library_functions_they_never_call() -> None:
    """Lua makes a closure for every `local function` at each call of a script: a waiting
    shared consumer's scripts defined about forty library functions per event, most of
    which they never call. What is left out is what nothing names; what is called stays."""
    join, settle = scripts.source("join_shared"), scripts.source("settle_shared")
    assert "local function pick(" not in join + settle  # the dispatcher's, never called
    assert "local function rooms(" not in join and "local function rooms(" in settle
    assert "local function watch(" in join and "local function set_tap(" in join
    assert "local function pick(" in scripts.source("fetch_shared")
    # one dispatcher per kind: each defines only what its kind calls
    assert "local function deal_keyed(" not in scripts.source("fetch_shared")
    assert "local function settle(" not in scripts.source("fetch_serial")
    assert "local function settle(" not in scripts.source("fetch_keyed")
    assert "local function deal_keyed(" in scripts.source("fetch_keyed")
    kept = scripts.unused_dropped(
        "local function a()\n  return b()\nend\nlocal function b()\n  return 1\nend\n"
        "local function c()\n  return a()\nend\n-- c() is named in a comment only\nreturn a()\n"
    )
    assert kept == (
        "local function a()\n  return b()\nend\nlocal function b()\n  return 1\nend\n"
        "-- c() is named in a comment only\nreturn a()\n"
    )


def test_every_key_of_a_channel_operation_shares_the_channel_hash_tag() -> None:
    ops: list[Op[Any]] = [
        channels.publish(K, Batch(), 0, "p.0", 1),
        durable_ops.delete(K, "d"),
        ExclusiveCursor(K, "d", "t", lease_ms=1000, batch=10).attach(),
        *SharedHandout(K, "d", "shared", "c#1", window=2, lease_ms=1000).release([]),
    ]
    for op in ops:
        assert op.keys and all("{orders}" in k for k in op.keys), op


def test_channel_info_reads_five_replies_into_a_record() -> None:
    replies = [
        [b"1700000000000", b"1500", b"10", b"drop_oldest", b"1"],
        3, [(b"1-0", {})], [(b"3-0", {})], [b"b", b"a"],
    ]  # fmt: skip
    info = channels.parse_info("orders", replies)
    assert info == durables.ChannelInfo(
        "orders", 3, "1-0", "3-0", ("a", "b"), 1.5, 10, "drop_oldest", True
    )
    with pytest.raises(durables.ChannelNotFoundError):
        channels.parse_info("gone", [[None] * 5, 0, [], [], []])


def test_channel_info_reads_the_settings_not_the_producers_records() -> None:
    (settings, *_) = channels.info(K)
    assert settings.args == ("HMGET", K.meta, "created_ms", "ttl_ms", "capacity", "full", "keyed")


def test_the_pool_size_is_read_from_the_pending_summary() -> None:
    summary = {
        "pending": 5,
        "consumers": [{"name": b"w#1", "pending": 2}, {"name": b"_pool", "pending": 3}],
    }
    assert durable_ops.pool_size(K, "d").parse(summary) == 3
    assert durable_ops.pool_size(K, "d").parse({"pending": 0, "consumers": None}) == 0


def test_a_created_durable_returns_the_stored_spec() -> None:
    spec = DurableSpec("shared", None, "earliest", 1)
    op = durable_ops.create(K, "d", spec, "0", "")
    assert op.args == ("d", spec.to_json(), "0", "")
    assert op.parse([0, spec.to_json()]) == spec


def test_the_server_clock_reply_becomes_milliseconds() -> None:
    assert sessions.server_ms().parse((b"1700000000", b"123456")) == 1_700_000_000_123
