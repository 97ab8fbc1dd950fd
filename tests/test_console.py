"""The web console in a real browser: headless Chromium (Debian's), driven by Playwright.

Each test starts `durables console` on a free port against the test server and reads
the page as a person would: what is on screen, what changes without a reload, what an
action asks before it acts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from playwright.sync_api import expect, sync_playwright

import durables

from .cli_support import Cli
from .conftest import FAST
from .console_support import chromium_or_skip, console, screenshot
from .helpers import fetch_all
from .secure import PASSWORD, SECURE
from .servers import RedisProcess

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

pytestmark = pytest.mark.slow

LIVE_S = 10.0
"""How long a figure may take to change on screen (the console reads every second)."""
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = chromium_or_skip()

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(chromium),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield launched
        launched.close()


@dataclass
class Dialogs:
    """The page's dialogs (confirm, alert) as they came, answered `accept`."""

    accept: bool = False
    seen: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, dialog: Dialog) -> None:
        self.seen.append((dialog.type, dialog.message))
        if self.accept:
            dialog.accept()
        else:
            dialog.dismiss()


@pytest.fixture
def page(browser: Browser) -> Iterator[tuple[Page, Dialogs]]:
    context = browser.new_context(viewport={"width": 1000, "height": 420})
    opened = context.new_page()
    opened.set_default_timeout(LIVE_S * 1000)
    dialogs = Dialogs()
    opened.on("dialog", dialogs)
    yield opened, dialogs
    context.close()


@pytest.fixture
def client(server_url: str, namespace: str) -> Iterator[durables.Client]:
    with durables.connect(server_url, namespace=namespace, **FAST) as connected:
        yield connected


def cell(page: Page, row: str, field_name: str) -> Any:
    return page.locator(f"{row} [data-field='{field_name}']")


