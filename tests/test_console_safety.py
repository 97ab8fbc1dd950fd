"""The console without a browser: where it may listen, its token, the guard on its
actions (CSRF token, origin), passwords kept out of sight, its rates; and the Grafana
dashboard shipped beside it, which must chart only metrics `durables metrics` exposes."""

from __future__ import annotations

import http.client
import json
import re
import signal
import sys
from pathlib import Path

import pytest

import durables
from durables.console import views
from durables.console.live import Live
from durables.figures import ChannelFigures, DurableFigures, Figures
from durables.records import ChannelInfo, DurableInfo, Nack

from .cli_support import Cli, describe, exits
from .conftest import FAST
from .console_support import console
from .servers import free_port

STOP_WITHIN_S = 5
DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana-dashboard.json"


def csrf_of(page: str) -> str:
    found = re.search(r'<meta name="csrf" content="([^"]+)">', page)
    assert found, page[:500]
    return found.group(1)


def test_listening_beyond_this_machine_needs_a_token(cli: Cli) -> None:
    result = cli("console", "--host", "0.0.0.0", "--port", "0")
    assert result.exit_code == exits.INVALID, describe(result)
    assert result.stdout == ""
    assert result.stderr.startswith("error: listening on 0.0.0.0 lets others in: give --token")
    assert len(result.stderr.strip().splitlines()) == 1


def test_without_its_extra_the_console_says_how_to_get_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # makes the import fail
    cli.fails(
        exits.ERROR,
        "error: the console needs its extra: pip install 'durables[console]'",
        "console",
        "--port",
        "0",
    )


def test_a_port_in_use_is_one_line_with_its_exit_code(cli: Cli, server_url: str) -> None:
    port = server_url.rsplit(":", 1)[1].split("/")[0]  # the test server holds it
    result = cli("console", "--port", port)
    assert result.exit_code == exits.CANNOT_LISTEN, describe(result)
    assert result.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}")


def test_a_token_is_needed_for_every_request(server_url: str, namespace: str) -> None:
    with console(server_url, namespace, env={"DURABLES_CONSOLE_TOKEN": "let-me-in"}) as running:
        for path in ("/", "/api/state", "/events", "/static/console.js"):
            status, body = running.get(path)
            assert status == 401 and "token" in body, (path, status)
        assert running.get("/", {"authorization": "Bearer wrong"})[0] == 401
        assert running.get("/", {"authorization": "Bearer w\u00e9"})[0] == 401
        assert running.get("/?token=wrong")[0] == 401
        assert running.get("/?token=let-me-in")[0] == 303  # sets the cookie, drops the token
        status, body = running.get("/", {"authorization": "Bearer let-me-in"})
        assert status == 200 and "Overview" in body
        assert running.get("/", {"cookie": "durables_console=let-me-in"})[0] == 200


def test_the_token_login_redirects_only_to_a_path_of_the_console(
    server_url: str, namespace: str
) -> None:
    with console(server_url, namespace, env={"DURABLES_CONSOLE_TOKEN": "let-me-in"}) as running:
        host, port = running.base.removeprefix("http://").split(":")
        for path, expected in (
            ("//evil.example/x?token=let-me-in&a=1", "/evil.example/x?a=1"),
            ("/\\evil.example/x?token=let-me-in", "/%5Cevil.example/x"),
            ("/sessions?token=let-me-in", "/sessions"),
        ):
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("GET", path)
            reply = connection.getresponse()
            assert reply.status == 303, path
            assert reply.getheader("location") == expected, path
            connection.close()


def test_an_action_needs_the_page_token_and_its_own_origin(server_url: str, namespace: str) -> None:
    with durables.connect(server_url, namespace=namespace, **FAST) as client:
        orders = client.channel("orders")
        orders.publish(b"x")
        with console(server_url, namespace, "--admin") as running:
            status, page = running.get("/")
            token = csrf_of(page)
            body = {"channel": "orders"}
            assert running.post("/actions/purge", body)[0] == 403
            assert running.post("/actions/purge", body, {"x-durables-csrf": "guess"})[0] == 403
            elsewhere = {"x-durables-csrf": token, "origin": "http://evil.example"}
            status, answer = running.post("/actions/purge", body, elsewhere)
            assert status == 403 and "cross-origin" in answer
            assert orders.info().length == 1
            status, answer = running.get("/api/impact?action=purge&channel=orders")
            assert status == 200
            assert json.loads(answer)["message"].startswith("Purge channel 'orders': its 1 ")
            own = {"x-durables-csrf": token, "origin": running.base}
            status, answer = running.post("/actions/purge", body, own)
            assert (status, json.loads(answer)) == (200, {"done": "purged 1 event from 'orders'"})
            assert orders.info().length == 0
            status, answer = running.post("/actions/purge", {"channel": "nope"}, own)
            assert status == 400 and "nope" in json.loads(answer)["error"]
            status, answer = running.post("/actions/format-disk", body, own)
            assert status == 400 and "no action 'format-disk'" in json.loads(answer)["error"]


