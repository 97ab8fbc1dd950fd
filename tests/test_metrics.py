"""`durables metrics` and `durables.metrics`: Prometheus text that says what the library
sees, printed, served over HTTP, or collected by an application's own registry."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import durables
from durables.metrics import collector, exposition, registry

from .cli_support import SCRIPT, Cli, describe, exits
from .conftest import FAST
from .helpers import fetch_all, publish
from .servers import RedisProcess, free_port

SERVE_TIMEOUT_S = 20.0
AGE_FLOOR_S = 0.3
"""The test waits this long before scraping, so the oldest pending event is at least this old."""

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition by (name, sorted labels); parsed by prometheus_client."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.type in ("gauge", "counter"), family
        assert (family.type == "counter") == family.name.endswith(
            (
                "_published",
                "_dropped",
                "_discarded",
                "_delivered",
                "_acknowledged",
                "_lettered",
                "_redelivered",
            )
        ), family.name  # counters, and only they, end in _total
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def durable_labels(name: str) -> tuple[tuple[str, str], ...]:
    return (("channel", "orders"), ("durable", name))


@dataclass
class Known:
    """The state built by `known_state`, with the numbers the metrics must show."""

    started: float
    billing: durables.Consumer
    retry: durables.Consumer
    live: durables.Session


@pytest.fixture
def known(client: durables.Client) -> Iterator[Known]:
    """7 events on `orders`; an exclusive `audit` nobody read (depth 7); a shared `billing`
    (max_deliveries=1) with a consumer holding 2 events and 1 event rolled back into the
    dead letters (depth 4); a shared `retry` whose consumer holds 2 events it rolled back
    once and got again (2 redeliveries); a session away since before the first event
    (queue 7) and one live that joined after the second (queue 5)."""
    started = time.monotonic()
    orders = client.channel("orders")
    orders.durable("audit")
    billing = orders.durable("billing", kind="shared", max_deliveries=1)
    retry = orders.durable("retry", kind="shared")
    away = client.session("mobile-away", timeout=60)
    away.register_interest("orders", durable=True)
    away.close(keepalive=True)
    publish(orders, 2)
    live = client.session("mobile-live", timeout=60)
    live.register_interest("orders", durable=True)  # not ready for events: it only queues
    publish(orders, 5, start=3)
    with billing.consumer("b1", prefetch=2) as b1, retry.consumer("r1", prefetch=2) as r1:
        first = fetch_all(b1, 2)
        first[0].rollback()  # max_deliveries=1: to the dead letters
        assert len(fetch_all(b1, 1)) == 1  # window room again: one more dealt
        assert len(fetch_all(r1, 2)) == 2
        r1.rollback()
        assert [e.redelivered for e in fetch_all(r1, 2)] == [True, True]
        time.sleep(AGE_FLOOR_S)
        yield Known(started, b1, r1, live)
    live.close(keepalive=False)


def test_metrics_show_the_state_the_library_sees(
    cli: Cli, client: durables.Client, known: Known
) -> None:
    found = samples(cli.ok("metrics", "--per-session"))
    elapsed = time.monotonic() - known.started
    billing = client.get_channel("orders").get_durable("billing")
    assert found[("durables_up", ())] == 1
    assert found[("durables_channel_length", (("channel", "orders"),))] == 7
    expected = {  # durable: depth, transaction depth, consumers, redeliveries, dead letters
        "audit": (7, 0, 0, 0, 0),
        "billing": (4, 2, 1, 0, 1),
        "retry": (5, 2, 1, 2, 0),
    }
    for name, numbers in expected.items():
        labels = durable_labels(name)
        shown = tuple(
            found[(f"durables_durable_{metric}", labels)]
            for metric in (
                "depth",
                "transaction_depth",
                "consumers",
                "redeliveries",
                "dead_letters",
            )
        )
        assert shown == numbers, name
    assert len(billing.dead_letters()) == 1
    assert billing.transaction_depth() == 2 and billing.depth() == 4
    age = "durables_durable_oldest_unacked_age_seconds"
    for name in ("audit", "billing", "retry"):  # audit: nothing handed out, 7 behind
        assert AGE_FLOOR_S <= found[(age, durable_labels(name))] <= elapsed + 1.0, name
    assert known.live.info().depth == 5
    session = {"mobile-away": (7, 0), "mobile-live": (5, 1)}
    for name, (depth, connected) in session.items():
        labels = (("session", name),)
        assert found[("durables_session_queue_depth", labels)] == depth, name
        assert found[("durables_session_connected", labels)] == connected, name
    assert found[("durables_channel_published_total", (("channel", "orders"),))] == 7
    delivered = "durables_durable_delivered_total"
    assert found[(delivered, durable_labels("audit"))] == 0
    assert found[("durables_durable_dead_lettered_total", durable_labels("billing"))] == 1
    redelivered = "durables_durable_redelivered_total"
    assert found[(redelivered, durable_labels("retry"))] == 2  # two rolled back once
    assert found[(redelivered, durable_labels("audit"))] == 0


def test_sessions_are_aggregated_by_state_unless_asked_per_session(
    cli: Cli, client: durables.Client, known: Known
) -> None:
    found = samples(cli.ok("metrics"))
    assert not [name for name, _ in found if name.startswith("durables_session_")]
    assert found[("durables_sessions", (("state", "away"),))] == 1
    assert found[("durables_sessions", (("state", "live"),))] == 1
    assert found[("durables_sessions_queue_depth", (("state", "away"),))] == 7
    assert found[("durables_sessions_queue_depth", (("state", "live"),))] == 5


def test_an_empty_namespace_is_up_with_no_channel_durable_or_session(cli: Cli) -> None:
    found = samples(cli.ok("metrics"))
    assert found[("durables_up", ())] == 1
    assert not [n for n, _ in found if n.startswith(("durables_channel", "durables_durable"))]
    states = {labels: v for (n, labels), v in found.items() if n == "durables_sessions"}
    assert states == {(("state", s),): 0 for s in ("live", "away", "expired")}
    assert ("durables_server_memory_used_bytes", ()) in found  # memory:// says 0
    assert found[("durables_server_eviction_safe", ())] == 1


def test_a_durable_nobody_reads_reports_the_age_of_its_backlog(
    cli: Cli, client: durables.Client, channel: durables.Channel
) -> None:
    channel.durable("idle", start="earliest")  # no consumer ever: nothing is handed out
    publish(channel, 3)
    time.sleep(3.0)  # the events' age (their ids carry the server's publish time)
    found = samples(cli.ok("metrics"))
    labels = durable_labels("idle")
    assert found[("durables_durable_depth", labels)] == 3
    assert found[("durables_durable_consumers", labels)] == 0
    assert found[("durables_durable_oldest_unacked_age_seconds", labels)] >= 3.0


def test_a_filtered_exclusive_durable_holds_only_the_events_it_matches(
    cli: Cli, client: durables.Client, channel: durables.Channel
) -> None:
    eu = channel.durable("eu", kind="exclusive", start="earliest", filter="region = 'eu'")
    regions = ["eu", "us", "us", "eu", "us", "us", "eu"]
    channel.publish_many(
        [durables.Message(b"%d" % i, properties={"region": r}) for i, r in enumerate(regions)]
    )
    with eu.consumer("e1") as holder:
        assert len(fetch_all(holder, 3)) == 3  # every eu event, held unacknowledged
        found = samples(cli.ok("metrics"))
    assert found[("durables_durable_transaction_depth", durable_labels("eu"))] == 3
    assert found[("durables_durable_depth", durable_labels("eu"))] == 0


PUBLISHER = """
import sys, durables
with durables.connect(sys.argv[1], namespace=sys.argv[2]) as client:
    ch = client.channel("orders")
    for i in range(int(sys.argv[3])):
        ch.publish(b"%d" % i)
