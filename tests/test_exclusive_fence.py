"""No exclusive event reaches two holders: a holder paused (SIGSTOP) while blocked in
`fetch()`, whose blocked read the server answered during the pause, hands nothing to its
application after it resumes once its lease has passed: an heir has those events."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from functools import partial

import pytest

import durables
from durables import DurableInUseError

from .children import Lines, once_free, python_child
from .conftest import FAST
from .faultproxy import FaultProxy
from .servers import RedisProcess

pytestmark = pytest.mark.slow
ROUNDS = 20
LEASE_S = 0.5

HOLDER = textwrap.dedent(
    """
    import sys, time, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2],
                              lease_timeout_s=float(sys.argv[3]), block_s=0.2,
                              housekeep_interval_s=3600)
    dur = client.channel("orders").durable("audit")
    while True:
        try:
            with dur.consumer("holder") as c:
                print("attached", flush=True)
                while True:
                    for event in c.fetch(timeout=5):
                        print("got", event.text, flush=True)
                        event.ack()
        except durables.DurableInUseError as exc:
            print("lost", type(exc).__name__, flush=True)
            time.sleep(0.05)
    """
)


def _has(line: str, lines: list[str]) -> bool:
    return line in lines


def _counted(start: str, times: int, lines: list[str]) -> bool:
    return sum(line.startswith(start) for line in lines) == times


def test_a_holder_paused_in_a_blocked_fetch_never_delivers_what_its_heir_got(
    server: RedisProcess, namespace: str
) -> None:
    """Each round: the holder blocks in fetch(), is stopped, an event is published (the
    server answers the blocked read at once), the lease passes, an heir attaches and takes
    the event; then the holder resumes. Counted over the rounds: each event reached the
    heir, and the holder's application got none of them."""
    heirs = durables.connect(server.url, namespace=namespace, **{**FAST, "lease_timeout_s": 10})
    channel = heirs.channel("orders")
    dur = channel.durable("audit")
    to_heir: list[str] = []
    with heirs, python_child(HOLDER, server.url, namespace, str(LEASE_S)) as proc:
        lines = Lines(proc)
        for n in range(ROUNDS):
            lines.until(partial(_counted, "attached", n + 1), 20)
            time.sleep(0.3)  # blocked in fetch() by now
            os.kill(proc.pid, signal.SIGSTOP)
            channel.publish(f"r{n}")  # answers the blocked read while the holder is stopped
            time.sleep(LEASE_S * 1.5)
            heir = once_free(lambda: dur.consumer("heir"), DurableInUseError)
            with heir:
                got = heir.fetch(timeout=5)
                os.kill(proc.pid, signal.SIGCONT)
                # its lease lost while the heir holds it: not a retry of its attach that
                # found the heir still there ('lost DurableInUseError'), which let a round
                # pass before the holder resumed, so that it found the lease free again,
                # attached again silently, and the next round waited for it in vain
                lines.until(partial(_counted, "lost LeaseLostError", n + 1), 20)
                to_heir += [e.text for e in got]
                heir.commit()
    held = [line.removeprefix("got ") for line in lines.seen if line.startswith("got ")]
    print(f"rounds {ROUNDS}: to the heir {len(to_heir)}, to the paused holder {len(held)}")
    assert to_heir == [f"r{n}" for n in range(ROUNDS)]
    assert held == []  # no event reached two holders


RIDER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2], lease_timeout_s=0.5,
                              block_s=0.2, socket_timeout_s=1.0, reconnect_timeout_s=60,
                              housekeep_interval_s=3600)
    kind = sys.argv[3]
    with client.channel("orders").durable("audit", kind=kind).consumer("holder") as c:
        print("attached", flush=True)
        while True:
            for event in c.fetch(timeout=5):
                print("got", event.text, flush=True)
                event.ack()
    """
)


@pytest.mark.parametrize("kind", ["exclusive", "shared", "serial", "keyed"])
def test_a_read_answered_while_paused_comes_again_when_an_outage_follows(
    server: RedisProcess, namespace: str, kind: durables.Kind
) -> None:
    """Each round: the holder blocks in fetch() behind a proxy and is stopped; an event
    answers its blocked read; the lease passes; the network black-holes and the holder
    resumes, so (exclusive) the lease check of the events it read fails for the outage,
    not for another holder. Once the network heals, the holder attaches again and gets
    each event, once: none is counted as handed out and then acknowledged unseen."""
    rounds = 3
    with (
        FaultProxy(server.port) as proxy,
        durables.connect(server.url, namespace=namespace, **FAST) as producer,
        python_child(RIDER, proxy.url, namespace, kind) as proc,
    ):
        channel = producer.channel("orders")
        channel.durable("audit", kind=kind)
        lines = Lines(proc)
        lines.until(lambda seen: "attached" in seen, 20)
        for n in range(rounds):
            time.sleep(0.5)  # blocked in fetch() by now
            os.kill(proc.pid, signal.SIGSTOP)
            channel.publish(f"r{n}")  # answers the blocked read while the holder is stopped
            time.sleep(1.0)  # past the lease: its events must be checked before handing out
            proxy.blackhole()
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(2.0)  # the check times out (socket timeout 1 s): an outage
            proxy.blackhole(False)
            lines.until(partial(_has, f"got r{n}"), 30)
    got = [line for line in lines.seen if line.startswith("got ")]
    print(f"rounds {rounds}: delivered {got}")
    assert got == [f"got r{n}" for n in range(rounds)]