def test_without_a_token_only_a_loopback_host_name_is_answered(
    server_url: str, namespace: str
) -> None:
    """Another site's name rebound to 127.0.0.1 (DNS rebinding) gets nothing."""
    with console(server_url, namespace, "--admin") as running:
        port = running.base.rsplit(":", 1)[1]
        for host in (
            f"127.0.0.1:{port}",
            f"localhost:{port}",
            f"[::1]:{port}",
            "[::1]",
            "localhost",
            "127.0.0.1",
        ):
            assert running.get("/api/state", {"host": host})[0] == 200, host
        status, icon = running.get("/favicon.ico")
        assert status == 200 and icon.startswith("<svg")
        status, body = running.get("/", {"host": f"evil.example:{port}"})
        assert status == 421 and "evil.example" in body


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stop_the_console_cleanly(
    server_url: str, namespace: str, stop: signal.Signals
) -> None:
    with console(server_url, namespace) as running:
        host, port = running.base.removeprefix("http://").split(":")
        page = http.client.HTTPConnection(host, int(port), timeout=10)
        page.request("GET", "/events")  # an open page: its stream never ends by itself
        stream = page.getresponse()
        assert stream.readline().startswith(b"data: ")
        running.process.send_signal(stop)
        assert running.process.wait(STOP_WITHIN_S) == exits.OK
        page.close()
        assert running.process.stdout is not None
        assert running.process.stdout.read() == "console stopped\n"


def test_pages_allow_only_the_consoles_own_script(server_url: str, namespace: str) -> None:
    with console(server_url, namespace) as running:
        status, page = running.get("/")
        assert status == 200
        assert re.findall(r"<script[^>]*>", page) == [
            '<script type="module" src="/static/console.js">'
        ]


def test_a_password_is_not_shown_when_the_server_cannot_be_reached(namespace: str) -> None:
    url = f"redis://app:s3cret-pw@127.0.0.1:{free_port()}/0"  # nothing listens there
    with console(url, namespace) as running:
        _, page = running.get("/")
        _, state = running.get("/api/state")
    assert json.loads(state)["up"] is False
    assert "cannot reach redis://app:***@127.0.0.1:" in state
    assert "server cannot be read" in page
    assert "s3cret-pw" not in page + state


def test_rates_are_the_counters_differences_over_the_time_between_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def read(added: int, acknowledged: int) -> Figures:
        info = ChannelInfo("orders", 10, None, None, ("billing",))
        spec = DurableInfo("orders", "billing", "shared", None, "earliest", 0, 0, "0-0", ())
        durable = DurableFigures(spec, 0, 0.0, 0, {}, acknowledged)
        return Figures(0, {}, [ChannelFigures(info, added, None, [durable])], [], [])

    clock = iter([100.0, 102.0, 103.0])
    monkeypatch.setattr("durables.console.live.time.monotonic", lambda: next(clock))
    live = Live(None, None)
    live._take(read(added=50, acknowledged=10))
    assert live.rates == {}
    live._take(read(added=250, acknowledged=70))  # 2 s later
    assert live.rates == {"orders": (100.0, 30.0)}
    live._take(read(added=250, acknowledged=70))
    assert live.rates == {"orders": (0.0, 0.0)}
    assert live.state()["channels"]["orders"]["rate_in"] == 0.0


def test_nacks_alerts_and_payloads_are_shown_as_text() -> None:
    evil = "<script>alert(1)</script>"
    page = views.alerts(
        [{"time_ms": 0, "message": f"session {evil!r} expired"}],
        {"orders": [Nack("1-0", evil, "timeout")]},
    )
    assert "<script>" not in page
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>timeout</td>" in page
    assert "<td>1970-01-01 00:00:00</td><td>session &#x27;&lt;script&gt;" in page
    assert views.preview(b"\xff\x00" * 100).startswith("0xff00ff00")  # not UTF-8: hex
    assert views.preview(("<b>" * 100).encode()).endswith("…")
    assert len(views.preview(("<b>" * 100).encode())) == views.PREVIEW_CHARS


def test_the_grafana_dashboard_charts_only_metrics_that_durables_exposes(cli: Cli) -> None:
    exposed = set(re.findall(r"^# TYPE (durables_\w+) ", cli.ok("metrics"), re.MULTILINE))
    assert "durables_durable_depth" in exposed
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    queried = {name for q in queries for name in re.findall(r"\bdurables_\w+", q)}
    assert queried <= exposed, f"not exposed: {sorted(queried - exposed)}"
    assert queried == exposed, f"not charted: {sorted(exposed - queried)}"