"""


def test_published_total_counts_every_process_and_holds_across_a_server_restart(
    fresh_server: RedisProcess, namespace: str
) -> None:
    def published() -> float:
        with durables.connect(fresh_server.url, namespace=namespace, **FAST) as client:
            found = samples(exposition(client))
        return found[("durables_channel_published_total", (("channel", "orders"),))]

    for count in ("3", "4"):
        subprocess.run(
            [sys.executable, "-c", PUBLISHER, fresh_server.url, namespace, count],
            check=True,
            timeout=60,
        )
    assert published() == 7
    with durables.connect(fresh_server.url, namespace=namespace, **FAST) as client:
        client.get_channel("orders").purge()  # the events go; the count stays
    fresh_server.restart()
    assert published() == 7


def test_an_application_registers_the_collector_in_its_own_registry(
    client: durables.Client, channel: durables.Channel
) -> None:
    publish(channel, 3)
    own = CollectorRegistry()
    own.register(collector(client))
    assert own.get_sample_value("durables_channel_length", {"channel": "orders"}) == 3
    assert own.get_sample_value("durables_up") == 1
    text = generate_latest(registry(client)).decode()
    assert samples(text)[("durables_channel_length", (("channel", "orders"),))] == 3


def test_up_is_zero_while_the_server_cannot_be_read(fresh_server: RedisProcess) -> None:
    settings = {**FAST, "reconnect_timeout_s": 0.5}
    with durables.connect(fresh_server.url, namespace="m", **settings) as client:
        client.channel("orders")
        reg = registry(client)
        assert reg.get_sample_value("durables_up") == 1
        fresh_server.kill9()
        begun = time.monotonic()
        assert samples(generate_latest(reg).decode()) == {("durables_up", ()): 0}
        assert time.monotonic() - begun < 5.0
        fresh_server.start()
        assert reg.get_sample_value("durables_up") == 1  # back by itself at the next scrape


# -- served over HTTP -------------------------------------------------------------------


def scrape(url: str, deadline: float) -> str:
    """GET `url` until it answers or `deadline` (monotonic) passes."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2.0) as reply:
                assert reply.status == 200
                return str(reply.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_serve_answers_scrapes_over_http_until_terminated(
    server_url: str, namespace: str, client: durables.Client, channel: durables.Channel
) -> None:
    publish(channel, 4)
    port = free_port()
    args = [str(SCRIPT), "--url", server_url, "--namespace", namespace, "metrics"]
    proc = subprocess.Popen(
        [*args, "--serve", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    try:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        found = samples(scrape(f"http://127.0.0.1:{port}/metrics", deadline))
        assert found[("durables_channel_length", (("channel", "orders"),))] == 4
        publish(channel, 2, start=5)  # read afresh at every scrape
        found = samples(scrape(f"http://127.0.0.1:{port}/metrics", deadline))
        assert found[("durables_channel_length", (("channel", "orders"),))] == 6
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=SERVE_TIMEOUT_S)
    assert proc.returncode == exits.OK, err
    assert f"serving metrics on http://127.0.0.1:{port}/metrics" in out.decode()
    assert err.decode() == ""


@pytest.mark.slow
def test_serve_says_up_0_while_the_server_is_away_at_the_start_and_after_a_long_outage(
    fresh_server: RedisProcess,
) -> None:
    fresh_server.stop()
    port = free_port()
    proc = subprocess.Popen(
        [
            str(SCRIPT),
            "--url",
            fresh_server.url,
            "--namespace",
            "m",
            "metrics",
            "--serve",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "DURABLES_CONNECT_TIMEOUT_S": "1"},
    )
    url = f"http://127.0.0.1:{port}/metrics"

    def up() -> float:
        return samples(scrape(url, time.monotonic() + SERVE_TIMEOUT_S))[("durables_up", ())]

    try:
        assert up() == 0  # no server at the start: served all the same
        fresh_server.start()
        assert up() == 1
        fresh_server.kill9()
        time.sleep(3)  # past the command's reconnect timeout (2 s): that client gave up
        assert up() == 0
        fresh_server.start()
        assert up() == 1  # connected anew
    finally:
        proc.terminate()
        proc.communicate(timeout=SERVE_TIMEOUT_S)
    assert proc.returncode == exits.OK


def test_serve_on_a_port_in_use_fails_with_one_line(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("metrics", "--serve", str(port))
    assert result.exit_code == exits.CANNOT_LISTEN, describe(result)
    assert result.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ], describe(result)


def test_host_without_serve_is_a_usage_error(cli: Cli) -> None:
    cli.fails(exits.USAGE, "error: --host applies only with --serve", "metrics", "--host", "::1")


def test_dropped_and_discarded_events_are_counted_by_reason(
    cli: Cli, client: durables.Client
) -> None:
    capped = client.channel("capped", capacity=3, full="drop_oldest")
    publish(capped, 5)
    brief = client.channel("brief", ttl=0.1)
    brief.durable("slow", start="earliest")  # never reads: the lifespan drops its events
    publish(brief, 2)
    time.sleep(0.3)
    client.housekeep()
    purged = client.channel("purged")
    purged.durable("late", start="earliest")
    publish(purged, 4)
    purged.purge()
    assert purged.publish(b"x", message_id="order-17") == purged.publish(
        b"y", message_id="order-17"
    )
    found = samples(cli.ok("metrics"))

    def counted(name: str, **labels: str) -> float:
        return found[(name, tuple(sorted(labels.items())))]

    dropped = "durables_channel_dropped_total"
    assert counted(dropped, channel="capped", reason="capacity") == 2
    assert counted(dropped, channel="brief", reason="ttl") == 2
    assert counted(dropped, channel="purged", reason="purge") == 4
    assert counted(dropped, channel="purged", reason="ttl") == 0
    assert counted("durables_channel_duplicates_discarded_total", channel="purged") == 1
    assert counted("durables_channel_published_total", channel="purged") == 5
