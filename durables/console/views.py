"""The console's pages as HTML, built from the figures the reader last took.

Channel names, durable names, filters, keys, session ids and payloads come from users:
everything shown goes through `esc` (text and attribute values alike), and links carry
names percent-encoded. The pages hold no inline script (the policy forbids it): the
figures change in place by `static/console.js`, which finds them by `data-` attributes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote, urlencode

from ..figures import ChannelFigures, DurableFigures, Figures, SessionFigures
from ..records import DeadLetter, Nack

NONE = "\N{EN DASH}"
"""Shown where there is no value."""
PREVIEW_CHARS = 120
"""A payload is previewed this long; the rest is cut with an ellipsis."""


def esc(value: object) -> str:
    """Any value as text safe inside an element or a quoted attribute."""
    return escape("" if value is None else str(value), quote=True)


def channel_href(name: str) -> str:
    return "/channels/" + quote(name, safe="")


def layout(
    title: str, body: str, *, where: str, csrf: str, admin: bool, live: str, namespace: str = ""
) -> str:
    """A whole page: the navigation, the namespace, the live status line and the body."""
    nav = "".join(
        f'<a href="{href}"{" class=here" if href == where else ""}>{label}</a>'
        for href, label in (
            ("/", "Overview"),
            ("/sessions", "Sessions"),
            ("/dead-letters", "Dead letters"),
            ("/alerts", "Nacks &amp; alerts"),
            ("/audit", "Audit"),
        )
    )
    shown_ns = (
        f'<span class="namespace">namespace <b>{esc(namespace)}</b></span>' if namespace else ""
    )
    mode = "admin" if admin else "read-only"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)} · durables console</title>"
        f'<meta name="csrf" content="{esc(csrf)}"><meta name="admin" content="{int(admin)}">'
        '<link rel="stylesheet" href="/static/console.css">'
        '<script type="module" src="/static/console.js"></script></head><body>'
        f"<header><strong>durables</strong><nav>{nav}</nav>{shown_ns}"
        f'<span class="mode">{mode}</span>'
        f'<span id="status" class="status">{esc(live)}</span></header>'
        f'<main><h1>{esc(title)}</h1><p id="flash" hidden></p>{body}</main></body></html>'
    )


def table(columns: Sequence[str], rows: Iterable[str], *, id_: str = "", empty: str) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(rows)
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    ident = f' id="{esc(id_)}"' if id_ else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def action(kind: str, label: str, **about: str) -> str:
    """A button the script turns into: ask what would be lost, confirm, then POST."""
    data = "".join(f' data-{k}="{esc(v)}"' for k, v in about.items())
    kind = esc(kind)
    return f'<button type="button" class="action" data-action="{kind}"{data}>{esc(label)}</button>'


def _bytes(n: int | None) -> str:
    if n is None:
        return NONE
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def overview(
    f: Figures, server_url: str, rates: dict[str, tuple[float, float]], admin: bool
) -> str:
    s = f.server
    version = s.get("valkey_version") or s.get("redis_version")
    facts = (
        f'<dl class="facts"><dt>server</dt><dd>{esc(server_url)}</dd>'
        f"<dt>version</dt><dd>{esc(version)}</dd>"
        f'<dt>memory</dt><dd id="memory">{esc(s.get("used_memory_human"))}</dd>'
        f"<dt>uptime</dt><dd>{esc(s.get('uptime_in_seconds'))} s</dd></dl>"
    )
    rows = (_channel_row(c, rates.get(c.info.name, (0.0, 0.0)), admin) for c in f.channels)
    columns = [
        "channel",
        "length",
        "in /s",
        "out /s",
        "retained",
        "durables",
        "held back by",
        "last minutes",
    ]
    if admin:
        columns.append("")
    news = '<p id="news" hidden><a href="/"></a></p>'  # the script: channels made since
    return facts + news + table(columns, rows, id_="channels", empty="no channels")


def _channel_row(c: ChannelFigures, rates: tuple[float, float], admin: bool) -> str:
    name = c.info.name
    cells = [
        f'<a href="{esc(channel_href(name))}">{esc(name)}</a>',
        f'<span data-field="length">{c.info.length}</span>',
        f'<span data-field="rate_in">{rates[0]:.1f}</span>',
        f'<span data-field="rate_out">{rates[1]:.1f}</span>',
        f'<span data-field="retained_bytes">{esc(_bytes(c.retained_bytes))}</span>',
        esc(", ".join(d.info.name for d in c.durables) or NONE),
        f'<span data-field="retained_by">{esc(c.retained_by or NONE)}</span>',
        '<canvas class="chart" width="160" height="32" data-series="length"></canvas>',
    ]
    if admin:
        cells.append(
            action("purge", "Purge", channel=name)
            + action("delete-channel", "Delete", channel=name)
        )
    tds = "".join(f"<td>{cell}</td>" for cell in cells)
    return f'<tr data-channel="{esc(name)}">{tds}</tr>'


def channel(c: ChannelFigures, admin: bool) -> str:
    name = c.info.name
    facts = (
        f'<dl class="facts" data-channel="{esc(name)}"><dt>length</dt>'
        f'<dd data-field="length">{c.info.length}</dd>'
        f"<dt>durables</dt><dd>{len(c.durables)}</dd>"
        f"<dt>retained</dt><dd>{esc(_bytes(c.retained_bytes))}</dd>"
        f'<dt>oldest event held back by</dt><dd data-field="retained_by">'
        f"{esc(c.retained_by or 'nothing: every durable and session acknowledged it')}</dd></dl>"
        f'<p><a href="/browse?{esc(urlencode({"channel": name}))}">Look at its newest '
        "events</a> (read only)</p>"
    )
    buttons = ""
    if admin:
        buttons = (
            '<p class="actions">'
            + action("purge", "Purge channel", channel=name)
            + action("delete-channel", "Delete channel", channel=name)
            + "</p>"
        )
    columns = [
        "durable",
        "kind",
        "filter",
        "depth",
        "txn depth",
        "lag",
        "oldest unacked",
        "consumers",
        "dead letters",
        "browse",
        "depth, last minutes",
    ]
    if admin:
        columns.append("")
    rows = (_durable_row(name, d, admin) for d in c.durables)
    legend = (
        '<p class="note">oldest unacked: the age of the oldest event the durable has not '
        "acknowledged, whether its consumers hold it (txn depth) or it still waits to be "
        "delivered (depth).</p>"
    )
    found = table(columns, rows, id_="durables", empty="no durables")
    return facts + buttons + found + (legend if c.durables else "")


def _durable_row(channel_name: str, d: DurableFigures, admin: bool) -> str:
    i = d.info
    if i.kind == "exclusive":
        consumers = f"held by {i.consumers[0]}" if i.consumers else "no holder"
    else:
        consumers = ", ".join(f"{n} (window {w})" for n, w in d.windows.items()) or "none"
    if d.keys is not None:  # keyed: where its keys are
        consumers += "; " + ", ".join(f"{c.name}: {c.keys} keys" for c in d.consumers)
        if d.keys.moving or d.keys.waiting:
            consumers += f"; {d.keys.moving} moving, {d.keys.waiting} handed back"
    letters = str(d.dead_letters)
    browse = urlencode({"channel": channel_name, "durable": i.name})
    if d.dead_letters:
        query = urlencode({"channel": channel_name, "durable": i.name})
        letters = f'<a href="/dead-letters?{esc(query)}">{d.dead_letters}</a>'
    cells = [
        esc(i.name), esc(i.kind), f"<code>{esc(i.filter)}</code>" if i.filter else NONE,
        f'<span data-field="depth">{i.depth}</span>',
        f'<span data-field="transaction_depth">{i.transaction_depth}</span>',
        f'<span data-field="lag">{esc(d.lag if d.lag is not None else NONE)}</span>',
        f'<span data-field="oldest_unacked_age_s">{d.oldest_unacked_age_s:.1f}</span> s',
        esc(consumers), letters, f'<a href="/browse?{esc(browse)}">next events</a>',
        '<canvas class="chart" width="160" height="32" data-series="depth"></canvas>',
    ]  # fmt: skip
    if admin:
        cells.append(action("delete-durable", "Delete", channel=channel_name, durable=i.name))
    tds = "".join(f"<td>{cell}</td>" for cell in cells)
    return f'<tr data-durable="{esc(i.name)}">{tds}</tr>'


def sessions(found: Sequence[SessionFigures], admin: bool) -> str:
    columns = ["session", "state", "queue", "limit", "keep-alive left", "interests"]
    if admin:
        columns.append("")
    return table(
        columns,
        (_session_row(s, admin) for s in found),
        id_="sessions",
        empty="no durable client sessions",
    )


def _session_row(s: SessionFigures, admin: bool) -> str:
    limit = "none" if s.max_depth is None else str(s.max_depth)
    if s.disconnected_max_depth is not None:
        limit += f" ({s.disconnected_max_depth} while away)"
    left = NONE if s.keepalive_left_s is None else f"{s.keepalive_left_s:.0f} s"
    cells = [esc(s.record.id), f'<span data-field="state">{esc(s.state)}</span>',
             f'<span data-field="queue">{s.queue_depth}</span>', esc(limit),
             f'<span data-field="keepalive_left_s">{esc(left)}</span>',
             esc(", ".join(s.record.interests) or NONE)]  # fmt: skip
    if admin:  # only an away session: a live one is its client's to close
        cells.append(action("close-session", "Close", session=s.record.id) if not s.live else "")
    tds = "".join(f"<td>{cell}</td>" for cell in cells)
    return f'<tr data-session="{esc(s.record.id)}">{tds}</tr>'


def dead_letter_index(f: Figures) -> str:
    rows = []
    for c in f.channels:
        for d in c.durables:
            if d.dead_letters:
                query = urlencode({"channel": c.info.name, "durable": d.info.name})
                link = f'<a href="/dead-letters?{esc(query)}">{esc(d.info.name)}</a>'
                rows.append(
                    f"<tr><td>{link}</td><td>{esc(c.info.name)}</td><td>{d.dead_letters}</td></tr>"
                )
    return table(["durable", "channel", "dead letters"], rows, empty="no dead letters")


def dead_letters(
    channel_name: str, durable: str, letters: Sequence[DeadLetter], admin: bool
) -> str:
    rows = (
        f"<tr><td>{esc(d.id)}</td><td>{esc(d.origin_id)}</td><td>{esc(d.key or NONE)}</td>"
        f"<td>{esc(d.reason)}</td><td>{d.deliveries}</td>"
        f'<td><code class="payload">{esc(preview(d.data))}</code></td></tr>'
        for d in letters
    )
    buttons = ""
    if admin and letters:
        buttons = (
            '<p class="actions">'
            + action("replay", "Replay all", channel=channel_name, durable=durable)
            + "</p>"
        )
    return buttons + table(
        ["id", "event id", "key", "reason", "deliveries", "payload"],
        rows,
        id_="dead-letters",
        empty="no dead letters",
    )


def preview(data: bytes) -> str:
    """A payload as text where it is UTF-8 (else as hex), cut to `PREVIEW_CHARS`."""
    try:
        shown = data.decode("utf-8")
    except UnicodeDecodeError:
        shown = "0x" + data[: PREVIEW_CHARS // 2].hex()
    return shown if len(shown) <= PREVIEW_CHARS else shown[: PREVIEW_CHARS - 1] + "…"


def alerts(found: Sequence[dict[str, object]], nacks: dict[str, list[Nack]]) -> str:
    alert_rows = (
        f"<tr><td>{esc(time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(_ms(a) / 1000)))}"
        f"</td><td>{esc(a.get('message'))}</td></tr>"
        for a in found
    )
    nack_rows = (
        f"<tr><td>{esc(ch)}</td><td>{esc(n.event_id)}</td><td>{esc(n.session_id)}</td>"
        f"<td>{esc(n.reason)}</td></tr>"
        for ch, found_nacks in nacks.items()
        for n in found_nacks
    )
    return (
        "<h2>Nacks</h2>"
        + table(
            ["channel", "event id", "session", "reason"],
            nack_rows,
            id_="nacks",
            empty="no events went unacknowledged",
        )
        + "<h2>Alerts</h2>"
        + table(["when (UTC)", "message"], alert_rows, id_="alerts", empty="no alerts")
    )


def _ms(alert: dict[str, object]) -> float:
    value = alert.get("time_ms") or 0
    return float(value) if isinstance(value, int | float | str) else 0.0


def outage(error: str) -> str:
    return f'<p class="outage">The server cannot be read: {esc(error)}</p>'


__all__ = ["esc", "layout", "preview"]
