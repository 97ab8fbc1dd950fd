"""What an operator sees of a keyed durable: keys per consumer, keys moving to a new owner,
keys handed back; the same in the figures, the metrics, `durables inspect` and the
console's consumer table."""

from __future__ import annotations

import durables
from durables.console.incident import consumers as consumer_table
from durables.console.views import _durable_row as durable_row
from durables.key_hash import owner_of
from durables.metrics import exposition

from .cli_support import Cli
from .servers import RedisProcess
from .test_metrics import samples


def test_keys_per_consumer_moving_and_handed_back_are_shown_everywhere(
    cli: Cli, client: durables.Client, channel: durables.Channel
) -> None:
    dur = channel.durable("orders", kind="keyed")
    with dur.consumer("first", prefetch=50, auto_ack=False) as first:
        channel.publish_many([durables.Message(f"k{n}:0", key=f"k{n}") for n in range(12)])
        held = first.fetch(timeout=2)
        assert len(held) == 12
        with dur.consumer("joiner", prefetch=50, auto_ack=False) as joiner:
            joiner.fetch(timeout=0.2)  # attached; every key is still out with `first`
            members = [first.reader.id, joiner.reader.id]  # type: ignore[attr-defined]
            moving = sum(owner_of(f"k{n}", members) == members[1] for n in range(12))
            assert 0 < moving < 12
            held[0].rollback()  # k0's event is back in the pool: it waits to be dealt again

            (figures,) = client.figures(channel="orders").channels[0].durables
            assert figures.keys is not None
            by_name = {c.name: c.keys for c in figures.consumers}
            assert by_name == {"first": 11, "joiner": 0}
            back = 1 if owner_of("k0", members) == members[1] else 0
            assert (figures.keys.moving, figures.keys.waiting) == (moving - back, 1)

            found = samples(exposition(client))
            labels = (("channel", "orders"), ("durable", "orders"))
            assert found["durables_durable_consumer_keys", (*labels[:1], ("consumer", "first"),
                                                             labels[1])] == 11  # fmt: skip
            assert found["durables_durable_keys_moving", labels] == moving - back
            assert found["durables_durable_keys_waiting", labels] == 1

            shown = cli.json("inspect", "orders", "orders")
            assert (shown["keys_moving"], shown["keys_waiting"]) == (moving - back, 1)
            assert sorted(c["keys"] for c in shown["consumer_details"]) == [0, 11]
            assert "keys" in cli.ok("inspect", "orders", "orders")
            table = consumer_table([figures])
            assert "<th>keys</th>" in table and "<td>11</td>" in table


def test_the_cli_creates_a_keyed_durable_and_the_console_row_shows_its_keys(
    cli: Cli, client: durables.Client, channel: durables.Channel
) -> None:
    assert "keyed" in cli.ok("create", "orders", "fulfil", "--kind", "keyed")
    dur = channel.get_durable("fulfil")
    assert dur.kind == "keyed"
    with dur.consumer("w", prefetch=5, auto_ack=False) as w:
        channel.publish_many([durables.Message("x", key=f"k{n}") for n in range(3)])
        assert len(w.fetch(timeout=2)) == 3
        (figures,) = client.figures(channel="orders").channels[0].durables
        assert "w: 3 keys" in durable_row("orders", figures, admin=False)


def test_other_kinds_show_no_keys(client: durables.Client, channel: durables.Channel) -> None:
    channel.durable("work", kind="shared")
    channel.publish("x", key="k")
    (figures,) = client.figures(channel="orders").channels[0].durables
    assert figures.keys is None and "durable_keys_moving{" not in exposition(client)


def test_acknowledged_keys_leave_nothing_behind(
    server: RedisProcess, client: durables.Client, channel: durables.Channel
) -> None:
    """Which event of a key is out is kept only while it is out: acknowledged on their own
    (`ack()`, `commit()`) or with the next fetch, the keys leave nothing in the server."""
    dur = channel.durable("orders", kind="keyed")
    holds = channel.keys.holds("orders")
    channel.publish_many(
        [durables.Message(f"k{n % 3}:{n // 3}", key=f"k{n % 3}") for n in range(9)]
    )
    with server.client() as raw, dur.consumer("one", prefetch=10, auto_ack=False) as one:
        first = one.fetch(timeout=2)
        assert sorted(e.text for e in first) == ["k0:0", "k1:0", "k2:0"]

        def fields() -> list[str]:
            return sorted(f.decode()[:2] for f in raw.hkeys(holds))

        # each key's event out, and the key of each event out or waiting (six: read ahead)
        assert fields() == ["i:"] * 9 + ["k:"] * 3
        for event in first:
            event.ack()  # sent on its own
        one.commit()
        assert fields() == ["i:"] * 6
        second = one.fetch(timeout=2)
        assert sorted(e.text for e in second) == ["k0:1", "k1:1", "k2:1"]
        one.commit()
    with dur.consumer("two", prefetch=10, auto_ack=True) as two:
        assert sorted(e.text for e in two.fetch(timeout=2)) == ["k0:2", "k1:2", "k2:2"]
        assert two.fetch(timeout=0.2) == []  # acknowledges the last three with this fetch
        assert dur.depth() == 0 and dur.transaction_depth() == 0
        with server.client() as raw:
            assert raw.hlen(holds) == 0
