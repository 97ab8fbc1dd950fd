"""Ack-required messages (Diffusion's client reconnection): each interested session must
acknowledge them; unacknowledged ones come again after a reconnect, flagged; timeouts and
events that expired before they could be sent become nacks for the publisher."""

from __future__ import annotations

import threading
import time

import pytest

import durables

from .conftest import FAST
from .helpers import wait_for
from .servers import RedisProcess


class Keeper:
    """A session listener that keeps every event (to acknowledge later, or never)."""

    def __init__(self) -> None:
        self.events: list[durables.Event] = []
        self.lock = threading.Lock()

    def on_event(self, event: durables.Event) -> None:
        with self.lock:
            self.events.append(event)

    def ids(self) -> list[str]:
        with self.lock:
            return [e.id for e in self.events]


def live_session(
    client: durables.Client, name: str, *, auto_ack: bool
) -> tuple[durables.Session, Keeper]:
    keeper = Keeper()
    s = client.session(name, timeout=60, auto_ack=auto_ack)
    s.register_interest("orders")
    s.add_listener("orders", keeper)
    s.ready_for_events()
    return s, keeper


def test_an_unacknowledged_ack_required_event_comes_again_after_a_reconnect_flagged(
    fresh_server: RedisProcess, namespace: str
) -> None:
    with durables.connect(
        fresh_server.url, namespace=namespace, **{**FAST, "reconnect_timeout_s": 30.0}
    ) as client:
        ch = client.channel("orders")
        s, keeper = live_session(client, "phone", auto_ack=False)
        plain = ch.publish("plain")
        needed = ch.publish("needed", ack_required=True, ack_timeout=60)
        acked = ch.publish("acked", ack_required=True, ack_timeout=60)
        assert wait_for(lambda: keeper.ids() == [plain, needed, acked])
        keeper.events[2].ack()
        assert not any(e.redelivered for e in keeper.events)
        fresh_server.kill9()
        time.sleep(0.5)
        fresh_server.restart()
        assert wait_for(lambda: len(keeper.ids()) == 4)
        again = keeper.events[3]
        assert (again.id, again.redelivered, again.text) == (needed, True, "needed")
        time.sleep(0.5)
        assert keeper.ids() == [plain, needed, acked, needed]  # nothing else came twice
        s.close()


def test_an_ack_timeout_becomes_a_nack_and_an_acknowledged_one_does_not(
    client: durables.Client,
) -> None:
    ch = client.channel("orders")
    lazy, lazy_keeper = live_session(client, "lazy", auto_ack=False)
    eager, eager_keeper = live_session(client, "eager", auto_ack=True)
    eid = ch.publish("order", ack_required=True, ack_timeout=0.3)
    assert wait_for(lambda: lazy_keeper.ids() == [eid] and eager_keeper.ids() == [eid])
    time.sleep(0.5)
    client.housekeep()
    assert ch.nacks() == [durables.Nack(eid, "lazy", "timeout", ch.nacks()[0].id)]
    assert lazy.info().in_flight == 0  # taken off the session's queue
    assert eager.info().in_flight == 0
    lazy.close()
    eager.close()


def test_an_event_whose_timeout_passed_while_the_session_was_away_is_never_sent(
    client: durables.Client,
) -> None:
    ch = client.channel("orders")
    s, _ = live_session(client, "away", auto_ack=True)
    s.close(keepalive=True)
    stale = ch.publish("stale", ack_required=True, ack_timeout=0.2)
    fresh = ch.publish("fresh", ack_required=True, ack_timeout=60)
    time.sleep(0.4)
    back, keeper = live_session(client, "away", auto_ack=True)
    assert back.resumed
    assert wait_for(lambda: keeper.ids() == [fresh])
    time.sleep(0.3)
    assert keeper.ids() == [fresh]
    assert [(n.event_id, n.reason) for n in ch.nacks()] == [(stale, "expired_before_sent")]
    assert back.info().depth == 0
    back.close()


@pytest.mark.both_clients
def test_housekeeping_nacks_an_event_that_expired_while_its_session_was_away(
    client: durables.Client,
) -> None:
    """Seed 002: the non-acknowledgement is notified when the timeout expires, not when (or
    if) the session comes back; the session then skips it, without a second nack."""
    ch = client.channel("prices", keyed=True)
    s = client.session("away", timeout=60)
    s.register_interest("prices", keys=["AAPL"])
    s.close(keepalive=True)
    stale = ch.publish("1", key="AAPL", ack_required=True, ack_timeout=0.2)
    ch.publish("2", key="MSFT", ack_required=True, ack_timeout=0.2)  # not of its interest
    fresh = ch.publish("3", key="AAPL", ack_required=True, ack_timeout=60)
    time.sleep(0.4)
    client.housekeep()
    assert [(n.event_id, n.session_id, n.reason) for n in ch.nacks()] == [
        (stale, "away", "expired_before_sent")
    ]
    client.housekeep()
    assert len(ch.nacks()) == 1  # recorded once
    keeper = Keeper()
    back = client.session("away", timeout=60)
    assert back.resumed
    back.add_listener("prices", keeper)
    back.ready_for_events()
    assert wait_for(lambda: keeper.ids() == [fresh])
    time.sleep(0.3)
    assert keeper.ids() == [fresh]
    assert len(ch.nacks()) == 1  # the session skipped it without a second nack
    assert back.info().depth == 0
    back.close(keepalive=False)
    assert client.redis.exists(client.keys("prices").unsent_nacks) == 0


def test_ack_timeouts_are_checked(channel: durables.Channel) -> None:
    for bad in (0, -1, "soon", 10**9):
        with pytest.raises(durables.ConfigError):
            channel.publish("x", ack_required=True, ack_timeout=bad)  # type: ignore[arg-type]
    assert channel.info().length == 0
