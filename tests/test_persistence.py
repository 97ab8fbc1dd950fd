"""The server killed with kill -9 mid-run and restarted: nothing acknowledged is lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import durables
from durables.reply_parsers import text

from .conftest import FAST
from .helpers import fetch_all, publish
from .servers import RedisProcess

PUBLISHER = textwrap.dedent(
    """
    import sys, durables
    client = durables.connect(sys.argv[1], namespace=sys.argv[2])
    ch = client.channel("orders")
    for i in range(100_000):
        print(ch.publish(f"p{i}"), flush=True)   # printed only once the server stored it
    """
)


def test_server_killed_mid_run_keeps_durables_positions_and_every_acknowledged_publish(
    fresh_server: RedisProcess, namespace: str
) -> None:
    with durables.connect(fresh_server.url, namespace=namespace, **FAST) as client:
        ch = client.channel("orders")
        keeper = ch.durable("keeper", kind="exclusive")
        worker = ch.durable("worker", kind="exclusive", filter="key IS NULL")
        first = publish(ch, 200)
        with worker.consumer(auto_ack=False) as c:
            fetch_all(c, 200)[149].ack()  # worker position: 150 acked, 50 pending
        proc = subprocess.Popen(
            [sys.executable, "-c", PUBLISHER, fresh_server.url, namespace],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        acknowledged = [proc.stdout.readline().strip() for _ in range(1000)]
        fresh_server.kill9()  # mid-run: the publisher is still going
        proc.kill()
        acknowledged += [line.strip() for line in proc.stdout if line.strip()]
        proc.wait()
        proc.stdout.close()
    assert len(acknowledged) >= 1000

    fresh_server.restart()
    with durables.connect(fresh_server.url, namespace=namespace, **FAST) as client:
        ch = client.get_channel("orders")
        assert {d.name: (d.kind, d.filter) for d in ch.durables()} == {
            "keeper": ("exclusive", None),
            "worker": ("exclusive", "key IS NULL"),
        }
        stored = {text(e[0]) for e in client.redis.xrange(ch.keys.stream) or [] if e[0]}
        assert set(acknowledged) <= stored
        assert set(first[150:]) <= stored
        keeper, worker = ch.get_durable("keeper"), ch.get_durable("worker")
        assert keeper.depth() == len(stored) and keeper.transaction_depth() == 0
        assert worker.transaction_depth() == 50
        with worker.consumer() as c:
            again = fetch_all(c, 50)
        assert [e.id for e in again] == first[150:]
        assert all(e.redelivered for e in again)
