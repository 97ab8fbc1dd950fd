"""What a reply means (`durables.verdicts`), without a server: our errors by the reply's
first word, a real failure raised as it is, and a tolerated word handed to the parser."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import NoPermissionError, ResponseError

import durables
from durables import keys
from durables.io.executor import parse_all
from durables.ops import sessions
from durables.ops.base import Op, command
from durables.verdicts import translate

K = keys.ChannelKeys("ns", "orders")


def test_error_replies_become_our_errors_by_their_first_word() -> None:
    lost = translate(ResponseError("LEASELOST the lease is gone"), "exclusive durable 'd'")
    assert isinstance(lost, durables.LeaseLostError)
    assert isinstance(lost, durables.DurableInUseError)  # what callers caught before
    assert isinstance(lost, durables.ConsumerClosedError)
    assert str(lost) == "exclusive durable 'd': the lease is gone"
    denied = translate(NoPermissionError("this user has no permissions to access the key"))
    assert isinstance(denied, durables.AccessDeniedError)
    assert "NOPERM" in str(denied)
    assert isinstance(translate(ResponseError("UNBLOCKED demoted")), durables.ConnectionLostError)
    unknown = ResponseError("WRONGTYPE Operation against a key")
    assert translate(unknown) is unknown  # a real failure is never swallowed


def test_a_tolerated_error_word_goes_to_the_parser() -> None:
    op = sessions.join(K, "s1")
    assert "BUSYGROUP" in op.tolerate
    assert op.args[:3] == ("XGROUP", "CREATE", K.stream)


def test_a_tolerated_word_goes_to_the_parser_even_where_it_would_mean_an_outage() -> None:
    """A read through a tap or a gate that its deletion woke answers UNBLOCKED: for that
    read it means "woken", not an outage (which would reconnect and re-attach every reader,
    as a memory:// run once showed: a shared ring dealt out of turn)."""
    woken = ResponseError("UNBLOCKED the stream key no longer exists")
    closed = frozenset({"NOGROUP", "UNBLOCKED"})
    read: Op[Any] = command("XREADGROUP", "GROUP", "g", "c", "STREAMS", "k", ">", tolerate=closed)
    assert parse_all([read], [woken]) == [woken]
    with pytest.raises(durables.ConnectionLostError):  # elsewhere it is one
        parse_all([command("GET", "k")], [woken])
