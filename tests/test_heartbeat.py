"""The heartbeat's verdicts, one beat at a time on a real server: a lease whose renewal
finds it gone is dropped and its holder told; a holder that registered a new lease while a
beat was under way (it attached again) keeps it, and hears nothing of the old one's fate."""

from __future__ import annotations

import threading

import durables
from durables.io.leases import Beats, Lease
from durables.ops.base import command


def beats() -> Beats:
    return Beats(1000, None, threading.Lock())


def beat(client: durables.Client, heartbeat: Beats) -> None:
    client.ctx.executor.drive(heartbeat.beating())


def test_a_lease_found_gone_is_dropped_and_its_holder_told(
    client: durables.Client, namespace: str
) -> None:
    heartbeat, lost = beats(), []
    gone = command("EXISTS", f"{namespace}:no-such-lease", parse=bool)
    heartbeat.add(Lease("t1", gone, lambda: lost.append("t1")))
    beat(client, heartbeat)
    assert lost == ["t1"]
    beat(client, heartbeat)
    assert lost == ["t1"]  # dropped: told once


def test_a_lease_registered_anew_during_a_beat_is_kept(
    client: durables.Client, namespace: str
) -> None:
    """The old lease's renewal finds it gone; as its reply comes, the holder has attached
    again (a new lease, same token). The holder is not told it lost what it has just
    taken, and the new lease stays registered: the next beat renews it (and, its key gone
    too, tells its holder)."""
    heartbeat, lost = beats(), []
    gone = f"{namespace}:no-such-lease"
    fresh = Lease("t1", command("EXISTS", gone, parse=bool), lambda: lost.append("new"))

    def attached_again(reply: int) -> bool:
        heartbeat.add(fresh)  # between the server's answer and the heartbeat's verdict
        return bool(reply)

    heartbeat.add(
        Lease("t1", command("EXISTS", gone, parse=attached_again), lambda: lost.append("old"))
    )
    beat(client, heartbeat)
    assert lost == []
    beat(client, heartbeat)
    assert lost == ["new"]