def test_overview_lists_a_channel_and_its_depth_rises_without_a_reload(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, _ = page
    orders = client.channel("orders")
    orders.durable("billing", kind="shared", start="earliest")
    client.channel("prices").publish(b"101.5")
    with console(server_url, namespace) as running:
        p.goto(running.base + "/")
        p.locator("#channels a", has_text="orders").wait_for()
        assert cell(p, "#channels tr[data-channel='prices']", "length").inner_text() == "1"
        expect(p.locator("#news")).to_be_hidden()
        client.channel("late")
        expect(p.locator("#news")).to_have_text("1 new channel since this page was loaded: reload")
        p.locator("#channels a", has_text="orders").click()
        p.wait_for_url("**/channels/orders")
        depth = cell(p, "tr[data-durable='billing']", "depth")
        assert depth.inner_text() == "0"
        p.evaluate("() => { window.notReloaded = true; }")
        orders.publish_many([durables.Message(b"%d" % i) for i in range(100)])
        expect(depth).to_have_text("100")
        assert p.evaluate("() => window.notReloaded") is True
        p.wait_for_timeout(1500)  # a second point on the chart
        screenshot(p, "channel")
        p.goto(running.base + "/")
        p.wait_for_timeout(2500)
        screenshot(p, "overview")
        if SECURE:
            assert PASSWORD not in p.content()
            assert ":***@" in p.content()


def test_a_purge_asks_what_will_be_lost_then_empties_the_channel(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, dialogs = page
    orders = client.channel("orders")
    orders.durable("billing", kind="shared", start="earliest")
    orders.publish_many([durables.Message(b"x") for _ in range(10)])
    with console(server_url, namespace, "--admin") as running:
        p.goto(running.base + "/")
        purge = p.locator("tr[data-channel='orders'] button[data-action='purge']")
        purge.click()  # answered "cancel"
        p.locator("#flash", has_text="nothing changed").wait_for()
        assert orders.info().length == 10
        ((kind, question),) = dialogs.seen
        assert kind == "confirm"
        assert "Purge channel 'orders'" in question
        assert "10 retained events" in question and "billing (10 not yet delivered)" in question
        dialogs.accept = True
        purge.click()
        p.locator("#flash", has_text="purged 10 events").wait_for()
        expect(cell(p, "tr[data-channel='orders']", "length")).to_have_text("0")
        assert orders.info().length == 0
        assert len(dialogs.seen) == 2


def test_without_admin_no_action_is_offered_and_the_endpoints_refuse(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, _ = page
    orders = client.channel("orders")
    orders.publish(b"keep me")
    with console(server_url, namespace) as running:
        p.goto(running.base + "/")
        p.locator("#channels a", has_text="orders").wait_for()
        assert p.locator("button.action").count() == 0
        assert p.locator("header .mode").inner_text() == "read-only"
        csrf = p.locator("meta[name='csrf']").get_attribute("content") or ""
        p.goto(running.base + "/channels/orders")
        assert p.locator("button.action").count() == 0
        for action in ("purge", "delete-channel"):
            status, body = running.post(
                f"/actions/{action}", {"channel": "orders"}, {"x-durables-csrf": csrf}
            )
            assert status == 403 and "read-only" in body, (status, body)
        status, _ = running.get("/api/impact?action=purge&channel=orders")
        assert status == 403
    assert orders.info().length == 1


def test_a_hostile_channel_name_shows_as_text(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    """Names the library refuses can still be in a namespace (written by hand, or by
    other software): the console shows them as text, and runs nothing in them."""
    p, dialogs = page
    keys = client.keys("x")
    client.channel("x").publish(b"<img src=x onerror=alert(2)>", key="<b>k</b>")
    evil = client.keys(EVIL)
    for old, new in ((keys.stream, evil.stream), (keys.meta, evil.meta)):
        client.redis.rename(old, new)
    client.redis.srem(f"{namespace}:channels", "x")
    client.redis.sadd(f"{namespace}:channels", EVIL)
    orders = client.channel("orders")
    orders.durable(
        "eu", kind="shared", start="earliest", filter="note = '<img src=y onerror=alert(3)>'"
    )
    with console(server_url, namespace, "--admin") as running:
        p.goto(running.base + "/")
        link = p.locator("#channels tr a").first
        link.wait_for()
        assert link.inner_text() == EVIL
        p.wait_for_timeout(1500)  # live updates came, and ran nothing either
        link.click()
        p.locator("main h1").wait_for()
        assert p.locator("main h1").inner_text() == f"Channel {EVIL}"
        p.goto(running.base + "/channels/orders")
        assert p.locator("#durables code").inner_text() == "note = '<img src=y onerror=alert(3)>'"
        assert p.locator("img").count() == 0
        assert p.locator("script").count() == 1  # the console's own
        p.wait_for_timeout(500)
    assert dialogs.seen == []


def test_the_console_shows_an_outage_then_recovers(
    page: tuple[Page, Dialogs], fresh_server: RedisProcess, namespace: str
) -> None:
    p, _ = page
    with durables.connect(fresh_server.url, namespace=namespace, **FAST) as setup:
        setup.channel("orders").publish(b"before")
    with console(fresh_server.url, namespace) as running:
        p.goto(running.base + "/")
        p.locator("#status", has_text="live").wait_for()
        fresh_server.stop()
        p.locator("#status", has_text="server unreachable").wait_for(timeout=15_000)
        assert "down" in (p.locator("body").get_attribute("class") or "")
        screenshot(p, "outage")
        p.reload()  # a page opened during the outage says so
        p.locator("main .outage").wait_for()
        fresh_server.restart()
        p.locator("#status", has_text="live").wait_for(timeout=20_000)
        with durables.connect(fresh_server.url, namespace=namespace, **FAST) as after:
            after.channel("orders").publish(b"after")
        expect(cell(p, "tr[data-channel='orders']", "length")).to_have_text("2", timeout=15_000)


def test_sessions_and_dead_letters_are_shown_and_operated(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, dialogs = page
    orders = client.channel("orders")
    billing = orders.durable("billing", kind="shared", max_deliveries=1)
    session = client.session("mobile-42", timeout=600, max_depth=1000, disconnected_max_depth=5000)
    session.register_interest("orders")
    session.close(keepalive=True)
    orders.publish_many([durables.Message(b"<i>e%d</i>" % i) for i in (1, 2)])
    with billing.consumer("w1", prefetch=2) as consumer:
        got: list[durables.Event] = []
        while len(got) < 2:
            got += consumer.fetch(timeout=1.0)
        consumer.rollback()  # past max_deliveries: to the dead letters
        consumer.fetch(timeout=0.5)
    assert len(billing.dead_letters()) == 2
    with console(server_url, namespace, "--admin") as running:
        p.goto(running.base + "/sessions")
        row = "tr[data-session='mobile-42']"
        expect(cell(p, row, "state")).to_have_text("away")
        expect(cell(p, row, "queue")).to_have_text("2")
        assert "1000 (5000 while away)" in p.locator(row).inner_text()
        screenshot(p, "sessions")
        p.goto(running.base + "/dead-letters")
        p.locator("main a", has_text="billing").click()
        payloads = p.locator("#dead-letters code.payload")
        expect(payloads).to_have_text(["<i>e1</i>", "<i>e2</i>"])
        screenshot(p, "dead-letters")
        dialogs.accept = True
        p.locator("button[data-action='replay']").click()
        p.locator("#flash", has_text="replayed 2 dead letters").wait_for()
        assert billing.dead_letters() == []
        assert "published to channel 'orders' again" in dialogs.seen[-1][1]
        p.goto(running.base + "/sessions")
        p.locator(f"{row} button[data-action='close-session']").click()
        p.locator("#flash", has_text="closed session 'mobile-42'").wait_for()
        assert "Close session 'mobile-42': its queue of" in dialogs.seen[-1][1]
        assert [s.id for s in client.sessions()] == []
        p.goto(running.base + "/alerts")
        expect(p.locator("#alerts")).to_contain_text("'mobile-42' was closed by an operator")


def test_a_durable_then_a_channel_are_deleted_through_the_pages(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, dialogs = page
    dialogs.accept = True
    orders = client.channel("orders")
    orders.durable("billing", kind="shared", start="earliest")
    orders.durable("audit", kind="exclusive", start="earliest")
    orders.publish_many([durables.Message(b"x") for _ in range(3)])
    live = client.session("phone", timeout=60)
    with console(server_url, namespace, "--admin") as running:
        p.goto(running.base + "/channels/orders")
        p.locator("tr[data-durable='billing'] button[data-action='delete-durable']").click()
        p.locator("#flash", has_text="deleted durable 'billing' of 'orders'").wait_for()
        assert (
            "Delete durable 'billing' of channel 'orders': its position, 3 undelivered "
            in (dialogs.seen[-1][1])
        )
        assert orders.durable_names() == ["audit"]
        expect(p.locator("tr[data-durable]")).to_have_count(1)  # reloaded
        p.locator("p.actions button[data-action='delete-channel']").click()
        p.locator("#flash", has_text="deleted channel 'orders'").wait_for()
        assert "its 3 events, its durables (audit)" in dialogs.seen[-1][1]
        assert client.channel_names() == []
        p.goto(running.base + "/sessions")
        expect(p.locator("tr[data-session='phone'] [data-field='state']")).to_have_text("live")
        assert p.locator("tr[data-session='phone'] button").count() == 0  # its client's to close
        token = p.locator("meta[name='csrf']").get_attribute("content") or ""
        status, body = running.post(
            "/actions/close-session", {"session": "phone"}, {"x-durables-csrf": token}
        )
        assert status == 400 and "is live" in body
    assert [s.id for s in client.sessions()] == ["phone"]
    live.close()


def test_the_overview_lists_every_durable_with_its_depth_sorted_and_filtered(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, _ = page
    orders = client.channel("orders")
    orders.durable("billing", start="earliest")
    client.channel("prices").durable("ticks", start="earliest")
    orders.publish_many([durables.Message(b"%d" % i) for i in range(5)])
    orders.durable("audit", start="latest")  # after them: none for it
    with console(server_url, namespace) as running:
        p.goto(running.base + "/?sort=depth")
        rows = p.locator("#all-durables tbody tr")
        expect(rows).to_have_count(3)
        assert rows.first.get_attribute("data-row") == "orders/billing"  # deepest first
        expect(cell(p, "#all-durables tr[data-row='orders/billing']", "depth")).to_have_text("5")
        expect(cell(p, "#all-durables tr[data-row='orders/audit']", "depth")).to_have_text("0")
        assert "none" in p.locator("#all-durables tr[data-row='prices/ticks']").inner_text()
        p.fill("form.filter input[name='q']", "tick")
        p.locator("form.filter button").click()
        p.wait_for_url("**q=tick**")
        expect(rows).to_have_count(1)
        assert rows.first.get_attribute("data-row") == "prices/ticks"
        assert p.locator("header .namespace").inner_text() == f"namespace {namespace}"
        assert "noeviction" in p.locator("#health").inner_text()
        status, icon = running.get("/favicon.ico")
        assert status == 200 and "svg" in icon


def test_a_channel_page_names_the_session_that_holds_its_oldest_event(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, _ = page
    orders = client.channel("orders")
    billing = orders.durable("billing", kind="shared", start="earliest")
    session = client.session("mobile-42", timeout=600)
    session.register_interest("orders")
    session.close(keepalive=True)  # away, never reading: its queue holds the channel back
    orders.publish_many([durables.Message(b"%d" % i) for i in range(3)])
    with billing.consumer("w1", prefetch=3) as worker:
        assert len(fetch_all(worker, 3)) == 3
        worker.commit()  # the durable holds nothing back
        with console(server_url, namespace) as running:
            p.goto(running.base + "/channels/orders")
            expect(p.locator("dl.facts [data-field='retained_by']")).to_have_text(
                "session mobile-42"
            )
            consumers = p.locator("#consumers tbody tr")
            expect(consumers).to_have_count(1)
            assert "w1" in consumers.first.inner_text()
            p.goto(running.base + "/")
            expect(cell(p, "#channels tr[data-channel='orders']", "retained_by")).to_have_text(
                "session mobile-42"
            )


def test_browsing_shows_payloads_as_text_and_changes_no_depth(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, _ = page
    orders = client.channel("orders")
    billing = orders.durable("billing", kind="shared", start="earliest")
    orders.publish(b'{"order": 17}', key="o-17", properties={"region": "eu"})
    orders.publish(EVIL.encode())
    with console(server_url, namespace) as running:
        p.goto(running.base + "/channels/orders")
        p.locator("tr[data-durable='billing'] a", has_text="next events").click()
        payloads = p.locator("#events code.payload")
        expect(payloads).to_have_text(['{"order": 17}', EVIL])
        first = p.locator("#events tbody tr").first.inner_text()
        assert "o-17" in first and "region=eu" in first
        p.goto(running.base + "/browse?channel=orders")  # the newest first
        expect(p.locator("#events code.payload")).to_have_text([EVIL, '{"order": 17}'])
        assert p.locator("script").count() == 1  # the console's own: the payload is text
    assert (billing.depth(), billing.transaction_depth()) == (2, 0)
    with billing.consumer("w1", prefetch=2) as worker:
        assert [e.data for e in fetch_all(worker, 2)] == [b'{"order": 17}', EVIL.encode()]
        assert not any(e.redelivered for e in fetch_all(worker, 0))


def test_an_admin_delete_is_kept_in_the_audit_log_shown_by_the_page_and_the_cli(
    page: tuple[Page, Dialogs], client: durables.Client, server_url: str, namespace: str
) -> None:
    p, dialogs = page
    dialogs.accept = True
    orders = client.channel("orders")
    orders.durable("billing", kind="shared", start="earliest")
    with console(server_url, namespace, "--admin") as running:
        p.goto(running.base + "/audit")
        p.locator("main .empty", has_text="no admin actions recorded").wait_for()
        p.goto(running.base + "/channels/orders")
        p.locator("tr[data-durable='billing'] button[data-action='delete-durable']").click()
        p.locator("#flash", has_text="deleted durable 'billing' of 'orders'").wait_for()
        p.goto(running.base + "/audit")
        row = p.locator("#audit tbody tr").first.inner_text()
        assert "delete-durable" in row and "durable orders/billing" in row
        assert "console, from 127.0.0.1" in row
    (entry, *_) = Cli(server_url, namespace).json("audit")
    assert (entry["action"], entry["target"]) == ("delete-durable", "durable orders/billing")
    assert entry["address"] == "console, from 127.0.0.1"
    assert entry["outcome"] == "deleted durable 'billing' of 'orders'"
    assert abs(entry["time_ms"] / 1000 - time.time()) < 60
